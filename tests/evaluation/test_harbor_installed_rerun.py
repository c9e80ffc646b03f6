"""Re-run of a Harbor *installed* agent (it runs inside the task container) through the real
Harbor CLI, behind the site's model gateway, against a scripted model.

The harness is Harbor's mini-swe-agent (its Python process runs in the task container and calls
the model through LiteLLM), baked offline into a harness image by `scripts/build-images
--harness mini-swe-agent` and started by Harbor with its own `skip_install`; Harbor is the
pinned CLI; the task is the site's CT package; the containers, the internal network and the
gateway are real. Only the model is the test's (tests/evaluation/stub_model.py, tool calls).

1. Egress (no database): the scripted model has the agent probe, from inside the task container,
   an outside address, the host address where the model server listens (the control run from
   the default bridge shows it OPEN), loopback, the internal network's would-be host address,
   other ports of the gateway, registry hosts, and the gateway itself with requests that are not
   model API calls (GET, another path, a proxy request line, CONNECT). Everything is BLOCKED or
   refused, while a model API call from the same container through the gateway works and reaches
   the model with the site's key (the agent only ever had a placeholder). The collected output
   grades 1.
2. End to end on a real Celery worker: two mini-swe-agent submissions claiming 5/5 passes on the
   CT task; the "solves" script re-runs 5/5 (verified), the "fails" one 0/5 (exact p = 1/252,
   discrepancy). The page states the test's power. Wall time per re-run trial is printed
   against the plain re-grade's.

Needs PostgreSQL, Redis, Docker, the base and task images and the mini-swe-agent harness image
(the session fixture harbor_ready, tests/evaluation/conftest.py, runs `scripts/build-images
--harness mini-swe-agent`: cached; the first run downloads its wheels from PyPI). Run:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_proxy \\
        .venv/bin/python -m pytest tests/evaluation/test_harbor_installed_rerun.py -x -q -s
"""

import json
import re
import time
from pathlib import Path

import pytest

from tests.evaluation import verification_support as vs
from tests.evaluation.stub_model import StubModel, bash_reply

pytestmark = [pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
CT = "ct-abnormality-classification/synthetic_01"
CT_DIR = REPO / "tasks" / CT
SITE_KEY = "sk-site-only-5678"
HARNESS = "mini-swe-agent"
VERSION = "2.4.6"
LINE_RE = re.compile(r"^(EGRESS|GATEWAY) (\S+) (\S+)\s*$", re.M)
DONE = bash_reply("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "done")
# From inside the task container: KERNEL_IS_1 when its dmesg is gVisor's boot banner (the
# typed command itself shows only the unexpanded form).
KERNEL_PROBE = "echo KERNEL_IS_$(dmesg 2>/dev/null | head -1 | grep -c 'Starting gVisor')"

# Run inside the task container by the agent: finds the gateway the agent was given (Harbor
# passes it to mini-swe-agent as model.model_kwargs.api_base), probes, prints one line each.
PROBE = r'''
import glob, re, socket, sys, urllib.error, urllib.request
print()  # the observation starts mid-line ("output": "...): the first result gets its own
base = None
for path in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        m = re.search(rb"api_base=(http://[0-9.]+:[0-9]+/v1)", open(path, "rb").read())
    except OSError:
        continue
    if m:
        base = m.group(1).decode()
        break
print("GATEWAY base", base)
host, port = base.split("//")[1].split("/")[0].split(":")
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
probe.connect((host, int(port)))
own = probe.getsockname()[0]
targets = sys.argv[2:] + [own.rsplit(".", 1)[0] + ".1:" + sys.argv[1], host + ":22",
                          host + ":80", "deb.debian.org:80", "pypi.org:443"]
for t in targets:
    h, p = t.rsplit(":", 1)
    try:
        socket.create_connection((h, int(p)), 3).close()
        print("EGRESS", t, "OPEN")
    except OSError:
        print("EGRESS", t, "BLOCKED")

def call(method, path, body=None):
    req = urllib.request.Request("http://%s:%s%s" % (host, port, path), data=body,
                                 method=method, headers={"Content-Type": "application/json",
                                                         "Authorization": "Bearer agent-own"})
    try:
        return urllib.request.urlopen(req, timeout=20).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return type(exc).__name__

def raw(line):
    s = socket.create_connection((host, int(port)), 5)
    s.sendall(line.encode() + b"\r\nHost: 1.1.1.1\r\n\r\n")
    status = s.recv(200).split(b"\r\n")[0].decode()
    s.close()
    return status.split(" ")[1] if " " in status else status

chat = b'{"model": "stub-direct", "messages": [{"role": "user", "content": "ping"}]}'
print("GATEWAY GET_models", call("GET", "/v1/models"))
print("GATEWAY POST_embeddings", call("POST", "/v1/embeddings", b"{}"))
print("GATEWAY POST_admin", call("POST", "/admin", b"{}"))
print("GATEWAY proxy_line", raw("GET http://1.1.1.1/ HTTP/1.1"))
print("GATEWAY CONNECT", raw("CONNECT 1.1.1.1:443 HTTP/1.1"))
print("GATEWAY POST_chat", call("POST", "/v1/chat/completions", chat))
'''


def _answer(*, right: bool) -> str:
    labels = json.loads((CT_DIR / "solution" / "submission.json").read_text())["labels"]
    if not right:
        labels = {k: ("no" if v == "yes" else "yes") for k, v in labels.items()}
    return json.dumps({"labels": labels}, separators=(",", ":"))


def _write(answer: str) -> str:
    return f"echo '{answer}' > /workspace/submission.json && echo written"


def _bridge_gateway() -> str:
    from evaluation import runner

    cfg = (runner.client().networks.get("bridge").attrs.get("IPAM") or {}).get("Config") or [{}]
    gateway = cfg[0].get("Gateway")
    if not gateway:
        subnet = cfg[0].get("Subnet", "172.17.0.0/16").split("/")[0].rsplit(".", 1)[0]
        gateway = f"{subnet}.1"
    return gateway


def _endpoint(stub: StubModel, gateway: str) -> dict:
    # The gateway reaches the host's model server on the bridge (where the agent cannot).
    return {"base_url": f"http://{gateway}:{stub.port}/v1", "key_env": "OPENAI_API_KEY",
            "key_secret": "STUB"}


# ---------------------------------------------------------------------------------------------
# 1. Egress
# ---------------------------------------------------------------------------------------------
def test_mini_swe_agent_reaches_only_the_model_endpoint(settings, harbor_ready, tmp_path):
    from evaluation import agents, runner

    bridge = _bridge_gateway()
    stub = StubModel({"stub-direct": ["pong"]}).start()
    outside = ["1.1.1.1:80", f"{bridge}:{stub.port}", f"127.0.0.1:{stub.port}"]
    probe_cmd = ("cat > /tmp/probe.py <<'PROBE_EOF'\n" + PROBE + "\nPROBE_EOF\n"
                 f"python3 /tmp/probe.py {stub.port} {' '.join(outside)}; "
                 f"{KERNEL_PROBE}; " + _write(_answer(right=True)))
    stub.scripts["stub-probe"] = [bash_reply(probe_cmd, "probe"), DONE]
    try:
        settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {"openai/stub-probe": _endpoint(stub, bridge)}
        settings.VERIFICATION_AGENT_SECRETS = {"STUB": SITE_KEY}
        control = runner.client().containers.run(
            runner.base_image_tag(),
            ["python3", "-c", "import socket,sys; socket.create_connection((sys.argv[1], "
             "int(sys.argv[2])), 3); print('OPEN')", bridge, str(stub.port)],
            remove=True, network_mode="bridge").decode()
        assert "OPEN" in control, control

        agent, why = agents.resolve_site_agent(
            HARNESS, harness_version=VERSION,
            agent_settings={"harbor_agent": HARNESS, "model_name": "openai/stub-probe",
                            "kwargs": {"base_url": "http://203.0.113.9/v1",
                                       "api_key": "sk-submitters-own"}})
        assert agent is not None, why
        t0 = time.monotonic()
        hb = agents.run_harbor_agent(agent, CT_DIR, job_id=f"{vs.RUN_PREFIX}msa-egress",
                                     attempt=1, attempts=1, work_dir=tmp_path)
        seconds = time.monotonic() - t0
    finally:
        stub.stop()
    report = f"{hb.log_tail}\n{hb.trials}\n{hb.gateway_log}"
    assert hb.returncode == 0 and len(hb.trials) == 1, report
    trial = hb.trials[0]
    assert trial.exception_type is None, report
    assert (trial.agent_name, trial.agent_version) == (HARNESS, VERSION), report

    # The agent reached the model through the gateway, which sent the site's key (the agent
    # had a placeholder; the submission's endpoint and key were dropped).
    assert stub.count("stub-probe") >= 2, report
    assert stub.authorizations() == {f"Bearer {SITE_KEY}"}
    cmdline = " ".join(hb.cmd)
    assert "203.0.113.9" not in cmdline and "sk-submitters-own" not in cmdline
    assert SITE_KEY not in cmdline and "skip_install=true" in cmdline
    assert hb.job_dirs and all(SITE_KEY not in (d / "config.json").read_text()
                               for d in hb.job_dirs)

    # What the agent's commands saw.
    # (mini-swe-agent returns a command's output JSON-encoded: its newlines arrive as \n)
    seen = "\n".join(stub.texts("stub-probe")).replace("\\n", "\n")
    lines = LINE_RE.findall(seen)
    egress = {t: v for kind, t, v in lines if kind == "EGRESS"}
    gw = {t: v for kind, t, v in lines if kind == "GATEWAY"}
    assert len(egress) == len(outside) + 5, seen[-4000:]
    assert set(egress.values()) == {"BLOCKED"}, egress
    assert gw["base"].startswith("http://") and gw["base"].endswith(":8080/v1"), seen[-4000:]
    assert (gw["GET_models"], gw["POST_embeddings"], gw["POST_admin"]) == ("405", "404", "404"), gw
    assert (gw["proxy_line"], gw["CONNECT"]) == ("405", "405"), gw
    assert gw["POST_chat"] == "200", gw  # the model endpoint works from inside
    assert stub.count("stub-direct") == 1
    # S15: the agent's container ran on gVisor's kernel, its only network the gateway's.
    assert hb.runtime == runner.GVISOR_HOSTINET_RUNTIME, hb.runtime
    assert "KERNEL_IS_1" in seen, seen[-4000:]
    refused = [e for e in hb.gateway_log if e.get("refused")]
    assert len(refused) == 5, hb.gateway_log
    served = [e for e in hb.gateway_log if e.get("status") == 200]
    assert {e["path"] for e in served} == {"/chat/completions"}, hb.gateway_log

    # The collected output grades like any other; nothing of the run is left behind.
    image, _built = runner.build_task_image(CT_DIR)
    verdict = runner.run_verifier(CT_DIR, job_id=f"{vs.RUN_PREFIX}msa-egress-grade",
                                  artifacts_dir=trial.artifacts_dir, image=image)
    assert verdict.reward == 1.0, verdict.result.text
    assert vs.labelled_containers(f"{vs.RUN_PREFIX}msa-egress") == []
    assert _job_networks(f"{vs.RUN_PREFIX}msa-egress") == []
    print(f"\nharbor run (mini-swe-agent behind the gateway, 1 trial): {seconds:.1f} s wall, "
          f"trial {trial.seconds:.1f} s, agent {trial.agent_seconds:.1f} s")


def _job_networks(prefix: str) -> list[str]:
    from evaluation import runner

    return sorted(n.name for n in runner.client().networks.list(
        filters={"label": "app=healthagentbench"})
        if str((n.attrs.get("Labels") or {}).get("job", "")).startswith(prefix))


def _connect(container, host: str, port: int) -> str:
    code = ("import socket,sys\n"
            "try:\n"
            "    socket.create_connection((sys.argv[1], int(sys.argv[2])), 3).close()\n"
            "    print('OPEN')\n"
            "except OSError as exc:\n"
            "    print('BLOCKED', type(exc).__name__)\n")
    return container.exec_run(["python3", "-c", code, host, str(port)]).output.decode().strip()


def test_two_trials_of_one_job_cannot_reach_each_other(settings, harbor_ready, tmp_path):
    """Two mini-swe-agent trials of one re-run, in parallel: each task container is on its own
    internal network, whose only other member is its own model gateway; with a listener in
    each, neither trial reaches the other's (each reaches its own: the control). Both trials
    complete, and every network of the job is gone afterwards, also when the Harbor run fails
    (a 3 s cap kills it before any trial result)."""
    import threading

    from evaluation import agents, runner

    bridge = _bridge_gateway()
    hold = "sleep 45; " + _write(_answer(right=True))
    stub = StubModel({"stub-pair": [bash_reply(hold, "hold"), DONE]}).start()
    job = f"{vs.RUN_PREFIX}msa-pair"
    settings.VERIFICATION_PARALLEL_TRIALS = 2
    settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {"openai/stub-pair": _endpoint(stub, bridge)}
    settings.VERIFICATION_AGENT_SECRETS = {"STUB": SITE_KEY}
    agent, why = agents.resolve_site_agent(
        HARNESS, harness_version=VERSION,
        agent_settings={"harbor_agent": HARNESS, "model_name": "openai/stub-pair"})
    assert agent is not None, why
    done: dict = {}

    def run():
        try:
            done["job"] = agents.run_harbor_agent(agent, CT_DIR, job_id=job, attempt=1,
                                                  attempts=2, work_dir=tmp_path / "pair")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
            done["error"] = exc

    c = runner.client()
    thread = threading.Thread(target=run)
    thread.start()
    probes = None
    try:
        deadline = time.monotonic() + 600
        while thread.is_alive() and time.monotonic() < deadline and probes is None:
            tasks = [x for x in c.containers.list(filters={"label": ["app=healthagentbench",
                                                                     "purpose=harbor"]})
                     if x.labels.get("job", "").startswith(job)]
            # Both agents have started their command (the model was asked twice).
            if len(tasks) == 2 and stub.count("stub-pair") >= 2:
                probes = _probe_pair(c, tasks, job)
            else:
                time.sleep(1)
        thread.join(timeout=900)
    finally:
        stub.stop()
    assert probes is not None, (done, stub.count("stub-pair"))
    assert "error" not in done, done.get("error")
    hb = done["job"]
    assert [t.exception_type for t in hb.trials] == [None, None], hb.log_tail
    assert len({t.name for t in hb.trials}) == 2
    assert _job_networks(job) == []

    (a_net, a_ip, a_gw), (b_net, b_ip, b_gw) = probes["trials"]
    assert a_net != b_net and a_net.startswith(f"hab-egress-{job}-t")
    assert probes["members"] == [{"harbor", "modelgw"}, {"harbor", "modelgw"}]
    assert probes["a->a"] == probes["b->b"] == "OPEN"  # the control: the listeners answer
    assert probes["a->b"].startswith("BLOCKED") and probes["b->a"].startswith("BLOCKED"), probes
    assert probes["a->b gateway"].startswith("BLOCKED"), probes
    print(f"\ntwo trials, two networks ({a_net}, {b_net}): {probes}")

    # On failure too: a run killed before any trial result leaves no network behind.
    settings.VERIFICATION_HARBOR_TIMEOUT_S = 3
    with pytest.raises(runner.InfrastructureError, match="without a trial result"):
        agents.run_harbor_agent(agent, CT_DIR, job_id=f"{job}-killed", attempt=1, attempts=2,
                                work_dir=tmp_path / "killed")
    assert _job_networks(f"{job}-killed") == []
    runner.reap_job_prefix(f"{job}-killed")


def _probe_pair(c, tasks, job) -> dict:
    """Networks, members and reachability of the two running trials (test side, docker exec)."""
    trials, gateways = [], []
    for task in tasks:
        task.reload()
        nets = task.attrs["NetworkSettings"]["Networks"]
        assert list(nets) == [n for n in nets if n.startswith(f"hab-egress-{job}-t")], nets
        (name, info), = nets.items()
        net = c.networks.get(name)
        net.reload()
        members = {m.labels.get("purpose"): m for m in net.containers}
        gw = members["modelgw"]
        gw_ip = gw.attrs["NetworkSettings"]["Networks"][name]["IPAddress"]
        trials.append((name, info["IPAddress"], gw_ip))
        gateways.append(set(members))
        task.exec_run(["python3", "-m", "http.server", "8000", "--bind", "0.0.0.0"],
                      detach=True)
    time.sleep(2)
    (a_net, a_ip, _), (b_net, b_ip, b_gw) = trials
    return {"trials": trials, "members": gateways,
            "a->a": _connect(tasks[0], a_ip, 8000), "b->b": _connect(tasks[1], b_ip, 8000),
            "a->b": _connect(tasks[0], b_ip, 8000), "b->a": _connect(tasks[1], a_ip, 8000),
            "a->b gateway": _connect(tasks[0], b_gw, 8080)}


def test_unbaked_installed_agents_say_why(settings):
    from evaluation import agents

    settings.VERIFICATION_HARBOR_AGENTS = {"terminus-2": ["2.0.0"], "aider": []}
    agent, why = agents.resolve_site_agent(
        "aider", harness_version="0.50.0",
        agent_settings={"harbor_agent": "aider", "model_name": "anthropic/claude"})
    assert agent is None
    assert why.startswith("aider runs inside the task container and installs itself")
    agent, why = agents.resolve_site_agent("goose", harness_version="1.0.0")
    assert agent is None and "installs itself from the internet" in why
    # OpenHands is baked at 1.6.0; Harbor's unpinned install (1.11.0) cannot run its agent, and
    # the badge says so.
    settings.VERIFICATION_HARBOR_AGENTS = {"openhands": []}
    agent, why = agents.resolve_site_agent(
        "openhands", harness_version="1.11.0",
        agent_settings={"harbor_agent": "openhands", "model_name": "anthropic/claude"})
    assert agent is None
    assert why == ("harness version 1.11.0 not built (openhands: the site's layer is 1.6.0; "
                   "openhands-ai 1.7.0 and later no longer ship openhands.core.main, which "
                   "Harbor's openhands agent runs)")
    # A baked CLI at a version the site has no layer for says which one it has.
    settings.VERIFICATION_HARBOR_AGENTS = {"claude-code": []}
    agent, why = agents.resolve_site_agent(
        "claude-code", harness_version="2.1.0",
        agent_settings={"harbor_agent": "claude-code", "model_name": "anthropic/claude"})
    assert agent is None and why.startswith("harness version 2.1.0 not built (claude-code")


# ---------------------------------------------------------------------------------------------
# 2. End to end on a real worker
# ---------------------------------------------------------------------------------------------
ATTEMPTS = 5  # every attempt of the task re-run: 0/5 against 5 claimed passes, p = 1/252


@pytest.fixture(scope="module")
def stub_models():
    stub = StubModel({"stub-solves": [bash_reply(_write(_answer(right=True))), DONE],
                      "stub-fails": [bash_reply(_write(_answer(right=False))), DONE]}).start()
    yield stub
    stub.stop()


@pytest.fixture(scope="module")
def media_root(tmp_path_factory):
    return tmp_path_factory.mktemp("installed-rerun-media")


@pytest.fixture(scope="module")
def rerun_worker(django_db_setup, django_db_blocker, media_root, harbor_ready, stub_models):
    with django_db_blocker.unblock():
        vs.shared_database_url()  # skips on SQLite
    bridge = _bridge_gateway()
    endpoints = {f"openai/{m}": _endpoint(stub_models, bridge) for m in ("stub-solves", "stub-fails")}
    queue = f"{vs.QUEUE}-installed"
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


def _msa_submission(bv, oracle, model: str):
    from evaluation.models import Agent, AIModel, Harness

    sub = vs.make_submission(bv, outputs=oracle, harness=HARNESS, tasks=[CT], attempts=ATTEMPTS)
    m, _ = AIModel.objects.get_or_create(slug=model, defaults={"display_name": model,
                                                               "provider": "stub"})
    harness, _ = Harness.objects.get_or_create(slug=HARNESS, defaults={"display_name": HARNESS})
    agent = Agent.objects.create(
        harness=harness, harness_version=VERSION, model=m,
        settings={"harbor_agent": HARNESS, "model_name": f"openai/{model}",
                  # the submission's own endpoint: ignored by the site
                  "kwargs": {"base_url": "http://203.0.113.9/v1"}},
        settings_digest=f"msa-{model}", display_name=f"{HARNESS} ({model})",
        slug=f"{HARNESS}-{model}")
    sub.agent = agent
    sub.save(update_fields=["agent"])
    return sub


@pytest.mark.django_db(transaction=True)
def test_installed_agent_rerun_agrees_and_disagrees(settings, media_root, rerun_worker, oracle,
                                                    stub_models):
    from django.contrib.auth import get_user_model
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
        solves = _msa_submission(bv, oracle, "stub-solves")
        fails = _msa_submission(bv, oracle, "stub-fails")
        jobs = {s.pk: verification_enqueue(submission=s) for s in (solves, fails)}

    def final(pk):
        s = Submission.objects.get(pk=pk)
        return s if s.status in ("verified", "consistent", "discrepancy", "failed") else None

    for sub in (solves, fails):
        vs.wait_for(lambda pk=sub.pk: final(pk), 1500, f"submission {sub.pk}",
                    worker=rerun_worker, interval=2)
    solves.refresh_from_db()
    fails.refresh_from_db()
    js, jf = (type(jobs[solves.pk]).objects.get(pk=jobs[s.pk].pk) for s in (solves, fails))

    # Re-run agrees: 5/5 against the same 5 trials claimed: verified.
    rerun = js.summary["rerun"]
    assert solves.status == "verified", (js.summary, rerun_worker.tail())
    assert (rerun["rerun_success"], rerun["rerun_runs"], rerun["site_success"]) == (
        ATTEMPTS, ATTEMPTS, ATTEMPTS)
    assert not rerun["significant"]
    checks = list(TrialCheck.objects.filter(job=js, kind=CheckKind.RERUN))
    assert len(checks) == ATTEMPTS
    for c in checks:
        assert c.detail["kind"] == "harbor" and c.detail["agent"] == HARNESS
        assert c.detail["agent_version"] == VERSION and c.detail["egress"] == "model gateway"
        assert c.detail["dropped_kwargs"] == ["base_url"]
        assert c.detail["gateway_requests"] >= 2 and c.detail["gateway_refused"] == 0
    assert stub_models.authorizations() == {f"Bearer {SITE_KEY}"}

    # Re-run disagrees: 0/5 against the same 5 trials claimed passed: exact p = 1/C(10,5) = 1/252 < 0.05.
    rerun_f = jf.summary["rerun"]
    assert fails.status == "discrepancy", (jf.summary, rerun_worker.tail())
    assert (rerun_f["rerun_success"], rerun_f["rerun_runs"]) == (0, ATTEMPTS)
    assert rerun_f["p_value"] == pytest.approx(1 / 252) and rerun_f["significant"]
    assert jf.summary["regrade"]["mismatched_trials"] == []

    # The page states the test's power for this sample.
    power = rerun["power"]
    # What the design detects against these claims (design.describe_power), stated on the page.
    assert power["sentence"] == power["statement"]
    assert power["points"] is None or 0 < power["points"] <= 100
    staff = get_user_model().objects.create_user("msa-staff", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    page = client.get(f"/submissions/{solves.pk}/").content.decode()
    assert power["statement"] in page.replace("&#x27;", "'"), page[:3000]
    assert (f"{ATTEMPTS}/{ATTEMPTS} passed, against {ATTEMPTS}/{ATTEMPTS} passes by the site's "
            "own grading" in page.replace("&#x27;", "'"))
    badge = coverage_badge(solves.coverage)
    assert badge.startswith("verified") and badge in page, badge
    print(f"\nbadge of the re-run submission: {badge}\nfailing one: {coverage_badge(fails.coverage)}")

    regrade_s = [c.duration_s for c in TrialCheck.objects.filter(
        job__in=[js, jf], kind=CheckKind.REGRADE)]
    rerun_s = [c.duration_s for c in TrialCheck.objects.filter(
        job__in=[js, jf], kind=CheckKind.RERUN)]
    per_rerun, per_regrade = sum(rerun_s) / len(rerun_s), sum(regrade_s) / len(regrade_s)
    line = (f"re-run of mini-swe-agent through Harbor behind the model gateway: {per_rerun:.1f} "
            f"s/trial (amortised over {ATTEMPTS} concurrent trials, incl. grading) vs plain "
            f"re-grade {per_regrade:.1f} s/trial: ratio {per_rerun / per_regrade:.1f}x; harbor "
            f"trial {sum(c.detail['trial_s'] for c in checks) / len(checks):.1f} s each")
    print("\n" + line)
    vs.TEST_OUTPUT.mkdir(exist_ok=True)
    (vs.TEST_OUTPUT / "harbor-installed-rerun-timing.txt").write_text(line + "\n")
