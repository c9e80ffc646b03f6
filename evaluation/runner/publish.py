"""Pushing the locally built images to an OCI registry (`IMAGE_REGISTRY=... make images`).

Each image keeps its repository and tag under the registry's prefix
(``<registry>/hab-task/<category>/<task_id>:<digest tag>``) and is recorded by the manifest
digest the registry answered (``...@sha256:<hex>``): that reference, never a tag, is what the
served task packages name (evaluation/published.py). Only the repository's own packages
(settings.TASKS_DIR) are pushed: a licensed task source never leaves its evaluation hosts.
Local builds stay the default; nothing here runs unless a registry is named.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from django.conf import settings

from evaluation.published import RECORD_FORMAT
from evaluation.runner.base import base_image_tag
from evaluation.runner.engine import InfrastructureError, _docker, _infra, client
from evaluation.runner.harnesses import harness_image_tag, installed_harness
from evaluation.runner.images import image_exists, task_image_tag
from evaluation.task_specs import TaskPackageError, load_task_package

# host[:port][/path], lowercase as OCI repository names are.
REGISTRY_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9._-]+)*$")


class PublishError(Exception):
    """A bad registry name, or an image that was not built before the push."""


def registry_check(registry: str) -> str:
    registry = registry.strip().rstrip("/")
    if not REGISTRY_NAME.match(registry):
        raise PublishError(f"IMAGE_REGISTRY={registry!r} is not a registry name "
                           "(host[:port][/path], lowercase; e.g. 127.0.0.1:5000)")
    return registry


def image_push(local_tag: str, registry: str) -> str:
    """Tag ``local_tag`` (``repo:tag``) as ``<registry>/repo:tag``, push it and return it by the
    manifest digest the registry reported (``<registry>/repo@sha256:...``)."""
    repo, _, tag = local_tag.rpartition(":")
    remote = f"{registry}/{repo}"
    docker = _docker()
    with _infra(f"tagging {local_tag}"):
        try:
            client().images.get(local_tag).tag(remote, tag=tag)
        except docker.errors.ImageNotFound:
            raise PublishError(f"{local_tag} is not built (run scripts/build-images first)") \
                from None
    digest = ""
    with _infra(f"pushing {remote}:{tag}"):
        for line in client().api.push(remote, tag=tag, stream=True, decode=True):
            if line.get("error"):
                raise InfrastructureError(f"pushing {remote}:{tag} to {registry}: "
                                          f"{line['error']}")
            digest = (line.get("aux") or {}).get("Digest") or digest
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise InfrastructureError(f"{registry} reported no manifest digest for {remote}:{tag}")
    return f"{remote}@{digest}"


def _task_dirs() -> list[Path]:
    root = Path(settings.TASKS_DIR)
    return sorted(p.parent.parent for p in root.glob("*/*/environment/Dockerfile"))


def _package_path(root: Path) -> str:
    try:
        return root.resolve().relative_to(Path(settings.BASE_DIR).resolve()).as_posix()
    except ValueError:
        return root.as_posix()


def _merged(old: dict, new: dict) -> dict:
    """The new record; each task keeps the images an older push recorded for the same package
    content after the new one (a job run from an older served package stays accepted)."""
    for digest, entry in new["tasks"].items():
        before = (old.get("tasks") or {}).get(digest) or {}
        entry["images"] += [i for i in before.get("images") or [] if i not in entry["images"]]
    return new


def publish_images(registry: str, record: Path, *, harnesses: tuple[str, ...] = (),
                   base_only: bool = False, say=print) -> dict:
    """Push the base image, every task image of settings.TASKS_DIR (unless ``base_only``) and
    the named harness images; write the record (JSON, evaluation/published.py) atomically and
    return it. Each push is one line through ``say``."""
    registry = registry_check(registry)
    t0 = time.monotonic()

    def push(tag: str) -> str:
        ref = image_push(tag, registry)
        say(f"pushed {tag} -> {ref}")
        return ref

    out: dict = {"format": RECORD_FORMAT, "registry": registry,
                 "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "base": {"local": base_image_tag(), "image": push(base_image_tag())},
                 "harnesses": {}, "tasks": {}}
    for name in harnesses:
        harness = installed_harness(name)
        if harness is None:
            raise PublishError(f"unknown harness {name!r}")
        tag = harness_image_tag(harness)
        out["harnesses"][name] = {"local": tag, "image": push(tag)}
    for task_dir in [] if base_only else _task_dirs():
        try:
            package = load_task_package(task_dir)
        except TaskPackageError as exc:
            raise PublishError(f"{task_dir}: {exc}") from None
        tag = task_image_tag(task_dir)
        if not image_exists(tag):
            raise PublishError(f"{tag} is not built (run scripts/build-images first)")
        out["tasks"][package.content_digest] = {
            "name": package.name, "package_path": _package_path(task_dir), "local": tag,
            "images": [push(tag)]}
    record = Path(record)
    old = {}
    if record.is_file():
        try:
            old = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {}
    if old.get("registry") == registry:
        out = _merged(old, out)
    record.parent.mkdir(parents=True, exist_ok=True)
    partial = record.with_name(f".{record.name}.{os.getpid()}")
    partial.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(record)
    say(f"pushed {1 + len(out['harnesses']) + len(out['tasks'])} images to {registry} in "
        f"{time.monotonic() - t0:.0f} s; record: {record}")
    return out
