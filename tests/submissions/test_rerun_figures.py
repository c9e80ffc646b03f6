"""Where the site re-ran a trial, its own time, tokens and cost (the re-run's tokens at the dated
price table) stand beside the submission's reported figures on the status page and in the status
API, and a reported cost far below the re-run's is flagged.

The Harbor re-run here is the check's real recording code (Rerun.check_harbor, CheckContext.record)
reading a real Harbor result.json through evaluation.runner.harbor._read_trials; only the two
container steps (`harbor run` and the verifier) are replaced, so no Docker is needed.
"""

import json
import re
import threading
from decimal import Decimal
from types import SimpleNamespace

import pytest

from evaluation.agents import SiteAgent
from evaluation.runner import harbor as harbor_runner
from submissions import pricing
from submissions.measured import RerunFigures, rerun_measured
from submissions.models import CheckKind, CheckStatus, Outcome, SubmissionStatus, TrialCheck
from submissions.models import VerificationJob
from submissions.verification.checks import base, rerun
from tests.factories import (
    AgentFactory,
    AIModelFactory,
    BenchmarkTaskFactory,
    CategoryFactory,
    SubmissionFactory,
    TrialFactory,
)

pytestmark = pytest.mark.django_db

# The site's re-run: 200k input tokens (100k cached), 20k output, agent 8 minutes.
RESULT = {
    "started_at": "2026-07-01T10:00:00", "finished_at": "2026-07-01T10:10:00",
    "agent_execution": {"started_at": "2026-07-01T10:01:00",
                        "finished_at": "2026-07-01T10:09:00"},
    "agent_info": {"name": "terminus-2", "version": "2.0.0", "model_info": {"name": "gpt-5"}},
    "agent_result": {"n_input_tokens": 200_000, "n_cache_tokens": 100_000,
                     "n_output_tokens": 20_000, "cost_usd": 0.3375},
}
# gpt-5 at the price table: (100k * 1.25 + 100k * 0.125 + 20k * 10) / 1e6
RERUN_COST = 0.3375


def _harbor_job(tmp_path, result=RESULT) -> harbor_runner.HarborJob:
    job_dir = tmp_path / "jobs" / "rerun"
    trial_dir = job_dir / "case__abc"
    (trial_dir / "artifacts").mkdir(parents=True)
    (trial_dir / "result.json").write_text(json.dumps(result))
    return harbor_runner.HarborJob(cmd=["harbor", "run"], returncode=0, seconds=600.0,
                                   job_dir=job_dir, trials=harbor_runner._read_trials(job_dir),
                                   log_tail="")


def test_harbor_result_tokens_are_read_from_the_rerun(tmp_path):
    (trial,) = _harbor_job(tmp_path).trials
    assert (trial.input_tokens, trial.cached_tokens, trial.output_tokens, trial.cost_usd) == (
        200_000, 100_000, 20_000, 0.3375)
    assert (trial.seconds, trial.agent_seconds) == (600.0, 480.0)
    # a harness that records no usage: no token counts, not zeros
    bare = {k: v for k, v in RESULT.items() if k != "agent_result"}
    (trial,) = _harbor_job(tmp_path / "bare", bare).trials
    assert (trial.input_tokens, trial.output_tokens, trial.cost_usd) == (None, None, None)


def test_measured_cost_is_the_rerun_tokens_at_the_dated_price_table():
    m = rerun_measured(model="openai/gpt-5", agent_seconds=480.0, trial_seconds=600.0,
                       input_tokens=200_000, cached_tokens=100_000, output_tokens=20_000)
    assert m == {"duration_s": 480.0, "input_tokens": 200_000, "cached_tokens": 100_000,
                 "output_tokens": 20_000, "cost_usd": RERUN_COST,
                 "price_table": pricing.PRICE_TABLE_DATE, "model": "openai/gpt-5"}
    # no price for the model, or no tokens: the time alone
    assert rerun_measured(model="acme/unknown", agent_seconds=None, trial_seconds=60.0,
                          input_tokens=1, output_tokens=1)["cost_usd"] is None
    assert rerun_measured(model="openai/gpt-5", agent_seconds=5.0) == {
        "duration_s": 5.0, "input_tokens": None, "cached_tokens": None, "output_tokens": None,
        "cost_usd": None, "price_table": None, "model": "openai/gpt-5"}


@pytest.mark.parametrize("reported, measured, far_below", [
    (0.10, RERUN_COST, True),     # under half
    (0.0, RERUN_COST, True),      # a reported cost of 0 is not "free"
    (0.20, RERUN_COST, False),    # 59%: within the factor
    (None, RERUN_COST, False),    # nothing reported: nothing to compare
    (0.10, None, False),          # the re-run's cost unknown
    (0.10, 0.0, False),
])
def test_reported_cost_far_below_the_rerun(settings, reported, measured, far_below):
    f = RerunFigures(check_id=1, duration_s=1.0, input_tokens=None, cached_tokens=None,
                     output_tokens=None, cost_usd=measured, price_table=None,
                     reported_cost_usd=reported, min_ratio=0.5)
    assert f.cost_far_below is far_below


@pytest.fixture
def rerun_submission(tmp_path, monkeypatch):
    """A published submission on two tasks x 2 attempts (reported: $0.10, 5 min, 5k output
    tokens each). The site re-ran task 1 attempt 1 through the Harbor re-run check (recorded by
    its real code from a Harbor result.json); an older re-run of task 1 attempt 2 recorded only
    Harbor's timing; task 2 was not re-run."""
    cat = CategoryFactory(slug="img")
    t1 = BenchmarkTaskFactory(category=cat, name="img/case_01", position=1)
    t2 = BenchmarkTaskFactory(category=cat, name="img/case_02", position=2)
    agent = AgentFactory(harness__slug="terminus-2",
                         model=AIModelFactory(slug="gpt-5", display_name="GPT-5"))
    sub = SubmissionFactory(agent=agent, benchmark_version=cat.benchmark_version,
                            status=SubmissionStatus.PUBLISHED)
    for task in (t1, t2):
        for attempt in (1, 2):
            TrialFactory(submission=sub, benchmark_task=task, attempt=attempt,
                         outcome=Outcome.PASSED, cost_usd=Decimal("0.1000"), duration_s=300.0,
                         output_tokens=5_000, input_tokens=50_000, cached_tokens=10_000)
    job = VerificationJob.objects.create(submission=sub, attempt=1)
    ctx = base.CheckContext(job, SimpleNamespace(lost=threading.Event()))
    hb = _harbor_job(tmp_path)
    # The container steps only: `harbor run` (its result.json is above) and the verifier.
    monkeypatch.setattr(rerun.agents, "run_harbor_agent", lambda *a, **k: hb)
    monkeypatch.setattr(base.CheckContext, "grade_outputs",
                        lambda self, *a: SimpleNamespace(reward=1.0, judge=None))
    monkeypatch.setattr(rerun, "task_dir_of", lambda task: tmp_path)
    monkeypatch.setattr(rerun, "grader_version", lambda task_dir, v: "img@1")
    monkeypatch.setattr(rerun, "grader_digest", lambda task_dir: "d" * 64)
    site_agent = SiteAgent(kind="harbor", name="terminus-2", model="openai/gpt-5",
                           version="2.0.0")
    rerun.CHECK.check_harbor(ctx, site_agent, (t1, [1]))
    TrialCheck.objects.create(job=job, kind=CheckKind.RERUN, benchmark_task=t1, sample_index=2,
                              status=CheckStatus.MATCH, verified_reward=1.0,
                              detail={"agent": "terminus-2", "kind": "harbor",
                                      "agent_s": 360.0, "trial_s": 420.0})
    return sub, t1, t2


def test_the_harbor_rerun_records_its_measured_figures(rerun_submission):
    _sub, t1, _ = rerun_submission
    check = TrialCheck.objects.get(kind=CheckKind.RERUN, benchmark_task=t1, sample_index=1)
    assert check.status == CheckStatus.MATCH
    assert check.detail["measured"] == {
        "duration_s": 480.0, "input_tokens": 200_000, "cached_tokens": 100_000,
        "output_tokens": 20_000, "cost_usd": RERUN_COST,
        "price_table": pricing.PRICE_TABLE_DATE, "model": "openai/gpt-5"}
    assert check.detail["agent_s"] == 480.0 and check.detail["trial_s"] == 600.0


def _row(html: str, task, attempt: int) -> dict[str, str]:
    row = html.split(f'<tr id="t{task.pk}-{attempt}">')[1].split("</tr>")[0]
    cells = dict(re.findall(r'<td class="num" data-field="(reported|measured)">(.*?)</td>',
                            row, re.S))
    return {k: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", v)).strip()
            for k, v in cells.items()}


def test_status_page_shows_measured_beside_reported_and_flags_the_understated_cost(
        rerun_submission, client):
    sub, t1, t2 = rerun_submission
    html = client.get(f"/submissions/{sub.pk}/").content.decode()
    head = html.split('data-testid="trials"')[1].split("</thead>")[0]
    assert ("Reported cost · time · output tokens</th><th scope=\"col\">Site re-run: cost · time "
            "· output tokens") in head
    assert _row(html, t1, 1) == {
        "reported": "$0.10 · 5.0 min · 5.0k",
        "measured": "$0.34 · 8.0 min · 20.0k reported cost under 50% of the re-run's"}
    # the older re-run: Harbor's agent time only, so no cost to compare and no flag
    assert _row(html, t1, 2) == {"reported": "$0.10 · 5.0 min · 5.0k",
                                 "measured": "– · 6.0 min · –"}
    assert _row(html, t2, 1)["measured"] == "not re-run"
    assert html.count('data-testid="cost-far-below"') == 1
    note = html.split('data-testid="cost-far-below-note">')[1].split("</p>")[0]
    assert note.startswith("1 of the 2 re-run trials reports a cost under 50% of what the "
                           "site's re-run of the same task and attempt cost")
    explained = html.split('data-testid="rerun-figures-note">')[1].split("</p>")[0]
    assert "dated price table" in explained and "the submission's own figures" in explained


def test_status_api_carries_the_measured_figures_and_the_flag(rerun_submission, client):
    sub, t1, _ = rerun_submission
    figures = client.get(f"/api/v1/submissions/{sub.pk}/").json()["rerun_figures"]
    assert figures["min_ratio"] == 0.5 and figures["reported_cost_far_below_rerun"] == 1
    first, second = figures["trials"]
    assert {k: v for k, v in first.items() if k not in ("trial_id", "check_id")} == {
        "task": "img/case_01", "attempt": 1, "reported_cost_usd": 0.1,
        "reported_duration_s": 300.0, "reported_output_tokens": 5_000,
        "reported_input_tokens": 50_000, "reported_cached_tokens": 10_000,
        "measured_duration_s": 480.0, "measured_input_tokens": 200_000,
        "measured_cached_tokens": 100_000, "measured_output_tokens": 20_000,
        "measured_cost_usd": RERUN_COST, "price_table": pricing.PRICE_TABLE_DATE,
        "reported_to_measured_cost": pytest.approx(0.1 / RERUN_COST),
        "reported_cost_far_below_rerun": True, "reported_cost_far_above_rerun": False}
    assert (second["attempt"], second["measured_duration_s"], second["measured_cost_usd"],
            second["reported_cost_far_below_rerun"]) == (2, 360.0, None, False)


def test_a_reported_cost_far_above_the_reruns_is_flagged_too(rerun_submission, client):
    """Inflating the reported cost (to shrink a sample sized by it) is flagged like deflating."""
    from submissions.models import Trial

    sub, t1, _ = rerun_submission
    Trial.objects.filter(submission=sub, benchmark_task=t1, attempt=1).update(
        cost_usd=4 * RERUN_COST)  # 4x: over the 3x ratio
    figures = client.get(f"/api/v1/submissions/{sub.pk}/").json()["rerun_figures"]
    assert (figures["max_ratio"], figures["reported_cost_far_above_rerun"]) == (3.0, 1)
    assert figures["trials"][0]["reported_cost_far_above_rerun"]
    html = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'data-testid="cost-far-above"' in html and "over 3.0x the re-run" in html


def test_the_factor_is_a_setting(rerun_submission, client, settings):
    sub, t1, _ = rerun_submission
    settings.VERIFICATION_REPORTED_COST_MIN_RATIO = 0.25  # $0.10 is 30% of $0.3375
    html = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'data-testid="cost-far-below' not in html
    assert _row(html, t1, 1)["measured"] == "$0.34 · 8.0 min · 20.0k"
    api = client.get(f"/api/v1/submissions/{sub.pk}/").json()["rerun_figures"]
    assert api["min_ratio"] == 0.25 and api["reported_cost_far_below_rerun"] == 0
