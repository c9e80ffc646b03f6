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
   The npm CLIs (claude-code, codex, copilot-cli) are pinned by a committed npm lock file with
   integrity hashes (harness-npm/<name>/package-lock.json): the build host runs `npm ci
   --ignore-scripts` of it into a cache (npm checks every tarball's integrity), and the image
   build copies that node_modules/ into /opt/hab-harness/lib with networking disabled. Each of
   the three ships its CLI as a native x86_64 Linux executable in a platform package (an
   optional dependency, locked too), so the layer needs no Node.
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

from evaluation.harness_versions import plain_version, same_version  # noqa: F401 (re-exported)
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
    install: str = ""  # `uv tool install` arguments (offline, from /tmp/wheels)
    endpoint_kwarg: str = "base_url"  # the agent kwarg that sets the model endpoint
    key_env: str = "OPENAI_API_KEY"  # gets a placeholder: the gateway holds the real key
    api_formats: tuple[str, ...] = ("openai",)  # the gateway's API formats it can speak
    # npm harnesses: the CLI's native executable and the commands it gets in bin/ (wrappers:
    # name -> shell line run with "$@"), paths under /opt/hab-harness/lib/node_modules.
    kind: str = "pip"  # pip | npm
    commands: tuple[tuple[str, str], ...] = ()
    # The gateway URL the agent is given: "/v1" for clients that take an OpenAI-style base URL,
    # "" for those that append /v1/<path> themselves (Anthropic's clients).
    endpoint_suffix: str = "/v1"
    # pip harnesses that need a newer Python than the base image's 3.11: the layer carries the
    # build host's CPython X.Y (copied under /opt/hab-harness/python, runpath made relative) and
    # a venv at the path Harbor's agent runs (`uv venv` + `uv pip install`, offline).
    python: str = ""
    venv: str = ""
    version_note: str = ""  # appended when a submission's version has no layer

    @property
    def paths(self) -> tuple[str, ...]:
        """What the layer adds to a task image."""
        return (HARNESS_ROOT, self.venv) if self.venv else (HARNESS_ROOT,)

    @property
    def requirements_path(self) -> Path:
        return REPO_ROOT / self.requirements

    @property
    def lock_files(self) -> list[Path]:
        path = self.requirements_path
        return [path.with_name("package.json"), path, *self.etc_files] if self.kind == "npm" \
            else [path]

    @property
    def etc_files(self) -> list[Path]:
        """Committed files beside an npm lock, copied to /opt/hab-harness/etc/."""
        if self.kind != "npm":
            return []
        return sorted(p for p in self.requirements_path.parent.iterdir()
                      if p.is_file() and not p.name.startswith("package"))


NODE_MODULES = f"{HARNESS_ROOT}/lib/node_modules"
INSTALLED_HARNESSES = {
    "mini-swe-agent": InstalledHarness(
        name="mini-swe-agent", version="2.4.6",
        requirements="requirements-harness-mini-swe-agent.txt",
        # Harbor's own install line, offline: the same extras (litellm[mcp], orjson, fastapi).
        install="mini-swe-agent==2.4.6 --with 'litellm[mcp]' --with orjson --with fastapi",
    ),
    # Anthropic Messages; Claude Code appends /v1/messages to ANTHROPIC_BASE_URL itself.
    "claude-code": InstalledHarness(
        name="claude-code", version="2.1.332", kind="npm",
        requirements="harness-npm/claude-code/package-lock.json",
        commands=(("claude", f"{NODE_MODULES}/@anthropic-ai/claude-code-linux-x64/claude"),),
        key_env="ANTHROPIC_API_KEY", api_formats=("anthropic",), endpoint_suffix="",
    ),
    # OpenAI Responses (Harbor 0.26's codex supports only wire_api "responses"); the wrapper
    # puts the bundled ripgrep on PATH as the package's bin/codex.js does.
    "codex": InstalledHarness(
        name="codex", version="0.171.0", kind="npm",
        requirements="harness-npm/codex/package-lock.json",
        commands=(("codex", f"env PATH=\"$PATH:{NODE_MODULES}/@openai/codex-linux-x64/vendor/"
                            "x86_64-unknown-linux-musl/codex-path\" "
                            f"{NODE_MODULES}/@openai/codex-linux-x64/vendor/"
                            "x86_64-unknown-linux-musl/bin/codex"),),
        key_env="OPENAI_API_KEY",
    ),
    # Copilot CLI's bring-your-own-key provider (COPILOT_PROVIDER_BASE_URL, wire API chat
    # completions by default), which Harbor sets from its base_url. 1.0.102 refuses to start its
    # model client when the system has no trust roots at all ("no trust roots available for
    # proxy TLS"), even for the gateway's plain-http URL, and the base image has none: the
    # wrapper points SSL_CERT_FILE at one committed public root (ISRG Root X1) for that check.
    # OpenHands (openhands-ai) runs `/opt/openhands-venv/bin/python -m openhands.core.main` with
    # litellm's LLM_MODEL/LLM_BASE_URL/LLM_API_KEY (Harbor sets LLM_BASE_URL from the agent's
    # api_base kwarg) and RUNTIME=local: tmux in the task container, which the base image has.
    # It needs Python >=3.12,<3.14 (the base image has 3.11), so the layer carries its own.
    # 1.6.0: the newest openhands-ai with openhands.core.main, which Harbor 0.26's agent runs
    # (1.7.0 to 1.11.0 ship only the V1 server; Harbor's unpinned install of 1.11.0 fails).
    "openhands": InstalledHarness(
        name="openhands", version="1.6.0",
        requirements="requirements-harness-openhands.txt",
        install="openhands-ai==1.6.0", python="3.12", venv="/opt/openhands-venv",
        endpoint_kwarg="api_base", key_env="LLM_API_KEY",
        version_note="; openhands-ai 1.7.0 and later no longer ship openhands.core.main, which "
                     "Harbor's openhands agent runs",
    ),
    "copilot-cli": InstalledHarness(
        name="copilot-cli", version="1.0.102", kind="npm",
        requirements="harness-npm/copilot-cli/package-lock.json",
        commands=(("copilot", f"env SSL_CERT_FILE=\"${{SSL_CERT_FILE:-{HARNESS_ROOT}/etc/"
                              f"trust-roots.pem}}\" {NODE_MODULES}/@github/copilot-linux-x64/"
                              "copilot"),),
        key_env="COPILOT_PROVIDER_API_KEY", api_formats=("openai", "anthropic"),
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


def npm_wrappers(harness: InstalledHarness) -> dict[str, str]:
    """bin/<command> of an npm harness: a shell wrapper that execs the CLI's executable."""
    return {command: f'#!/bin/sh\nexec {target} "$@"\n' for command, target in harness.commands}


def npm_dockerfile(harness: InstalledHarness) -> str:
    """The npm harness layer: the host's `npm ci` tree (context node_modules/) and the wrappers
    (context bin/) copied in, and the version the CLI reports checked, offline."""
    first = harness.commands[0][0]
    return (
        f"FROM {base_image_tag()}\n"
        "USER root\n"
        f"COPY node_modules/ {NODE_MODULES}/\n"
        f"COPY bin/ {HARNESS_ROOT}/bin/\n"
        f"COPY etc/ {HARNESS_ROOT}/etc/\n"
        f"RUN set -e; chmod 0755 {HARNESS_ROOT}/bin/* \\\n"
        f" && HOME=/tmp/h {HARNESS_ROOT}/bin/{first} --version | grep -qF '{harness.version}' \\\n"
        # no chmod -R: npm ci left the tree world-readable, and a chmod would copy it into
        # the layer a second time
        " && rm -rf /tmp/h\n"
        f"# wrappers {hashlib.sha256(repr(sorted(npm_wrappers(harness).items())).encode()).hexdigest()}\n"
    )


def _uv_lines(uv_wheel: str) -> str:
    """RUN lines that install uv from its locked wheel (the base image's python3 unzips it)."""
    return (f" && python3 -m zipfile -e /tmp/wheels/{uv_wheel} /tmp/uvwhl \\\n"
            f" && install -D -m 0755 /tmp/uvwhl/*.data/scripts/uv {HARNESS_ROOT}/bin/uv \\\n")


def harness_dockerfile(harness: InstalledHarness, uv_wheel: str) -> str:
    env = " ".join(f"{k}={v}" for k, v in HARNESS_ENV.items() if k != "UV_OFFLINE")
    if harness.venv:
        return venv_dockerfile(harness, uv_wheel, env)
    return (
        f"FROM {base_image_tag()}\n"
        "USER root\n"
        "COPY wheels/ /tmp/wheels/\n"
        "RUN set -e; cd /tmp \\\n"
        + _uv_lines(uv_wheel) +
        f" && env {env} UV_CACHE_DIR=/tmp/uvcache {HARNESS_ROOT}/bin/uv tool install --offline"
        " --no-index --find-links /tmp/wheels --python /usr/bin/python3 "
        f"{harness.install} \\\n"
        f" && env {env} {HARNESS_ROOT}/bin/uv tool list | grep -q '^{harness.name} v{harness.version}$' \\\n"
        f" && env {env} {HARNESS_ROOT}/bin/{harness.name} --help > /dev/null \\\n"
        " && rm -rf /tmp/wheels /tmp/uvwhl /tmp/uvcache \\\n"
        f" && chmod -R a+rX {HARNESS_ROOT}\n"
    )


PYTHON_RUNTIME = f"{HARNESS_ROOT}/python"
# Modules whose C extensions need the base image's libraries: the copied runtime must load them.
RUNTIME_CHECK = "import ssl, sqlite3, ctypes, lzma, bz2, zlib, uuid, readline, curses, hashlib"


def venv_dockerfile(harness: InstalledHarness, uv_wheel: str, env: str) -> str:
    """A pip harness with its own Python: the host's runtime (context python/) checked against
    the base image's libraries, then Harbor's venv created and filled offline from the wheels
    (sdists in the lock, e.g. func-timeout, are built here from the locked setuptools)."""
    py = f"{PYTHON_RUNTIME}/bin/python{harness.python}"
    package = harness.install.split("==", 1)[0]
    return (
        f"FROM {base_image_tag()}\n"
        "USER root\n"
        f"COPY python/ {PYTHON_RUNTIME}/\n"
        "COPY wheels/ /tmp/wheels/\n"
        "RUN set -e; cd /tmp \\\n"
        f" && {py} -c '{RUNTIME_CHECK}; import sys; "
        f"assert sys.version.startswith(\"{harness.python}.\"), sys.version' \\\n"
        + _uv_lines(uv_wheel) +
        f" && env {env} {HARNESS_ROOT}/bin/uv venv --offline --python {py} {harness.venv} \\\n"
        f" && env {env} UV_CACHE_DIR=/tmp/uvcache {HARNESS_ROOT}/bin/uv pip install --offline"
        f" --no-index --find-links /tmp/wheels --python {harness.venv}/bin/python"
        f" {harness.install} \\\n"
        # Quiet one library's FutureWarning at the venv's start (google-auth on grpcio), which
        # Harbor would otherwise record as part of the agent's version.
        f" && echo \"import warnings; warnings.filterwarnings('ignore', category=FutureWarning,"
        f" module='google[.]auth')\" > {harness.venv}/lib/python{harness.python}/site-packages/"
        "hab-quiet.pth \\\n"
        f" && {harness.venv}/bin/python -c 'import importlib.metadata as m; "
        f"v = m.version(\"{package}\"); assert v == \"{harness.version}\", v' \\\n"
        " && rm -rf /tmp/wheels /tmp/uvwhl /tmp/uvcache \\\n"
        f" && chmod -R a+rX {HARNESS_ROOT} {harness.venv}\n"
    )


def host_python_runtime(version: str) -> Path:
    """The build host's CPython `version` (X.Y) prefix to copy into a layer: HAB_HARNESS_PYTHON
    (an interpreter), python<X.Y> on PATH, or pyenv's. It must be built for Debian bookworm,
    the base image's release (the layer's check imports its C extensions)."""
    import glob
    import os
    import subprocess

    candidates = [os.environ.get("HAB_HARNESS_PYTHON", ""), shutil.which(f"python{version}") or ""]
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"),
                         reverse=True)
    for exe in filter(None, candidates):
        try:
            out = subprocess.run(  # noqa: S603 (the build host's own interpreter)
                # base_prefix: a venv's interpreter names the installation it was made from
                [exe, "-c", "import sys; print(sys.version_info[0], sys.version_info[1]); "
                 "print(sys.base_prefix)"],
                capture_output=True, text=True, timeout=30, check=True).stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            continue
        prefix = Path(out[1])
        if ".".join(out[0].split()) == version and (prefix / "lib" / f"python{version}").is_dir():
            return prefix
    raise InfrastructureError(
        f"no CPython {version} on the build host for the harness layer (set HAB_HARNESS_PYTHON "
        f"to a python{version} built on Debian bookworm, e.g. pyenv's)")


def _set_runpath(path: Path, runpath: str) -> str:
    """Rewrite an ELF64 executable's DT_RUNPATH/DT_RPATH in place (the new string must not be
    longer: it is NUL-padded); return the old one ("" when it has none)."""
    import struct

    data = bytearray(path.read_bytes())
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise InfrastructureError(f"{path} is not a little-endian ELF64 file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return ""  # static: nothing to do
    strtab, where = None, None
    for off in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, val = struct.unpack_from("<qQ", data, off)
        if tag == 0:
            break
        if tag == 5:
            strtab = val
        elif tag in (15, 29):  # DT_RPATH, DT_RUNPATH
            where = val
    if where is None or strtab is None:
        return ""
    base = next((o + strtab - v for v, o, n in loads if v <= strtab < v + n), None)
    if base is None:
        raise InfrastructureError(f"{path}: its string table is in no loaded segment")
    start = base + where
    end = data.index(b"\0", start)
    old = data[start:end].decode()
    new = runpath.encode()
    if len(new) > end - start:
        raise InfrastructureError(f"{path}: runpath {runpath!r} is longer than {old!r}")
    data[start:end] = new + b"\0" * (end - start - len(new))
    path.write_bytes(bytes(data))
    return old


# Not needed to run a harness: the test suite, IDLE, Tk, pip's own copy, headers, docs.
_RUNTIME_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}


def copy_python_runtime(prefix: Path, dest: Path, version: str) -> None:
    """prefix/bin/python<X.Y>, its libpython and its standard library into dest, the
    interpreter's runpath made relative ($ORIGIN/../lib) so it runs from any directory."""
    (dest / "bin").mkdir(parents=True)
    exe = dest / "bin" / f"python{version}"
    shutil.copy2(prefix / "bin" / f"python{version}", exe)
    _set_runpath(exe, "$ORIGIN/../lib")
    (dest / "lib").mkdir()
    for lib in prefix.joinpath("lib").glob(f"libpython{version}*.so*"):
        shutil.copy2(lib, dest / "lib" / lib.name, follow_symlinks=False)

    def ignore(directory: str, names: list[str]) -> set[str]:
        skip = {n for n in names if n in _RUNTIME_SKIP or n.startswith("config-")}
        if Path(directory).name == "site-packages":
            skip |= set(names)  # the host's pip and friends: the venv brings its own
        return skip
    shutil.copytree(prefix / "lib" / f"python{version}", dest / "lib" / f"python{version}",
                    ignore=ignore, symlinks=True)


def harness_image_tag(harness: InstalledHarness) -> str:
    """hab-harness/<name>:<digest of the lock and the Dockerfile (which names the base image's
    content tag)>."""
    h = hashlib.sha256()
    for path in harness.lock_files:
        h.update(path.read_bytes())
    h.update((npm_dockerfile(harness) if harness.kind == "npm"
              else harness_dockerfile(harness, "uv.whl")).encode())
    return f"{HARNESS_IMAGE_REPO}/{harness.name}:{h.hexdigest()[:24]}"


def harness_problem(name: str, version: str = "", *, image: bool = True) -> str:
    """Why the site cannot run this installed agent offline ("" when it can). With `version`
    (the submission's harness version), a version the site has no layer for is named; with
    `image`, a layer not built on this worker too."""
    harness = installed_harness(name)
    if harness is None:
        return (f"{name} runs inside the task container and installs itself from the internet "
                f"at run time; the site bakes only {', '.join(sorted(INSTALLED_HARNESSES))}")
    if version and not same_version(version, harness.version):
        return (f"harness version {version} not built ({name}: the site's layer is "
                f"{harness.version}{harness.version_note})")
    tag = harness_image_tag(harness)
    if image and not image_exists(tag):
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
    with tempfile.TemporaryDirectory(prefix="hab-harness-") as tmp:
        ctx = Path(tmp)
        if harness.kind == "npm":  # `wheels` is the host's `npm ci` directory
            if not (wheels / "node_modules").is_dir():
                raise InfrastructureError(f"no node_modules in {wheels} (npm ci of the lock)")
            shutil.copytree(wheels / "node_modules", ctx / "node_modules", symlinks=True)
            (ctx / "bin").mkdir()
            for command, text in npm_wrappers(harness).items():
                (ctx / "bin" / command).write_text(text)
            (ctx / "etc").mkdir()
            (ctx / "etc" / "README").write_text(f"{harness.name} {harness.version}\n")
            for path in harness.etc_files:
                shutil.copyfile(path, ctx / "etc" / path.name)
            (ctx / "Dockerfile").write_text(npm_dockerfile(harness))
        else:
            uv_wheel = _uv_wheel(wheels)
            shutil.copytree(wheels, ctx / "wheels")
            if harness.python:
                copy_python_runtime(host_python_runtime(harness.python), ctx / "python",
                                    harness.python)
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
    copies = "".join(f"COPY --from={base} {p} {p}\n" for p in harness.paths)
    dockerfile = (f"FROM {task_image}\n{copies}"
                  f"ENV PATH={path}:{HARNESS_ROOT}/bin {env}\n")
    with tempfile.TemporaryDirectory(prefix="hab-harness-task-") as tmp:
        (Path(tmp) / "Dockerfile").write_text(dockerfile)
        image_build(tmp, tag, labels={LABEL_APP: APP_LABEL}, timeout_s=900)
    return tag
