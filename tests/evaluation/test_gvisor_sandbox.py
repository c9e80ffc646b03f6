"""gVisor in use (matrix row S15): on the engine scripts/ensure-docker sets up (runsc from
bookworm-backports, registered as `runsc` and `runsc-hostinet`), VERIFICATION_SANDBOX_RUNTIME=auto
picks gVisor, and the kernel a replay's, a re-grade's and a command agent re-run's container see
is gVisor's, proved from inside; a production worker without it is unhealthy unless the operator
opts out by name.

A Harbor re-run under gVisor is proved from inside too, by the installed-agent re-run's egress
test (tests/evaluation/test_harbor_installed_rerun.py: mini-swe-agent under runsc-hostinet);
terminus-2, on the runc list, sees the host's kernel (test_harbor_rerun.py).
"""

import os
import shutil
import uuid

import pytest

from tests.evaluation import verification_support as vs

pytestmark = [pytest.mark.docker]

CT = "ct-abnormality-classification/synthetic_01"
# What a command prints from inside: dmesg's first line (gVisor's own boot banner) and uname -r.
KERNEL_CMD = "dmesg 2>/dev/null | head -1; uname -r"


def _saw_gvisor(text: str) -> bool:
    return "Starting gVisor" in text and os.uname().release not in text


def test_s15_replay_and_regrade_run_on_gvisors_kernel(docker_engine, settings, tmp_path):
    """S15: with VERIFICATION_SANDBOX_RUNTIME=auto the engine's runsc passes the GNU coreutils
    probe and is chosen; a replay of recorded commands runs in it (its dmesg is gVisor's boot
    banner, its kernel release is not the host's) and its output grades 1; the re-grade's
    verifier container reads the submitted output on gVisor's kernel too; the isolation words
    say gVisor."""
    from evaluation import agents, runner

    settings.VERIFICATION_SANDBOX_RUNTIME = "auto"
    probe = runner.runtime_probe(runner.GVISOR_RUNTIME)
    assert probe["works"], (
        f"runsc does not work here ({probe['detail'][-300:]}): run scripts/ensure-docker as root "
        "(it installs runsc from bookworm-backports)")
    assert runner.sandbox_runtime() == runner.GVISOR_RUNTIME
    assert runner.GVISOR_HOSTINET_RUNTIME in runner.engine_runtimes()
    assert runner.networked_runtime(runner.GVISOR_RUNTIME) == runner.GVISOR_HOSTINET_RUNTIME

    oracle = vs.oracle_outputs(tmp_path / "oracle", only=[CT])[CT]
    answer = (oracle / "workspace" / "submission.json").read_text()
    trajectory = vs.atif("claude-code", [
        ("Bash", {"command": f"{KERNEL_CMD}; ls -l /workspace/data; stat /workspace/data"}),
        ("Write", {"file_path": "/workspace/submission.json", "content": answer})])
    tdir = vs.REPO / "tasks" / CT
    out = tmp_path / "replay"
    run = agents.run_site_agent(agents.SiteAgent(kind="replay", name="replay"), tdir,
                                job_id=f"{vs.RUN_PREFIX}gv{uuid.uuid4().hex[:6]}", attempt=1,
                                out_dir=out, trajectory=trajectory)
    assert run.result.ok, run.result.text
    assert _saw_gvisor(run.result.text), run.result.text

    # The re-grade: the task's own verifier, with one line more that prints its kernel.
    graded = tmp_path / "task"
    shutil.copytree(tdir, graded)
    test_sh = graded / "tests" / "test.sh"
    lines = test_sh.read_text().split("\n", 1)
    test_sh.write_text(f"{lines[0]}\n{KERNEL_CMD}\n{lines[1]}")
    v = runner.run_verifier(graded, job_id=f"{vs.RUN_PREFIX}gv{uuid.uuid4().hex[:6]}",
                            artifacts_dir=out, image=runner.task_image_tag(tdir))
    assert v.passed and v.reward == 1.0, (v.error, v.result.text)
    assert _saw_gvisor(v.result.text), v.result.text
    assert runner.isolation(runner.sandbox_runtime()).startswith(
        "gVisor (runsc): a kernel of its own; ")

    # A re-run by a command agent (the site's install script and run command) on the same task.
    agent = agents.SiteAgent(kind="command", name="command", install="true",
                             run=f"{KERNEL_CMD}; printf '%s' '{answer}' > {{workdir}}/"
                                 "submission.json")
    rerun_out = tmp_path / "rerun"
    rerun = agents.run_site_agent(agent, tdir, job_id=f"{vs.RUN_PREFIX}gv{uuid.uuid4().hex[:6]}",
                                  attempt=1, out_dir=rerun_out)
    assert rerun.result.ok, rerun.result.text
    assert _saw_gvisor(rerun.result.text), rerun.result.text
    v = runner.run_verifier(tdir, job_id=f"{vs.RUN_PREFIX}gv{uuid.uuid4().hex[:6]}",
                            artifacts_dir=rerun_out)
    assert v.reward == 1.0, v.result.text


def test_s15_production_worker_without_gvisor_is_unhealthy_unless_opted_out(
        docker_engine, settings):
    """S15: a production worker (DEBUG off) whose replays, re-grades and re-runs would run on
    runc (VERIFICATION_SANDBOX_RUNTIME=default here) fails worker_health with a named check that
    says what to do, so it claims no job; VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR=1 accepts it
    (a warning only); under DEBUG it is a warning; with gVisor working the check passes."""
    from evaluation.health import worker_health

    settings.DEBUG = False
    settings.VERIFICATION_SANDBOX_RUNTIME = "default"
    report = worker_health()
    assert not report["healthy"]
    checks = {c["name"]: c for c in report["checks"]}
    check = checks["kernel isolation (gVisor)"]
    assert not check["ok"]
    assert check["detail"].startswith("no kernel isolation beyond namespaces: replays, "
                                      "re-grades and re-runs run under runc")
    assert "VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR=1" in check["detail"]
    assert [p for p in report["problems"] if p.startswith("kernel isolation (gVisor): ")]

    settings.VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR = True
    report = worker_health()
    assert "kernel isolation (gVisor)" not in {c["name"] for c in report["checks"]}
    assert not any(p.startswith("kernel isolation") for p in report["problems"])
    assert any(w.startswith("no kernel isolation beyond namespaces") for w in report["warnings"])

    settings.VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR = False
    settings.DEBUG = True
    report = worker_health()
    assert "kernel isolation (gVisor)" not in {c["name"] for c in report["checks"]}
    assert any(w.startswith("no kernel isolation beyond namespaces") for w in report["warnings"])

    settings.DEBUG = False
    settings.VERIFICATION_SANDBOX_RUNTIME = "auto"
    report = worker_health()
    check = {c["name"]: c for c in report["checks"]}["kernel isolation (gVisor)"]
    assert check["ok"] and check["detail"].startswith("gVisor (runsc)"), check
    assert not any("no kernel isolation" in w for w in report["warnings"])
