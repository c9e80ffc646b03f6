"""The second isolation boundary: on the engine scripts/ensure-docker sets up, a
container's uid 0 is not the host's uid 0 (user-namespace remapping), seen from inside a replay
container; each kind of container's isolation is stated in words; and worker_health warns where
the kernel is shared."""

import os
import uuid

import pytest

from evaluation import runner
from evaluation.runner.base import base_image_tag

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("sandboxed", [False, True], ids=["runc", "sandbox-runtime"])
def test_s13_container_root_is_an_unprivileged_host_uid(docker_engine, sandboxed):
    """S13: the engine remaps user namespaces. From inside a replay container under runc (the
    agent user) /proc/self/uid_map is not the identity map: container uid 0 is host uid 100000
    (dockremap's range); under the sandbox runtime (gVisor, whose own kernel shows its own map)
    too, a file the agent writes in its workspace belongs, on the host, to an unprivileged uid
    (the engine's offset + the agent's uid)."""
    mapping = runner.user_mapping()
    assert mapping.mode == "userns-remap", (
        f"{mapping.describe()}: run scripts/ensure-docker as root (it sets userns-remap)")
    assert mapping.uid_offset >= 65536
    runtime = runner.sandbox_runtime() if sandboxed else None
    run = runner.ContainerRun(base_image_tag(), purpose="replay",
                              job_id=f"uidmap-{os.getpid()}-{uuid.uuid4().hex[:6]}",
                              runtime=runtime, seed_workspace=False)
    with run as r:
        res = r.exec("cat /proc/self/uid_map; id -u; touch /workspace/mine", timeout_s=60)
        assert res.exit_code == 0, res.text
        volume = runner.client().volumes.get(r._volume_names["/workspace"])
        owner = os.stat(os.path.join(volume.attrs["Mountpoint"], "mine")).st_uid
    first_map = res.text.split("\n")[0].split()
    if runtime is None:
        assert first_map == ["0", str(mapping.uid_offset), "65536"], res.text
    agent_uid = int(res.text.split("\n")[1])
    assert agent_uid == runner.AGENT_UID and owner == mapping.uid_offset + agent_uid != 0


def test_s14_the_isolation_of_each_run_is_stated_and_a_shared_kernel_is_a_warning(
        docker_engine):
    """S14: what separated a run from the host is stated in words (the trial page shows it per
    check), and worker_health warns that the kernel is shared when gVisor does not work here
    (Debian bookworm's runsc answers GNU statx with EINVAL), without calling the worker
    unhealthy."""
    from evaluation.health import worker_health

    words = runner.isolation(runner.sandbox_runtime())
    assert "container uid 0 is host uid 100000" in words
    report = worker_health()
    if runner.sandbox_runtime() == runner.GVISOR_RUNTIME:
        assert "gVisor (runsc)" in words
        assert not any("no kernel isolation" in w for w in report["warnings"])
    else:
        assert "runc: the host's kernel, namespaces only" in words
        assert any(w.startswith("no kernel isolation beyond namespaces")
                   for w in report["warnings"]), report["warnings"]
    assert not any("user-namespace" in w for w in report["warnings"])
