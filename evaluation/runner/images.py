"""Images: the base image check and the task images, built locally and cached by digest."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path


from evaluation.digests import update_from_file
from evaluation.runner.base import (
    ALIAS_FROM,
    base_image_tag,
    missing_base_message,
)
from evaluation.runner.engine import (
    APP_LABEL,
    LABEL_APP,
    ImageBuildError,
    InfrastructureError,
    _docker,
    _infra,
    _is_infra,
    client,
)
from evaluation.runner.limits import load_task_toml

log = logging.getLogger(__name__)

TASK_IMAGE_REPO = "hab-task"
TASK_DIGEST_LABEL = "org.healthagentbench.task-digest"


def image_exists(tag: str) -> bool:
    docker = _docker()
    with _infra(f"inspecting image {tag}"):
        try:
            client().images.get(tag)
            return True
        except docker.errors.ImageNotFound:
            return False


def image_build(
    context_dir: str | Path,
    tag: str,
    *,
    labels: dict[str, str] | None = None,
    dockerfile: str = "Dockerfile",
    timeout_s: float | None = None,
) -> str:
    """Build `context_dir` as `tag` with networking disabled and no pull; return the image id."""
    docker = _docker()
    c = client()
    kwargs = {}
    if timeout_s:
        kwargs["timeout"] = int(timeout_s)
    try:
        image, logs = c.images.build(
            path=str(context_dir),
            dockerfile=dockerfile,
            tag=tag,
            network_mode="none",
            pull=False,
            rm=True,
            forcerm=True,
            labels=labels or {},
            **kwargs,
        )
    except docker.errors.BuildError as exc:
        tail = "".join(
            str(chunk.get("stream") or chunk.get("error") or "") for chunk in exc.build_log
        )[-4000:]
        raise ImageBuildError(f"building {tag} from {context_dir} failed: {exc.msg}", tail) from exc
    except docker.errors.APIError as exc:
        if exc.response is not None and exc.response.status_code in (400, 404):
            raise ImageBuildError(f"building {tag} from {context_dir} failed: {exc}") from exc
        raise InfrastructureError(f"building {tag}: {exc}") from exc
    except Exception as exc:
        if _is_infra(exc):
            raise InfrastructureError(f"building {tag}: {exc}") from exc
        raise
    return image.id


def ensure_base_image() -> str:
    """The id of this checkout's base image (base.base_image_tag: the content-addressed tag of
    its recipe and grader files); InfrastructureError naming the fix when it is not built."""
    docker = _docker()
    tag = base_image_tag()
    with _infra("inspecting the base image"):
        try:
            return client().images.get(tag).id
        except docker.errors.ImageNotFound:
            raise InfrastructureError(missing_base_message(tag)) from None


def _iter_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            yield Path(dirpath) / name


def tree_digest(root: Path) -> str:
    """sha256 over the relative paths, exec bits and contents of every file under root."""
    h = hashlib.sha256()
    for path in _iter_files(root):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            h.update(f"L {rel} -> {os.readlink(path)}\n".encode())
            continue
        mode = "x" if os.access(path, os.X_OK) else "-"
        h.update(f"F {rel} {mode}\n".encode())
        update_from_file(h, path)
    return h.hexdigest()


def task_image_repo(task_dir: Path) -> str:
    task_dir = Path(task_dir).resolve()
    category, task_id = task_dir.parent.name, task_dir.name

    def clean(s: str) -> str:
        s = re.sub(r"[^a-z0-9._-]+", "-", s.lower()).strip("._-")
        return s or "x"

    return f"{TASK_IMAGE_REPO}/{clean(category)}/{clean(task_id)}"


_FROM_ALIAS = re.compile(rf"^(\s*FROM\s+){re.escape(ALIAS_FROM)}(?=\s|$)",
                         re.IGNORECASE | re.MULTILINE)


def task_dockerfile(task_dir: Path, base_tag: str) -> str:
    """The package's Dockerfile with its `FROM healthagentbench/base:bookworm` (the moving alias
    Harbor's own build uses) replaced by the exact base tag of this checkout."""
    text = (Path(task_dir) / "environment" / "Dockerfile").read_text()
    return _FROM_ALIAS.sub(lambda m: m.group(1) + base_tag, text)


def task_image_tag(task_dir: Path) -> str:
    """hab-task/<category>/<task_id>:<digest of environment/ + this checkout's base tag>. The
    base tag is itself a content digest (recipe, grader files), so the task tag covers
    everything baked into the image."""
    env_dir = Path(task_dir) / "environment"
    h = hashlib.sha256()
    h.update(f"base {base_image_tag()}\nfrom-rewrite 1\n".encode())
    h.update(tree_digest(env_dir).encode())
    return f"{task_image_repo(task_dir)}:{h.hexdigest()[:24]}"


def build_task_image(task_dir: Path, *, force: bool = False) -> tuple[str, bool]:
    """Build the task's environment/Dockerfile FROM this checkout's base tag unless its digest
    tag exists: (tag, built)."""
    task_dir = Path(task_dir)
    if not (task_dir / "environment" / "Dockerfile").is_file():
        raise ImageBuildError(f"{task_dir}/environment/Dockerfile is missing")
    tag = task_image_tag(task_dir)
    if not force and image_exists(tag):
        return tag, False
    base = base_image_tag()
    ensure_base_image()
    spec = load_task_toml(task_dir)
    timeout = (spec.get("environment") or {}).get("build_timeout_sec")
    with tempfile.TemporaryDirectory(prefix="hab-task-dockerfile-") as tmp:
        # Outside the context: the Docker SDK sends it alongside the context as the Dockerfile.
        dockerfile = Path(tmp) / "Dockerfile"
        dockerfile.write_text(task_dockerfile(task_dir, base))
        image_build(
            task_dir / "environment",
            tag,
            labels={LABEL_APP: APP_LABEL, TASK_DIGEST_LABEL: tag.rsplit(":", 1)[1],
                    "org.healthagentbench.base-image": base},
            dockerfile=str(dockerfile),
            timeout_s=timeout,
        )
    return tag, True


def prune_task_images(keep: set[str], *, repos: set[str] | None = None) -> list[str]:
    """Untag task images that no configured task package uses any more: every tag of the given
    repositories (default: every hab-task repository) not in `keep`. Explicit housekeeping only
    (`python -m evaluation.runner prune-images`), never a side effect of a build: several
    benchmark versions, task sources or checkouts may need different digests of one task's image
    at the same time. An image a container still uses is kept."""
    docker = _docker()
    removed = []
    with _infra("listing task images"):
        images = client().images.list(filters={"label": f"{LABEL_APP}={APP_LABEL}"})
    for image in images:
        for tag in image.tags:
            repo = tag.rsplit(":", 1)[0]
            if not repo.startswith(TASK_IMAGE_REPO + "/") or tag in keep:
                continue
            if repos is not None and repo not in repos:
                continue
            try:
                client().images.remove(tag, noprune=False)
                removed.append(tag)
            except docker.errors.APIError as exc:
                log.info("keeping %s: %s", tag, exc)
    return sorted(removed)


def image_size(tag: str) -> int:
    with _infra(f"inspecting {tag}"):
        return int(client().images.get(tag).attrs.get("Size") or 0)
