"""Task images in an OCI registry, and the task packages the site serves that name them.

`IMAGE_REGISTRY=<host[/path]> make images` pushes the base, task and harness images and writes a
record (evaluation/runner/publish.py) that maps each task package, by its content digest, to the
image it was pushed as, named by manifest digest (``<registry>/hab-task/<c>/<t>@sha256:...``).

The committed packages of a released version never change (their digests are pinned in
``tasks/benchmarks/<name>@<version>.toml``). What the site *serves* to Harbor is the same
package with one line added to its task.toml, Harbor's prebuilt-image field::

    [environment]
    docker_image = "<registry>/hab-task/<category>/<task_id>@sha256:<manifest digest>"

so `harbor run -d <name>@<version> --registry-url <site>/registry.json` pulls that image instead
of building the task's Dockerfile (which needs the locally built base image). The served package
is a pure function of the committed one and the image reference, so the site knows its Harbor
digests (lock.json ``task.digest``, result.json ``task_checksum``) and accepts a job run from it
as a run of the committed package (``served_digests``). `manage.py publish_packages` writes the
served packages for a git repository that ``/registry.json`` points Harbor at
(``REGISTRY_GIT_URL`` at ``REGISTRY_GIT_COMMIT``; docs/images.md).

The record (``settings.PUBLISHED_IMAGES_FILE``, JSON, format 1)::

    {"format": 1, "registry": "...", "base": {...}, "harnesses": {name: {...}},
     "tasks": {<content digest>: {"name": "<category>/<task_id>", "package_path": "tasks/...",
                                  "images": ["<newest ref>", "<older refs still accepted>"]}}}
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings

from evaluation.task_specs import iter_package_files, package_digest

RECORD_FORMAT = 1
# A reference by manifest digest: what a published task names (a tag could be moved).
IMAGE_BY_DIGEST = re.compile(r"^[a-z0-9][a-z0-9._:/-]*@sha256:[0-9a-f]{64}$")
_ENV_HEADER = re.compile(r"^\[environment\][ \t]*(#[^\n]*)?$", re.MULTILINE)


class PublishedImagesError(ValueError):
    """The record is unreadable or names an image by something other than its digest."""


@dataclass(frozen=True)
class PublishedTask:
    content_digest: str
    name: str
    package_path: str
    images: tuple[str, ...]  # newest first; every one stays accepted

    @property
    def image(self) -> str:
        return self.images[0]


def read_record(path: Path) -> dict[str, PublishedTask]:
    """The record's tasks by content digest; PublishedImagesError naming the file when it is not
    a format-1 record of images named by digest."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PublishedImagesError(f"{path}: not a readable JSON record ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        raise PublishedImagesError(f"{path}: not a format-{RECORD_FORMAT} published-images record")
    out = {}
    for digest, entry in (data.get("tasks") or {}).items():
        images = entry.get("images") if isinstance(entry, dict) else None
        if not (isinstance(images, list) and images
                and all(isinstance(i, str) and IMAGE_BY_DIGEST.match(i) for i in images)):
            raise PublishedImagesError(
                f"{path}: task {digest[:16]}... must list its images by digest "
                "(<registry>/<repository>@sha256:<64 hex>)")
        out[digest] = PublishedTask(digest, str(entry.get("name", "")),
                                    str(entry.get("package_path", "")), tuple(images))
    return out


def _record_key(path: str) -> tuple[str, float]:
    try:
        return path, Path(path).stat().st_mtime
    except OSError:
        return path, -1.0


@lru_cache(maxsize=4)
def _record_cached(path: str, mtime: float) -> dict[str, PublishedTask]:
    return read_record(Path(path)) if mtime >= 0 else {}


def published_tasks() -> dict[str, PublishedTask]:
    """The configured record (settings.PUBLISHED_IMAGES_FILE; empty: none), re-read when the
    file changes. A configured file that is missing publishes nothing; a broken one raises."""
    path = str(settings.PUBLISHED_IMAGES_FILE or "")
    return _record_cached(*_record_key(path)) if path else {}


def published_image(content_digest: str) -> str | None:
    """The newest image published for a package with this content, or None."""
    task = published_tasks().get(content_digest)
    return task.image if task else None


def served_task_toml(text: str, image: str) -> str:
    """The task.toml Harbor is served: ``text`` with ``docker_image = "<image>"`` as the first
    line of its ``[environment]`` table (added at the end when it has none); every other byte
    is kept. A package that already names a prebuilt image is served as it is."""
    if not IMAGE_BY_DIGEST.match(image):
        raise PublishedImagesError(f"{image!r} is not an image reference by digest")
    if (tomllib.loads(text).get("environment") or {}).get("docker_image"):
        return text
    line = f'docker_image = "{image}"'
    match = _ENV_HEADER.search(text)
    if match:
        served = f"{text[:match.end()]}\n{line}{text[match.end():]}"
    else:
        served = f"{text.rstrip(chr(10))}\n\n[environment]\n{line}\n"
    if tomllib.loads(served)["environment"].get("docker_image") != image:
        raise PublishedImagesError(f"the [environment] table of this task.toml could not be "
                                   f"given docker_image = {image!r}")
    return served


def write_served_package(src: Path, dst: Path, image: str) -> None:
    """Copy the package at ``src`` to ``dst`` (the files its content digest covers), its
    task.toml naming ``image``."""
    src, dst = Path(src), Path(dst)
    for path in iter_package_files(src):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    toml = dst / "task.toml"
    toml.write_text(served_task_toml((src / "task.toml").read_text(encoding="utf-8"), image),
                    encoding="utf-8")


@lru_cache(maxsize=256)
def _served_digests(package_dir: str, content_digest: str, image: str) -> tuple[str, str]:
    # Imported here: harbor_task_checksum is Harbor's dirhash, defined with the validation that
    # compares it (submissions.validation would be an upward import; dirhash is all it needs).
    from dirhash import dirhash

    with tempfile.TemporaryDirectory(prefix="hab-served-") as tmp:
        served = Path(tmp) / Path(package_dir).name
        write_served_package(Path(package_dir), served, image)
        return package_digest(served), dirhash(str(served), "sha256")


def served_digests(package_dir: Path, content_digest: str) -> set[tuple[str, str]]:
    """(content digest, Harbor dirhash) of every package the site serves or served for the
    committed package at ``package_dir`` (one per published image; none when unpublished).
    Cached per package content and image."""
    task = published_tasks().get(content_digest)
    if task is None:
        return set()
    return {_served_digests(str(Path(package_dir).resolve()), content_digest, image)
            for image in task.images}
