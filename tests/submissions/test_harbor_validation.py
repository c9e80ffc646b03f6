"""Harbor upload validation, metadata, pricing and secret redaction (Django-free).

Run: .venv/bin/python -m pytest tests/submissions/test_harbor_validation.py -q -p no:django
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import uuid
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from devtools.harbor_fixtures import (  # noqa: E402
    atif_trajectory,
    HarborJobBuilder,
    build_metadata,
    edit_json,
    write_json,
)

from evaluation.task_specs import version_packages  # noqa: E402
from submissions import pricing  # noqa: E402
from submissions.harbor import (  # noqa: E402
    AGENT_ERROR,
    FAILED,
    INFRA_ERROR,
    PASSED,
    TIMEOUT,
    outcome_for,
    parse_tree,
)
from submissions.metadata import MetadataError, parse_metadata  # noqa: E402
from submissions.secrets import scan_and_redact  # noqa: E402
from submissions.validation import (  # noqa: E402
    BenchmarkSpec,
    spec_from_packages,
    validate_submission,
)

SLUG = "healthagentbench-synthetic@1.0"
MODEL = "openai/gpt-5.5"


@pytest.fixture(scope="module")
def spec() -> BenchmarkSpec:
    packages = version_packages(REPO / "tasks", SLUG)
    assert len(packages) == 7
    return spec_from_packages(packages, slug=SLUG, attempts_per_task=3)


def _build(root: Path, spec: BenchmarkSpec, **kwargs):
    # Output paths and Harbor's task_checksum default to what the real packages declare.
    kwargs.setdefault("agent", "codex")
    kwargs.setdefault("model", MODEL)
    return HarborJobBuilder(spec.tasks, attempts=spec.attempts_per_task, **kwargs).build(root)


def _meta(**kwargs):
    return parse_metadata(build_metadata(**kwargs))


def _codes(report) -> set[str]:
    return {p.code for p in report.problems}


def _other_problems(report, harbor_version: str = "0.25.0") -> list:
    """The problems besides the release check: a job of Harbor 0.1.x (no lock.json) is refused
    as `harbor_release_unsupported` once per job; the parser still reads the rest of it, and the
    tests of that shape check every other rule on it."""
    release = [p for p in report.problems if p.code == "harbor_release_unsupported"]
    assert len(release) == (1 if harbor_version.startswith("0.1.") else 0), release
    return [p for p in report.problems if p.code != "harbor_release_unsupported"]


# ------------------------------------------------------------------ valid submissions


@pytest.mark.parametrize("harbor_version", ["0.25.0", "0.1.18"])
def test_complete_submission_validates_without_problems(tmp_path, spec, harbor_version):
    """A Harbor 0.25 job is accepted; a 0.1.x job is read as completely but refused for its
    release alone (test_jobs_of_harbor_releases_before_0_13_are_refused_naming_the_accepted)."""
    _build(tmp_path, spec, harbor_version=harbor_version)
    report = validate_submission(tmp_path, _meta(), spec)
    assert _other_problems(report, harbor_version) == []
    assert report.ok == (harbor_version == "0.25.0")
    assert len(report.trials) == 21
    assert report.agent_config.name == "codex"
    assert report.agent_config.model_name == MODEL
    by_task: dict[str, list[int]] = {}
    for trial in report.trials:
        by_task.setdefault(trial.spec_task, []).append(trial.attempt)
        assert trial.outcome == PASSED and trial.reward == 1.0
        assert trial.cost_usd == 0.42 and not trial.cost_computed
        assert (trial.input_tokens, trial.cached_tokens, trial.output_tokens) == (
            182_311, 150_400, 6_120)
        assert trial.duration_s == pytest.approx(95.4)
        assert trial.trajectory_path.endswith("/agent/trajectory.json")
        assert trial.agent_ran and not trial.verifier_disabled and trial.timeout_multiplier == 1
        (artifact,) = trial.artifact_paths
        assert (tmp_path / artifact).exists()
        expected = spec.outputs[trial.spec_task].strip("/")
        assert artifact.rstrip("/").endswith(f"/artifacts/{expected}")
    assert by_task == {task: [1, 2, 3] for task in spec.tasks}
    if harbor_version == "0.25.0":
        assert report.harbor_versions == ["0.25.0"]
        assert all(t.task_digest == spec.tasks[t.spec_task] for t in report.trials)
    else:
        assert report.harbor_versions == []  # 0.1.x writes no lock.json
        assert all(t.task_digest is None and t.task_checksum for t in report.trials)
    fields = report.trials[0].model_fields()
    assert fields["success"] is True and fields["attempt"] == 1


def test_harbor_020_sparse_config_dumps_validate(tmp_path, spec):
    job = _build(tmp_path, spec, exclude_defaults=True)
    config = json.loads((job.all_trials()[0] / "config.json").read_text())
    assert "verifier" not in config and config["environment"] == {"type": "docker"}
    assert validate_submission(tmp_path, _meta(), spec).problems == []


NO_MODEL = [{"model_name": "none", "model_provider": "none", "model_display_name": "no model",
             "model_org_display_name": "none"}]


def test_oracle_run_labelled_with_a_model_is_refused(tmp_path, spec):
    """The trials ran Harbor's oracle (no -m): metadata naming GPT-5.5 would put that model on
    the leaderboard as if the site had found it. Refused, with the metadata that fits."""
    _build(tmp_path, spec, agent="oracle", model=None)
    report = validate_submission(tmp_path, _meta(harness="oracle", agent_display_name="Oracle",
                                                 harness_version="1.0.0"), spec)
    assert [(p.code, p.path) for p in report.problems] == [
        ("metadata_model_mismatch", "metadata:models")]
    assert "calls no model" in report.problems[0].message
    assert "'gpt-5.5'" in report.problems[0].message and "model_name: none" in report.problems[0].message
    # The same run with the model it ran (none) is accepted.
    assert validate_submission(tmp_path, _meta(harness="oracle", agent_display_name="Oracle",
                                               harness_version="1.0.0", models=NO_MODEL),
                               spec).problems == []


def test_oracle_submission_with_metadata_yaml_at_the_root(tmp_path, spec):
    _build(tmp_path / "jobs", spec, agent="oracle", model=None)
    (tmp_path / "metadata.yaml").write_text(build_metadata(
        harness="oracle", agent_display_name="Oracle", harness_version="1.0.0", fmt="yaml",
        models=NO_MODEL))
    report = validate_submission(tmp_path, None, spec)
    assert report.problems == []
    assert report.metadata.harness == "oracle"
    assert all(t.cost_usd is None and not t.cost_computed for t in report.trials)


def test_two_job_directories_count_as_one_submission(tmp_path, spec):
    tasks = list(spec.tasks)
    first = {t: spec.tasks[t] for t in tasks[:4]}
    second = {t: spec.tasks[t] for t in tasks[4:]}
    common = dict(agent="codex", model=MODEL)
    HarborJobBuilder(first, job_name="2026-12-01__10-00-00", **common).build(tmp_path)
    HarborJobBuilder(second, job_name="2026-12-02__10-00-00", **common).build(tmp_path)
    report = validate_submission(tmp_path, _meta(), spec)
    assert report.problems == []
    assert len(report.jobs) == 2 and len(report.trials) == 21


# ------------------------------------------------------------------ every failure at once


def _copy_trial(src: Path, name: str, **result_changes) -> Path:
    dst = src.parent / name
    shutil.copytree(src, dst)

    def change(doc):
        doc["trial_name"] = name
        doc["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, name))  # another run: another id
        doc.update(result_changes)

    edit_json(dst / "result.json", change)
    edit_json(dst / "config.json", lambda d: d.update({"trial_name": name}))
    return dst


def test_every_failure_mode_is_reported_together(tmp_path, spec):
    """J3 (with the two tests below): an unknown task id, a task id `../../gt` (reported, never
    used as a path), missing and extra attempts are all listed in one report."""
    job = _build(tmp_path, spec)
    t = sorted(spec.tasks)
    assert t[4] == "ehr-format-conversion/synthetic_01"

    # 1. a trial without result.json
    (job.trial(t[0], 1) / "result.json").unlink()
    # 2. a trial of a task that is not in the benchmark, with a hostile name
    gt = _copy_trial(job.trial(t[1], 1), "gt__AAAAAAA", task_name="../../gt",
                     task_id={"path": "../../gt"})
    edit_json(gt / "config.json", lambda d: d["task"].update({"path": "../../gt"}))
    # 3. content digest mismatch
    edit_json(job.trial(t[2], 1) / "lock.json",
              lambda d: d["task"].update({"digest": "sha256:" + "0" * 64}))
    # 4. missing attempt (2 of 3) and 5. an extra attempt (4 of 3)
    shutil.rmtree(job.trial(t[3], 3))
    extra = _copy_trial(job.trial(t[4], 1), "ehr-format-conversion-synthetic__Zzzzzzz",
                        started_at="2026-12-02T23:59:00.000000Z")
    # 6. a second agent configuration, whose unknown model has no price and no cost recorded
    odd = job.trial(t[5], 1)
    edit_json(odd / "config.json", lambda d: d["agent"].update({"model_name": "acme/mystery-1"}))
    edit_json(odd / "result.json", lambda d: (d["config"]["agent"].update(
        {"model_name": "acme/mystery-1"}), d["agent_result"].update({"cost_usd": None})))
    # 7. timeout multiplier, 8. resource override, 9. verifier disabled
    edit_json(job.trial(t[5], 2) / "config.json", lambda d: d.update({"timeout_multiplier": 2.0}))
    edit_json(job.trial(t[5], 3) / "config.json",
              lambda d: d["environment"].update({"override_memory_mb": 8192}))
    edit_json(job.trial(t[6], 1) / "config.json", lambda d: d.update({"verifier":
                                                                       {"disable": True}}))
    # 10. missing trajectory, 11. invalid trajectory (step ids not sequential)
    (job.trial(t[6], 2) / "agent" / "trajectory.json").unlink()
    edit_json(job.trial(t[6], 3) / "agent" / "trajectory.json",
              lambda d: d["steps"][1].update({"step_id": 7}))
    # 12. the output artifact was not collected
    (job.trial(t[1], 2) / "artifacts" / "workspace" / "submission.json").unlink()
    # 13. metadata names another model than the trials ran
    meta = _meta(models=[{"model_name": "gpt-5.4", "model_provider": "openai",
                          "model_display_name": "GPT-5.4", "model_org_display_name": "OpenAI"}])

    report = validate_submission(tmp_path, meta, spec)
    found = {(p.code, p.path) for p in report.problems}
    rel = lambda p: p.relative_to(tmp_path).as_posix()  # noqa: E731
    expected = {
        ("result_missing", f"{rel(job.trial(t[0], 1))}/result.json"),
        ("attempts_missing", t[0]),
        ("task_unknown", rel(gt)),
        ("task_digest_mismatch", rel(job.trial(t[2], 1))),
        ("attempts_missing", t[3]),
        ("job_trials_missing", f"{rel(job.job_dir)}/result.json"),  # the deleted attempt
        ("attempts_extra", t[4]),
        ("agent_model_mixed", rel(odd)),
        ("cost_missing_no_price", f"{rel(odd)}/result.json"),
        ("timeout_multiplier", rel(job.trial(t[5], 2))),
        ("override", rel(job.trial(t[5], 3))),
        ("verifier_disabled", rel(job.trial(t[6], 1))),
        ("trajectory_missing", f"{rel(job.trial(t[6], 2))}/agent/trajectory.json"),
        ("trajectory_invalid", f"{rel(job.trial(t[6], 3))}/agent/trajectory.json"),
        ("artifact_missing", f"{rel(job.trial(t[1], 2))}/artifacts/workspace/submission.json"),
        ("metadata_model_mismatch", "metadata:models"),
    }
    assert expected <= found, sorted(expected - found)
    assert found - expected == set(), sorted(found - expected)  # nothing spurious
    assert all(p.path and p.message for p in report.problems)
    # Messages name what is wrong.
    by_code = {p.code: p.message for p in report.problems}
    assert "acme/mystery-1" in by_code["cost_missing_no_price"]
    assert "cost missing and no price for model" in by_code["cost_missing_no_price"]
    assert "environment.override_memory_mb" in by_code["override"]
    assert "2.0" in by_code["timeout_multiplier"]
    assert "../../gt" in by_code["task_unknown"]
    assert rel(extra) in by_code["attempts_extra"]
    assert "step_id" in by_code["trajectory_invalid"]
    # The hostile task name was never used as a path.
    assert not (tmp_path.parent / "gt").exists()


def test_job_level_overrides_and_multipliers_are_reported(tmp_path, spec):
    _build(tmp_path, spec, overrides={"timeout_multiplier": 2.0,
                                      "verifier.override_timeout_sec": 60})
    report = validate_submission(tmp_path, _meta(), spec)
    job_config = "2026-12-02__09-18-40/config.json"
    job_lock = "2026-12-02__09-18-40/lock.json"
    found = {(p.code, p.path) for p in report.problems}
    assert ("timeout_multiplier", job_config) in found
    assert ("override", job_config) in found
    # The job's config, each trial, and the job's lock.json (one problem per setting there).
    assert ("timeout_multiplier", job_lock) in found and ("override", job_lock) in found
    assert sum(p.code == "timeout_multiplier" for p in report.problems) == 1 + 21 + 1
    assert sum(p.code == "override" for p in report.problems) == 1 + 21 + 1
    lock = {p.code: p.message for p in report.problems if p.path == job_lock}
    assert lock["timeout_multiplier"] == ("timeout_multiplier is 2.0 in 21 of its 21 trial "
                                          "locks; it must be 1.0")
    assert lock["override"].startswith("verifier.override_timeout_sec is set (60) in 21 of")


def test_agent_override_keys_of_both_generations(tmp_path, spec):
    job = _build(tmp_path, spec, harbor_version="0.1.18")
    t = sorted(spec.tasks)
    edit_json(job.trial(t[0], 1) / "config.json",
              lambda d: d["agent"].update({"override_timeout_sec": 7200}))
    edit_json(job.trial(t[0], 2) / "config.json",
              lambda d: d["agent"].update({"max_timeout_sec": 60}))
    edit_json(job.trial(t[0], 3) / "config.json",
              lambda d: d["environment"].update({"override_cpus": 8}))
    report = validate_submission(tmp_path, _meta(), spec)
    others = _other_problems(report, "0.1.18")
    messages = sorted(p.message.split(" is set")[0] for p in others)
    assert messages == ["agent.max_timeout_sec", "agent.override_timeout_sec",
                        "environment.override_cpus"]
    assert {p.code for p in others} == {"override"}


def test_reward_file_disagreeing_with_result_is_reported(tmp_path, spec):
    job = _build(tmp_path, spec)
    trial = job.trial(sorted(spec.tasks)[0], 1)
    write_json(trial / "verifier" / "reward.json", {"reward": 0})
    report = validate_submission(tmp_path, _meta(), spec)
    assert [(p.code, p.path) for p in report.problems] == [
        ("reward_mismatch", f"{trial.relative_to(tmp_path).as_posix()}/verifier/reward.json")]


def test_reward_read_from_reward_files_when_result_has_none(tmp_path, spec):
    job = _build(tmp_path, spec, harbor_version="0.1.18")
    trial = job.trial(sorted(spec.tasks)[0], 1)
    edit_json(trial / "result.json", lambda d: d.update({"verifier_result": None}))
    (trial / "verifier" / "reward.json").unlink()
    (trial / "verifier" / "reward.txt").write_text("0\n")
    report = validate_submission(tmp_path, _meta(), spec)
    assert _other_problems(report, "0.1.18") == []
    parsed = next(x for x in report.trials if x.trial_name == trial.name)
    assert parsed.reward == 0.0 and parsed.outcome == FAILED
    assert parsed.reward_source.endswith("verifier/reward.txt")


# ------------------------------------------------------------------ outcomes


@pytest.mark.parametrize(("exception", "reward", "outcome"), [
    (None, 1.0, PASSED),
    (None, 0.0, FAILED),
    (None, 0.5, FAILED),
    (None, None, INFRA_ERROR),
    ("AgentTimeoutError", 1.0, TIMEOUT),
    ("AgentTimeoutError", 0.0, TIMEOUT),
    ("NonZeroAgentExitCodeError", 0.0, AGENT_ERROR),
    ("ContextWindowExceededError", None, AGENT_ERROR),
    ("ContentPolicyViolationError", 0.0, AGENT_ERROR),
    ("PermissionError", 0.0, AGENT_ERROR),
    ("SomethingNewError", None, AGENT_ERROR),  # unknown types count, as in Harbor
    ("ApiRateLimitError", None, INFRA_ERROR),
    ("ApiOverloadedError", 0.0, INFRA_ERROR),
    ("AgentAuthenticationError", None, INFRA_ERROR),
    ("BadRequestError", None, INFRA_ERROR),
    ("MemoryLimitExceededError", None, INFRA_ERROR),
    ("RewardFileNotFoundError", None, INFRA_ERROR),
    ("RewardFileEmptyError", None, INFRA_ERROR),
    ("VerifierTimeoutError", None, INFRA_ERROR),
    ("VerifierOutputParseError", None, INFRA_ERROR),
    ("EnvironmentStartTimeoutError", None, INFRA_ERROR),
    ("SandboxBuildFailedError", None, INFRA_ERROR),
    ("AgentSetupTimeoutError", None, INFRA_ERROR),
    ("DockerException", None, INFRA_ERROR),
    ("ComposeUpFailedError", None, INFRA_ERROR),
    ("CancelledError", None, INFRA_ERROR),
])
def test_outcome_mapping(exception, reward, outcome):
    assert outcome_for(exception, reward) == outcome


def test_outcomes_read_from_trials(tmp_path, spec):
    t = sorted(spec.tasks)
    _build(tmp_path, spec, rewards={t[0]: [1.0, 0.0, 1.0]}, exceptions={
        (t[1], 1): "AgentTimeoutError", (t[1], 2): "NonZeroAgentExitCodeError",
        (t[1], 3): "RewardFileNotFoundError"})
    tree = parse_tree(tmp_path)
    assert tree.problems == []
    outcome = {(x.task_name.split("/")[1], x.attempt): x.outcome for x in tree.trials}
    first, second = t[0].replace("/", "-"), t[1].replace("/", "-")
    assert [outcome[(first, a)] for a in (1, 2, 3)] == [PASSED, FAILED, PASSED]
    assert [outcome[(second, a)] for a in (1, 2, 3)] == [TIMEOUT, AGENT_ERROR, INFRA_ERROR]


def test_attempts_follow_start_time_not_directory_names(tmp_path, spec):
    job = _build(tmp_path, spec)
    task = sorted(spec.tasks)[0]
    last = job.trial(task, 3)
    edit_json(last / "result.json", lambda d: d.update({"started_at": "2026-12-01T00:00:00Z"}))
    report = validate_submission(tmp_path, _meta(), spec)
    assert report.problems == []
    mine = [x for x in report.trials if x.spec_task == task]
    assert [x.attempt for x in mine] == [1, 2, 3]
    assert mine[0].trial_name == last.name
    again = validate_submission(tmp_path, _meta(), spec)
    assert [(x.trial_dir, x.attempt) for x in again.trials] == [
        (x.trial_dir, x.attempt) for x in report.trials]


# ------------------------------------------------------------------ costs


def test_missing_costs_are_computed_from_tokens_with_the_dated_table(tmp_path, spec):
    _build(tmp_path, spec, cost_usd=None, tokens=(1_000_000, 400_000, 50_000))
    report = validate_submission(tmp_path, _meta(), spec)
    assert report.problems == []
    price = pricing.PRICES["gpt-5-5"]
    expected = (600_000 * price.input + 400_000 * price.cached + 50_000 * price.output) / 1e6
    assert all(t.cost_computed and t.cost_usd == pytest.approx(expected) for t in report.trials)
    summary = report.claimed_summary()
    assert summary["cost_computed_trials"] == 21
    assert summary["cost_usd_total"] == pytest.approx(21 * expected)
    assert summary["price_table_date"] == pricing.PRICE_TABLE_DATE == report.price_table_date


def test_price_table_covers_the_papers_models():
    import yaml

    paper = yaml.safe_load((REPO / "leaderboard" / "demo" / "paper.yaml").read_text())
    names = {row["model"] for row in paper["leaderboard"]}
    assert names, "paper.yaml lists models"
    for name in names:
        assert pricing.price_for(name) is not None, name
    assert pricing.normalize_model("anthropic/claude-opus-4.8-20261001") == "claude-opus-4-8"
    assert pricing.price_for("acme/mystery-1") is None
    assert pricing.compute_cost("acme/mystery-1", 10, 0, 10) is None
    assert pricing.PRICE_TABLE_DATE >= "2026-01-01"


def test_cost_and_tokens_both_missing_is_reported(tmp_path, spec):
    _build(tmp_path, spec, cost_usd=None, tokens=None)
    report = validate_submission(tmp_path, _meta(), spec)
    assert _codes(report) == {"cost_missing"}
    assert len(report.problems) == 21


# ------------------------------------------------------------------ secrets

OPENAI = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
OPENAI_OLD = "sk-" + "Zy9xWv8uTs7rQp6oNm5lKj4iHg3fEd2c"
ANTHROPIC = "sk-ant-api03-" + "Qw3rTy6uIo9pAs2dFg5hJk8lZx1cVb4n-AAAA"
GOOGLE = "AIza" + "SyD3x4mPl3K3y_f0rT3st1ng0nlyABCDEFG"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
BEARER = "eyJhbGciOiJIUzI1NiJ9." + "c2VjcmV0LXRva2Vu.dGVzdA"
PEM_BODY = "MIIEowIBAAKCAQEA7bq0x" + "Q2Zz9nP4k3Lr8sT1uV6wX0yZ5aB7cD9eF2gH4iJ6kL"
PEM = ("-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n" + PEM_BODY[::-1] +
       "\n-----END RSA PRIVATE KEY-----")
ALL_SECRETS = [OPENAI, OPENAI_OLD, ANTHROPIC, GOOGLE, AWS_ID, AWS_SECRET, GITHUB, GITHUB_PAT,
               BEARER, PEM_BODY, PEM_BODY[::-1]]


def test_secrets_are_found_and_redacted_everywhere(tmp_path, spec):
    job = _build(tmp_path, spec)
    trial = job.trial(sorted(spec.tasks)[0], 1)
    traj_path = trial / "agent" / "trajectory.json"
    doc = atif_trajectory(agent="codex", version="0.130.0", model=MODEL, task="x", modern=True,
                          session="s-1")
    doc["steps"][1]["tool_calls"][0]["arguments"] = {
        "command": f"export OPENAI_API_KEY={OPENAI} ANTHROPIC_API_KEY={ANTHROPIC}"}
    doc["steps"][1]["observation"]["results"][0]["content"] = (
        f"key file:\n{PEM}\nAWS_ACCESS_KEY_ID={AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n")
    doc["steps"][2]["message"] = f'curl -H "Authorization: Bearer {BEARER}" https://x'
    doc["extra"] = {"google": GOOGLE, "headers": {"Authorization": f"Bearer {BEARER}"}}
    write_json(traj_path, doc, indent=2)
    log = trial / "trial.log"
    log.write_text(
        "line one\n"
        f"token {GITHUB} and {GITHUB_PAT}\n"
        "three\n"
        f"{PEM}\n"
        "after the key\n"
        f"old style {OPENAI_OLD}\n")
    (job.job_dir / "job.log").write_text(f"using {GOOGLE}\n")
    binary = trial / "artifacts" / "blob.bin"
    binary.write_bytes(b"\0\x01" + OPENAI.encode())  # binary: not text, left alone

    findings = scan_and_redact(tmp_path)

    rel = lambda p: p.relative_to(tmp_path).as_posix()  # noqa: E731
    got = {(f.file, f.line, f.kind) for f in findings}
    traj_lines = traj_path.read_text().splitlines()
    assert (rel(log), 2, "github_token") in got
    assert sum(1 for f in findings if f.file == rel(log) and f.kind == "github_token") == 2
    assert (rel(log), 4, "private_key") in got
    assert (rel(log), 9, "openai_api_key") in got  # the PEM block spans lines 4-7
    assert (rel(job.job_dir / "job.log"), 1, "google_api_key") in got
    traj_kinds = {f.kind for f in findings if f.file == rel(traj_path)}
    assert traj_kinds == {"openai_api_key", "anthropic_api_key", "private_key",
                          "aws_access_key_id", "aws_secret_access_key", "bearer_token",
                          "google_api_key"}
    assert all(f.line >= 1 for f in findings)
    assert all(f.file != rel(binary) for f in findings)
    # Line numbers point at the lines that held the secrets (JSON is re-parsed below).
    assert all("[REDACTED:" in traj_lines[f.line - 1]
               for f in findings if f.file == rel(traj_path))
    # No finding (or its repr) carries the secret.
    assert not any(s in repr(findings) for s in ALL_SECRETS)
    # The stored copies hold no secret any more, and JSON still parses.
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != binary:
            text = path.read_text(errors="replace")
            for secret in ALL_SECRETS:
                assert secret not in text, (path, secret[:6])
            if path.suffix == ".json":
                json.loads(text)
    redacted = json.loads(traj_path.read_text())
    assert "[REDACTED:openai_api_key]" in redacted["steps"][1]["tool_calls"][0]["arguments"][
        "command"]
    assert redacted["extra"]["headers"]["Authorization"] == "Bearer [REDACTED:bearer_token]"
    assert "after the key" in log.read_text() and "[REDACTED:private_key]" in log.read_text()
    # Still a complete, valid submission (the trajectory is still ATIF).
    assert validate_submission(tmp_path, _meta(), spec).problems == []
    # Idempotent: a second pass finds nothing.
    assert scan_and_redact(tmp_path) == []


# ------------------------------------------------------------------ metadata


def test_metadata_accepts_yaml_and_json():
    for fmt in ("yaml", "json"):
        meta = parse_metadata(build_metadata(fmt=fmt))
        assert meta.benchmark == SLUG and meta.models[0].model_name == "gpt-5.5"
    yaml_text = build_metadata(fmt="yaml").replace("harness_version: 0.130.0",
                                                   "harness_version: 1.0")
    assert parse_metadata(yaml_text).harness_version == "1.0"
    assert parse_metadata(build_metadata(extra_key="ignored")).harness == "codex"


@pytest.mark.parametrize(("changes", "field"), [
    ({"agent_url": "javascript:alert(1)"}, "agent_url"),
    ({"agent_url": "ftp://example.org/agent"}, "agent_url"),
    ({"agent_url": "data:text/html,hi"}, "agent_url"),
    ({"models": []}, "models"),
    ({"benchmark": "healthagentbench-synthetic"}, "benchmark"),
    ({"benchmark": "../etc@1.0"}, "benchmark"),
    ({"benchmark": "Bad Name@1.0"}, "benchmark"),
    ({"agent_display_name": "x" * 201}, "agent_display_name"),
    ({"notes": "n" * 5001}, "notes"),
    ({"harness": "codex\nx"}, "harness"),
])
def test_metadata_rejects(changes, field):
    doc = build_metadata(**{k: v for k, v in changes.items() if k != "models"})
    if "models" in changes:
        doc["models"] = changes["models"]
    with pytest.raises(MetadataError) as exc:
        parse_metadata(doc)
    assert field in {p.path.split(":", 1)[1].split(".")[0].split("[")[0]
                     for p in exc.value.problems}


def test_metadata_reports_every_problem_and_oversized_model_strings():
    """J3: oversize fields are listed with the other metadata problems."""
    doc = build_metadata(agent_url="javascript:x", benchmark="nope")
    del doc["agent_display_name"]
    doc["models"] = [{"model_name": "m" * 500, "model_provider": "openai"}]
    with pytest.raises(MetadataError) as exc:
        parse_metadata(doc)
    paths = {p.path for p in exc.value.problems}
    assert {"metadata:agent_url", "metadata:benchmark", "metadata:agent_display_name",
            "metadata:models[0].model_name", "metadata:models[0].model_display_name"} <= paths


def test_metadata_yaml_alias_bomb_is_refused_quickly():
    bomb = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        bomb.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    text = "\n".join(bomb) + "\n"
    start = time.perf_counter()
    with pytest.raises(MetadataError) as exc:
        parse_metadata(text)
    assert time.perf_counter() - start < 1.0
    assert exc.value.problems[0].code == "metadata_yaml_alias"
    # Even a single harmless-looking anchor is refused, and so are oversized documents.
    with pytest.raises(MetadataError):
        parse_metadata(build_metadata(fmt="yaml") + "x: &anchor 1\ny: *anchor\n")
    with pytest.raises(MetadataError) as big:
        parse_metadata(b"notes: " + b"x" * (70 * 1024))
    assert big.value.problems[0].code == "metadata_too_large"
    with pytest.raises(MetadataError) as wide:
        parse_metadata("items:\n" + "".join(f"  - {i}\n" for i in range(6000)))
    assert wide.value.problems[0].code == "metadata_too_complex"
    with pytest.raises(MetadataError) as tagged:
        parse_metadata("agent_url: !!python/object/apply:os.system ['true']\n")
    assert tagged.value.problems[0].code == "metadata_syntax"


def test_metadata_benchmark_must_match_the_version(tmp_path, spec):
    _build(tmp_path, spec)
    report = validate_submission(tmp_path, _meta(benchmark="healthagentbench@1.0"), spec)
    assert _codes(report) == {"benchmark_mismatch"}


def test_metadata_harness_must_match_the_agent(tmp_path, spec):
    _build(tmp_path, spec)
    report = validate_submission(tmp_path, _meta(harness="claude-code"), spec)
    assert _codes(report) == {"metadata_harness_mismatch"}


def test_missing_metadata_and_no_jobs_are_reported(tmp_path, spec):
    (tmp_path / "readme.txt").write_text("nothing here")
    report = validate_submission(tmp_path, None, spec)
    codes = _codes(report)
    assert {"metadata_missing", "no_job_directories", "attempts_missing"} <= codes


def test_private_key_split_over_json_strings_is_redacted(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text(json.dumps({"a": "-----BEGIN PRIVATE KEY-----", "b": PEM_BODY,
                                "c": "-----END PRIVATE KEY-----", "d": "kept"}, indent=2))
    findings = scan_and_redact(tmp_path)
    assert [(f.file, f.line, f.kind) for f in findings] == [("notes.json", 2, "private_key")]
    doc = json.loads(path.read_text())
    assert PEM_BODY not in path.read_text()
    assert list(doc) == ["a", "b", "c", "d"] and doc["d"] == "kept"


# Tokens the maintained rules (detect-secrets' plugins, the Hugging Face rule and the keyword +
# entropy check) catch; each is split so that this file holds no scannable token.
MAINTAINED = {
    "slack_token": "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "stripe_access_key": "sk_live_" + "a1B2c3D4e5F6g7H8i9J0k1L2",
    "huggingface_token": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "sendgrid_api_key": "SG." + "ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    "gitlab_token": "glpat-" + "Ab12Cd34Ef56Gh78Ij90",
    "twilio_api_key": "SK" + "0123456789abcdef0123456789abcdef",
    "json_web_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0."
                      + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "npm_tokens": "//registry.npmjs.org/:_authToken=" + "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
}


def test_maintained_rules_catch_more_kinds_and_json_stays_valid(tmp_path):
    secret_value = "Zx8Q2mR7pL4vN9wK" + "3tY6hB1cF5gJ0sDe"
    digest = "9f86d081884c7d659a2feaa0c55ad015" + "a3bf4f1b2b0b822cd15d6c15b0f00a08"
    doc = {f"note_{kind}": f"value {token} end" for kind, token in MAINTAINED.items()}
    doc["api_key"] = secret_value  # a high-entropy value under a secret-like key
    doc["password"] = "hunter2"  # short and plain: left alone
    doc["sha256"] = digest  # a hash under an ordinary key: left alone
    doc["clone"] = "git clone https://bob:" + "S3cr3tPassw0rd" + "@github.com/x/y"
    doc["n_input_tokens"] = 1234
    path = tmp_path / "agent" / "trajectory.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc, indent=2))
    log = tmp_path / "trial.log"
    log.write_text("".join(f"{kind}: {token}\n" for kind, token in MAINTAINED.items()))

    findings = scan_and_redact(tmp_path)

    kinds = {f.kind for f in findings if f.file == "agent/trajectory.json"}
    assert kinds == {*MAINTAINED, "high_entropy_secret", "basic_auth_credentials"}
    log_kinds = [f.kind for f in findings if f.file == "trial.log"]
    assert sorted(log_kinds) == sorted(MAINTAINED)
    assert [f.line for f in findings if f.file == "trial.log"] == list(
        range(1, len(MAINTAINED) + 1))
    redacted = json.loads(path.read_text())  # still JSON
    for kind in MAINTAINED:
        assert redacted[f"note_{kind}"].startswith("value ")
        assert f"[REDACTED:{kind}]" in redacted[f"note_{kind}"]
        if kind != "npm_tokens":  # detect-secrets' npm rule takes the rest of the line
            assert redacted[f"note_{kind}"].endswith("] end")
    assert redacted["api_key"] == "[REDACTED:high_entropy_secret]"
    assert redacted["password"] == "hunter2" and redacted["sha256"] == digest
    assert redacted["n_input_tokens"] == 1234
    assert "S3cr3tPassw0rd" not in path.read_text()
    for token in [*MAINTAINED.values(), secret_value]:
        secret_part = token.rsplit("=", 1)[-1] if token.startswith("//") else token
        assert secret_part not in path.read_text() and secret_part not in log.read_text()
        assert secret_part not in repr(findings)
    assert scan_and_redact(tmp_path) == []  # idempotent


def test_agent_kwargs_and_versions_are_part_of_the_configuration(tmp_path, spec):
    job = _build(tmp_path, spec, agent_kwargs={"reasoning_effort": "medium"})
    report = validate_submission(tmp_path, _meta(), spec)
    assert report.problems == []
    assert report.agent_config.kwargs == {"reasoning_effort": "medium"}
    assert report.agent_config.as_dict()["kwargs"] == {"reasoning_effort": "medium"}
    t = sorted(spec.tasks)
    edit_json(job.trial(t[0], 1) / "config.json",
              lambda d: d["agent"].update({"kwargs": {"reasoning_effort": "high"}}))
    edit_json(job.trial(t[1], 1) / "result.json",
              lambda d: d["agent_info"].update({"version": "0.131.0"}))
    report = validate_submission(tmp_path, _meta(harness_version=""), spec)
    found = {(p.code, p.path) for p in report.problems}
    rel = lambda p: p.relative_to(tmp_path).as_posix()  # noqa: E731
    assert found == {("agent_config_mixed", rel(job.trial(t[0], 1))),
                     ("agent_version_mixed", rel(job.trial(t[1], 1)))}
    assert "high" in report.problems[0].message or "high" in report.problems[1].message


def test_harness_versions_are_compared_as_version_numbers(tmp_path, spec):
    """Harbor records what the agent's version command printed (OpenHands: "OpenHands version:
    1.6.0"); the metadata's 0.130.0 matches a recorded "codex-cli 0.130.0", not 0.131.0."""
    job = _build(tmp_path, spec)
    for trial in job.job_dir.glob("*__*"):
        edit_json(trial / "result.json",
                  lambda d: d["agent_info"].update({"version": "codex-cli 0.130.0"}))
    assert "metadata_harness_version_mismatch" not in _codes(
        validate_submission(tmp_path, _meta(harness_version="0.130.0"), spec))
    report = validate_submission(tmp_path, _meta(harness_version="0.131.0"), spec)
    assert [p.message for p in report.problems if p.code == "metadata_harness_version_mismatch"
            ] == ["metadata says '0.131.0'; the trials recorded ['codex-cli 0.130.0']"]


def test_uploading_part_of_a_job_or_a_trial_twice_is_reported(tmp_path, spec):
    """J3: a duplicated trial (the same task attempt uploaded twice) is reported."""
    job = _build(tmp_path, spec)
    t = sorted(spec.tasks)
    dropped = job.trial(t[0], 2)
    shutil.rmtree(dropped)
    twin = job.job_dir / (job.trial(t[1], 1).name[:-7] + "Twin000")
    shutil.copytree(job.trial(t[1], 1), twin)  # same result.json id
    report = validate_submission(tmp_path, _meta(), spec)
    found = {(p.code, p.path) for p in report.problems}
    rel = lambda p: p.relative_to(tmp_path).as_posix()  # noqa: E731
    assert ("job_trials_missing", f"{rel(job.job_dir)}/result.json") in found
    assert any(p.code == "job_trials_missing" and dropped.name in p.message
               for p in report.problems)
    assert {("trial_duplicate", rel(job.trial(t[1], 1))),
            ("trial_duplicate", rel(twin))} & found
    assert ("attempts_extra", t[1]) in found and ("attempts_missing", t[0]) in found


def test_a_failed_trial_without_output_is_accepted_only_when_collection_says_so(tmp_path, spec):
    t = sorted(spec.tasks)
    job = _build(tmp_path, spec, rewards={t[0]: [0.0, 0.0, 1.0]})
    rel = lambda p: p.relative_to(tmp_path).as_posix()  # noqa: E731
    no_output, not_collected, passed = job.trial(t[0], 1), job.trial(t[0], 2), job.trial(t[0], 3)
    for trial in (no_output, not_collected, passed):
        (trial / "artifacts" / "workspace" / "submission.json").unlink()

    def collection_failed(doc):
        for entry in doc:
            if entry["source"] == "/workspace/submission.json":
                entry["status"] = "failed"

    edit_json(no_output / "artifacts" / "manifest.json", lambda d: collection_failed(d) or d)
    report = validate_submission(tmp_path, _meta(), spec)
    found = {(p.code, p.path) for p in report.problems}
    assert found == {
        ("artifact_missing", f"{rel(not_collected)}/artifacts/workspace/submission.json"),
        ("artifact_missing", f"{rel(passed)}/artifacts/workspace/submission.json")}
    parsed = next(x for x in report.trials if x.trial_dir == rel(no_output))
    assert parsed.artifact_paths == [] and parsed.outcome == FAILED


def test_harbor_01_failed_trial_without_artifacts_folder_needs_no_artifact(tmp_path, spec):
    t = sorted(spec.tasks)
    job = _build(tmp_path, spec, harbor_version="0.1.18", rewards={t[0]: [0.0, 1.0, 1.0]})
    shutil.rmtree(job.trial(t[0], 1) / "artifacts")
    shutil.rmtree(job.trial(t[0], 2) / "artifacts")
    report = validate_submission(tmp_path, _meta(), spec)
    assert [(p.code, p.path) for p in _other_problems(report, "0.1.18")] == [(
        "artifact_missing",
        f"{job.trial(t[0], 2).relative_to(tmp_path).as_posix()}/artifacts/workspace/"
        "submission.json")]


def test_a_claimed_pass_needs_its_evidence_even_without_agent_timing(tmp_path, spec):
    job = _build(tmp_path, spec)
    trial = job.trial(sorted(spec.tasks)[0], 1)
    edit_json(trial / "result.json", lambda d: d.update({"agent_execution": None}))
    (trial / "agent" / "trajectory.json").unlink()
    report = validate_submission(tmp_path, _meta(), spec)
    assert [p.code for p in report.problems] == ["trajectory_missing"]


def test_harbors_oracle_records_no_trajectory_and_needs_none(tmp_path, spec):
    """Real `harbor run -a oracle` writes agent/oracle.txt and no trajectory.json (seen with
    harbor 0.26.0): accepted, the site re-runs the oracle itself. A model agent still needs one."""
    oracle = _build(tmp_path / "o", spec, agent="oracle", model=None)
    for trial in oracle.all_trials():
        (trial / "agent" / "trajectory.json").unlink(missing_ok=True)
        (trial / "agent" / "oracle.txt").write_text("solve.sh ran\n")
    assert validate_submission(tmp_path / "o", _meta(harness="oracle", agent_display_name="Oracle",
                                                      harness_version="1.0.0", models=NO_MODEL),
                               spec).problems == []
    codex = _build(tmp_path / "c", spec)
    (codex.all_trials()[0] / "agent" / "trajectory.json").unlink()
    report = validate_submission(tmp_path / "c", _meta(), spec)
    assert [p.code for p in report.problems] == ["trajectory_missing"]


HARBOR_CHECK = """
import sys
from pathlib import Path
from harbor.models.job.config import JobConfig
from harbor.models.job.lock import JobLock, TrialLock
from harbor.models.job.result import JobResult
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult
from harbor.utils.trajectory_validator import TrajectoryValidator
job = Path(sys.argv[1])
JobConfig.model_validate_json((job / "config.json").read_text())
JobResult.model_validate_json((job / "result.json").read_text())
JobLock.model_validate_json((job / "lock.json").read_text())
n = 0
for trial in sorted(p for p in job.iterdir() if p.is_dir()):
    TrialConfig.model_validate_json((trial / "config.json").read_text())
    TrialResult.model_validate_json((trial / "result.json").read_text())
    TrialLock.model_validate_json((trial / "lock.json").read_text())
    assert TrajectoryValidator().validate(trial / "agent" / "trajectory.json"), trial
    n += 1
print(n)
"""


def test_fixture_is_accepted_by_the_real_harbor_models(tmp_path, spec):
    """The 0.2x fixture parses with the real Harbor's own pydantic models and trajectory
    validator (the pinned CLI that scripts/harbor-venv installs into .venv-harbor)."""
    import os
    import subprocess

    python = Path(os.environ.get("HARBOR_VENV", REPO / ".venv-harbor")) / "bin" / "python"
    if not python.exists():
        pytest.fail("no .venv-harbor: run scripts/harbor-venv (make test does) to install the "
                    "pinned Harbor CLI this test checks the fixtures against")
    job = _build(tmp_path, spec, exceptions={(sorted(spec.tasks)[0], 1): "AgentTimeoutError"})
    done = subprocess.run([str(python), "-W", "ignore", "-c", HARBOR_CHECK, str(job.job_dir)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "21"


@pytest.mark.parametrize("harbor_version", ["0.25.0", "0.1.18"])
def test_retrying_agent_failures_is_reported(tmp_path, spec, harbor_version):
    job = _build(tmp_path, spec, harbor_version=harbor_version)
    report = validate_submission(tmp_path, _meta(), spec)
    assert _other_problems(report, harbor_version) == []  # defaults: no retries

    def best_of_three(doc):
        retry = doc["retry"] if "retry" in doc else doc["orchestrator"]["retry"]
        retry.update({"max_retries": 2, "exclude_exceptions": ["VerifierTimeoutError"]})

    edit_json(job.job_dir / "config.json", best_of_three)
    others = _other_problems(validate_submission(tmp_path, _meta(), spec), harbor_version)
    assert [(p.code, p.path) for p in others] == [
        ("retry_policy", f"{job.job_dir.name}/config.json")]
    assert "NonZeroAgentExitCodeError" in others[0].message


def test_error_policy_overrides_are_reported(tmp_path, spec):
    job = _build(tmp_path, spec)
    trial = job.trial(sorted(spec.tasks)[0], 1)
    edit_json(trial / "config.json", lambda d: d.update(
        {"override_error_policy": {"AgentTimeoutError": {"has_valid_reward": False}}}))
    report = validate_submission(tmp_path, _meta(), spec)
    assert [(p.code, p.path) for p in report.problems] == [
        ("override", trial.relative_to(tmp_path).as_posix())]
    assert "override_error_policy" in report.problems[0].message


def test_private_key_double_escaped_in_a_json_tool_argument(tmp_path):
    inner = json.dumps({"key": PEM})  # JSON inside a JSON string: \\n in the file
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps({"steps": [{"arguments": {"payload": inner}}]}, indent=2))
    assert "\\\\n" in path.read_text()
    findings = scan_and_redact(tmp_path)
    assert [f.kind for f in findings] == ["private_key"]
    text = path.read_text()
    assert PEM_BODY not in text and PEM_BODY[::-1] not in text
    payload = json.loads(json.loads(text)["steps"][0]["arguments"]["payload"])
    assert payload == {"key": "[REDACTED:private_key]"}


def test_more_than_the_allowed_share_of_infra_errors_is_refused_with_resume_advice(tmp_path, spec):
    t = sorted(spec.tasks)
    one = {(t[0], 1): "EnvironmentStartTimeoutError"}
    _build(tmp_path / "one", spec, exceptions=one)
    assert "infra_errors_too_many" not in _codes(
        validate_submission(tmp_path / "one", _meta(), spec))  # 1 of 21 <= 5%
    two = {**one, (t[1], 2): "AgentSetupTimeoutError"}
    job = _build(tmp_path / "two", spec, exceptions=two)
    report = validate_submission(tmp_path / "two", _meta(), spec)
    [problem] = [p for p in report.problems if p.code == "infra_errors_too_many"]
    job_rel = job.job_dir.relative_to(tmp_path / "two").as_posix()
    assert problem.path == job_rel
    assert "2 of 21 trials (10%)" in problem.message and "at most 5%" in problem.message
    # Named where `harbor run -o jobs` (the Submit page) put it, as typed from that folder.
    assert (f"harbor job resume -p jobs/{job_rel} -f AgentSetupTimeoutError "
            "-f EnvironmentStartTimeoutError") in problem.message
    assert "judge" not in problem.message
    # The share is a setting: a site allowing 10% accepts the same upload.
    assert "infra_errors_too_many" not in _codes(
        validate_submission(tmp_path / "two", _meta(), spec, max_infra_share=0.10))


def test_xray_trials_whose_verifier_had_no_judge_are_accepted_as_claiming_no_grade(tmp_path,
                                                                                 spec):
    """The Submit page exports no judge: without one the X-ray verifier writes no reward file
    (RewardFileNotFoundError, or nothing at all). That is no infrastructure error: the upload
    is accepted, and the site's re-grade alone decides those trials. The same ending on a task
    graded without a judge is one, and counts towards the share."""
    tasks = sorted(spec.tasks)
    xray = next(t for t in tasks if t.startswith("xray-report-correction/"))
    _build(tmp_path / "xray", spec, rewards={xray: [None] * 3},
           exceptions={(xray, k): "RewardFileNotFoundError" for k in (1, 2, 3)})
    report = validate_submission(tmp_path / "xray", _meta(), spec)
    assert "infra_errors_too_many" not in _codes(report)
    ended = [t for t in report.trials if t.spec_task == xray]
    assert [(t.outcome, t.reward, t.exception_type) for t in ended] == [
        ("infra_error", None, "RewardFileNotFoundError")] * 3
    other = next(t for t in tasks if not t.startswith("xray-report-correction/"))
    _build(tmp_path / "other", spec, rewards={other: [None] * 3},
           exceptions={(other, k): "RewardFileNotFoundError" for k in (1, 2, 3)})
    report = validate_submission(tmp_path / "other", _meta(), spec)
    [problem] = [p for p in report.problems if p.code == "infra_errors_too_many"]
    assert "3 of 21 trials (14%)" in problem.message and "judge" not in problem.message


def test_which_endings_the_site_grades_alone():
    """Only a judged category's verifier that wrote no reward, with nothing else wrong."""
    from submissions.harbor import site_grades_alone

    x = "xray-report-correction"
    assert site_grades_alone(x, "RewardFileNotFoundError", None)
    assert site_grades_alone(x, "RewardFileEmptyError", None)
    assert site_grades_alone(x, None, None)
    assert not site_grades_alone(x, "EnvironmentStartTimeoutError", None)
    assert not site_grades_alone(x, "VerifierTimeoutError", None)
    assert not site_grades_alone(x, None, 0.0)
    assert not site_grades_alone("ct-abnormality-classification", "RewardFileNotFoundError", None)
    assert not site_grades_alone(None, None, None)


# ------------------------------------------------------------------ Harbor's submission rules
# (Terminal-Bench's static validation): each rule alone on a real job
# directory, then all of them in one report.

JOB = "2026-12-02__09-18-40"


def _first(spec) -> str:
    return sorted(spec.tasks)[0]


def _trial_config(key, value):
    def change(job, spec):
        edit_json(job.trial(_first(spec), 1) / "config.json",
                  lambda d: set_in(d, key, value))
        return f"{job.trial(_first(spec), 1).relative_to(job.job_dir.parent).as_posix()}"
    return change


def set_in(doc: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        doc = doc.setdefault(part, {})
    doc[last] = value


def _job_lock_entry(key, value):
    def change(job, spec):
        edit_json(job.job_dir / "lock.json", lambda d: set_in(d["trials"][0], key, value))
        return f"{JOB}/lock.json"
    return change


def _trial_lock(key, value):
    def change(job, spec):
        edit_json(job.trial(_first(spec), 2) / "lock.json", lambda d: set_in(d, key, value))
        return job.trial(_first(spec), 2).relative_to(job.job_dir.parent).as_posix()
    return change


def _no_trajectory(job, spec):
    (job.trial(_first(spec), 3) / "agent" / "trajectory.json").unlink()
    return f"{job.trial(_first(spec), 3).relative_to(job.job_dir.parent).as_posix()}" \
           "/agent/trajectory.json"


def _job_lock_digest(job, spec):
    task = _first(spec)

    def change(doc):
        for entry in doc["trials"]:
            if entry["task"]["path"] == f"tasks/{task}":
                entry["task"]["digest"] = "sha256:" + "ab" * 32
    edit_json(job.job_dir / "lock.json", change)
    return f"{JOB}/lock.json"


RULES = {
    # no timeout or resource overrides, in each trial's config.json, its lock.json and the job's
    "timeout_multiplier": (_trial_config("timeout_multiplier", 2.0), "timeout_multiplier",
                           "timeout_multiplier is 2.0"),
    "agent_timeout_multiplier": (_trial_config("agent_timeout_multiplier", 3.0),
                                 "timeout_multiplier", "agent_timeout_multiplier is set (3.0)"),
    "verifier_timeout_multiplier": (_trial_config("verifier_timeout_multiplier", 0.5),
                                    "timeout_multiplier", "verifier_timeout_multiplier"),
    "agent_override_timeout_sec": (_trial_config("agent.override_timeout_sec", 7200),
                                   "override", "agent.override_timeout_sec is set (7200)"),
    "verifier_override_timeout_sec": (_trial_config("verifier.override_timeout_sec", 30),
                                      "override", "verifier.override_timeout_sec"),
    "environment_override_memory_mb": (_trial_lock("environment.override_memory_mb", 65536),
                                       "override", "environment.override_memory_mb"),
    "job_lock_override_cpus": (_job_lock_entry("environment.override_cpus", 16), "override",
                               "environment.override_cpus is set (16) in 1 of its 21 trial "
                               "locks"),
    "job_lock_agent_multiplier": (_job_lock_entry("agent_timeout_multiplier", 4.0),
                                  "timeout_multiplier",
                                  "agent_timeout_multiplier is 4.0 in 1 of its 21"),
    # every passing trial has its trajectory
    "trajectory": (_no_trajectory, "trajectory_missing", "wrote no ATIF trajectory"),
    # task checksums match the version: a trial's lock.json, and the job's lock.json
    "trial_lock_digest": (_trial_lock("task.digest", "sha256:" + "cd" * 32),
                          "task_digest_mismatch", "different content"),
    "job_lock_digest": (_job_lock_digest, "task_digest_mismatch",
                        "locks clinical-trial-matching/synthetic_01 at sha256:abababab"),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_harbor_submission_rule_is_refused_on_its_own(tmp_path, spec, rule):
    change, code, words = RULES[rule]
    job = _build(tmp_path, spec)
    assert validate_submission(tmp_path, _meta(), spec).problems == []
    path = change(job, spec)
    report = validate_submission(tmp_path, _meta(), spec)
    assert [(p.code, p.path) for p in report.problems] == [(code, path)], report.problems
    assert words in report.problems[0].message, report.problems[0].message


def test_fewer_attempts_than_the_version_asks_are_refused_per_task(tmp_path, spec):
    """At least the benchmark's attempts per task (3 here): a `-k 2` job is refused, each task
    named with what it has and what is required."""
    HarborJobBuilder(spec.tasks, attempts=2, agent="codex", model=MODEL).build(tmp_path)
    report = validate_submission(tmp_path, _meta(), spec)
    assert sorted((p.code, p.path) for p in report.problems) == [
        ("attempts_missing", task) for task in sorted(spec.tasks)]
    assert report.problems[0].message.endswith(": 2 complete attempt(s), 3 required")


def test_a_result_json_checksum_of_other_task_content_is_refused(tmp_path, spec):
    """Harbor 0.1.x records only result.json's task_checksum (no lock.json): checked too."""
    job = _build(tmp_path, spec, harbor_version="0.1.18")
    edit_json(job.trial(_first(spec), 1) / "result.json",
              lambda d: d.update({"task_checksum": "ef" * 32}))
    report = validate_submission(tmp_path, _meta(), spec)
    assert [p.code for p in _other_problems(report, "0.1.18")] == ["task_digest_mismatch"]


@pytest.mark.parametrize(("lock_version", "refused"), [
    (None, True),  # no lock.json: Harbor 0.1.x
    ("0.9.0", True), ("0.12.9", True), ("unknown", True),
    ("0.13.0", False), ("0.20.1.dev202607190128", False), ("0.26.0", False), ("1.0.0", False),
])
def test_jobs_of_harbor_releases_before_0_13_are_refused_naming_the_accepted(
        tmp_path, spec, lock_version, refused):
    """The release matrix (tests/submissions/test_harbor_releases.py) ran
    0.13.0 to 0.26.0; the last 0.1.x cannot run these tasks. A job of an older release is refused
    with one problem on its lock.json that says why and names the accepted releases."""
    job = _build(tmp_path, spec, harbor_version="0.25.0")
    lock = job.job_dir / "lock.json"
    if lock_version is None:
        lock.unlink()
    else:
        edit_json(lock, lambda d: d["harbor"].update({"version": lock_version}))
    report = validate_submission(tmp_path, _meta(), spec)
    release = [p for p in report.problems if p.code == "harbor_release_unsupported"]
    assert [p.path for p in release] == ([f"{job.job_dir.name}/lock.json"] if refused else [])
    assert report.ok is not refused
    if refused:
        message = release[0].message
        assert ("Harbor 0.13.0 or later (tested: 0.13.0, 0.17.0, 0.20.0, 0.25.0, 0.26.0)"
                in message and "pip install -U harbor" in message)
        assert ("Harbor 0.1.45, the last 0.1.x, cannot run these tasks" in message) == (
            lock_version is None)


def test_the_job_lock_must_lock_only_tasks_of_the_version_with_their_digests(tmp_path, spec):
    """The job's lock.json locks every trial's task at a digest: one problem per task whose
    digest differs or is absent, and per task that is not in the version."""
    job = _build(tmp_path, spec)
    tasks = sorted(spec.tasks)

    def change(doc):
        for entry in doc["trials"]:
            if entry["task"]["path"] == f"tasks/{tasks[1]}":
                entry["task"]["digest"] = "sha256:" + "0" * 64
            elif entry["task"]["path"] == f"tasks/{tasks[2]}":
                entry["task"].pop("digest")
        doc["trials"].append({**doc["trials"][0], "task": {
            "name": "healthagentbench-synthetic/made-up-01", "type": "local",
            "digest": "sha256:" + "1" * 64, "path": "tasks/made-up/01"}})
    edit_json(job.job_dir / "lock.json", change)
    report = validate_submission(tmp_path, _meta(), spec)
    assert sorted((p.code, p.message.split(" at ")[0].split(" for ")[-1])
                  for p in report.problems) == sorted([
        ("task_digest_mismatch", f"the job's lock.json locks {tasks[1]}"),
        ("task_digest_missing", tasks[2]),
        ("task_unknown", "the job's lock.json locks task 'healthagentbench-synthetic/made-up-01'"
                         ", which is not a task of healthagentbench-synthetic@1.0"),
    ])
    assert {p.path for p in report.problems} == {f"{JOB}/lock.json"}


def test_every_harbor_rule_broken_at_once_is_one_report(tmp_path, spec):
    """All of Harbor's submission rules broken in one upload: every violation listed together."""
    job = _build(tmp_path, spec)
    expected = set()
    for rule in ("agent_timeout_multiplier", "job_lock_override_cpus", "trajectory",
                 "job_lock_digest"):
        change, code, _words = RULES[rule]
        expected.add((code, change(job, spec)))
    tasks = sorted(spec.tasks)
    edit_json(job.trial(tasks[3], 2) / "lock.json",
              lambda d: d["task"].update({"digest": "sha256:" + "9" * 64}))
    expected.add(("task_digest_mismatch", job.trial(tasks[3], 2).relative_to(tmp_path)
                  .as_posix()))
    shutil.rmtree(job.trial(tasks[4], 3))
    expected |= {("attempts_missing", tasks[4]), ("job_trials_missing", f"{JOB}/result.json")}
    report = validate_submission(tmp_path, _meta(), spec)
    assert {(p.code, p.path) for p in report.problems} == expected


def _base_name_layout(trial: Path) -> None:
    """Rewrite a trial's artifacts as Harbor 0.1.x and 0.13 collect them: each path at
    artifacts/<base name>, the manifest saying so (0.2x mirror the whole path)."""
    artifacts = trial / "artifacts"
    manifest = json.loads((artifacts / "manifest.json").read_text())
    for entry in manifest:
        source = entry["source"].rstrip("/")
        mirrored = artifacts / source.lstrip("/")
        if entry.get("status") == "ok" and mirrored.exists() and source.startswith("/workspace"):
            target = artifacts / PurePosixPath(source).name
            mirrored.rename(target)
            entry["destination"] = f"artifacts/{target.name}"
    shutil.rmtree(artifacts / "workspace", ignore_errors=True)
    (artifacts / "manifest.json").write_text(json.dumps(manifest))


def test_outputs_collected_at_their_base_name_are_found_where_the_manifest_says(tmp_path, spec):
    """Harbor 0.1.x and 0.13 keep a collected path under its base name (found by the release
    matrix: /workspace/output at artifacts/output); the manifest is the authority, for the
    intake here and for verification (tests/submissions/test_verification_outputs.py)."""
    job = _build(tmp_path, spec)
    for trial in job.all_trials():
        _base_name_layout(trial)
    report = validate_submission(tmp_path, _meta(), spec)
    assert report.problems == []
    for trial in report.trials:
        (artifact,) = trial.artifact_paths
        name = PurePosixPath(spec.outputs[trial.spec_task].rstrip("/")).name
        assert artifact.rstrip("/").endswith(f"/artifacts/{name}"), artifact
        assert not (tmp_path / trial.trial_dir / "artifacts" / "workspace").exists()
