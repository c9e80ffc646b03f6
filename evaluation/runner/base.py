"""The runtime base image's content-addressed tag: what this checkout's code expects to run.

`scripts/build-images` builds the base image (a debootstrap OS stage plus the grader files at
/opt/hab) and tags it `<repo>:<digest>`, the digest covering everything baked in: the build
recipe (scripts/build-images, which holds the OS stage: suite, package list, root filesystem
functions, the grader stage's Dockerfile) and every grader file it copies (listed here, once;
the script asks `python -m evaluation.runner base-image --files`). Task and harness images are
built FROM that exact tag, so their digests cover it too (images.py, harnesses.py).

The runner resolves the tag from the files of its own checkout and never a moving tag, so two
checkouts with different graders sharing one Docker engine each run their own graders; a tag
that is not built is an infrastructure error saying to run scripts/build-images. The moving
alias `healthagentbench/base:bookworm` (settings.TASK_BASE_IMAGE) is still written, for the
task Dockerfiles' FROM line under Harbor's own `harbor run`; the site never reads it.

No Docker here: engine.py and images.py both import this module.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.conf import settings

from evaluation.digests import update_from_file

RECIPE = "scripts/build-images"
BASE_DIGEST_LABEL = "org.healthagentbench.recipe-digest"
# What every task package's Dockerfile names (evaluation/task_specs.py checks it); the runner
# builds task images FROM the content tag in its place.
ALIAS_FROM = "healthagentbench/base:bookworm"


def _root(root: Path | None) -> Path:
    return Path(root) if root is not None else Path(settings.BASE_DIR)


def base_image_files(root: Path | None = None) -> list[str]:
    """Relative paths (sorted) of the files copied to /opt/hab: the graders' command line and
    what it imports: evaluation/__init__.py, the shared kit (evaluation/grading.py), every file of
    evaluation/graders/, the judge client the X-ray grader asks (evaluation/judge/__init__.py,
    client.py and the prompt it reads: standard library only; the trajectory judge runs on the
    worker, so its prompt stays out), the category registry (evaluation/categories/*.py) and each category's
    spec and grader (evaluation/categories/<category>/{__init__,grader}.py). Generators and
    assets stay out: they are build-time code and must not change what grades."""
    root = _root(root)
    found: list[Path] = []
    for rel in ("evaluation/__init__.py", "evaluation/grading.py", "evaluation/judge/__init__.py",
                "evaluation/judge/client.py", "evaluation/judge/xray_judge_prompt.txt"):
        if (root / rel).is_file():
            found.append(root / rel)
    graders = root / "evaluation" / "graders"
    if graders.is_dir():
        found += [p for p in graders.rglob("*") if p.is_file() and p.suffix != ".pyc"
                  and "__pycache__" not in p.relative_to(graders).parts]
    categories = root / "evaluation" / "categories"
    if categories.is_dir():
        found += [p for p in categories.glob("*.py") if p.is_file()]
        found += [p for p in categories.glob("*/*") if p.is_file()
                  and p.name in ("__init__.py", "grader.py")]
    return sorted({p.relative_to(root).as_posix() for p in found})


def base_image_digest(root: Path | None = None) -> str:
    """sha256 over the recipe and every grader file (path and bytes)."""
    root = _root(root)
    h = hashlib.sha256()
    for rel in [RECIPE, *base_image_files(root)]:
        f = hashlib.sha256()
        update_from_file(f, root / rel)
        h.update(f"{rel} {f.hexdigest()}\n".encode())
    return h.hexdigest()


def base_image_repo() -> str:
    image = settings.TASK_BASE_IMAGE
    return image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image


def base_image_tag(root: Path | None = None) -> str:
    """<repo>:<first 24 hex of base_image_digest>, e.g. healthagentbench/base:3f0c...; the
    image the runner's containers start from."""
    return f"{base_image_repo()}:{base_image_digest(root)[:24]}"


def missing_base_message(tag: str) -> str:
    return (f"base image {tag} (this checkout's build recipe and grader files) is missing: "
            "run scripts/build-images (`make images`) in this checkout")
