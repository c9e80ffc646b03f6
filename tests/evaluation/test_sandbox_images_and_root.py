"""Sandbox rows of the reliability matrix against the real Docker engine: images are the
maintainers' own and never pulled (S10)."""

import uuid

import pytest

pytestmark = pytest.mark.docker


def test_s10_images_are_local_digest_tagged_and_never_pulled(docker_engine, base_image):
    """S10: a container starts only from an image already built on this engine (an image name
    a submitter could choose is never pulled: it is an infrastructure error naming
    `make images`); task images are tagged by the digest of their build context and the base
    image; the engine's runc carries the CVE-2024-21626 fix (engine_status, the worker's health
    check)."""
    from evaluation import runner
    from evaluation.task_specs import discover_task_packages
    from tests.tasks.task_package_paths import TASKS_DIR

    c = runner.client()
    foreign = f"docker.io/library/hab-never-pulled-{uuid.uuid4().hex[:8]}:latest"
    with pytest.raises(runner.InfrastructureError, match="is missing: run `make images`"):
        with runner.ContainerRun(foreign, purpose="test", job_id=f"s10{uuid.uuid4().hex[:6]}"):
            pass
    # Nothing by that (random) name was pulled or built. (Not "the engine's image list is
    # unchanged": the engine is shared with other test processes, and Harbor builds its own.)
    assert c.images.list(name=foreign.rsplit(":", 1)[0]) == [], "the image was pulled or built"
    assert not any(foreign.removeprefix("docker.io/library/") in t
                   for i in c.images.list(all=True) for t in i.tags)
    package = discover_task_packages(TASKS_DIR)[0]
    tag = runner.task_image_tag(package)
    repo, digest = tag.rsplit(":", 1)
    assert repo == runner.task_image_repo(package) and len(digest) == 24
    assert runner.task_image_tag(package) == tag  # stable: the same context, the same tag
    assert docker_engine["runc_patched"] is True, docker_engine["runc_version"]


CT = "ct-abnormality-classification/synthetic_01"


def test_s3_the_runner_refuses_root_from_a_task_or_a_caller(docker_engine, tmp_path):
    """S3: a task.toml asking for root (by name or uid 0) is refused by the runner too, before
    any container exists; a caller asking ContainerRun for root is refused."""
    import shutil

    from evaluation import runner
    from tests.evaluation.verification_support import REPO

    task = tmp_path / "ct-abnormality-classification" / "synthetic_01"
    shutil.copytree(REPO / "tasks" / CT, task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\n", '[agent]\nuser = "0:0"\n', 1))
    job = f"s3{uuid.uuid4().hex[:8]}"
    with pytest.raises(runner.RootUserRefused, match="is root"):
        runner.run_agent(task, job_id=job, command="id", out_dir=tmp_path / "out")
    with pytest.raises(runner.RootUserRefused):
        runner.ContainerRun(base_image_name(), purpose="test", job_id=job, user="root")
    assert not runner.client().containers.list(all=True, filters={"label": f"job={job}"})


def base_image_name():
    from evaluation import runner

    return runner.base_image_tag()


def test_s3_replayed_commands_run_under_gvisor(docker_engine, settings, tmp_path):
    """S3 (matrix design invariant 6, runsc where possible): with runsc registered
    (scripts/ensure-docker does it), a replay of submitter-written commands runs in a gVisor
    sandbox (its kernel is gVisor's, not the host's), as the unprivileged user, and its output
    grades like under runc. The compatibility probe agrees with what it finds: VERIFICATION_
    SANDBOX_RUNTIME=auto picks runsc exactly when GNU coreutils work under it."""
    from evaluation import agents, runner
    from tests.evaluation import verification_support as vs

    assert runner.GVISOR_RUNTIME in runner.engine_runtimes(), (
        "the engine has no runsc runtime: run scripts/ensure-docker as root")
    oracle = vs.oracle_outputs(tmp_path / "oracle", only=[CT])[CT]
    answer = (oracle / "workspace" / "submission.json").read_text()
    trajectory = vs.atif("claude-code", [
        ("Bash", {"command": "id -u > /workspace/uid.txt; dmesg | head -1 > /workspace/kernel.txt"
                             "; uname -r >> /workspace/kernel.txt"}),
        ("Write", {"file_path": "/workspace/submission.json", "content": answer})])
    settings.VERIFICATION_SANDBOX_RUNTIME = "runsc"
    tdir = vs.REPO / "tasks" / CT
    out = tmp_path / "replay"
    run = agents.run_site_agent(agents.SiteAgent(kind="replay", name="replay"), tdir,
                                job_id=f"gv{uuid.uuid4().hex[:8]}", attempt=1, out_dir=out,
                                trajectory=trajectory)
    assert run.result.ok, run.result.text
    v = runner.run_verifier(tdir, job_id=f"gv{uuid.uuid4().hex[:8]}", artifacts_dir=out)
    assert v.passed, (v.error, v.result.text)
    # What the sandbox looked like from inside: copied out by a second gVisor run.
    with runner.ContainerRun(base_image_name(), purpose="test", job_id=f"gv{uuid.uuid4().hex[:6]}",
                             runtime="runsc") as probe:
        res = probe.exec("id -u; dmesg | head -1; uname -r")
    assert res.text.splitlines()[0] == "1000"
    assert "gVisor" in res.text, res.text
    probe_report = runner.runtime_probe("runsc")
    with runner.ContainerRun(base_image_name(), purpose="test", job_id=f"gv{uuid.uuid4().hex[:6]}",
                             runtime="runsc") as direct:
        coreutils_ok = direct.exec("ls / >/dev/null && stat /usr >/dev/null").exit_code == 0
    assert probe_report["listed"] and probe_report["works"] == coreutils_ok
    settings.VERIFICATION_SANDBOX_RUNTIME = "auto"
    assert runner.sandbox_runtime() == ("runsc" if coreutils_ok else None)
