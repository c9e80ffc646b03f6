"""The X-ray judge on the site, on PostgreSQL with real Docker containers:

* a stub OpenAI-compatible judge started by the test is the LLM; the first re-grade of an X-ray
  trial asks it 5 times, the second re-grade (a new verification job) is answered by the
  site's judge cache: no request reaches the stub, the same votes, hit ratio 100%;
* the judge model and prompt version are stored with the verdict (TrialCheck, Trial) and shown
  on the submission and trajectory pages, in /trials.csv and /api/v1/trials/;
* without a configured judge, X-ray trials are "awaiting judge": not scored, the job ends (no
  retry), the submission is "consistent" and cannot be published; `manage.py judge_pending`
  re-verifies it once a judge is configured;
* egress: the verifier of a real X-ray task has no network; it reaches the judge only through
  the gateway (which adds the site's key), and neither the judge's own address nor anything
  else.

Run:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_judge \
        .venv/bin/python -m pytest tests/evaluation/test_xray_judge_site.py -q -s
"""

import csv
import io
import json
import shutil
import textwrap

import pytest

from tests.evaluation import verification_support as vs
from tests.evaluation.judge_standin import JudgeStandIn, docker_bridge_ip

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

XRAY = "xray-report-correction/synthetic_01"
CT = "ct-abnormality-classification/synthetic_01"
MODEL = "stub-judge-cache-1"
KEY = "sk-site-only-7f3a"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    return vs.oracle_outputs(tmp_path_factory.mktemp("oracle-outputs"), only=[XRAY, CT])


@pytest.fixture
def stub():
    with JudgeStandIn(host=docker_bridge_ip(), rule="injected-errors") as judge:
        yield judge


@pytest.fixture(autouse=True)
def _site(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE  # published to, consumed by nobody
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.VERIFICATION_CHECKS = ["regrade"]
    settings.VERIFICATION_HEARTBEAT_S = 1
    settings.XRAY_JUDGE_URL = ""
    settings.XRAY_JUDGE_MODEL = MODEL
    settings.XRAY_JUDGE_API_KEY = KEY
    vs.point_celery_at(vs.BROKER_URL)


def _run(sub):
    from submissions.verification import verification_enqueue, verification_run

    job = verification_enqueue(submission=sub)
    assert verification_run(job_id=job.pk) == "done"
    job.refresh_from_db()
    sub.refresh_from_db()
    return job


def _regrade(job, task=XRAY):
    from submissions.models import CheckKind, TrialCheck

    return TrialCheck.objects.get(job=job, kind=CheckKind.REGRADE, benchmark_task__name=task)


def test_second_regrade_is_answered_by_the_judge_cache(settings, stub, oracle, client,
                                                       django_user_model):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from evaluation.judge.client import PROMPT_VERSION
    from evaluation.models import JudgeCacheEntry
    from submissions.services import submission_publish, submission_reverify

    settings.XRAY_JUDGE_URL = stub.url
    bv = vs.synthetic_version()
    sub = vs.make_submission(bv, outputs=oracle, tasks=[XRAY], attempts=1)

    first = _run(sub)
    check = _regrade(first)
    assert check.status == "match" and check.verified_reward == 1.0, check.reason
    assert (check.judge_model, check.judge_prompt_version) == (MODEL, PROMPT_VERSION)
    assert check.detail["judge"] == {"model": MODEL, "prompt_version": PROMPT_VERSION,
                                     "requests": 5, "cache_hits": 0, "upstream_calls": 5,
                                     "errors": 0}
    assert len(stub.requests) == 5
    # The stub saw the site's model and key (added by the gateway, never in the verifier).
    assert {b["model"] for b in stub.requests} == {MODEL}
    assert {h.get("Authorization") for h in stub.headers} == {f"Bearer {KEY}"}
    entry = JudgeCacheEntry.objects.get()
    assert (entry.prompt_version, entry.model, entry.scope, len(entry.replies)) == (
        PROMPT_VERSION, MODEL, "healthagentbench-synthetic/xray-report-correction-synthetic_01",
        5)

    # The second re-grade: a new verification job of the same submission.
    submission_reverify(submission=sub, actor=None, reason="second re-grade")
    second = _run(sub)
    assert second.pk != first.pk
    again = _regrade(second)
    assert len(stub.requests) == 5  # not one more request reached the judge
    assert again.detail["judge"]["cache_hits"] == 5 and again.detail["judge"]["requests"] == 5
    assert again.detail["judge"]["upstream_calls"] == 0
    assert (again.status, again.verified_reward) == (check.status, check.verified_reward)
    assert again.detail["rewards"] == check.detail["rewards"]  # the same votes
    ratio = second.summary["judge"]["cache_hit_ratio"]
    assert ratio == 1.0
    print(f"\njudge cache hit ratio on the second re-grade: {ratio:.0%} "
          f"({again.detail['judge']['cache_hits']}/{again.detail['judge']['requests']} "
          f"requests; requests at the stub: first re-grade 5, second 0)")
    entry.refresh_from_db()
    assert entry.hits == 5

    # Shown with the verdict: trial fields, the pages, the CSV and the API.
    trial = sub.trials.get()
    assert (trial.judge_model, trial.judge_prompt_version) == (MODEL, PROMPT_VERSION)
    assert sub.status == "consistent"
    maintainer = django_user_model.objects.create_user("maint", is_staff=True)
    client.force_login(maintainer)
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert f"judge {MODEL}, prompt {PROMPT_VERSION}" in page
    default_storage.save(f"{sub.files_prefix}/job/x/agent/trajectory.json",
                         ContentFile(b'{"schema_version": "ATIF-v1.6", "steps": []}'))
    trial.trajectory_path = "job/x/agent/trajectory.json"
    trial.save(update_fields=["trajectory_path"])
    viewer = client.get(f"/submissions/{sub.pk}/trials/{trial.pk}/trajectory/").content.decode()
    assert f"{MODEL}, prompt version {PROMPT_VERSION}" in viewer
    submission_publish(submission=sub, actor=maintainer)
    rows = list(csv.DictReader(io.StringIO(b"".join(
        client.get(f"/trials.csv?benchmark={bv.slug}").streaming_content).decode())))
    mine = [r for r in rows if r["submission"] == str(sub.pk)]
    assert [(r["judge_model"], r["judge_prompt_version"]) for r in mine] == [
        (MODEL, PROMPT_VERSION)]
    api = client.get(f"/api/v1/trials/?benchmark={bv.slug}").json()["results"]
    assert [(r["judge_model"], r["judge_prompt_version"]) for r in api
            if r["submission"] == sub.pk] == [(MODEL, PROMPT_VERSION)]


def test_without_a_judge_xray_trials_await_it_until_judge_pending(settings, stub, oracle, client,
                                                                 django_user_model):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from submissions.models import coverage_badge
    from submissions.services import SubmissionError, submission_publish

    bv = vs.synthetic_version()
    sub = vs.make_submission(bv, outputs=oracle, tasks=[XRAY, CT], attempts=1)
    job = _run(sub)  # one attempt: "awaiting judge" is no infrastructure error to retry
    assert job.attempt == 1 and job.status == "done"
    waiting = sub.trials.get(benchmark_task__name=XRAY)
    check = _regrade(job)
    assert check.status == "awaiting_judge" and "XRAY_JUDGE_URL" in check.reason
    assert (waiting.flags, waiting.verification_level, waiting.verified_reward) == (
        ["awaiting_judge"], "claimed", None)
    assert _regrade(job, CT).status == "match"  # the other task is graded as usual
    assert len(stub.requests) == 0
    # Not scored, and said so: the submission is checked (not verified), the badge counts it.
    assert sub.status == "consistent" and sub.coverage["awaiting_judge"] == 1
    assert job.summary["judge"]["awaiting_trials"] == [waiting.pk]
    # The headline does not count the unjudged trial as a matching re-grade.
    assert job.summary["headline"].startswith("consistent: 1/2 re-grades match"), job.summary
    assert "1 awaiting the X-ray judge (not scored)" in job.summary["headline"]
    assert "1 trial awaiting the X-ray judge (not scored by the site)" in coverage_badge(
        sub.coverage)
    maintainer = django_user_model.objects.create_user("maint2", is_staff=True)
    client.force_login(maintainer)
    assert 'data-testid="awaiting-judge">awaiting judge<' in client.get(
        f"/submissions/{sub.pk}/").content.decode()
    with pytest.raises(SubmissionError, match="await the X-ray judge"):
        submission_publish(submission=sub, actor=maintainer)
    standin_url, settings.TRAJECTORY_JUDGE_URL = settings.TRAJECTORY_JUDGE_URL, ""
    with pytest.raises(CommandError, match="no judge is configured"):  # neither judge
        call_command("judge_pending", stdout=io.StringIO())
    settings.TRAJECTORY_JUDGE_URL = standin_url

    # A judge is configured: judge_pending re-verifies; the new job grades the trial.
    settings.XRAY_JUDGE_URL = stub.url
    out = io.StringIO()
    call_command("judge_pending", stdout=out)
    assert json.loads(out.getvalue()) == {"requeued": [sub.pk], "left": {}}
    sub.refresh_from_db()
    assert sub.status == "queued"
    job = _run(sub)
    waiting.refresh_from_db()
    assert (waiting.flags, waiting.verified_reward, waiting.judge_model) == ([], 1.0, MODEL)
    assert sub.coverage["awaiting_judge"] == 0 and len(stub.requests) == 5
    submission_publish(submission=sub, actor=maintainer)


def test_the_xray_verifier_reaches_only_the_judge_gateway(settings, stub, tmp_path):
    """The real X-ray package's image and gateway; its test.sh replaced by probes."""
    from django.conf import settings as live

    from evaluation import runner
    from evaluation.judge import cache as judging
    from evaluation.judge.client import SYSTEM_PROMPT

    settings.XRAY_JUDGE_URL = stub.url
    task = tmp_path / "xray-report-correction" / "synthetic_01"
    shutil.copytree(vs.REPO / "tasks" / XRAY, task)
    host = docker_bridge_ip()
    pg_port = int(live.DATABASES["default"].get("PORT") or 5432)
    (task / "tests" / "test.sh").write_text(textwrap.dedent(f"""\
        #!/bin/bash
        python3 -s -P - <<'EOF'
        import http.client, json, os, socket, sys
        sys.path.insert(0, "/opt/hab")
        from evaluation.judge.client import ChatJudge, _UnixConnection
        out = {{"reward": 1.0}}
        sock = os.environ["XRAY_JUDGE_URL"][len("unix://"):]
        judge = ChatJudge(os.environ["XRAY_JUDGE_URL"], "whatever", timeout_s=30, retries=0)
        out["judge_votes"] = judge.vote("Normal heart.", "Normal heart.", ["large effusion"])
        for name, (h, p) in {{"judge_direct": ({host!r}, {stub.port}),
                              "database": ({host!r}, {pg_port}),
                              "internet": ("1.1.1.1", 443),
                              "dns": ("8.8.8.8", 53)}}.items():
            try:
                socket.create_connection((h, p), timeout=2).close(); out[name] = "reachable"
            except OSError as exc:
                out[name] = type(exc).__name__
        def ask(method, path, body=b"", headers=None):
            c = _UnixConnection(sock, 10)
            c.request(method, path, body=body, headers=headers or {{}})
            r = c.getresponse(); r.read(); c.close()
            return r.status
        out["gateway_get"] = ask("GET", "http://example.com/")
        out["gateway_other_path"] = ask("POST", "http://example.com/v1/embeddings", b"{{}}",
                                        {{"Content-Type": "application/json"}})
        free = json.dumps({{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]}})
        out["gateway_free_prompt"] = ask("POST", "/v1/chat/completions", free.encode(),
                                         {{"Content-Type": "application/json"}})
        out["key_in_env"] = any({KEY!r} in v for v in os.environ.values())
        out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
        json.dump(out, open("/logs/verifier/reward.json", "w"))
        EOF
        """))
    runner.build_task_image(task)
    spec = judging.judge_for(task)
    assert spec.system_prompt == SYSTEM_PROMPT and spec.api_key == KEY
    v = runner.run_verifier(task, job_id=f"{vs.RUN_PREFIX}egress", artifacts_dir=tmp_path / "o",
                            judge=spec)
    probe = v.rewards
    assert probe.get("judge_votes") == [0] * 5, (v.error, v.result.text)
    assert {k: probe[k] for k in ("judge_direct", "database", "internet", "dns")} == {
        k: "OSError" for k in ("judge_direct", "database", "internet", "dns")}, probe
    assert (probe["gateway_get"], probe["gateway_other_path"], probe["gateway_free_prompt"]) == (
        405, 404, 400)
    assert probe["key_in_env"] is False and probe["interfaces"] == ["lo"]
    # Only the gateway's 5 judge requests reached the stub, from the bridge network.
    assert len(stub.requests) == 5 and all(p != "127.0.0.1" for p in stub.peers)
    assert all(h.get("Authorization") == f"Bearer {KEY}" for h in stub.headers)
