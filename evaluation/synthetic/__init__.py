"""Deterministic generation of the synthetic HealthAgentBench task packages.

Build-time tooling only (numpy, pillow, tifffile, nibabel, scikit-learn from the ``tasks``
dependency group); the web app never imports it while serving requests. Each category's
generator is ``evaluation/categories/<category>/generator.py`` (found through the category
registry); it writes a package's ``environment/data/``, its hidden answer under ``tests/`` and
the oracle's files under ``solution/``. The shared seeding and byte-stable writers are
``evaluation/generating.py``. Seeds derive from ``<category>/<task_id>``, so
``python -m evaluation.synthetic <category> <task_dir>`` reproduces a package byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evaluation.categories import CATEGORIES as _REGISTRY
from evaluation.generating import make_rng

CATEGORIES = tuple(_REGISTRY)


def generate(category: str, task_dir: Path, *, task_id: str | None = None,
             difficulty: Mapping[str, object] | None = None) -> None:
    """(Re)write the generated parts of one package; hand-written files are left alone.
    ``difficulty`` holds the generator's keyword parameters (its defaults made the @1.0 tasks)."""
    if category not in _REGISTRY:
        raise KeyError(f"unknown category {category!r}; expected one of {', '.join(CATEGORIES)}")
    task_dir = Path(task_dir).resolve()
    task_id = task_id or task_dir.name
    (task_dir / "solution").mkdir(parents=True, exist_ok=True)
    (task_dir / "tests").mkdir(parents=True, exist_ok=True)
    _REGISTRY[category].generator().generate(task_dir, make_rng(category, task_id),
                                              **dict(difficulty or {}))
