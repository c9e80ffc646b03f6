"""Verification end to end: a REAL Celery worker process, a REAL Redis broker, REAL containers.

* an oracle submission of healthagentbench-synthetic@1.0 (7 tasks x 3 attempts) ends
  `verified`; the same submission with one trial's output replaced by a wrong answer that still
  claims reward 1 ends `discrepancy` with exactly that trial flagged;
* replay: recorded commands that write the right answer reproduce, commands that do not are
  flagged, an unknown tool makes the trial "not replayable"; the replay container holds no
  answer (S1 at the verification level);
* S9: a submitted conftest.py / sitecustomize.py / fake reward.json beside (or inside) the
  declared outputs has no effect on the re-grade.

Needs PostgreSQL (the worker shares the test database) and Docker. Run:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_verif \
        .venv/bin/python -m pytest tests/evaluation/test_verification.py
"""

import html
import json

import pytest

from django.contrib.auth import get_user_model
from django.test import Client

from evaluation import runner
from submissions.models import coverage_badge
from tests.evaluation import verification_support as vs

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

CT = "ct-abnormality-classification/synthetic_01"
PATH = "pathology-tumor-region/synthetic_01"
ETL = "ehr-format-conversion/synthetic_01"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    return vs.oracle_outputs(tmp_path_factory.mktemp("oracle-outputs"))


@pytest.fixture(autouse=True)
def _media_and_broker(settings, media_root):
    settings.MEDIA_ROOT = str(media_root)
    # In-process tests publish where no worker listens; tests on the worker use `on_worker`.
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE
    settings.INTAKE_QUEUE = vs.INPROC_QUEUE  # intake runs in-process where a test needs it
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.XRAY_JUDGE_URL = vs.judge_stub().url
    settings.XRAY_JUDGE_MODEL = vs.JUDGE_MODEL
    settings.VERIFICATION_HEARTBEAT_S = 1
    vs.point_celery_at(vs.BROKER_URL)


def _job(sub):
    return sub.verification_jobs.order_by("-created_at").first()


def _wait_final(sub, worker, timeout=300):
    from submissions.models import Submission

    def final():
        s = Submission.objects.get(pk=sub.pk)
        return s if s.status in ("verified", "consistent", "discrepancy", "failed") else None

    return vs.wait_for(final, timeout, f"submission {sub.pk} to be verified", worker=worker)


def _wrong_ct_answer(oracle) -> bytes:
    right = json.loads((oracle[CT] / "workspace" / "submission.json").read_text())
    flipped = {k: ("no" if v == "yes" else "yes") for k, v in right["labels"].items()}
    return json.dumps({"labels": flipped}).encode()


def test_oracle_submission_verified_and_tampered_trial_flagged(settings, oracle, on_worker):
    from django.db import transaction

    from submissions.models import CheckKind, JobStatus, TrialCheck
    from submissions.verification import verification_enqueue

    settings.VERIFICATION_CHECKS = ["regrade", "rerun"]
    settings.VERIFICATION_RERUN_FIRST_TASKS = 2
    settings.VERIFICATION_RERUN_MAX_TRIALS = 2
    bv = vs.synthetic_version()
    assert bv.tasks.count() == 7
    with transaction.atomic():
        honest = vs.make_submission(bv, outputs=oracle)
        # One output tampered; one trial reported as an infrastructure error although its
        # output is there (the site grades it and decides).
        tampered = vs.make_submission(
            bv, outputs=oracle, replace={(CT, 2): {"/workspace/submission.json":
                                                   _wrong_ct_answer(oracle)}},
            claims={(PATH, 3): "infra"})
        verification_enqueue(submission=honest)
        verification_enqueue(submission=tampered)
    honest = _wait_final(honest, on_worker)
    tampered = _wait_final(tampered, on_worker)

    # Every check agrees, but the re-run covers only the 2 trials (task, attempt) it re-ran:
    # consistent, not verified.
    assert honest.status == "consistent", (_job(honest).summary, on_worker.tail())
    assert not honest.is_verified and honest.trials_done == honest.trials_total == 21
    job = _job(honest)
    assert job.status == JobStatus.DONE and job.verdict == "consistent"
    assert {k: honest.coverage[k] for k in ("counted", "passes", "regraded", "reproduced",
                                            "rerun", "passes_uncovered")} == {
        "counted": 21, "passes": 21, "regraded": 21, "reproduced": 0, "rerun": 2,
        "passes_uncovered": 19}
    assert coverage_badge(honest.coverage) == (
        "consistent, not verified: re-graded 21/21, reproduced 0/21, re-run 2/21 counted "
        "trials; re-run underpowered: the site's design detects a 15-point inflation 0% of the "
        "time (the site requires 50%; 1 re-run per task, at most 2 re-run trials); 19 of 21 "
        "counted passes neither reproduced nor re-run")
    # The two re-run trials are the first two of the committed order, revealed with the verdict.
    from submissions.verification import public_sample
    from submissions.verification.sample import commitment

    sample = public_sample(honest)
    assert sample["revealed"] and sample["matches"]
    assert commitment(sample["order"], sample["salt"]) == honest.rerun_commitment
    rerun_trials = {(t.benchmark_task.name, t.attempt)
                    for t in honest.trials.filter(verification_level="re-run")}
    first_of_task: dict = {}
    for name, attempt in sample["order"]:
        first_of_task.setdefault(name, (name, attempt))
    assert rerun_trials == set(list(first_of_task.values())[:2])  # one trial of each of 2 tasks
    assert TrialCheck.objects.filter(job=job, kind=CheckKind.REGRADE).count() == 21
    assert all(t.verified_reward == 1.0 and t.flags == [] for t in honest.trials.all())
    # The X-ray trials were judged by the configured judge (the session's stub) on the worker.
    from evaluation.judge.client import PROMPT_VERSION

    xray = honest.trials.filter(benchmark_task__category__slug="xray-report-correction")
    assert xray.count() == 3 and set(xray.values_list("judge_model", "judge_prompt_version")) == {
        (vs.JUDGE_MODEL, PROMPT_VERSION)}
    rerun = job.summary["rerun"]
    assert rerun["ran"] and rerun["rerun_success"] == rerun["rerun_runs"] == 2
    assert not rerun["significant"]

    assert tampered.status == "discrepancy", _job(tampered).summary
    assert not tampered.is_verified
    flagged = [t for t in tampered.trials.all() if "regrade_mismatch" in t.flags]
    assert [(t.benchmark_task.name, t.attempt) for t in flagged] == [(CT, 2)]
    assert flagged[0].flags == ["regrade_mismatch"]
    assert flagged[0].reward == 1.0 and flagged[0].verified_reward == 0.0
    assert (flagged[0].outcome, flagged[0].claimed_outcome) == ("failed", "passed")
    infra = tampered.trials.get(benchmark_task__name=PATH, attempt=3)
    assert (infra.claimed_outcome, infra.outcome, infra.verified_reward, infra.flags) == (
        "infra_error", "passed", 1.0, ["infra_unconfirmed"])
    assert _job(tampered).summary["regrade"]["mismatched_trials"] == [flagged[0].pk]
    # Each check written exactly once.
    assert set(TrialCheck.objects.values_list("executions", flat=True)) == {1}


def test_replay_reproduces_flags_and_reports_unknown_tools(settings, oracle):
    """Runs the job in this process (the worker path is covered above): real containers."""
    from django.db import transaction

    from submissions.models import CheckKind, TrialCheck
    from submissions.verification import verification_enqueue, verification_run

    settings.VERIFICATION_CHECKS = ["regrade", "replay"]
    settings.VERIFICATION_REPLAY_FAILING = 0
    answer = (oracle[CT] / "workspace" / "submission.json").read_text()
    wrong = _wrong_ct_answer(oracle).decode()
    probe = ("find / -xdev \\( -name 'answer*' -o -name 'tests' \\) 2>/dev/null | "
             "grep -v '^/proc' ; ls /tests /solution 2>&1; env | sort")
    trajectories = {
        # terminus-2: keystrokes into one shell, heredoc across calls.
        (CT, 1): vs.atif("terminus-2", [
            ("bash_command", {"keystrokes": "cd /workspace\n", "duration": 0.1}),
            ("bash_command", {"keystrokes": f"cat > submission.json <<'EOF'\n{answer.rstrip()}\nEOF\n",
                              "duration": 0.5}),
            ("mark_task_complete", {})]),
        # claude-code: the recorded commands write a WRONG answer; the submitted one is right.
        (CT, 2): vs.atif("claude-code", [
            ("Bash", {"command": probe}),
            ("Read", {"file_path": "/workspace/data/README.md"}),
            ("Write", {"file_path": "/workspace/submission.json", "content": wrong})]),
        # codex: an unknown tool -> not replayable, reported.
        (CT, 3): vs.atif("codex", [
            ("shell", {"command": ["bash", "-lc", "ls"]}),
            ("teleport_answer", {"to": "/workspace"})]),
    }
    with transaction.atomic():
        sub = vs.make_submission(vs.synthetic_version(), outputs=oracle, tasks=[CT],
                                 trajectories=trajectories)
        job = verification_enqueue(submission=sub)
    assert verification_run(job_id=job.pk) == "done"
    sub.refresh_from_db()
    replays = {c.trial.attempt: c for c in TrialCheck.objects.filter(job=job,
                                                                     kind=CheckKind.REPLAY)}
    assert replays[1].status == "match" and replays[1].reproduced is True, replays[1].detail
    assert replays[1].detail["output_identical"] is True
    assert replays[2].status == "mismatch" and replays[2].reproduced is False
    assert replays[2].verified_reward == 0.0 and "replay_mismatch" in replays[2].flags
    assert replays[3].status == "not_replayable"
    assert "teleport_answer" in replays[3].reason
    # S14: each check that ran containers records what separated them from the host; the
    # trial page shows it (a check that ran nothing, the not-replayable one, records none).
    isolation = runner.isolation(runner.sandbox_runtime())
    assert replays[1].detail["isolation"] == isolation and "isolation" not in replays[3].detail
    regrade = TrialCheck.objects.get(job=job, kind=CheckKind.REGRADE, trial=replays[1].trial)
    assert regrade.detail["isolation"] == isolation  # S15: the re-grade is sandboxed too
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("iso-staff", is_staff=True))
    page = staff.get(f"/submissions/{sub.pk}/trials/{replays[1].trial.pk}/trajectory/")
    assert page.status_code == 200
    assert f"Replay: {isolation}" in html.unescape(page.content.decode())
    # S1: the replay container (agent side) holds no answer and no tests.
    log = replays[2].detail["log_tail"]
    secret_line = json.loads(answer)["labels"]
    assert "/tests" in log and "No such file or directory" in log
    assert "answer.json" not in log and json.dumps(secret_line) not in log
    flags = {t.attempt: t.flags for t in sub.trials.all()}
    # The probe also trips the reward-hacking screen: /tests (RH1), /solution (RH2: no harness
    # is exempt, though this submission calls its harness the oracle), answer files (RH3) and,
    # from what the replay printed, the verifier's folder named in its own output (RH10).
    assert flags == {1: [], 2: ["replay_mismatch", "reward_hack:RH1", "reward_hack:RH2",
                                "reward_hack:RH3", "reward_hack:RH10"],
                     3: ["not_replayable"]}
    assert sub.status == "discrepancy"
    assert job.__class__.objects.get(pk=job.pk).summary["replay"]["not_replayable_trials"]


def test_replay_adapters_claude_copilot_codex_in_containers(settings, oracle):
    from django.db import transaction

    from submissions.models import CheckKind, TrialCheck
    from submissions.verification import verification_enqueue, verification_run

    settings.VERIFICATION_CHECKS = ["replay"]
    answer = (oracle[CT] / "workspace" / "submission.json").read_text()
    placeholder = answer.replace('"Emphysema"', '"EMPH_PLACEHOLDER"')
    trajectories = {
        (CT, 1): vs.atif("claude-code", [
            ("Write", {"file_path": "submission.json", "content": placeholder}),
            ("Bash", {"command": "mkdir -p sub && cd sub"}),
            ("Bash", {"command": "pwd > /tmp/where"}),  # cwd persists across Bash calls
            ("Edit", {"file_path": "/workspace/submission.json",
                      "old_string": "EMPH_PLACEHOLDER", "new_string": "Emphysema"})]),
        (CT, 2): vs.atif("copilot-cli", [
            ("report_intent", {"intent": "write"}),
            ("bash", {"command": "mkdir -p /tmp/x && echo ok > /tmp/x/y"}),
            ("create", {"path": "/workspace/submission.json", "file_text": answer})]),
        # codex: apply_patch envelope, then a shell fix-up, as Harbor records them.
        (CT, 3): vs.atif("codex", [
            ("apply_patch", {"input": "*** Begin Patch\n*** Add File: submission.json\n"
                             + "".join("+" + line + "\n" for line in placeholder.splitlines())
                             + "*** End Patch"}),
            ("shell", {"command": ["bash", "-lc",
                                   "sed -i s/EMPH_PLACEHOLDER/Emphysema/ submission.json"],
                       "workdir": "/workspace"}),
            ("update_plan", {"plan": []})]),
    }
    with transaction.atomic():
        sub = vs.make_submission(vs.synthetic_version(), outputs=oracle, tasks=[CT], attempts=3,
                                 trajectories=trajectories)
        job = verification_enqueue(submission=sub)
    assert verification_run(job_id=job.pk) == "done"
    checks = TrialCheck.objects.filter(job=job, kind=CheckKind.REPLAY)
    assert [(c.trial.attempt, c.status) for c in checks.order_by("trial__attempt")] == [
        (1, "match"), (2, "match"), (3, "match")], [c.detail for c in checks]
    # Every counted pass reproduced, but these trajectories write the answer as pasted text: a
    # replay proves the commands produce the output, not that a model chose them. Without a
    # re-run the site never says "verified".
    sub.refresh_from_db()
    assert sub.status == "consistent" and not sub.is_verified
    assert set(sub.trials.values_list("verification_level", flat=True)) == {"reproduced"}
    assert coverage_badge(sub.coverage) == (
        "consistent, not verified: re-graded 3/3, reproduced 3/3, re-run 0/3 counted trials; "
        "not re-run by the site (re-run not configured)")


def test_a_pass_that_cannot_be_replayed_leaves_the_submission_checked_not_verified(
        settings, oracle):
    """A trajectory with a tool outside the known vocabularies is not replayable: the pass is
    re-graded only, so the submission is not verified (it used to be, with zero replays)."""
    from django.db import transaction

    from submissions.verification import verification_enqueue, verification_run

    settings.VERIFICATION_CHECKS = ["regrade", "replay"]
    trajectories = {(CT, 1): vs.atif("codex", [("teleport_answer", {"to": "/workspace"})])}
    with transaction.atomic():
        sub = vs.make_submission(vs.synthetic_version(), outputs=oracle, tasks=[CT], attempts=1,
                                 trajectories=trajectories)
        job = verification_enqueue(submission=sub)
    assert verification_run(job_id=job.pk) == "done"
    sub.refresh_from_db()
    assert sub.status == "consistent" and not sub.is_verified
    trial = sub.trials.get()
    assert (trial.verification_level, trial.flags) == ("re-graded", ["not_replayable"])
    assert sub.coverage["passes_uncovered"] == 1
    assert coverage_badge(sub.coverage).startswith("consistent, not verified: re-graded 1/1, "
                                                   "reproduced 0/1")


def test_grader_tampering_files_have_no_effect(settings, oracle):
    """S9: conftest.py, sitecustomize.py, a fake reward.json and a wrapped python3 among the
    submitted files beside the declared output change nothing: only the output is copied in."""
    from django.db import transaction

    from submissions.models import CheckKind, TrialCheck
    from submissions.verification import verification_enqueue, verification_run

    settings.VERIFICATION_CHECKS = ["regrade"]
    hostile = {
        "artifacts/workspace/conftest.py": b"import os; os._exit(0)\n",
        "artifacts/workspace/sitecustomize.py": b"open('/logs/verifier/reward.json','w')"
                                                b".write('{\"reward\": 1}')\n",
        "artifacts/logs/verifier/reward.json": b'{"reward": 1.0}',
        "verifier/reward.txt": b"1",
        "artifacts/workspace/bin/python3": b"#!/bin/sh\necho '{\"reward\": 1}'\n",
    }
    with transaction.atomic():
        bv = vs.synthetic_version()
        sub = vs.make_submission(
            bv, outputs=oracle, tasks=[CT], attempts=1,
            replace={(CT, 1): {"/workspace/submission.json": _wrong_ct_answer(oracle)}},
            extra_files={(CT, 1): hostile})
        job = verification_enqueue(submission=sub)
    assert verification_run(job_id=job.pk) == "done"
    checks = {c.benchmark_task.name: c for c in TrialCheck.objects.filter(job=job,
                                                                          kind=CheckKind.REGRADE)}
    assert checks[CT].verified_reward == 0.0 and checks[CT].status == "mismatch"
    # Only the declared output was copied in.
    assert checks[CT].detail["outputs"]["found"] == ["/workspace/submission.json"]


def test_an_upload_whose_passes_paste_the_answer_is_never_verified(
        settings, oracle, tmp_path, live_server):
    """Integration with the upload intake: a real Harbor-shaped job directory (the submissions
    fixture builder) is uploaded by the submitter client (`python -m submissions.client`)
    to a live server; the intake service validates it (the intake worker's body, called
    directly), verification re-grades the stored artifacts, and the client, polling meanwhile,
    prints the validation and the verdict.

    every trajectory writes the task's reference answer with a heredoc. The replays
    reproduce every pass (the commands do produce the output), but that proves consistency,
    not authorship, and the site cannot re-run codex: never "verified". Where the pasted text
    holds a hidden answer file verbatim the screen flags it (RH7): a discrepancy, those trials
    and no others; where it does not, nothing contradicts the claim and the trial is
    "reproduced", the most a paste can reach ("consistent" in tests above)."""
    import io
    import threading

    import yaml
    from django.contrib.auth import get_user_model
    from django.test import Client

    from submissions.verification import reap_stuck_submissions, verification_run
    from submissions import client
    from submissions.models import Submission
    from submissions.services import token_issue
    from devtools.harbor_fixtures import HarborJobBuilder, build_metadata

    settings.VERIFICATION_CHECKS = ["regrade", "replay", "rerun"]
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    bv = vs.synthetic_version()
    outputs, paths = {}, {}
    for task in bv.tasks.all():
        (cpath,) = __import__("evaluation.runner").runner.declared_outputs(vs.task_dir(task))
        src = oracle[task.name] / cpath.lstrip("/")
        if src.is_dir():
            outputs[task.name] = {p.relative_to(src).as_posix(): p.read_bytes()
                                  for p in src.rglob("*") if p.is_file()}
            paths[task.name] = cpath + "/"
        else:
            outputs[task.name] = src.read_bytes()
            paths[task.name] = cpath
    # A submitted agent (codex with a model; its outputs are the oracle's): the site's own
    # oracle would be a reference run, which is never published (tests/submissions/
    # test_intake_rules.py).
    def pasted(task):  # the reference answer typed in with heredocs, as a codex shell call
        files = ({paths[task]: outputs[task]} if isinstance(outputs[task], bytes) else
                 {paths[task] + rel: data for rel, data in outputs[task].items()})
        script = "".join(f"mkdir -p $(dirname {path}) && cat > {path} <<'HAB_EOF'\n"
                         f"{data.decode().removesuffix(chr(10))}\nHAB_EOF\n"
                         for path, data in files.items())
        return vs.atif("codex", [("shell", {"command": ["bash", "-lc", script],
                                            "workdir": "/workspace"})])

    HarborJobBuilder({t.name: t.content_digest for t in bv.tasks.all()}, agent="codex",
                     model="openai/gpt-5.5", outputs=outputs, output_paths=paths,
                     trajectories={t.name: pasted(t.name) for t in bv.tasks.all()}).build(
                         tmp_path / "upload")
    user = get_user_model().objects.create_user("verif-submitter", password="x")
    meta = tmp_path / "metadata.yaml"
    meta.write_text(yaml.safe_dump(build_metadata()))
    (job_dir,) = (tmp_path / "upload").iterdir()
    printed, errors, result = io.StringIO(), io.StringIO(), {}
    token = token_issue(user=user)[1]

    def run_client():
        result["exit"] = client.main([
            "--url", live_server.url, "--token", token, "--metadata", str(meta),
            "--interval", "0.5", str(job_dir)], out=printed, err=errors)

    thread = threading.Thread(target=run_client, daemon=True)
    thread.start()
    vs.wait_for(lambda: Submission.objects.filter(owner=user).exists() or not thread.is_alive(),
                120, "the client's upload")
    sub = Submission.objects.get(owner=user)
    vs.wait_for(lambda: "status received" in errors.getvalue(), 60, "the client's first poll")
    from submissions.intake import submission_intake

    assert submission_intake(submission_id=sub.pk) == "queued"
    job = sub.verification_jobs.first()
    if job is None:  # the intake's on-commit publish is not wired: the reconciler enqueues it
        report = reap_stuck_submissions()
        job = sub.verification_jobs.get()
        assert job.pk in report["enqueued"]
    assert verification_run(job_id=job.pk) == "done"
    sub.refresh_from_db()
    summary = job.__class__.objects.get(pk=job.pk).summary
    from evaluation import screen

    def leaks(task):  # the pasted answer holds one of the task's hidden answer files verbatim
        text = (outputs[task].decode() if isinstance(outputs[task], bytes) else
                "".join(d.decode() for d in outputs[task].values()))
        return any(len(h) >= 64 and h in text for h in screen.hidden_texts_of(
            vs.task_dir(bv.tasks.get(name=task))))

    leaking = {t.name for t in bv.tasks.all() if leaks(t.name)}
    flagged = {t.benchmark_task.name for t in sub.trials.all() if t.screen_open}
    assert flagged == leaking, (flagged, leaking, summary["screen"])
    assert all(t.screen_open == ["RH7"] for t in sub.trials.all() if t.screen_open)
    assert not sub.is_verified and sub.status == ("discrepancy" if leaking else "consistent")
    assert sub.trials.filter(verified_reward=1.0).count() == 21
    # Every pass reproduced by its replay; none re-run: the site cannot run codex, and says so.
    assert (sub.coverage["reproduced"], sub.coverage["rerun"]) == (21, 0), summary
    assert summary["rerun"]["not_runnable"] and "codex" in summary["rerun"]["reason"]
    print(f"\npasted answers: {len(leaking)} of 7 tasks flagged RH7 ({sorted(leaking)}); "
          f"badge: {coverage_badge(sub.coverage)}")
    thread.join(timeout=60)
    verdict = sub.status
    assert result.get("exit") == (0 if verdict == "consistent" else 1), (
        printed.getvalue(), errors.getvalue())
    assert "uploading 100%" in errors.getvalue()
    assert f"status {verdict}, 21/21 trials" in errors.getvalue()  # progress until the verdict
    assert f"submission {sub.pk} on {bv.slug}: {verdict}" in printed.getvalue()
    assert f"{live_server.url}/submissions/{sub.pk}/" in printed.getvalue()
    # The end of the journey: a maintainer publishes it; it appears on the leaderboard and in the CSVs,
    # a flagged pass counted as a failure.
    from leaderboard.models import LeaderboardEntry
    from submissions.services import submission_publish

    maintainer = get_user_model().objects.create_user("verif-maint", is_staff=True)
    submission_publish(submission=sub, actor=maintainer)
    entry = LeaderboardEntry.objects.get(submission=sub)
    assert (entry.successes, entry.attempts, entry.verified) == (21 - 3 * len(leaking), 21,
                                                                 False)
    assert entry.verification_level == verdict
    public = Client()
    csv = b"".join(public.get(f"/leaderboard.csv?benchmark={bv.slug}").streaming_content)
    assert b"Codex (GPT 5.5)" in csv and b",verified" in csv
    trials = b"".join(public.get(f"/trials.csv?benchmark={bv.slug}").streaming_content)
    assert trials.count(b"\n") == 22
    assert public.get(f"/submissions/{sub.pk}/").status_code == 200


def test_rerun_significance_nop_and_command_agents(settings, oracle):
    """Re-run: a `nop` harness claiming every task is re-run by the site's nop agent on 9 trials
    (3 tasks x 3 attempts), 0 of 9 against the same 9 trials claimed passed: the exact test
    stratified by task gives p = (1/20)^3 = 1/8000 -> discrepancy, even though every re-grade
    matches. A command agent (install script + run template, the way harness agents are
    described) reproduces its claim -> verified. The instruction reaches the agent as a file."""
    from django.db import transaction

    from submissions.models import CheckKind, TrialCheck
    from submissions.verification import verification_enqueue, verification_run

    settings.VERIFICATION_CHECKS = ["rerun"]
    settings.VERIFICATION_RERUN_FIRST_TASKS = 3
    settings.VERIFICATION_RERUN_PER_TASK = 3
    settings.VERIFICATION_RERUN_MAX_TRIALS = 9
    answer = (oracle[CT] / "workspace" / "submission.json").read_text().rstrip()
    settings.VERIFICATION_COMMAND_AGENTS = {"scripted": {
        "install": "test -s /agent/instruction.md && echo installed",
        "run": f"grep -q submission {{instruction_file}} && cd {{workdir}} && "
               f"cat > submission.json <<'EOF'\n{answer}\nEOF",
        "env": ["SCRIPTED_API_KEY"]}}
    settings.VERIFICATION_AGENT_SECRETS = {"SCRIPTED_API_KEY": "sk-test"}
    bv = vs.synthetic_version()
    with transaction.atomic():
        nop = vs.make_submission(bv, outputs=oracle, harness="nop", tasks=[CT, PATH, ETL])
        scripted = vs.make_submission(bv, outputs=oracle, harness="scripted", tasks=[CT])
        unknown = vs.make_submission(bv, outputs=oracle, harness="mystery", tasks=[CT],
                                     attempts=1)
        jobs = [verification_enqueue(submission=s) for s in (nop, scripted, unknown)]
    for job in jobs:
        assert verification_run(job_id=job.pk) == "done"
    for s in (nop, scripted, unknown):
        s.refresh_from_db()
    summary = jobs[0].__class__.objects.get(pk=jobs[0].pk).summary["rerun"]
    assert (summary["rerun_success"], summary["rerun_runs"]) == (0, 9)
    assert (summary["site_success"], summary["site_runs"]) == (9, 9)
    assert summary["p_value"] == pytest.approx(1 / 8000) and summary["significant"]
    assert nop.status == "discrepancy"
    scripted_rerun = TrialCheck.objects.filter(job=jobs[1], kind=CheckKind.RERUN)
    assert [r.verified_reward for r in scripted_rerun] == [1.0] * 3, [
        r.detail for r in scripted_rerun]
    assert "installed" in scripted_rerun[0].detail["log_tail"]
    # Re-run covers the passes, but nothing was re-graded (re-run only): consistent.
    assert scripted.status == "consistent"
    assert (scripted.coverage["rerun"], scripted.coverage["regraded"]) == (3, 0)
    # A harness the site cannot run is reported; nothing covers the passes: not verified.
    not_runnable = TrialCheck.objects.get(job=jobs[2], kind=CheckKind.RERUN)
    assert not_runnable.status == "not_runnable" and "mystery" in not_runnable.reason
    assert unknown.status == "consistent" and unknown.coverage["passes_uncovered"] == 1
    assert "not re-runnable because of the submission: " in coverage_badge(unknown.coverage)
    assert "mystery" in coverage_badge(unknown.coverage)
