"""The row is the agent that ran: the model the leaderboard row shows (metadata ``models[0]``)
is the model every trial ran, as Harbor recorded it; a second listed model is a helper and says
so; a custom agent class cannot be hidden from the re-run by an edited config.json; harness
versions are compared as exact releases. Through the upload API and the intake service, as a
submitter meets them (house style HS32: no eager Celery)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml
from django.test import Client
from django.urls import reverse

from devtools.harbor_fixtures import HarborJobBuilder, build_metadata, edit_json
from evaluation import agents
from submissions import client as submit_client
from submissions.metadata import parse_metadata
from submissions.models import Submission
from submissions.services import token_issue
from submissions.validation import spec_from_packages, validate_submission
from tests.submissions.intake_support import problem_codes, targz, validated

REPO = Path(__file__).resolve().parents[2]
SLUG = "healthagentbench-synthetic@1.0"
STRONG = "openai/gpt-5.5"


def _model(name: str, provider: str = "openai", **extra) -> dict:
    return {"model_name": name, "model_provider": provider, "model_display_name": name.upper(),
            "model_org_display_name": "OpenAI", **extra}


@pytest.fixture
def upload(owner, django_capture_on_commit_callbacks):
    """Post an archive of ``root`` with ``meta`` (a dict or YAML text); the status document."""
    token = token_issue(user=owner)[1]

    def post(root, meta) -> dict:
        text = meta if isinstance(meta, str) else yaml.safe_dump(meta)
        files = {"archive": _named(targz(root), "run.tar.gz"),
                 "metadata": _named(text.encode(), "metadata.yaml")}
        response = Client(HTTP_AUTHORIZATION=f"Token {token}").post("/api/v1/submissions/",
                                                                    files)
        return validated(response, token=token, capture=django_capture_on_commit_callbacks)
    return post


def _named(data: bytes, name: str):
    f = io.BytesIO(data)
    f.name = name
    return f


def _problems(doc: dict, code: str) -> list[dict]:
    return [p for p in doc["problems"] if p["code"] == code]


def _reviewed(text: str) -> str:
    """The client's metadata with every placeholder replaced, as a submitter reviews it."""
    return re.sub(r'"TODO:[^"]*"', lambda m: '"https://example.org/agent"'
                  if "https" in m.group(0) else '"Reviewed"', text)


# ------------------------------------------------------------------ the row's model


def test_an_honest_upload_is_accepted_as_the_client_writes_it_and_as_documented(
        tasks, tmp_path, upload):
    root = tmp_path / "run"
    job = HarborJobBuilder(tasks, agent="codex", model=STRONG).build(root)
    written = _reviewed(submit_client.metadata_text([job.job_dir], benchmark=SLUG))
    assert f'model_name: "{STRONG}"' in written
    doc = upload(root, written)
    assert doc["status"] == "queued", doc["problems"]
    agent = Submission.objects.get(pk=doc["id"]).agent
    assert agent.settings["model_name"] == STRONG and agent.settings["import_path"] is None
    assert "helper_models" not in agent.settings  # other uploads' agents are unchanged
    # The documented form: the name without its provider, the provider beside it.
    doc = upload(root, build_metadata(models=[_model("gpt-5.5")]))
    assert doc["status"] == "queued", doc["problems"]


def test_a_weak_model_listed_first_is_refused_whatever_else_is_listed(tasks, tmp_path, upload):
    """Run the strong model, list a weak one first: the row would show the weak one as
    verified. Refused, naming the model to list first, with or without `role: helper` on the
    strong one."""
    root = tmp_path / "run"
    HarborJobBuilder(tasks, agent="codex", model=STRONG).build(root)
    swapped = build_metadata(models=[_model("gpt-4.1-mini"), _model("gpt-5.5", role="helper")])
    doc = upload(root, swapped)
    assert doc["status"] == "refused"
    assert problem_codes(doc) == {"metadata_model_mismatch"}
    (problem,) = doc["problems"]
    assert problem["path"] == "metadata:models"
    assert "the trials ran model 'openai/gpt-5.5'" in problem["message"]
    assert "the first model listed, 'gpt-4.1-mini'" in problem["message"]
    assert "model_name: 'openai/gpt-5.5'" in problem["message"]
    # No role at all: the second model is not a helper either.
    doc = upload(root, build_metadata(models=[_model("gpt-4.1-mini"), _model("gpt-5.5")]))
    assert problem_codes(doc) == {"metadata_model_mismatch", "metadata_model_role"}
    # Another snapshot of the model is another model: no aliases, no dropped date suffix.
    doc = upload(root, build_metadata(models=[_model("gpt-5.5-2026-01-01")]))
    assert problem_codes(doc) == {"metadata_model_mismatch"}


def test_a_helper_model_is_listed_after_the_row_model_and_shown_as_a_helper(
        tasks, tmp_path, upload, owner):
    root = tmp_path / "run"
    HarborJobBuilder(tasks, agent="codex", model=STRONG).build(root)
    doc = upload(root, build_metadata(models=[_model("gpt-5.5"), _model("gpt-4.1-mini")]))
    assert doc["status"] == "refused" and doc["problems"] == [{
        "code": "metadata_model_role", "path": "metadata:models[1].role",
        "message": "models[1] ('gpt-4.1-mini') has no `role: helper`: a submission is one "
                   "model, models[0], the model every trial ran; a model the agent also calls "
                   "is listed after it with `role: helper` and shown as a helper"}]
    doc = upload(root, build_metadata(models=[_model("gpt-5.5", role="helper")]))
    assert problem_codes(doc) == {"metadata_model_role"}
    doc = upload(root, build_metadata(models=[_model("gpt-5.5"),
                                              _model("gpt-4.1-mini", role="helper")]))
    assert doc["status"] == "queued", doc["problems"]
    sub = Submission.objects.get(pk=doc["id"])
    assert sub.agent.settings["model_name"] == STRONG
    assert sub.agent.settings["helper_models"] == ["gpt-4.1-mini"]
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("submission-status", args=[sub.pk])).content.decode()
    assert 'data-testid="helper-models">GPT-4.1-MINI (<code>gpt-4.1-mini</code>)' in page


def test_trials_that_ran_different_models_are_refused(tasks, tmp_path, upload):
    root = tmp_path / "run"
    job = HarborJobBuilder(tasks, agent="codex", model=STRONG).build(root)
    odd = job.trial(sorted(tasks)[0], 2)
    weak = {"model_name": "openai/gpt-4.1-mini"}
    for name in ("config.json", "lock.json"):  # the trial's files agree with each other
        edit_json(odd / name, lambda d: d["agent"].update(weak))
    edit_json(odd / "result.json", lambda d: d["config"]["agent"].update(weak))

    def job_lock(doc):  # and so does the job's lock of its trials
        entry = next(e for e in doc["trials"] if e["task"]["path"] == f"tasks/{sorted(tasks)[0]}")
        entry["agent"].update(weak)
    edit_json(job.job_dir / "lock.json", job_lock)
    doc = upload(root, build_metadata())
    assert doc["status"] == "refused"
    rel = odd.relative_to(root).as_posix()
    assert {(p["code"], p["path"]) for p in doc["problems"]} == {
        ("agent_model_mixed", rel), ("agent_model_mixed", f"{job.job_dir.name}/lock.json")}
    assert any("1 trial(s) ran model 'openai/gpt-4.1-mini', the others 'openai/gpt-5.5'"
               in p["message"] for p in doc["problems"]), doc["problems"]


def test_an_edited_config_json_does_not_change_the_model_the_trial_ran(tasks, tmp_path, upload):
    """Every trial's config.json says the strong model; result.json and lock.json, which Harbor
    wrote from the same config, say the weak one that ran."""
    root = tmp_path / "run"
    job = HarborJobBuilder(tasks, agent="codex", model="openai/gpt-4.1-mini").build(root)
    for trial in job.all_trials():
        edit_json(trial / "config.json", lambda d: d["agent"].update({"model_name": STRONG}))
    doc = upload(root, build_metadata())
    assert doc["status"] == "refused"
    mixed = _problems(doc, "agent_model_mixed")
    assert len(mixed) >= len(job.all_trials())
    assert ("the trial's files name different models (config.json: 'openai/gpt-5.5'; "
            "result.json: 'openai/gpt-4.1-mini'; lock.json: 'openai/gpt-4.1-mini')"
            ) in mixed[0]["message"]


# ------------------------------------------------------------------ the agent class


def test_a_custom_agent_class_hidden_from_config_json_is_stored_and_never_rerun_as_stock(
        tasks, tmp_path, upload, settings):
    """A subclass whose name() is terminus-2, run with --agent-import-path: an edited
    config.json drops the import path; result.json's and lock.json's dumps still name it, the
    agent's settings keep it, and the re-run refuses it as the submission's own class."""
    settings.VERIFICATION_HARBOR_AGENTS = {"terminus-2": ["2.0.0"]}
    settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {STRONG: {"base_url": "http://10.9.8.7/v1"}}
    custom = "my_agents.sneaky:SneakyTerminus"
    root = tmp_path / "run"
    job = HarborJobBuilder(tasks, agent="terminus-2", model=STRONG).build(root)
    for trial in job.all_trials():
        edit_json(trial / "result.json",
                  lambda d: d["config"]["agent"].update({"import_path": custom}))
        edit_json(trial / "lock.json", lambda d: d["agent"].update({"import_path": custom}))
        assert json.loads((trial / "config.json").read_text())["agent"]["import_path"] is None
    doc = upload(root, build_metadata(harness="terminus-2", harness_version="2.0.0"))
    assert doc["status"] == "queued", doc["problems"]
    agent = Submission.objects.get(pk=doc["id"]).agent
    assert (agent.settings["harbor_agent"], agent.settings["import_path"]) == (
        "terminus-2", custom)
    site_agent, why = agents.resolve_site_agent(
        agent.harness.slug, harness_version=agent.harness_version, agent_settings=agent.settings)
    assert site_agent is None
    assert (why, why.by) == (f"custom agent class ({custom})", "submission")
    # The same settings without the class are the stock harness the site would have run.
    stock, why = agents.resolve_site_agent(
        agent.harness.slug, harness_version=agent.harness_version,
        agent_settings={**agent.settings, "import_path": None})
    assert (stock.kind, stock.name, stock.model, why) == ("harbor", "terminus-2", STRONG, "")


# ------------------------------------------------------------------ the harness version


def test_an_unstated_harness_version_is_the_one_the_trials_recorded(tasks, tmp_path, upload):
    root = tmp_path / "run"
    HarborJobBuilder(tasks, agent="codex", model=STRONG).build(root)
    doc = upload(root, build_metadata(harness_version=""))
    assert doc["status"] == "queued", doc["problems"]
    assert Submission.objects.get(pk=doc["id"]).agent.harness_version == "0.130.0"


@pytest.mark.parametrize(("stated", "accepted"), [
    ("0.130.0", True), ("codex-cli 0.130.0", True), ("v0.130.0", True),
    ("0.130", False), ("0.130.0rc1", False), ("0.130.1", False)])
def test_the_metadata_version_is_the_exact_release_the_trials_recorded(tmp_path, stated,
                                                                        accepted):
    from evaluation.task_specs import version_packages

    spec = spec_from_packages(version_packages(REPO / "tasks", SLUG), slug=SLUG,
                              attempts_per_task=1, with_checksums=False)
    HarborJobBuilder(spec.tasks, attempts=1, agent="codex", model=STRONG).build(tmp_path)
    report = validate_submission(tmp_path, parse_metadata(build_metadata(
        harness_version=stated)), spec)
    codes = {p.code for p in report.problems}
    assert ("metadata_harness_version_mismatch" not in codes) == accepted, report.problems
