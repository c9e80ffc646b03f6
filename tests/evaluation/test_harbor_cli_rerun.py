"""Re-run of the coding-agent CLIs (Claude Code, Codex, Copilot CLI) and OpenHands through the
real Harbor CLI, behind the site's model gateway, against a scripted model speaking each one's API.

Each CLI is the real one, from npm, pinned by harness-npm/<name>/package-lock.json and baked
offline into a harness layer (`scripts/build-images --harness <name>`); OpenHands is
openhands-ai from PyPI (requirements-harness-openhands.txt) in a venv on the layer's own
CPython 3.12, running its CodeActAgent with RUNTIME=local (tmux in the task container); Harbor (the pinned CLI)
starts it as its installed agent with `skip_install`; the task is the site's CT package; the
containers, the internal network and the gateway are real. Only the model is the test's
(tests/evaluation/stub_model.py): Anthropic Messages for Claude Code, OpenAI Responses for Codex,
OpenAI Chat Completions for Copilot CLI's bring-your-own-key provider and for OpenHands (litellm,
native tool calls: execute_bash, then finish), streamed as the CLIs ask.

For each CLI two trials: the oracle plan (the shell command that writes the reference answer,
after an egress probe) grades 1, the wrong plan (the labels flipped) grades 0. The probe, run by
the CLI's own shell tool inside the task container, finds every outside address, the host's
model server, registries and the gateway's other ports BLOCKED and the gateway refusing anything
but a model API call, which works and reaches the model with the site's key only.

Heavy (a harness layer of 200-450 MB per CLI and 1.9 GB for OpenHands, one to two minutes per
trial): marked `harness`: `make test`
deselects it, .ci/run runs it. Run by hand:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_harness \\
        .venv/bin/python -m pytest -q -p no:cacheprovider -m harness -s \\
        tests/evaluation/test_harbor_cli_rerun.py
"""

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.evaluation import verification_support as vs
from tests.evaluation.stub_model import StubModel, bash_reply, finish_reply

pytestmark = [
    pytest.mark.docker, pytest.mark.harness,
]

REPO = Path(__file__).resolve().parents[2]
CT = "ct-abnormality-classification/synthetic_01"
CT_DIR = REPO / "tasks" / CT
SITE_KEY = "sk-site-only-9123"
LINE_RE = re.compile(r"(EGRESS|GATEWAY) (\S+) (\S+?)(?:\\n|\n|\s|$)")
# name -> (version, provider prefix of the model, the endpoint's API format, the API path)
HARNESSES = {
    "claude-code": ("2.1.332", "anthropic", "anthropic", "/messages"),
    "codex": ("0.171.0", "openai", "openai", "/responses"),
    "copilot-cli": ("1.0.102", "openai", "openai", "/chat/completions"),
    "openhands": ("1.6.0", "openai", "openai", "/chat/completions"),
}
TIMINGS: dict = {}

# Run inside the task container by the CLI's shell tool: finds the gateway the CLI was given (in
# its process's environment), probes, prints one line each.
PROBE = r'''
import glob, re, socket, sys, urllib.error, urllib.request
print()
base = None
for path in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        m = re.search(rb"(http://[0-9.]+:8080)", open(path, "rb").read())
    except OSError:
        continue
    if m:
        base = m.group(1).decode()
        break
print("GATEWAY base", base)
host, port = base.split("//")[1].split(":")
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
probe.connect((host, int(port)))
own = probe.getsockname()[0]
api_path, fmt = sys.argv[2], sys.argv[3]
targets = sys.argv[4:] + [own.rsplit(".", 1)[0] + ".1:" + sys.argv[1], host + ":22",
                          host + ":80", "registry.npmjs.org:443", "pypi.org:443"]
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
                                                         "Authorization": "Bearer agent-own",
                                                         "x-api-key": "agent-own"})
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

if fmt == "anthropic":
    body = b'{"model": "stub-direct", "max_tokens": 10, "messages": [{"role": "user", "content": "ping"}]}'
elif api_path == "/responses":
    body = b'{"model": "stub-direct", "input": "ping"}'
else:
    body = b'{"model": "stub-direct", "messages": [{"role": "user", "content": "ping"}]}'
print("GATEWAY GET_models", call("GET", "/v1/models"))
print("GATEWAY POST_embeddings", call("POST", "/v1/embeddings", b"{}"))
print("GATEWAY proxy_line", raw("GET http://1.1.1.1/ HTTP/1.1"))
print("GATEWAY CONNECT", raw("CONNECT 1.1.1.1:443 HTTP/1.1"))
print("GATEWAY POST_model", call("POST", "/v1" + api_path, body))
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
    return cfg[0].get("Gateway") or "172.17.0.1"


@pytest.fixture(scope="module")
def cli_layers(harbor_ready):
    """Every CLI's harness layer (cached: seconds when built; the first build runs npm ci)."""
    from evaluation import runner

    for name in HARNESSES:
        if runner.harness_problem(name):
            done = subprocess.run(["scripts/build-images", "--harness", name], cwd=REPO,  # noqa: S603
                                  capture_output=True, text=True, timeout=1800, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
    yield
    if TIMINGS:
        print("\nre-run wall time per trial:", json.dumps(TIMINGS, indent=1))


@pytest.mark.parametrize("plan", ["oracle", "wrong"])
@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_cli_rerun_through_the_gateway(harness, plan, settings, cli_layers, tmp_path):
    """S11: each CLI, in the task container, reaches only its model API through the gateway;
    the oracle plan grades 1, the wrong plan 0."""
    from evaluation import agents, runner

    version, provider, api_format, api_path = HARNESSES[harness]
    bridge = _bridge_gateway()
    stub = StubModel({"stub-direct": ["pong"]}).start()
    outside = ["1.1.1.1:80", f"{bridge}:{stub.port}", f"127.0.0.1:{stub.port}"]
    first = []
    if plan == "oracle" and harness == "openhands":
        # OpenHands' bash tool types the command into tmux and returns at the first prompt
        # (a here-document's `cat` gives one back before the probe has run) and mangles a line
        # of several KB: the probe is written with its file editor first, as OpenHands would.
        first = [{"content": "writing the probe", "tool_calls": [
            {"name": "str_replace_editor",
             "arguments": {"command": "create", "path": "/tmp/probe.py", "file_text": PROBE,
                           "security_risk": "LOW"}}]}]
        command = (f"python3 /tmp/probe.py {stub.port} {api_path} {api_format} "
                   f"{' '.join(outside)}; " + _write(_answer(right=True)))
    elif plan == "oracle":
        command = ("cat > /tmp/probe.py <<'PROBE_EOF'\n" + PROBE + "\nPROBE_EOF\n"
                   f"python3 /tmp/probe.py {stub.port} {api_path} {api_format} "
                   f"{' '.join(outside)}; " + _write(_answer(right=True)))
    else:
        command = _write(_answer(right=False))
    model = f"stub-{harness}-{plan}"
    stub.scripts[model] = [*first, bash_reply(command, "carrying out the plan"),
                           finish_reply() if harness == "openhands" else "Done."]
    endpoint = {"base_url": f"http://{bridge}:{stub.port}/v1", "key_secret": "STUB",
                "api_format": api_format}
    if api_format == "anthropic":
        endpoint.update(key_env="ANTHROPIC_API_KEY", auth_header="x-api-key")
    else:
        endpoint.update(key_env="OPENAI_API_KEY")
    settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {f"{provider}/{model}": endpoint}
    settings.VERIFICATION_AGENT_SECRETS = {"STUB": SITE_KEY}
    settings.VERIFICATION_HARBOR_AGENTS = {harness: [version]}
    job = f"{vs.RUN_PREFIX}{harness[:5]}-{plan}"
    try:
        agent, why = agents.resolve_site_agent(
            harness, harness_version=version,
            agent_settings={"harbor_agent": harness, "model_name": f"{provider}/{model}",
                            "kwargs": {"base_url": "http://203.0.113.9/v1",
                                       "api_key": "sk-submitters-own"}})
        assert agent is not None, why
        t0 = time.monotonic()
        hb = agents.run_harbor_agent(agent, CT_DIR, job_id=job, attempt=1, attempts=1,
                                     work_dir=tmp_path)
        seconds = time.monotonic() - t0
    finally:
        stub.stop()
    report = f"{hb.log_tail}\n{hb.trials}\n{hb.gateway_log}\n{stub.paths()}"
    assert hb.returncode == 0 and len(hb.trials) == 1, report
    trial = hb.trials[0]
    assert trial.exception_type is None, report
    # Harbor records what the version command printed ("OpenHands version: 1.6.0")
    assert (trial.agent_name, runner.plain_version(trial.agent_version)) == (harness, version), \
        report
    assert stub.count(model) >= 2, report  # the command, then its result back to the model
    assert stub.authorizations() <= {f"Bearer {SITE_KEY}", SITE_KEY}, stub.authorizations()
    cmdline = " ".join(hb.cmd)
    assert "203.0.113.9" not in cmdline and "sk-submitters-own" not in cmdline
    assert SITE_KEY not in cmdline and "skip_install=true" in cmdline
    served = [e for e in hb.gateway_log if e.get("status") == 200]
    assert {e["path"] for e in served} == {api_path}, hb.gateway_log

    if plan == "oracle":
        seen = "\n".join(stub.texts(model)).replace("\\\\n", "\n").replace("\\n", "\n")
        lines = LINE_RE.findall(seen)
        egress = {t: v for kind, t, v in lines if kind == "EGRESS"}
        gw = {t: v.strip('"\\') for kind, t, v in lines if kind == "GATEWAY"}
        assert len(egress) == len(outside) + 5, seen[-4000:]
        assert set(egress.values()) == {"BLOCKED"}, egress
        assert (gw["GET_models"], gw["POST_embeddings"]) == ("405", "404"), gw
        assert (gw["proxy_line"], gw["CONNECT"]) == ("405", "405"), gw
        assert gw["POST_model"] == "200", gw
        assert stub.count("stub-direct") == 1

    # The plan's own answer was collected (a failing grade is the wrong answer, not no answer).
    written = [json.loads(p.read_text()) for p in trial.artifacts_dir.rglob("submission.json")]
    assert written == [json.loads(_answer(right=plan == "oracle"))], report
    image, _built = runner.build_task_image(CT_DIR)
    verdict = runner.run_verifier(CT_DIR, job_id=f"{job}-grade",
                                  artifacts_dir=trial.artifacts_dir, image=image)
    assert verdict.reward == (1.0 if plan == "oracle" else 0.0), verdict.result.text
    assert vs.labelled_containers(job) == []
    TIMINGS[f"{harness} {plan}"] = {"wall_s": round(seconds, 1), "trial_s": trial.seconds,
                                    "agent_s": trial.agent_seconds}
    print(f"\n{harness} {plan}: harbor run {seconds:.1f} s wall, trial {trial.seconds:.1f} s, "
          f"agent {trial.agent_seconds:.1f} s")
