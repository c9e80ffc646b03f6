"""Task package manifest schema and Docker-free structural checks.

A package is a Harbor task directory ``tasks/<category>/<task_id>/`` (house style HS3):
``task.toml`` (Harbor schema; HealthAgentBench facts in ``[metadata]``), ``instruction.md``,
``README.md``, ``environment/Dockerfile`` + build context, ``tests/test.sh`` + the hidden
answer, ``solution/solve.sh``. ``manage.py validate_task`` adds the Docker checks (oracle
passes, nop fails, no answer reachable from the agent's container).

Pure Python (tomllib + pydantic): no Django, no Docker, safe to import anywhere.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evaluation.categories import CATEGORIES, Category
from evaluation.digests import sha256_file

BASE_IMAGE = "healthagentbench/base:bookworm"
# The benchmark the public packages of this repository make up (new_task names tasks after it);
# its versions are data: tasks/benchmarks/<name>@<version>.toml (see BenchmarkManifest).
BENCHMARK_NAME = "healthagentbench-synthetic"
MANIFEST_DIR = "benchmarks"
TASK_ID_RE = re.compile(r"^[a-z0-9_]+$")
MAX_PACKAGE_BYTES = 5 * 1024 * 1024
# Excluded from digests and size: VCS and interpreter droppings (Harbor's publish defaults).
IGNORED_NAMES = frozenset({".git", "__pycache__", ".DS_Store", ".pytest_cache"})
IGNORED_SUFFIXES = (".pyc", ".swp", ".swo", "~")
REQUIRED_FILES = (
    "task.toml",
    "instruction.md",
    "README.md",
    "environment/Dockerfile",
    "tests/test.sh",
    "solution/solve.sh",
)
# RUN lines that would need the network at build time (builds run with networking disabled).
NETWORK_RUN_RE = re.compile(
    r"\b(apt-get|apt|apk|yum|dnf|pip3?|uv|conda|mamba|npm|curl|wget|git\s+clone)\b"
)
# Placeholder text the scaffold leaves for the author; a package still carrying it is not done.
PLACEHOLDER_RE = re.compile(r"\b(TODO|FIXME)\b")
PLACEHOLDER_FILES = ("instruction.md", "README.md", "solution/solve.sh")
# Names that smell of hidden answers; never allowed under environment/.
ANSWER_NAME_RE = re.compile(r"(^|/)(answers?|gold|expected|solutions?|ground_truth)([._/-]|$)",
                            re.IGNORECASE)


# The seven categories of the paper (../shared/reference/healthagentbench-paper.yaml), one
# folder each under evaluation/categories/ (the registry; CategoryInfo is its spec type).
CategoryInfo = Category
SYNTHETIC_ACCESS = "public (synthetic data generated in this repository)"


class TaskPackageError(ValueError):
    """The directory is not a loadable task package (missing or unparsable task.toml)."""


class _Open(BaseModel):
    # Harbor ignores unknown keys; so do we, except in [metadata] where we need ours.
    model_config = ConfigDict(extra="allow")


class TaskInfo(_Open):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*$")
    description: str = ""
    keywords: list[str] = []


class TaskMetadata(_Open):
    category: str
    group: Literal["imaging", "text"]
    modality: str = Field(min_length=3)
    data_source: str = Field(min_length=3)
    access: str = Field(min_length=3)
    success_criterion: str = Field(min_length=10)
    submission_path: str = Field(pattern=r"^/")
    synthetic: bool
    task_id: str = Field(pattern=TASK_ID_RE.pattern)
    # The paper disables web access for agents; our runner enforces it (network none).
    agent_network: Literal["none"]

    @field_validator("category")
    @classmethod
    def _known_category(cls, value: str) -> str:
        if value not in CATEGORIES:
            raise ValueError(f"unknown category {value!r}; expected one of {sorted(CATEGORIES)}")
        return value


class AgentLimits(_Open):
    timeout_sec: float = Field(gt=0, le=4 * 3600)


class VerifierLimits(_Open):
    timeout_sec: float = Field(gt=0, le=3600)
    env: dict[str, str] = {}


class EnvironmentLimits(_Open):
    build_timeout_sec: float = Field(default=600.0, gt=0, le=3600)
    docker_image: str | None = None
    cpus: int = Field(ge=1, le=4)
    memory_mb: int = Field(ge=256, le=16384)
    storage_mb: int = Field(ge=256, le=10240)
    gpus: int = Field(default=0, ge=0, le=0)
    network_mode: Literal["no-network", "public", "allowlist"] | None = None
    allow_internet: bool | None = None


class TaskManifest(_Open):
    """task.toml as both Harbor generations read it (``version`` or ``schema_version``)."""

    schema_version: str | None = None
    version: str | None = None
    task: TaskInfo
    metadata: TaskMetadata
    agent: AgentLimits
    verifier: VerifierLimits
    environment: EnvironmentLimits

    @property
    def network_contradiction(self) -> str | None:
        """Harbor keys that grant the agent network despite ``agent_network = "none"``.

        Leaving them unset is right: Harbor's Docker provider rejects ``no-network`` unless it
        can pull its egress-control images, so only an explicit grant is an error.
        """
        env, agent = self.environment, self.agent
        if env.network_mode in ("public", "allowlist") or env.allow_internet is True:
            return "[environment] grants network access"
        if getattr(agent, "network_mode", None) in ("public", "allowlist"):
            return "[agent] grants network access"
        return None


@dataclass(frozen=True)
class TaskPackage:
    root: Path
    manifest: TaskManifest
    files: tuple[str, ...]  # sorted POSIX paths relative to root
    size_bytes: int
    content_digest: str  # sha256 hex, see package_digest()

    @property
    def category(self) -> str:
        return self.manifest.metadata.category

    @property
    def task_id(self) -> str:
        return self.manifest.metadata.task_id

    @property
    def name(self) -> str:
        """Catalogue name, as BenchmarkTask.name stores it: ``<category>/<task_id>``."""
        return f"{self.category}/{self.task_id}"


def declared_outputs(spec: dict) -> list[str]:
    """Container paths the agent must write: Harbor `artifacts` under /workspace, else
    `[metadata].submission_path` / `output_path`; default /workspace/submission.json."""
    paths: list[str] = []
    for item in spec.get("artifacts") or []:
        src = item.get("source") if isinstance(item, dict) else item
        if src and str(src).startswith("/workspace"):
            paths.append(str(src))
    meta = spec.get("metadata") or {}
    for key in ("submission_path", "output_path"):
        val = meta.get(key)
        if isinstance(val, str) and val:
            val = val.rstrip("/") or val
            if val not in paths:
                paths.append(val)
    return [p.rstrip("/") or p for p in paths] or ["/workspace/submission.json"]



def package_file_names(root: Path) -> list[str]:
    """Every regular file of the package as a relative posix path, skipping VCS/cache
    droppings, sorted by path components (as Path objects sort). Strings from os.walk:
    pathlib's per-file overhead made a 54-package sync take tens of seconds."""
    found = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in IGNORED_NAMES]
        for name in names:
            if name in IGNORED_NAMES or name.endswith(IGNORED_SUFFIXES):
                continue
            path = os.path.join(top, name)
            if os.path.isfile(path):
                found.append(os.path.relpath(path, root).split(os.sep))
    return ["/".join(parts) for parts in sorted(found)]


def iter_package_files(root: Path) -> Iterator[Path]:
    """Every regular file of the package (package_file_names), as paths."""
    for rel in package_file_names(root):
        yield root / rel


def package_digest(root: Path) -> str:
    """sha256 over sorted ``<relpath>\\0<sha256(bytes)>\\n`` lines (Harbor's packager scheme)."""
    outer = hashlib.sha256()
    for rel in package_file_names(root):
        outer.update(f"{rel}\0{sha256_file(os.path.join(root, rel))}\n".encode())
    return outer.hexdigest()


def read_manifest(root: Path) -> TaskManifest:
    toml_path = Path(root) / "task.toml"
    if not toml_path.is_file():
        raise TaskPackageError(f"{toml_path}: missing")
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskPackageError(f"{toml_path}: not valid TOML ({exc})") from None
    try:
        return TaskManifest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise TaskPackageError(f"{toml_path}: {problems}") from None


def load_task_package(path: Path | str) -> TaskPackage:
    """Parse and fingerprint one package; raises TaskPackageError if task.toml is unusable."""
    root = Path(path).resolve()
    manifest = read_manifest(root)
    files = tuple(package_file_names(root))
    size = sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return TaskPackage(root, manifest, files, size, package_digest(root))


def discover_task_packages(tasks_dir: Path | str) -> list[Path]:
    """Package directories under ``tasks_dir`` (``<category>/<task_id>/task.toml``), sorted."""
    return sorted(p.parent for p in Path(tasks_dir).glob("*/*/task.toml"))


def version_packages(tasks_dir: Path | str, slug: str) -> list[Path]:
    """The package directories a released version (``name@version``) lists, sorted; a source
    holds several versions' packages side by side, so globbing would mix them."""
    name, _, version = slug.rpartition("@")
    for manifest in read_benchmark_manifests(tasks_dir):
        if (manifest.spec.name, manifest.spec.version) == (name, version):
            return sorted(Path(tasks_dir) / task for task in manifest.spec.tasks)
    raise TaskPackageError(f"{tasks_dir}: no manifest of {slug}")


def check_task_package(path: Path | str) -> list[str]:
    """Structural problems of a package (empty list = fine). No Docker, no network."""
    root = Path(path).resolve()
    problems = [f"missing {rel}" for rel in REQUIRED_FILES if not (root / rel).is_file()]
    try:
        package = load_task_package(root)
    except TaskPackageError as exc:
        return [*problems, str(exc)]
    problems += _check_identity(root, package.manifest)
    problems += _check_instruction(root, package.manifest)
    problems += _check_placeholders(root)
    problems += _check_no_answers_in_environment(root)
    problems += _check_dockerfile(root)
    problems += _check_test_script(root)
    problems += _check_users(package.manifest)
    if package.manifest.network_contradiction:
        problems.append(f"task.toml: {package.manifest.network_contradiction}; agents work "
                        'offline (metadata.agent_network = "none")')
    if package.size_bytes > MAX_PACKAGE_BYTES:
        problems.append(f"package is {package.size_bytes} bytes; the cap is {MAX_PACKAGE_BYTES}")
    if package.manifest.metadata.synthetic and "SYNTHETIC" not in _read(root / "README.md"):
        problems.append("README.md: a synthetic package must say SYNTHETIC")
    return problems


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _check_identity(root: Path, manifest: TaskManifest) -> list[str]:
    meta, problems = manifest.metadata, []
    if manifest.schema_version is None and manifest.version is None:
        problems.append('task.toml: set schema_version (or legacy version = "1.0")')
    if root.name != meta.task_id or not TASK_ID_RE.match(root.name):
        problems.append(f"directory name {root.name!r} must equal metadata.task_id "
                        f"{meta.task_id!r} and match {TASK_ID_RE.pattern}")
    if root.parent.name != meta.category:
        problems.append(f"package must live under tasks/{meta.category}/ "
                        f"(found under {root.parent.name}/)")
    if not manifest.task.name.endswith(f"/{meta.category}-{meta.task_id}"):
        problems.append(f"[task].name must end with /{meta.category}-{meta.task_id}")
    expected_group = CATEGORIES[meta.category].group
    if meta.group != expected_group:
        problems.append(f"metadata.group is {meta.group!r}; {meta.category} is {expected_group!r}")
    if meta.synthetic and "synthetic" not in meta.data_source.lower():
        problems.append("metadata.data_source must say 'synthetic' for a synthetic package")
    return problems


def _check_instruction(root: Path, manifest: TaskManifest) -> list[str]:
    text = _read(root / "instruction.md")
    target = manifest.metadata.submission_path
    if text and target.rstrip("/") not in text:
        return [f"instruction.md must name the output path {target}"]
    return []


def _check_placeholders(root: Path) -> list[str]:
    """The scaffold's placeholder text (``new_task`` writes TODO where only the author can)."""
    problems = []
    for rel in PLACEHOLDER_FILES:
        for number, line in enumerate(_read(root / rel).splitlines(), start=1):
            if PLACEHOLDER_RE.search(line):
                problems.append(f"{rel}:{number}: placeholder text left in ({line.strip()[:60]!r}); "
                                "write the real text")
                break
    return problems


def _check_no_answers_in_environment(root: Path) -> list[str]:
    env, problems = root / "environment", []
    hidden = {}
    for sub in ("tests", "solution"):
        for name in package_file_names(root / sub) if (root / sub).is_dir() else ():
            data = (root / sub / name).read_bytes()
            if len(data) >= 16:  # ignore trivially small files (empty JSON, newlines)
                hidden[hashlib.sha256(data).hexdigest()] = f"{sub}/{name}"
    for name in package_file_names(env) if env.is_dir() else ():
        rel = f"environment/{name}"
        if ANSWER_NAME_RE.search(name):
            problems.append(f"{rel}: answer-like file name under environment/")
        twin = hidden.get(sha256_file(os.path.join(env, name)))
        if twin:
            problems.append(f"{rel}: identical to {twin} (answers must stay out of environment/)")
    return problems


def _dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\s*\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _check_dockerfile(root: Path) -> list[str]:
    text = _read(root / "environment" / "Dockerfile")
    if not text:
        return []
    steps, problems = _dockerfile_instructions(text), []
    froms = [args.split()[0] for word, args in steps if word == "FROM" and args]
    if not froms or any(image != BASE_IMAGE for image in froms):
        problems.append(f"Dockerfile must build FROM {BASE_IMAGE} only (found {froms})")
    for word, args in steps:
        if word == "USER" and is_root_user(args.split()[0] if args else ""):
            problems.append(f"Dockerfile USER {args} is root; leave the base image's user")
        if word == "WORKDIR" and re.match(r"^/(proc|sys|dev)(/|$)", args.strip("\"'")):
            problems.append(f"Dockerfile WORKDIR {args} points into /proc, /sys or /dev")
        if word == "RUN" and NETWORK_RUN_RE.search(args):
            problems.append(f"Dockerfile RUN needs the network (builds are offline): {args[:80]}")
        if word in {"COPY", "ADD"}:
            sources = [a for a in args.split()[:-1] if not a.startswith("--")]
            for src in sources:
                if "://" in src or src.startswith(("..", "/")) or re.match(
                        r"^(tests|solution)(/|$)", src):
                    problems.append(f"Dockerfile {word} source {src!r} is outside the build "
                                    "context or remote")
    return problems


def is_root_user(user) -> bool:
    """True for a container user that is root: ``root``, uid ``0``, or either with a group."""
    if user is None or user == "":
        return False
    if isinstance(user, bool):
        return False
    if isinstance(user, int):
        return user == 0
    name = str(user).strip().split(":", 1)[0].strip()
    return name == "root" or (name.isdigit() and int(name) == 0) or name == ""


def _check_users(manifest: TaskManifest) -> list[str]:
    """The agent and the verifier never run as root: a package asking for it is refused."""
    problems = []
    for phase in ("agent", "verifier"):
        user = getattr(getattr(manifest, phase), "user", None)
        if is_root_user(user):
            problems.append(f"task.toml: [{phase}] user = {user!r} is root; tasks run as the "
                            "base image's unprivileged user (leave user unset)")
    return problems


def _check_test_script(root: Path) -> list[str]:
    text = _read(root / "tests" / "test.sh")
    if text and "/logs/verifier/reward" not in text:
        return ["tests/test.sh must write /logs/verifier/reward.json (or reward.txt)"]
    return []


# --------------------------------------------------------------------------------------------
# Benchmark versions as data: <task source>/benchmarks/<name>@<version>.toml
# --------------------------------------------------------------------------------------------
VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.+-]{0,39}$")
BENCHMARK_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,99}$")


class BenchmarkManifestFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=BENCHMARK_NAME_RE.pattern)
    version: str = Field(pattern=VERSION_RE.pattern)
    title: str = ""
    description: str = ""
    attempts_per_task: int = Field(default=3, ge=1, le=20)
    # A try-out version: uploads of the site's own agents (oracle, nop) are accepted as labelled
    # reference runs, never ranked (BenchmarkVersion.allows_reference_runs). A site policy, not
    # task content: sync_tasks applies it to a registered version too.
    allows_reference_runs: bool = False
    # "<category>/<task_id>" -> sha256 content digest of the package (package_digest()).
    tasks: dict[str, str] = Field(min_length=1)

    @field_validator("tasks")
    @classmethod
    def _digests(cls, value: dict[str, str]) -> dict[str, str]:
        for name, digest in value.items():
            if not re.match(r"^[a-z0-9-]+/[a-z0-9_]+$", name) or not re.match(r"^[0-9a-f]{64}$",
                                                                                digest):
                raise ValueError(f"{name!r} = {digest!r}: expected \"<category>/<task_id>\" = "
                                 "\"<64 hex digits>\"")
        return value


@dataclass(frozen=True)
class BenchmarkManifest:
    """One benchmark version: which packages, at which content digests, how many attempts.

    A registered version never changes; a changed, added or removed package is a new version
    (a new manifest file). Several versions of one source coexist: each lists its own digests.
    """

    path: Path
    spec: BenchmarkManifestFile

    @property
    def slug(self) -> str:
        return f"{self.spec.name}@{self.spec.version}"


def manifest_path(source: Path, name: str, version: str) -> Path:
    return Path(source) / MANIFEST_DIR / f"{name}@{version}.toml"


def read_benchmark_manifests(source: Path | str) -> list[BenchmarkManifest]:
    """Every ``<source>/benchmarks/*.toml``, sorted by name and version; TaskPackageError if bad."""
    out = []
    for path in sorted((Path(source) / MANIFEST_DIR).glob("*.toml")):
        try:
            spec = BenchmarkManifestFile.model_validate(tomllib.loads(path.read_text("utf-8")))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise TaskPackageError(f"{path}: not valid TOML ({exc})") from None
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                                 for e in exc.errors())
            raise TaskPackageError(f"{path}: {problems}") from None
        if path.name != f"{spec.name}@{spec.version}.toml":
            raise TaskPackageError(f"{path}: the file must be named {spec.name}@{spec.version}.toml")
        out.append(BenchmarkManifest(path, spec))
    return out


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_benchmark_manifest(source: Path, *, name: str, version: str, tasks: dict[str, str],
                             title: str = "", description: str = "",
                             attempts_per_task: int = 3,
                             allows_reference_runs: bool = False) -> Path:
    """Write a new version's manifest; refuses to overwrite (a released version never changes)."""
    BenchmarkManifestFile(name=name, version=version, title=title, description=description,
                          attempts_per_task=attempts_per_task, tasks=tasks,
                          allows_reference_runs=allows_reference_runs)  # validates
    path = manifest_path(source, name, version)
    if path.exists():
        raise FileExistsError(f"{path} exists; a released version never changes")
    lines = [
        f"# Benchmark version {name}@{version}: the task packages of this source at these content",
        "# digests. Never edit a released version: `manage.py sync_tasks --new-version` writes the",
        "# next one.",
        f"name = {_toml_string(name)}",
        f"version = {_toml_string(version)}",
        f"title = {_toml_string(title)}",
        f"description = {_toml_string(description)}",
        f"attempts_per_task = {attempts_per_task}",
        *(["allows_reference_runs = true"] if allows_reference_runs else []),
        "",
        "[tasks]",
        *(f"{_toml_string(task)} = {_toml_string(digest)}" for task, digest in sorted(tasks.items())),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
