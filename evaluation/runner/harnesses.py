"""Harbor installed agents baked into images at build time, for re-runs with nothing downloaded.

Harbor's installed agents (harbor/agents/installed/) install themselves in the task container at
run time (mini-swe-agent: `curl https://astral.sh/uv/install.sh | sh`, `uv python install 3.12`,
`uv tool install mini-swe-agent`; codex and claude-code: nvm and npm), which a re-run container
cannot do: it reaches nothing but the site's model gateway (egress.py). Harbor's own answer is
the `skip_install` agent kwarg ("the environment must already provide it"), so the site builds
that environment beforehand:

1. `scripts/build-images --harness <name>` downloads the harness's pinned, hashed wheels
   (requirements-harness-<name>.txt) on the worker host, where PyPI is reachable at build time,
   and runs `python -m evaluation.runner build-harness-image <name> --wheels <dir>`: a harness
   image FROM the base image installs them with `uv tool install --offline --no-index` into
   /opt/hab-harness (the layout Harbor's installer produces, so its version detection,
   `uv tool list`, works), with networking disabled. The shared base image is not changed.
2. At re-run time `harness_task_image` layers /opt/hab-harness onto the task's own image
   (`COPY --from`, networking disabled, cached by both image ids): the agent runs against the
   same files as every other check.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import shutil
import tempfile
from pathlib import Path

from evaluation.runner.base import base_image_tag
from evaluation.runner.engine import APP_LABEL, LABEL_APP, InfrastructureError, _infra, client
from evaluation.runner.images import image_build, image_exists

log = logging.getLogger(__name__)

HARNESS_IMAGE_REPO = "hab-harness"
HARNESS_ROOT = "/opt/hab-harness"
HARNESS_DIGEST_LABEL = "org.healthagentbench.harness-digest"
REPO_ROOT = Path(__file__).resolve().parents[2]
# What the agent's container sees besides the harness: no download of anything, no telemetry.
HARNESS_ENV = {
    "UV_TOOL_DIR": f"{HARNESS_ROOT}/tools",
    "UV_TOOL_BIN_DIR": f"{HARNESS_ROOT}/bin",
    "UV_PYTHON_DOWNLOADS": "never",
    "UV_OFFLINE": "1",
    "UV_NO_CACHE": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "DO_NOT_TRACK": "1",
}


@dataclasses.dataclass(frozen=True)
class InstalledHarness:
    """One Harbor installed agent the site can bake."""

    name: str  # Harbor's agent name (-a)
    version: str  # the version the requirements pin
    requirements: str  # hashed lock, relative to the repository root
    install: str  # `uv tool install` arguments (offline, from /tmp/wheels)
    endpoint_kwarg: str = "base_url"  # the agent kwarg that sets the model endpoint
    key_env: str = "OPENAI_API_KEY"  # gets a placeholder: the gateway holds the real key
    api_format: str = "openai"

    @property
    def requirements_path(self) -> Path:
        return REPO_ROOT / self.requirements


INSTALLED_HARNESSES = {
    "mini-swe-agent": InstalledHarness(
        name="mini-swe-agent", version="2.4.6",
        requirements="requirements-harness-mini-swe-agent.txt",
        # Harbor's own install line, offline: the same extras (litellm[mcp], orjson, fastapi).
        install="mini-swe-agent==2.4.6 --with 'litellm[mcp]' --with orjson --with fastapi",
    ),
}


# Harbor agents that run on the worker and drive the task container from outside (its network
# stays none); every other Harbor agent but oracle and nop runs inside the task container.
HOST_SIDE_AGENTS = frozenset({"terminus-2", "terminus-1", "terminus"})
# Harbor 0.26's installed agents (harbor.models.agent.name.AgentName), to tell a submitter why one
# is not re-run: each installs itself from the internet (curl, npm, pip, uv) at run time.
KNOWN_INSTALLED_AGENTS = frozenset({
    "acp", "aider", "antigravity-cli", "antigravity-sdk", "claude-code", "cline-cli",
    "code-puppy", "codex", "computer-1", "copilot-cli", "cortex-code", "cursor-cli", "deerflow",
    "devin", "dspy-rlm", "eve", "fabric", "fx", "fx-dev", "gemini-cli", "goose", "grok-build",
    "hermes", "junie", "kimi-cli", "kimi-code", "langgraph", "mcode", "mimo", "mini-swe-agent",
    "muse-code", "nemo-agent", "openclaw", "opencode", "opencode-v2", "openhands",
    "openhands-sdk", "pi", "qwen-coder", "rovodev-cli", "strands", "swe-agent", "trae-agent",
    "vibe",
})


def installed_harness(name: str) -> InstalledHarness | None:
    return INSTALLED_HARNESSES.get((name or "").strip().lower())


def _uv_wheel(wheels: Path) -> Path:
    found = sorted(wheels.glob("uv-*.whl"))
    if not found:
        raise InfrastructureError(f"no uv wheel in {wheels} (it is in the harness's lock)")
    return found[0]


def harness_dockerfile(harness: InstalledHarness, uv_wheel: str) -> str:
    env = " ".join(f"{k}={v}" for k, v in HARNESS_ENV.items() if k != "UV_OFFLINE")
    return (
        f"FROM {base_image_tag()}\n"
        "USER root\n"
        "COPY wheels/ /tmp/wheels/\n"
        "RUN set -e; cd /tmp \\\n"
        f" && python3 -m zipfile -e /tmp/wheels/{uv_wheel} /tmp/uvwhl \\\n"
        f" && install -D -m 0755 /tmp/uvwhl/*.data/scripts/uv {HARNESS_ROOT}/bin/uv \\\n"
        f" && env {env} UV_CACHE_DIR=/tmp/uvcache {HARNESS_ROOT}/bin/uv tool install --offline"
        " --no-index --find-links /tmp/wheels --python /usr/bin/python3 "
        f"{harness.install} \\\n"
        f" && env {env} {HARNESS_ROOT}/bin/uv tool list | grep -q '^{harness.name} v{harness.version}$' \\\n"
        f" && env {env} {HARNESS_ROOT}/bin/{harness.name} --help > /dev/null \\\n"
        " && rm -rf /tmp/wheels /tmp/uvwhl /tmp/uvcache \\\n"
        f" && chmod -R a+rX {HARNESS_ROOT}\n"
    )


def harness_image_tag(harness: InstalledHarness) -> str:
    """hab-harness/<name>:<digest of the lock and the Dockerfile (which names the base image's
    content tag)>."""
    h = hashlib.sha256()
    h.update(harness.requirements_path.read_bytes())
    h.update(harness_dockerfile(harness, "uv.whl").encode())
    return f"{HARNESS_IMAGE_REPO}/{harness.name}:{h.hexdigest()[:24]}"


def harness_problem(name: str) -> str:
    """Why the site cannot run this installed agent offline ("" when it can)."""
    harness = installed_harness(name)
    if harness is None:
        return (f"{name} runs inside the task container and installs itself from the internet "
                f"at run time; the site bakes only {', '.join(sorted(INSTALLED_HARNESSES))}")
    tag = harness_image_tag(harness)
    if not image_exists(tag):
        return (f"the {name} harness image {tag} is not built on this worker "
                f"(scripts/build-images --harness {name})")
    return ""


def build_harness_image(name: str, wheels: Path, *, force: bool = False) -> tuple[str, bool]:
    """Build the harness image from a directory of its locked wheels: (tag, built)."""
    harness = installed_harness(name)
    if harness is None:
        raise ValueError(f"unknown installed harness {name!r} (known: "
                         f"{', '.join(sorted(INSTALLED_HARNESSES))})")
    tag = harness_image_tag(harness)
    if not force and image_exists(tag):
        return tag, False
    wheels = Path(wheels)
    uv_wheel = _uv_wheel(wheels)
    with tempfile.TemporaryDirectory(prefix="hab-harness-") as tmp:
        ctx = Path(tmp)
        shutil.copytree(wheels, ctx / "wheels")
        (ctx / "Dockerfile").write_text(harness_dockerfile(harness, uv_wheel.name))
        image_build(ctx, tag, labels={LABEL_APP: APP_LABEL,
                                      HARNESS_DIGEST_LABEL: tag.rsplit(":", 1)[1]},
                    timeout_s=1800)
    return tag, True


def harness_task_image(task_image: str, name: str) -> str:
    """The task's image with the harness layered on (built once per pair of image ids)."""
    harness = installed_harness(name)
    problem = harness_problem(name)
    if harness is None or problem:
        raise InfrastructureError(problem)
    base = harness_image_tag(harness)
    with _infra(f"inspecting {task_image}"):
        image = client().images.get(task_image)
        base_id = client().images.get(base).id
    path = next((e.split("=", 1)[1] for e in (image.attrs.get("Config") or {}).get("Env") or []
                 if e.startswith("PATH=")), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    h = hashlib.sha256(f"{image.id}\n{base_id}\n{path}".encode())
    tag = f"{task_image.rsplit(':', 1)[0]}-{harness.name}:{h.hexdigest()[:24]}"
    if image_exists(tag):
        return tag
    env = " ".join(f"{k}={v}" for k, v in HARNESS_ENV.items())
    # The harness's bin/ comes last on PATH: it shadows nothing the task provides.
    dockerfile = (f"FROM {task_image}\nCOPY --from={base} {HARNESS_ROOT} {HARNESS_ROOT}\n"
                  f"ENV PATH={path}:{HARNESS_ROOT}/bin {env}\n")
    with tempfile.TemporaryDirectory(prefix="hab-harness-task-") as tmp:
        (Path(tmp) / "Dockerfile").write_text(dockerfile)
        image_build(tmp, tag, labels={LABEL_APP: APP_LABEL}, timeout_s=900)
    return tag
