"""The runner against the REAL Docker engine and the real base image (reliability matrix S1-S8).

Each test asserts a containment *and* that it is reported with its reason. Run:
    DEBUG=1 .venv/bin/python -m pytest tests/evaluation/test_runner_docker.py -q -p no:django
Without an engine these fail with a clear message unless ALLOW_NO_DOCKER=1 (tests/docker_gate.py).
"""

import json
import resource
import textwrap
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from tests.evaluation.judge_standin import JudgeStandIn, docker_bridge_ip

pytestmark = pytest.mark.docker


def _job():
    return f"t{uuid.uuid4().hex[:10]}"


def _runner():
    from evaluation import runner

    return runner


def _run(base_image, cmd, **limits):
    runner = _runner()
    timeout = limits.pop("timeout_s", 30)
    lim = runner.Limits(**{"memory_mb": 512, "pids": 128, "timeout_s": timeout, **limits})
    with runner.ContainerRun(base_image, purpose="test", job_id=_job(), limits=lim) as run:
        return run.exec(cmd)


# -- S2: network ---------------------------------------------------------------------------------
PROBE = textwrap.dedent(
    """
    import json, socket, time
    out = {}
    for host, port in [("1.1.1.1", 53), ("169.254.169.254", 80), ("deb.debian.org", 80)]:
        t = time.time()
        try:
            socket.create_connection((host, port), timeout=2).close()
            out[host] = ["connected", time.time() - t]
        except OSError as exc:
            out[host] = [type(exc).__name__ + ": " + str(exc), time.time() - t]
    ifaces = sorted(name for _, name in socket.if_nameindex())
    print(json.dumps({"probes": out, "ifaces": ifaces}))
    """
)


def test_container_has_no_network(base_image):
    """S2: no egress (public address, cloud metadata, DNS name): each connection fails within
    2 s and the container has only a loopback interface."""
    res = _run(base_image, ["python3", "-c", PROBE])
    assert res.exit_code == 0, res.text
    data = json.loads(res.text.strip().splitlines()[-1])
    for host, (outcome, elapsed) in data["probes"].items():
        assert outcome != "connected", f"{host} reachable from the container"
        assert elapsed < 2.0, f"{host}: failure took {elapsed:.2f}s (must fail fast)"
    assert data["ifaces"] == ["lo"], data["ifaces"]


# -- S3: privileges ------------------------------------------------------------------------------
def test_non_root_no_capabilities_read_only_rootfs(base_image):
    """S3: uid 1000, no capabilities, no-new-privileges, read-only root file system, no Docker
    socket; only the scratch directories are writable."""
    res = _run(
        base_image,
        "id -u; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status; "
        "touch /etc/probe 2>&1 || true; touch /usr/probe 2>&1 || true; "
        "test -e /var/run/docker.sock && echo SOCKET || echo no-socket; "
        "touch /tmp/ok && touch /workspace/ok && echo writable-scratch",
    )
    assert res.exit_code == 0, res.text
    lines = res.text.splitlines()
    assert lines[0] != "0" and int(lines[0]) == 1000
    caps = dict(line.split(":\t") for line in lines if line.startswith(("Cap", "NoNew")))
    assert caps["CapEff"] == caps["CapPrm"] == caps["CapBnd"] == "0000000000000000"
    assert caps["NoNewPrivs"] == "1"
    assert res.text.count("Read-only file system") == 2
    assert "no-socket" in res.text and "writable-scratch" in res.text


# -- S4: fork bomb --------------------------------------------------------------------------------
def test_fork_bomb_contained_by_pids_limit(base_image):
    """S4: a fork bomb hits the pids limit, is reported as such, and the engine still runs the
    next job."""
    t0 = time.time()
    res = _run(
        base_image, "bomb() { bomb | bomb & }; bomb; sleep 60", pids=64, memory_mb=1024, timeout_s=8
    )
    assert res.pids_exhausted, res.reason
    assert res.status == "process_limit"
    assert "process limit exceeded" in res.reasons
    assert time.time() - t0 < 40
    # The engine and the next job are fine.
    after = _run(base_image, "echo alive")
    assert after.ok and after.text.strip() == "alive"


# -- S5: memory hog ------------------------------------------------------------------------------
def test_memory_hog_oom_killed_and_reported(base_image):
    """S5: a memory hog is OOM-killed at its limit and reported as a memory-limit failure."""
    hog = "x = []\nwhile True:\n    x.append(bytearray(32 << 20))\n"  # grows past 2x the limit
    res = _run(base_image, ["python3", "-c", hog], memory_mb=128, timeout_s=60)
    assert res.oom_killed
    assert res.status == "memory_limit"
    assert res.reason.startswith("memory limit exceeded")
    assert not res.timed_out


# -- S7: endless loop ----------------------------------------------------------------------------
def test_endless_loop_killed_and_reported_as_timeout(base_image):
    """S7: an endless loop is killed at the time limit, reported as a timeout, and its container
    and volume are gone."""
    runner = _runner()
    job = _job()
    lim = runner.Limits(timeout_s=3, memory_mb=256)
    with runner.ContainerRun(base_image, purpose="test", job_id=job, limits=lim) as run:
        res = run.exec("while :; do :; done")
        name = run.name
    assert res.timed_out and res.status == "time_limit"
    assert res.reason == "time limit exceeded"
    assert 3 <= res.duration_s < 10
    client = runner.client()
    assert not client.containers.list(all=True, filters={"name": name}), "container left behind"
    assert not client.volumes.list(filters={"label": f"job={job}"}), "volume left behind"


# -- S8: log flood -------------------------------------------------------------------------------
def test_log_flood_truncated_with_marker_and_bounded_memory(base_image):
    """S8: a 512 MB log flood is kept to the cap with a truncation marker; the runner's memory
    stays bounded."""
    cap = 1 << 20
    flood = 512 << 20
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    res = _run(
        base_image, f"head -c {flood} /dev/zero | tr '\\0' x", timeout_s=120, log_cap_bytes=cap
    )
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert res.exit_code == 0, res.reason
    assert res.truncated
    assert res.output_bytes == flood
    assert len(res.output) < cap + 200
    assert res.output[:cap] == b"x" * cap
    assert b"output truncated by the HealthAgentBench runner" in res.output[cap:]
    assert str(flood - cap).encode() in res.output[cap:]
    assert (rss_after - rss_before) < 64 * 1024, f"runner RSS grew by {rss_after - rss_before} KiB"


# -- reaping and deterministic names --------------------------------------------------------------
def test_stale_containers_reaped_by_label(base_image):
    runner = _runner()
    job = _job()
    lim = runner.Limits(timeout_s=30, memory_mb=128)
    # A worker that died mid-run: entered, never exited.
    crashed = runner.ContainerRun(base_image, purpose="test", job_id=job, limits=lim).__enter__()
    client = runner.client()
    assert client.containers.get(crashed.name).labels["app"] == "healthagentbench"
    # A retry with the same deterministic name replaces it.
    retry = runner.ContainerRun(base_image, purpose="test", job_id=job, limits=lim).__enter__()
    assert retry.container.id != crashed.container.id
    time.sleep(1.5)
    removed = runner.reap_stale(timedelta(seconds=1), job=job)
    assert removed["containers"] == [retry.name]
    assert len(removed["volumes"]) == 1
    assert not client.containers.list(all=True, filters={"label": f"job={job}"})
    assert not client.volumes.list(filters={"label": f"job={job}"})
    # A fresh container is not reaped.
    with runner.ContainerRun(base_image, purpose="test", job_id=job, limits=lim) as fresh:
        assert runner.reap_stale(timedelta(minutes=5), job=job)["containers"] == []
        assert fresh.container.status in ("created", "running")


# -- copy out: links refused (S1/S9 hygiene) ------------------------------------------------------
def test_copy_out_refuses_links_and_oversize(base_image, tmp_path):
    runner = _runner()
    lim = runner.Limits(timeout_s=30, memory_mb=256)
    with runner.ContainerRun(base_image, purpose="test", job_id=_job(), limits=lim) as run:
        res = run.exec(
            "mkdir -p out && echo ok > out/a.txt && ln -s /etc/passwd out/link && "
            "head -c 3000000 /dev/zero > big.bin"
        )
        assert res.ok, res.text
        with pytest.raises(runner.UnsafeArchiveError):
            run.get_path("/workspace/out", tmp_path / "o1")
        with pytest.raises(runner.OutputTooLargeError):
            run.get_path("/workspace/big.bin", tmp_path / "o2", max_bytes=1 << 20)
        with pytest.raises(FileNotFoundError):
            run.get_path("/workspace/nothing", tmp_path / "o3")
    assert not (tmp_path / "o1" / "out" / "link").exists()


# -- two-container grading on a miniature task ----------------------------------------------------
def _mini_task(root: Path) -> Path:
    task = root / "mini-category" / "mini_task"
    (task / "environment" / "data").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "task.toml").write_text(
        textwrap.dedent(
            """
            version = "1.0"
            [metadata]
            category = "mini-category"
            submission_path = "/workspace/submission.json"
            synthetic = true
            [agent]
            timeout_sec = 60
            [verifier]
            timeout_sec = 60
            [environment]
            cpus = 1
            memory_mb = 512
            storage_mb = 64
            """
        )
    )
    (task / "environment" / "Dockerfile").write_text(
        "FROM healthagentbench/base:bookworm\nCOPY --chown=1000:1000 data/ /workspace/data/\n"
    )
    (task / "environment" / "data" / "question.txt").write_text("what is 6 * 7?\n")
    (task / "tests" / "answer.json").write_text(
        '{"value": 42, "secret": "' + uuid.uuid4().hex + '"}'
    )
    (task / "tests" / "test.sh").write_text(
        textwrap.dedent(
            """\
            #!/bin/bash
            python3 - <<'EOF'
            import json
            answer = json.load(open("/tests/answer.json"))
            try:
                sub = json.load(open("/workspace/submission.json"))
                ok = sub.get("value") == answer["value"]
            except (OSError, ValueError):
                ok = False
            json.dump({"reward": 1.0 if ok else 0.0}, open("/logs/verifier/reward.json", "w"))
            EOF
            """
        )
    )
    (task / "solution" / "solve.sh").write_text(
        "#!/bin/bash\ncat data/question.txt >/dev/null\n"
        "echo '{\"value\": 42}' > /workspace/submission.json\n"
    )
    return task


def test_oracle_passes_nop_fails_and_answer_stays_out_of_agent(base_image, tmp_path):
    """S1: the agent container holds no ground truth (no /tests, no answer file, the secret
    found nowhere on its file system or in its environment); the verifier alone receives it."""
    runner = _runner()
    task = _mini_task(tmp_path / "tasks")
    tag, built = runner.build_task_image(task)
    assert runner.build_task_image(task) == (tag, False), "second build must hit the cache"
    secret = json.loads((task / "tests" / "answer.json").read_text())["secret"]
    job = _job()

    oracle = runner.run_agent(
        task,
        job_id=job,
        command="bash /solution/solve.sh",
        out_dir=tmp_path / "oracle",
        copy_in={"/solution": task / "solution"},
    )
    assert oracle.result.ok, oracle.result.reason
    assert oracle.collected == ["/workspace/submission.json"]
    v = runner.run_verifier(task, job_id=job, artifacts_dir=tmp_path / "oracle")
    assert v.passed, (v.error, v.result.text)

    nop = runner.run_agent(task, job_id=job, attempt=2, command=None, out_dir=tmp_path / "nop")
    assert nop.missing == ["/workspace/submission.json"]
    v2 = runner.run_verifier(task, job_id=job, attempt=2, artifacts_dir=tmp_path / "nop")
    assert v2.reward == 0.0 and not v2.passed

    probe = runner.run_agent(
        task,
        job_id=job,
        attempt=3,
        out_dir=tmp_path / "probe",
        command=f"grep -rIl --exclude-dir=proc --exclude-dir=sys '{secret}' / 2>/dev/null; "
        "ls /tests 2>&1; find / -xdev -name 'answer*' 2>/dev/null; env",
    )
    assert secret not in probe.result.text
    assert "answer.json" not in probe.result.text
    assert "No such file or directory" in probe.result.text


def test_verifier_has_no_network_and_reaches_only_the_judge_gateway(base_image, tmp_path):
    """The verifier runs with network none; the judge gateway (on the egress network) is the
    one thing it reaches, through a Unix socket; the stub judge it forwards to is not
    reachable from the verifier directly, nor is anything else."""
    from evaluation.judge.client import PROMPT_VERSION, SYSTEM_PROMPT

    runner = _runner()
    task = _mini_task(tmp_path / "tasks")
    with JudgeStandIn(host=docker_bridge_ip(), rule="always-zero") as stub:
        (task / "tests" / "test.sh").write_text(textwrap.dedent(f"""\
            #!/bin/bash
            python3 - <<'EOF'
            import json, os, socket, sys
            sys.path.insert(0, "/opt/hab")
            from evaluation.judge.client import ChatJudge
            out = {{}}
            judge = ChatJudge(os.environ["XRAY_JUDGE_URL"], "m", timeout_s=20, retries=0)
            out["judge"] = float(judge.ask("Normal.", "Normal.", []) == 0)
            for name, (host, port) in {{"stub": ({stub.url.split('//')[1].split(':')[0]!r},
                                                  {stub.port}),
                                       "internet": ("1.1.1.1", 53),
                                       "metadata": ("169.254.169.254", 80)}}.items():
                try:
                    socket.create_connection((host, port), timeout=2).close(); out[name] = 1.0
                except OSError:
                    out[name] = 0.0
            out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
            json.dump({{"reward": 1.0, **out}}, open("/logs/verifier/reward.json", "w"))
            EOF
            """))
        runner.build_task_image(task)
        spec = runner.JudgeGateway(
            upstream_url=f"{stub.url}/v1/chat/completions",
            model="m", api_key="sk-x", prompt_version=PROMPT_VERSION,
            system_prompt=SYSTEM_PROMPT)
        v = runner.run_verifier(task, job_id=_job(), artifacts_dir=tmp_path / "none", judge=spec)
    assert v.rewards == {"reward": 1.0, "judge": 1.0, "stub": 0.0, "internet": 0.0,
                         "metadata": 0.0, "interfaces": ["lo"]}, (v.error, v.result.text)
    assert len(stub.requests) == 1 and [e["hit"] for e in v.judge_log] == [False]


def test_engine_status_reports_versions(docker_engine):
    assert docker_engine["reachable"] and docker_engine["version"]
    assert docker_engine["runc_version"]
    assert docker_engine["runc_patched"] is True


def test_building_a_task_image_never_untags_another_digest(base_image, tmp_path):
    """Two digests of one task's image (two benchmark versions, task sources or checkouts) live
    side by side: a build leaves the other tag alone, and only the explicit prune untags what no
    task package uses, keeping an image a container still runs."""
    from evaluation.runner.engine import client

    runner = _runner()
    repo = f"{runner.TASK_IMAGE_REPO}/zz-prune-test/{_job()}"
    tags = {}
    for name in ("old", "new", "busy"):
        ctx = tmp_path / name
        ctx.mkdir()
        (ctx / "Dockerfile").write_text(f"FROM {base_image}\nRUN echo {name} > /etc/hab-which\n")
        tags[name] = f"{repo}:{name}"
        runner.image_build(ctx, tags[name], labels={runner.LABEL_APP: runner.APP_LABEL})
    try:
        assert all(runner.image_exists(t) for t in tags.values())
        lim = runner.Limits(memory_mb=256, pids=64, timeout_s=30)
        with runner.ContainerRun(tags["busy"], purpose="test", job_id=_job(), limits=lim) as run:
            assert run.exec(["cat", "/etc/hab-which"]).output.decode().strip() == "busy"
            removed = runner.prune_task_images({tags["new"]}, repos={repo})
            assert removed == [tags["old"]]
            assert runner.image_exists(tags["new"]) and runner.image_exists(tags["busy"])
        assert not runner.image_exists(tags["old"])
        assert runner.prune_task_images({tags["new"]}, repos={repo}) == [tags["busy"]]
    finally:
        for tag in tags.values():
            if runner.image_exists(tag):
                client().images.remove(tag, force=True)
