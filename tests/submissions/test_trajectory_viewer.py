"""The trajectory viewer as a reviewer reads it: per-step model, tokens, cost and duration from
the ATIF steps, a find and a filter that work without JavaScript, deep links to a step, what the
agent changed in its workspace (the X-ray draft against its findings) and the trial as a zip."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from submissions.models import SubmissionStatus
from submissions.trajectory import trajectory_view
from submissions.workspace import text_diff
from tests.factories import BenchmarkTaskFactory, CategoryFactory, SubmissionFactory, TrialFactory

REPO = Path(__file__).resolve().parents[2]
XRAY_TASK = "tasks/xray-report-correction/synthetic_01"

DOC = {
    "schema_version": "ATIF-v1.7", "session_id": "s",
    "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-5.5"},
    "steps": [
        {"step_id": 1, "source": "user", "timestamp": "2026-12-01T10:00:00Z",
         "message": "Correct the FINDINGS of study_03."},
        {"step_id": 2, "source": "agent", "timestamp": "2026-12-01T10:00:12.5Z",
         "model_name": "gpt-5.5", "message": "I will read the draft.",
         "reasoning_content": "The prior studies matter.",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "bash",
                         "arguments": {"command": "cat /workspace/data/case_01/study_03/report_draft.txt"}}],
         "observation": {"results": [{"source_call_id": "c1", "content": "FINDINGS: Small PNEUMOTHORAX."}]},
         "metrics": {"prompt_tokens": 800, "completion_tokens": 50, "cached_tokens": 200,
                     "cost_usd": 0.0025}},
        {"step_id": 3, "source": "agent", "timestamp": "2026-12-01T10:01:00Z",
         "model_name": "gpt-5.5", "message": "Writing /workspace/submission.json",
         "metrics": {"prompt_tokens": 900, "completion_tokens": 150, "cost_usd": 0.0035}},
    ],
}


def test_steps_carry_model_tokens_cost_and_the_time_to_the_next_step():
    view = trajectory_view(DOC)
    first, second, third = view.steps
    # 10:00:00 -> 10:00:12.5 -> 10:01:00; the last step has no next step.
    assert (first.duration_s, second.duration_s, third.duration_s) == (12.5, 47.5, None)
    assert (second.model_name, second.prompt_tokens, second.completion_tokens,
            second.cached_tokens, second.cost_usd) == ("gpt-5.5", 800, 50, 200, 0.0025)
    assert (view.prompt_tokens, view.completion_tokens, view.duration_s) == (1700, 200, 60.0)
    assert view.cost_usd == pytest.approx(0.006)
    assert (view.agent, view.model_name) == ("terminus-2 2.0.0", "openai/gpt-5.5")
    # The timeline weighs steps by duration when every step but the last has one; the last,
    # with no duration, gets no width beyond the strip's minimum.
    assert [pct for _, pct in view.timeline] == [pytest.approx(100 * 12.5 / 60, abs=1e-3),
                                                 pytest.approx(100 * 47.5 / 60, abs=1e-3), 0.0]
    assert [s.anchor for s in view.steps] == ["step-1", "step-2", "step-3"]
    assert second.kinds == ["message", "tool", "observation", "reasoning"]


def test_without_timestamps_the_timeline_weighs_tokens_and_odd_values_are_ignored():
    doc = {"steps": [{"step_id": 1, "source": "agent", "message": "a", "timestamp": "soon",
                      "metrics": {"prompt_tokens": 30, "completion_tokens": 10, "cost_usd": "x"}},
                     {"step_id": 2, "source": "agent", "message": "b",
                      "metrics": {"prompt_tokens": -5, "completion_tokens": True}},
                     {"step_id": 3, "source": "agent", "message": "c",
                      "metrics": {"prompt_tokens": 60}}]}
    view = trajectory_view(doc)
    assert [s.duration_s for s in view.steps] == [None, None, None]
    assert [s.cost_usd for s in view.steps] == [None, None, None]
    assert [s.tokens for s in view.steps] == [40, 0, 60]
    assert [pct for _, pct in view.timeline] == [40.0, 0.0, 60.0]


def test_find_is_case_blind_over_every_part_and_the_filter_hides_steps():
    view = trajectory_view(DOC, query="pneumothorax")
    assert [s.matches for s in view.steps] == [False, True, False]  # in an observation
    assert view.match_count == 1
    view = trajectory_view(DOC, sources=["agent"], kinds=["tool"])
    assert [s.shown for s in view.steps] == [False, True, False]
    assert view.filtered and view.shown_count == 1
    # Unknown values are ignored rather than hiding everything.
    assert trajectory_view(DOC, sources=["robot"], kinds=["x"]).shown_count == 3


def test_a_one_paragraph_report_is_diffed_by_sentence():
    diff = text_diff("No effusion. Small right pneumothorax. Heart normal.",
                     "No effusion. Heart normal.")
    assert [(d.kind, d.text) for d in diff] == [
        (" ", "No effusion."), ("-", "Small right pneumothorax."), (" ", "Heart normal.")]


@pytest.fixture
def xray_trial(db, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    category = CategoryFactory(slug="xray-report-correction")
    task = BenchmarkTaskFactory(category=category, name="xray-report-correction/synthetic_01",
                                package_path=XRAY_TASK)
    sub = SubmissionFactory(files_prefix="submissions/9/files", status=SubmissionStatus.PUBLISHED)
    draft = (REPO / XRAY_TASK / "environment/data/case_01/study_03/report_draft.txt").read_text()
    findings = draft.split("FINDINGS:\n")[1].split("\n\n")[0]
    # The agent removes the pneumothorax and keeps the rest.
    written = findings.replace(" Small right apical pneumothorax.", "")
    trial_dir = "xray/synthetic_01__a1"
    default_storage.save(f"submissions/9/files/{trial_dir}/artifacts/workspace/submission.json",
                         ContentFile(json.dumps({"findings": written}).encode()))
    default_storage.save(f"submissions/9/files/{trial_dir}/agent/trajectory.json",
                         ContentFile(json.dumps(DOC).encode()))
    return TrialFactory(submission=sub, benchmark_task=task, trial_dir=trial_dir,
                        trajectory_path=f"{trial_dir}/agent/trajectory.json")


def _page(client, trial, query=""):
    url = f"/submissions/{trial.submission_id}/trials/{trial.pk}/trajectory/{query}"
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_shows_the_workspace_diff_against_the_tasks_draft(client, xray_trial):
    html = _page(client, xray_trial)
    workspace = html.split('data-testid="workspace"')[1].split("</section>")[0]
    assert "<code>/workspace/submission.json</code>" in workspace
    assert ("against the FINDINGS of /workspace/data/case_01/study_03/report_draft.txt "
            "(the task&#x27;s draft): 0 added, 1 removed") in workspace
    removed = workspace.split('class="diff-line diff-del"')[1].split("</li>")[0]
    assert removed.endswith("Small right apical pneumothorax.")
    for n in (1, 2, 3):
        assert f'<li id="step-{n}" class="step' in html
        assert f'href="#step-{n}" data-testid="step-link">Link to step {n}</a>' in html
    metrics = html.split('data-testid="step-metrics">')[2].split("</span>")[0]
    assert metrics == "800 in (200 cached) · 50 out · $0.0025 · 47.5 s"
    assert "3 steps · terminus-2 2.0.0 · openai/gpt-5.5 · ATIF-v1.7" in html


def test_find_and_filter_work_through_the_server_without_javascript(client, xray_trial):
    html = _page(client, xray_trial, "?q=PNEUMOTHORAX&source=agent&show=tool")
    assert "1 step match “PNEUMOTHORAX”." in html
    assert "1 of 3 steps shown by the filter." in html
    assert '<li id="step-1" class="step step-user" data-source="user" data-kinds="message" hidden>' in html
    assert 'class="step step-agent match"' in html
    assert 'class="steps hide-message hide-observation hide-reasoning"' in html
    assert 'value="PNEUMOTHORAX"' in html


def test_the_trial_downloads_as_one_zip(client, xray_trial):
    response = client.get(f"/submissions/{xray_trial.submission_id}/trials/{xray_trial.pk}/trial.zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as zf:
        names = sorted(zf.namelist())
        assert names == ["site-record.json", "trial/agent/trajectory.json",
                         "trial/artifacts/workspace/submission.json"]
        record = json.loads(zf.read("site-record.json"))
        assert json.loads(zf.read("trial/agent/trajectory.json")) == DOC
    assert record["trial"] == xray_trial.pk and record["task"] == xray_trial.benchmark_task.name
    assert set(record["reported"]) == {"cost_usd", "duration_s", "input_tokens",
                                       "output_tokens", "cached_tokens"}
    assert record["files_left_out (over the download's size cap)"] == []


def test_tool_calls_are_rendered_by_kind():
    doc = {"steps": [{"step_id": 1, "source": "agent", "tool_calls": [
        {"tool_call_id": "a", "function_name": "Bash", "arguments": {"command": "ls -la /workspace"}},
        {"tool_call_id": "b", "function_name": "str_replace_based_edit_tool",
         "arguments": {"command": "create", "path": "/workspace/submission.json"}},
        {"tool_call_id": "c", "function_name": "read_file", "arguments": {"path": "/workspace/a"}},
        {"tool_call_id": "d", "function_name": "think", "arguments": {"thought": "hm"}}]}]}
    calls = trajectory_view(doc).steps[0].tool_calls
    assert [(c.kind, c.summary) for c in calls] == [
        ("command", "ls -la /workspace"), ("edit", "/workspace/submission.json"),
        ("view", "/workspace/a"), ("other", "")]


def test_an_unpublished_trials_zip_is_not_public(client, xray_trial):
    type(xray_trial.submission).objects.filter(pk=xray_trial.submission_id).update(
        status=SubmissionStatus.VERIFIED)
    response = client.get(f"/submissions/{xray_trial.submission_id}/trials/{xray_trial.pk}/trial.zip")
    assert response.status_code == 404
