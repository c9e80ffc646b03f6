"""The category registry: one folder per category, found by discovery, registered once.

    evaluation/categories/<slug with underscores>/
        __init__.py        CATEGORY = Category(...): display metadata, output spec, verifier
                           settings, the synthetic oracle (evaluation/categories/spec.py)
        grader.py          grade(answer_path, submission_path, **options) -> GradeResult
        generator.py       generate(task_dir, rng): the synthetic package's data and answer
        test.sh.template   optional: the verifier script, if not the shared one (spec.py)
        assets/            optional: files the generator copies into packages

Adding a category means adding one such folder: the graders' dispatch and command line, the
synthetic generators, ``manage.py new_task`` / ``validate_task``, the task.toml schema and the
catalogue all read ``CATEGORIES``. Standard library only (verifier containers import it).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from .spec import PARTS, Category, RegistryError


def discover(package: str, paths: Iterable[str]) -> dict[str, Category]:
    """Every sub-package of ``package`` (found under ``paths``) that declares ``CATEGORY``,
    keyed by slug in display order. Folders starting with "_" are skipped."""
    found: list[Category] = []
    for info in pkgutil.iter_modules(list(paths)):
        if not info.ispkg or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")  # plugin discovery
        spec = getattr(module, "CATEGORY", None)
        if not isinstance(spec, Category):
            raise RegistryError(f"{module.__name__}: __init__.py must define CATEGORY = Category(...)")
        if info.name != spec.slug.replace("-", "_"):
            raise RegistryError(f"{module.__name__}: the folder must be named after the slug "
                                f"{spec.slug!r} ({spec.slug.replace('-', '_')})")
        found.append(replace(spec, package=module.__name__, path=Path(module.__file__).parent))
    positions = [c.position for c in found]
    if len(set(positions)) != len(positions):
        raise RegistryError(f"{package}: two categories share a position ({sorted(positions)})")
    return {c.slug: c for c in sorted(found, key=lambda c: c.position)}


def missing_parts(category: Category) -> list[str]:
    """The parts of a category folder that are absent or incomplete (empty list = complete)."""
    missing = [part for part in PARTS if not (category.path / part).is_file()]
    if not missing:
        if not callable(getattr(category.grader(), "grade", None)):
            missing.append("grader.grade")
        if not callable(getattr(category.generator(), "generate", None)):
            missing.append("generator.generate")
    return missing


CATEGORIES: dict[str, Category] = discover(__name__, __path__)


def get(slug: str) -> Category:
    try:
        return CATEGORIES[slug]
    except KeyError:
        raise KeyError(f"unknown category {slug!r}; expected one of: "
                       f"{', '.join(CATEGORIES)}") from None


__all__ = ["CATEGORIES", "Category", "RegistryError", "discover", "get", "missing_parts"]
