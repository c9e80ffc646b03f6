"""Deterministic generators for the synthetic HealthAgentBench task packages.

Build-time tooling only (numpy, pillow, tifffile, nibabel, scikit-learn from the ``tasks``
dependency group); the web app never imports it while serving requests. One module per
category writes a package's ``environment/data/``, its hidden answer under ``tests/`` and
the oracle's files under ``solution/``. Seeds derive from ``<category>/<task_id>``, so
``python -m evaluation.synthetic <category> <task_dir>`` reproduces a package byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from . import ct, ehr_audit, ehr_events, ehr_meds, pathology, trials, xray
from .common import make_rng

GENERATORS: dict[str, ModuleType] = {
    m.CATEGORY: m for m in (xray, pathology, ct, ehr_audit, ehr_meds, ehr_events, trials)
}
CATEGORIES = tuple(GENERATORS)


def generate(category: str, task_dir: Path, *, task_id: str | None = None) -> None:
    """(Re)write the generated parts of one package; hand-written files are left alone."""
    if category not in GENERATORS:
        raise KeyError(f"unknown category {category!r}; expected one of {', '.join(CATEGORIES)}")
    task_dir = Path(task_dir).resolve()
    task_id = task_id or task_dir.name
    (task_dir / "solution").mkdir(parents=True, exist_ok=True)
    (task_dir / "tests").mkdir(parents=True, exist_ok=True)
    GENERATORS[category].generate(task_dir, make_rng(category, task_id))
