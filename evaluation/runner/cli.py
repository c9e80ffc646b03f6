"""The runner's command line (`python -m evaluation.runner`; scripts/build-images uses it) and
the bare `docker run` baseline of bench_runner."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import django

from evaluation.runner.base import base_image_digest, base_image_files, base_image_tag
from evaluation.runner.engine import (
    APP_LABEL,
    LABEL_APP,
    ImageBuildError,
    InfrastructureError,
    engine_status,
)
from evaluation.runner.harnesses import build_harness_image
from evaluation.runner.images import build_task_image, prune_task_images, task_image_tag
from evaluation.runner.publish import PublishError, publish_images
from evaluation.runner.reaper import reap_stale
from evaluation.task_sources import task_source_dirs


def bare_docker_run(
    image: str, *, binds: dict[str, str], command: list[str], timeout_s: float = 600
) -> tuple[int, float, str]:
    """A plain `docker run --rm --network none` (the CLI), as the baseline of bench_runner.

    binds maps host paths to container paths (read-only). Returns (exit code, wall s, output).
    """
    docker_cli = shutil.which("docker")
    if docker_cli is None:
        raise InfrastructureError("the docker CLI is not installed")
    args = [docker_cli, "run", "--rm", "--network", "none", "--label", f"{LABEL_APP}={APP_LABEL}"]
    for host, cpath in binds.items():
        args += ["-v", f"{Path(host).resolve()}:{cpath}:ro"]
    args += ["--tmpfs", "/logs/verifier:uid=0", image, *command]
    t0 = time.time()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)  # noqa: S603
    return proc.returncode, time.time() - t0, (proc.stdout + proc.stderr)[-2000:]


def discover_tasks(tasks_dir: Path | None = None) -> list[Path]:
    roots = [Path(tasks_dir)] if tasks_dir else task_source_dirs()
    return sorted(p.parent.parent for root in roots for p in root.glob("*/*/environment/Dockerfile"))


def _push_images(args) -> int:
    try:
        publish_images(args.registry, args.record, harnesses=tuple(args.harness),
                       base_only=args.base_only)
    except (PublishError, InfrastructureError) as exc:
        print(f"FAIL  push to {args.registry}: {exc}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.runner")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build-task-images", help="build every task image (cached by digest)")
    b.add_argument("task_dirs", nargs="*", type=Path)
    b.add_argument("--force", action="store_true")
    sub.add_parser("status", help="print engine_status() as JSON")
    r = sub.add_parser("reap", help="remove labelled containers older than --hours")
    r.add_argument("--hours", type=float, default=2.0)
    sub.add_parser("prune-images", help="untag task images no configured task package uses")
    h = sub.add_parser("build-harness-image",
                       help="build a Harbor installed agent's harness image from its wheels")
    h.add_argument("name")
    h.add_argument("--wheels", type=Path, required=True)
    h.add_argument("--force", action="store_true")
    bi = sub.add_parser("base-image", help="this checkout's base image: its content tag, "
                        "digest or grader files (scripts/build-images asks; no Docker)")
    bi.add_argument("what", choices=["tag", "digest", "files"])
    p = sub.add_parser("push-images", help="push the base, task and named harness images to an "
                       "OCI registry and write the published-images record")
    p.add_argument("--registry", required=True, help="host[:port][/path] (IMAGE_REGISTRY)")
    p.add_argument("--record", type=Path, required=True)
    p.add_argument("--harness", action="append", default=[])
    p.add_argument("--base-only", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    if args.cmd == "base-image":
        if args.what == "files":
            print("\n".join(base_image_files()))
        else:
            print(base_image_tag() if args.what == "tag" else base_image_digest())
        return 0
    if args.cmd == "push-images":
        return _push_images(args)
    if args.cmd == "status":
        print(json.dumps(engine_status(), indent=2))
        return 0
    if args.cmd == "reap":
        print(json.dumps(reap_stale(timedelta(hours=args.hours)), indent=2))
        return 0
    if args.cmd == "prune-images":
        keep = {task_image_tag(task) for task in discover_tasks()}
        print(json.dumps({"kept": sorted(keep), "removed": prune_task_images(keep)}, indent=2))
        return 0
    if args.cmd == "build-harness-image":
        t0 = time.time()
        try:
            tag, built = build_harness_image(args.name, args.wheels, force=args.force)
        except (ImageBuildError, InfrastructureError, ValueError) as exc:
            print(f"FAIL  harness {args.name}: {exc}")
            if isinstance(exc, ImageBuildError) and exc.log_tail:
                print(exc.log_tail)
            return 1
        print(f"{'built ' if built else 'cached'} {tag}  ({time.time() - t0:.1f} s)")
        return 0
    tasks = args.task_dirs or discover_tasks()
    failures = 0
    for task in tasks:
        t0 = time.time()
        try:
            tag, built = build_task_image(task, force=args.force)
        except (ImageBuildError, InfrastructureError) as exc:
            failures += 1
            print(f"FAIL  {task}: {exc}")
            if isinstance(exc, ImageBuildError) and exc.log_tail:
                print(exc.log_tail)
            continue
        verb = "built " if built else "cached"
        print(f"{verb} {tag}  ({time.time() - t0:.1f} s)")
    return 1 if failures else 0


