"""Harbor's environment backends for the re-run (`harbor run --env <name>`), and which of the
site's guarantees each one keeps (docs/deploy.md, "Re-runs in Harbor's environments").

Only the re-run goes through Harbor; re-grades and replays always run on the worker's own engine
(runner.run_verifier, runner.run_agent). The table is what Harbor 0.26.0 declares for each backend
(harbor/environments/*: `capabilities` and `resource_capabilities`):

* ``local``: the containers run on the worker's own engine, so the site's compose overlay applies
  (its task image, its labels for the reaper, `network_mode: none` or the model gateway's
  internal network).
* ``no_network``: the backend can start the sandbox with no network (Harbor's `disable_internet`
  for a single-container task). The site then gives Harbor a copy of the task package whose
  `[environment] network_mode` is `no-network`, and Harbor refuses to start on a backend that
  cannot honour it.
* ``hard_limits``: CPU and memory are hard ceilings (cgroups), not only a sandbox size request.
* ``credentials``: the environment variables Harbor reads for the backend; the worker passes
  them from VERIFICATION_AGENT_SECRETS (by the same name) and nothing else of its environment.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from django.conf import settings


@dataclasses.dataclass(frozen=True)
class HarborBackend:
    name: str  # Harbor's own name (`--env`)
    local: bool
    no_network: bool
    hard_limits: bool
    credentials: tuple[str, ...] = ()


HARBOR_ENVIRONMENTS: dict[str, HarborBackend] = {b.name: b for b in (
    HarborBackend("docker", local=True, no_network=True, hard_limits=True),
    HarborBackend("daytona", local=False, no_network=True, hard_limits=False,
                  credentials=("DAYTONA_API_KEY", "DAYTONA_API_URL", "DAYTONA_TARGET")),
    HarborBackend("modal", local=False, no_network=True, hard_limits=True,
                  credentials=("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET")),
    HarborBackend("e2b", local=False, no_network=True, hard_limits=False,
                  credentials=("E2B_API_KEY",)),
    HarborBackend("runloop", local=False, no_network=True, hard_limits=False,
                  credentials=("RUNLOOP_API_KEY",)),
    # GKE disables the network only for compose tasks (Harbor: disable_internet=compose_mode);
    # the site's single-container tasks would run with the cluster's egress, so the re-run of a
    # harness that needs isolation is refused there.
    HarborBackend("gke", local=False, no_network=False, hard_limits=True,
                  credentials=("GCP_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS", "KUBECONFIG")),
)}


def harbor_backend() -> HarborBackend:
    """The configured backend (VERIFICATION_HARBOR_ENVIRONMENT); ValueError for a name the
    site has not vetted (Harbor knows more: their guarantees are not checked here)."""
    name = str(settings.VERIFICATION_HARBOR_ENVIRONMENT or "docker").strip().lower()
    backend = HARBOR_ENVIRONMENTS.get(name)
    if backend is None:
        raise ValueError(f"VERIFICATION_HARBOR_ENVIRONMENT={name!r} is not one of the backends "
                         f"the site vetted: {', '.join(HARBOR_ENVIRONMENTS)}")
    return backend


def harbor_environment_problem(*, in_container: bool) -> str:
    """Why the configured backend cannot re-run this harness with the site's guarantees ("" when
    it can). ``in_container``: a Harbor installed agent (its process runs in the task container
    and reaches the model only through the site's gateway on the worker's engine)."""
    try:
        backend = harbor_backend()
    except ValueError as exc:
        return str(exc)
    if backend.local:
        return ""
    if in_container:
        return (f"Harbor's {backend.name} backend cannot reach the site's model gateway: the "
                "agent would need the model key inside the sandbox, so the site re-runs "
                "installed agents only with --env docker")
    if not backend.no_network:
        return (f"Harbor's {backend.name} backend cannot start this task's sandbox with no "
                "network, which the re-run of a harness driving it from outside needs")
    return ""


def environment_args(backend: HarborBackend) -> list[str]:
    """`--env` and the `--ek key=value` options of VERIFICATION_HARBOR_ENVIRONMENT_KWARGS."""
    args = ["--env", backend.name]
    for key, value in sorted((settings.VERIFICATION_HARBOR_ENVIRONMENT_KWARGS or {}).items()):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(key)):
            raise ValueError(f"VERIFICATION_HARBOR_ENVIRONMENT_KWARGS: bad name {key!r}")
        args += ["--ek", f"{key}={value}"]
    return args


def environment_credentials(backend: HarborBackend) -> dict[str, str]:
    """The backend's credential variables, from VERIFICATION_AGENT_SECRETS (only those set)."""
    secrets = settings.VERIFICATION_AGENT_SECRETS or {}
    return {k: str(secrets[k]) for k in backend.credentials if secrets.get(k)}


def offline_task_copy(task_dir: Path, dest: Path) -> Path:
    """A copy of the task package whose baseline network is `no-network` (Harbor's
    [environment] network_mode), for a backend where the site's overlay does not apply."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(task_dir, dest, symlinks=True)
    toml = dest / "task.toml"
    text = toml.read_text()
    line = 'network_mode = "no-network"'
    text = re.sub(r'(?m)^network_mode\s*=.*\n?', "", text)
    if re.search(r"(?m)^\[environment\]\s*$", text):
        text = re.sub(r"(?m)^\[environment\]\s*$", f"[environment]\n{line}", text, count=1)
    else:
        text = text.rstrip("\n") + f"\n\n[environment]\n{line}\n"
    toml.write_text(text)
    return dest
