"""Re-run of a real Harbor harness through the real Harbor CLI, against a scripted model.

The harness is Harbor's terminus-2 (it runs on the worker, asks the model for keystrokes and types
them into tmux in the task container), Harbor is the pinned CLI (scripts/harbor-venv), the task is
the site's CT package, the containers are real. Only the model is the test's: a local
OpenAI-compatible server (tests/evaluation/stub_model.py) answering from a script per model name.

1. The driver and the egress rule (no database): the scripted model first has the agent probe
   the network from inside the task container: an outside address, the host address where the
   model server listens (reachable from a bridged container: the control run shows it OPEN), and
   loopback. Every probe fails (network none), while the harness reached the model endpoint
   with the site's key, the submission's own `api_base` was dropped, and the collected output
   grades 1.
2. End to end on a real Celery worker: two terminus-2 submissions claiming 5/5 passes on the CT
   task. The site re-runs the task 4 times with each submission's model: the "solves" script
   writes the right answer (5/5, the re-run covers every counted pass: verified), the "fails"
   script writes a wrong one (0/5 against the same 5 trials claimed passed: exact p = 1/252, discrepancy). The page
   states the test's power for that sample. The re-run's wall time per trial is printed against
   the plain re-grade's.

Needs PostgreSQL, Redis, Docker and the base image with tmux (the session fixture harbor_ready,
tests/evaluation/conftest.py, runs `scripts/build-images`, cached: the worker also needs every
task image). Run:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_rerun \\
        .venv/bin/python -m pytest tests/evaluation/test_harbor_rerun.py -x -q
"""

import json
import re
import time
from pathlib import Path

import pytest

from tests.evaluation import verification_support as vs
from tests.evaluation.stub_model import StubModel, terminus_reply

pytestmark = [pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
CT = "ct-abnormality-classification/synthetic_01"
CT_DIR = REPO / "tasks" / CT
SITE_KEY = "sk-site-only-1234"
EGRESS_RE = re.compile(r"^EGRESS (\S+) (OPEN|BLOCKED)\s*$", re.M)
# From inside the task container: KERNEL_IS_1 when its dmesg is gVisor's boot banner (the
# typed command itself shows only the unexpanded form).
KERNEL_PROBE = "echo KERNEL_IS_$(dmesg 2>/dev/null | head -1 | grep -c 'Starting gVisor')"


def _answer(*, right: bool) -> str:
    labels = json.loads((CT_DIR / "solution" / "submission.json").read_text())["labels"]
    if not right:
        labels = {k: ("no" if v == "yes" else "yes") for k, v in labels.items()}
    return json.dumps({"labels": labels}, separators=(",", ":"))


def _write(answer: str) -> str:
    return f"echo '{answer}' > /workspace/submission.json"


def _probe(targets: list[str]) -> str:
    """One shell line: try a TCP connection to each host:port, print OPEN or BLOCKED."""
    py = ('import socket,sys; h,p=sys.argv[1].rsplit(":",1); '
          'socket.create_connection((h,int(p)),3); print("EGRESS",sys.argv[1],"OPEN")')
    return (f"for t in {' '.join(targets)}; do python3 -c '{py}' $t 2>/dev/null "
            f"|| echo EGRESS $t BLOCKED; done")


def _script(*first_commands: str) -> list[str]:
    # turn 1: the commands; turn 2: done; turn 3: terminus-2's "are you sure?" -> done again
    done = terminus_reply([], complete=True)
    return [terminus_reply(list(first_commands), complete=False), done, done]


def _bridge_gateway() -> str:
    from evaluation import runner

    cfg = (runner.client().networks.get("bridge").attrs.get("IPAM") or {}).get("Config") or [{}]
    gateway = cfg[0].get("Gateway")
    if not gateway:  # an engine that does not report it: the subnet's first host
        subnet = cfg[0].get("Subnet", "172.17.0.0/16").split("/")[0].rsplit(".", 1)[0]
        gateway = f"{subnet}.1"
    return gateway


# ---------------------------------------------------------------------------------------------
# 1. Driver and egress
# ---------------------------------------------------------------------------------------------
def test_terminus2_reaches_only_the_site_endpoint(settings, harbor_ready, tmp_path, docker_engine):
    from evaluation import agents, runner

    gateway = _bridge_gateway()
    stub = StubModel({}).start()
    targets = ["1.1.1.1:80", f"{gateway}:{stub.port}", f"127.0.0.1:{stub.port}"]
    stub.scripts["stub-probe"] = _script(_probe(targets), KERNEL_PROBE,
                                         _write(_answer(right=True)))
    try:
        settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {"openai/stub-probe": {
            "base_url": stub.base_url, "key_env": "OPENAI_API_KEY", "key_secret": "STUB"}}
        settings.VERIFICATION_AGENT_SECRETS = {"STUB": SITE_KEY}
        # The control: the same probe from a container on the default bridge reaches the
        # model server's host address, so "BLOCKED" below means the network is cut.
        control = runner.client().containers.run(
            runner.base_image_tag(), ["bash", "-c", _probe([f"{gateway}:{stub.port}"])],
            remove=True, network_mode="bridge").decode()
        assert f"EGRESS {gateway}:{stub.port} OPEN" in control, control

        agent, why = agents.resolve_site_agent(
            "terminus-2", harness_version="2.0.0",
            agent_settings={"harbor_agent": "terminus-2", "model_name": "openai/stub-probe",
                            "kwargs": {"record_terminal_session": True,
                                       "api_base": "http://203.0.113.9/v1"}})
        assert agent is not None, why
        t0 = time.monotonic()
        hb = agents.run_harbor_agent(agent, CT_DIR, job_id=f"{vs.RUN_PREFIX}egress", attempt=1,
                                     attempts=1, work_dir=tmp_path)
        seconds = time.monotonic() - t0
    finally:
        stub.stop()
    report = f"{hb.log_tail}\n{[t for t in hb.trials]}"
    assert hb.returncode == 0 and len(hb.trials) == 1, report
    trial = hb.trials[0]
    assert trial.exception_type is None, report
    assert (trial.agent_name, trial.agent_version) == ("terminus-2", "2.0.0")

    # The model endpoint worked, with the site's key; the submission's api_base was dropped.
    assert stub.count("stub-probe") >= 3, report
    assert stub.authorizations() == {f"Bearer {SITE_KEY}"}
    config = (hb.job_dir / "config.json").read_text()
    assert stub.base_url in config and "203.0.113.9" not in config and SITE_KEY not in config
    assert "--ak" in hb.cmd and SITE_KEY not in " ".join(hb.cmd)

    # What the agent's commands saw: every address unreachable.
    seen = dict(EGRESS_RE.findall("\n".join(stub.texts("stub-probe"))))
    assert seen == {t: "BLOCKED" for t in targets}, stub.texts("stub-probe")[-1][-3000:]
    # S15: terminus-2 is one of the harnesses that cannot run under gVisor (its terminal
    # recording relays nothing there): its task container ran under runc, the host's kernel,
    # and the job says so.
    assert "terminus-2" in agents.RUNC_HARNESSES
    assert hb.runtime is None
    assert "KERNEL_IS_0" in "\n".join(stub.texts("stub-probe")), stub.texts("stub-probe")[-1]

    # The collected output grades like any other; nothing of the run is left behind.
    image, _built = runner.build_task_image(CT_DIR)
    verdict = runner.run_verifier(CT_DIR, job_id=f"{vs.RUN_PREFIX}egress-grade",
                                  artifacts_dir=trial.artifacts_dir, image=image)
    assert verdict.reward == 1.0, verdict.result.text
    assert vs.labelled_containers(f"{vs.RUN_PREFIX}egress") == []
    print(f"\nharbor run (terminus-2, 1 trial): {seconds:.1f} s wall, trial "
          f"{trial.seconds:.1f} s, agent {trial.agent_seconds:.1f} s")


# ---------------------------------------------------------------------------------------------
# 2. End to end on a real worker
# ---------------------------------------------------------------------------------------------
ATTEMPTS = 5  # every attempt of the task re-run: 0/5 against 5 claimed passes, p = 1/252


@pytest.fixture(scope="module")
def stub_models():
    stub = StubModel({"stub-solves": _script(_write(_answer(right=True))),
                      "stub-fails": _script(_write(_answer(right=False)))}).start()
    yield stub
    stub.stop()


@pytest.fixture(scope="module")
def media_root(tmp_path_factory):
    return tmp_path_factory.mktemp("harbor-rerun-media")


@pytest.fixture(scope="module")
def rerun_worker(django_db_setup, django_db_blocker, media_root, harbor_ready, stub_models):
    with django_db_blocker.unblock():
        vs.shared_database_url()  # skips on SQLite
    endpoints = {f"openai/{m}": {"base_url": stub_models.base_url, "key_env": "OPENAI_API_KEY",
                                 "key_secret": "STUB"} for m in ("stub-solves", "stub-fails")}
    queue = f"{vs.QUEUE}-harbor"
    vs.redis_client().delete(queue)
    w = vs.Worker(media_root=media_root, concurrency=1, queue=queue, env={
        "VERIFICATION_RERUN_MODEL_ENDPOINTS": json.dumps(endpoints),
        "VERIFICATION_AGENT_SECRETS": json.dumps({"STUB": SITE_KEY}),
        "VERIFICATION_PARALLEL_TRIALS": str(ATTEMPTS),
    }).start()
    yield w
    w.stop()
    vs.redis_client().delete(queue)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    return vs.oracle_outputs(tmp_path_factory.mktemp("oracle-outputs"), only=[CT])


def _terminus_submission(bv, oracle, model: str, *, claims: dict | None = None,
                         attempts: int = ATTEMPTS):
    from evaluation.models import Agent, AIModel, Harness

    sub = vs.make_submission(bv, outputs=oracle, harness="terminus-2", tasks=[CT],
                             attempts=attempts, claims=claims)
    m, _ = AIModel.objects.get_or_create(slug=model, defaults={"display_name": model,
                                                               "provider": "stub"})
    agent = Agent.objects.create(
        harness=Harness.objects.get(slug="terminus-2"), harness_version="2.0.0", model=m,
        settings={"harbor_agent": "terminus-2", "model_name": f"openai/{model}",
                  # the submission's own endpoint and key: ignored by the site
                  "kwargs": {"api_base": "http://203.0.113.9/v1", "temperature": 0.0,
                             "record_terminal_session": False}},
        settings_digest=f"{model}-{sub.pk}", display_name=f"terminus-2 ({model}, {sub.pk})",
        slug=f"terminus-2-{model}-{sub.pk}")
    sub.agent = agent
    sub.save(update_fields=["agent"])
    return sub


@pytest.mark.django_db(transaction=True)
def test_rerun_through_harbor_agrees_and_disagrees(settings, media_root, rerun_worker, oracle,
                                                   stub_models):
    from django.db import transaction
    from django.test import Client

    from submissions.models import CheckKind, Submission, TrialCheck, coverage_badge
    from submissions.verification import verification_enqueue

    settings.MEDIA_ROOT = str(media_root)
    settings.VERIFICATION_QUEUE = rerun_worker.queue
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.VERIFICATION_CHECKS = ["regrade", "rerun"]
    settings.VERIFICATION_RERUN_FIRST_TASKS = 1
    settings.VERIFICATION_RERUN_PER_TASK = ATTEMPTS
    settings.VERIFICATION_RERUN_MAX_TRIALS = ATTEMPTS
    # One task of five attempts reaches no power floor (the job fixes it from these settings);
    # this test is the harness's path to a verdict, tests/adversarial the floor's.
    settings.VERIFICATION_RERUN_POWER_FLOOR = 0.0
    vs.point_celery_at(vs.BROKER_URL)
    bv = vs.synthetic_version()
    with transaction.atomic():
        solves = _terminus_submission(bv, oracle, "stub-solves")
        fails = _terminus_submission(bv, oracle, "stub-fails")
        jobs = {s.pk: verification_enqueue(submission=s) for s in (solves, fails)}

    def final(pk):
        s = Submission.objects.get(pk=pk)
        return s if s.status in ("verified", "consistent", "discrepancy", "failed") else None

    for sub in (solves, fails):
        vs.wait_for(lambda pk=sub.pk: final(pk), 1200, f"submission {sub.pk}",
                    worker=rerun_worker, interval=2)
    solves.refresh_from_db()
    fails.refresh_from_db()
    js, jf = (type(jobs[solves.pk]).objects.get(pk=jobs[s.pk].pk) for s in (solves, fails))

    # Re-run agrees: 5/5 against the same 5 trials claimed, every counted pass re-graded and re-run: verified.
    rerun = js.summary["rerun"]
    assert solves.status == "verified", (js.summary, rerun_worker.tail())
    assert (rerun["rerun_success"], rerun["rerun_runs"], rerun["site_success"]) == (
        ATTEMPTS, ATTEMPTS, ATTEMPTS)
    assert not rerun["significant"]
    assert solves.coverage["rerun"] == ATTEMPTS and solves.coverage["passes_uncovered"] == 0
    checks = list(TrialCheck.objects.filter(job=js, kind=CheckKind.RERUN))
    assert len(checks) == ATTEMPTS
    for c in checks:
        assert c.detail["kind"] == "harbor" and c.detail["agent"] == "terminus-2"
        assert c.detail["model"] == "openai/stub-solves" and c.detail["agent_version"] == "2.0.0"
        assert c.detail["dropped_kwargs"] == ["api_base"]
        # the site's own time of the re-run (Harbor's agent execution), shown beside the
        # reported one; the stub model has no price, so no measured cost
        measured = c.detail["measured"]
        assert measured["duration_s"] == (c.detail["agent_s"] if c.detail["agent_s"] is not None
                                          else c.detail["trial_s"])
        assert measured["cost_usd"] is None and measured["model"] == "openai/stub-solves"
    assert stub_models.count("stub-solves") >= 3 * ATTEMPTS
    assert stub_models.authorizations() == {f"Bearer {SITE_KEY}"}

    # Re-run disagrees: 0/5 against the same 5 trials claimed passed: exact p = 1/C(10,5) = 1/252 < 0.05.
    rerun_f = jf.summary["rerun"]
    assert fails.status == "discrepancy", (jf.summary, rerun_worker.tail())
    assert (rerun_f["rerun_success"], rerun_f["rerun_runs"]) == (0, ATTEMPTS)
    assert rerun_f["p_value"] == pytest.approx(1 / 252) and rerun_f["significant"]
    # The re-grades of the submitted outputs all matched: the re-run alone found it.
    assert jf.summary["regrade"]["mismatched_trials"] == []

    # The page states the test's power for this sample.
    power = rerun["power"]
    # What the design detects against these claims (design.describe_power), stated on the page.
    assert power["sentence"] == power["statement"]
    assert power["points"] is None or 0 < power["points"] <= 100
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.create_user("rerun-staff", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    page = client.get(f"/submissions/{solves.pk}/").content.decode()
    assert power["statement"] in page.replace("&#x27;", "'"), page[:3000]
    assert (f"{ATTEMPTS}/{ATTEMPTS} passed, against {ATTEMPTS}/{ATTEMPTS} passes by the site's "
            "own grading" in page.replace("&#x27;", "'"))
    badge = coverage_badge(solves.coverage)
    assert badge.startswith("verified") and badge in page, badge
    print(f"\nbadge of the re-run submission: {badge}\nfailing one: {coverage_badge(fails.coverage)}")

    # Wall time per trial: re-run (Harbor job amortised + its grading) vs plain re-grade.
    regrade_s = [c.duration_s for c in TrialCheck.objects.filter(
        job__in=[js, jf], kind=CheckKind.REGRADE)]
    rerun_s = [c.duration_s for c in TrialCheck.objects.filter(
        job__in=[js, jf], kind=CheckKind.RERUN)]
    per_rerun, per_regrade = sum(rerun_s) / len(rerun_s), sum(regrade_s) / len(regrade_s)
    line = (f"re-run through Harbor: {per_rerun:.1f} s/trial (amortised over {ATTEMPTS} "
            f"concurrent trials, incl. grading) vs plain re-grade {per_regrade:.1f} s/trial: "
            f"ratio {per_rerun / per_regrade:.1f}x; harbor trial "
            f"{sum(c.detail['trial_s'] for c in checks) / len(checks):.1f} s each")
    print("\n" + line)
    vs.TEST_OUTPUT.mkdir(exist_ok=True)
    (vs.TEST_OUTPUT / "harbor-rerun-timing.txt").write_text(line + "\n")


@pytest.mark.django_db(transaction=True)
def test_claimed_infrastructure_error_reattempted_through_harbor(settings, media_root,
                                                                  rerun_worker, oracle,
                                                                  stub_models):
    """A terminus-2 submission reports one trial as an infrastructure error: the site
    re-attempts it with the real Harbor CLI (the submission's harness and model, the site's
    endpoint), the trial completes normally, so the claim is not confirmed: a failure."""
    from django.db import transaction

    from submissions.models import CheckKind, Submission, TrialCheck
    from submissions.verification import verification_enqueue

    settings.MEDIA_ROOT = str(media_root)
    settings.VERIFICATION_QUEUE = rerun_worker.queue
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.VERIFICATION_CHECKS = ["regrade"]
    vs.point_celery_at(vs.BROKER_URL)
    bv = vs.synthetic_version()
    before = stub_models.count("stub-solves")
    with transaction.atomic():
        sub = _terminus_submission(bv, oracle, "stub-solves", attempts=2,
                                   claims={(CT, 2): "infra"})
        verification_enqueue(submission=sub)
    sub = vs.wait_for(lambda: Submission.objects.filter(
        pk=sub.pk, status__in=("verified", "consistent", "discrepancy", "failed")).first(),
        900, f"submission {sub.pk}", worker=rerun_worker, interval=2)
    check = TrialCheck.objects.get(trial__submission=sub, kind=CheckKind.INFRA)
    assert check.status == "mismatch", (check.reason, rerun_worker.tail())
    assert check.detail["mode"] == "harbor" and check.detail["agent"] == "terminus-2"
    assert check.reason.startswith("not confirmed: the site re-ran terminus-2 with the real "
                                   "Harbor CLI and it completed normally (verifier reward 1)")
    assert stub_models.count("stub-solves") >= before + 3  # the harness asked the site's model
    trial = check.trial
    trial.refresh_from_db()
    # Its submitted output is the oracle's: the site grades it a pass, not an infra error.
    assert (trial.claimed_outcome, trial.infra_confirmed, trial.outcome) == (
        "infra_error", False, "passed")
    print(f"\nHarbor re-attempt of a claimed infrastructure error: {check.duration_s:.1f} s "
          f"(harbor job {check.detail['harbor_job_s']:.1f} s)")
