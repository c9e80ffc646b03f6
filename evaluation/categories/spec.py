"""What a category package declares: ``CATEGORY = Category(...)`` in its ``__init__.py``.

Standard library only: the registry, and with it this module, is imported by the graders'
command line inside verifier containers (Debian bookworm's Python 3.11, no Django, no pydantic).
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from types import ModuleType
from typing import Literal

# The verifier script every category uses unless its folder holds its own ``test.sh.template``.
# Placeholders (str.format): {category}, {answer}, {submission}; braces bash needs are doubled.
DEFAULT_VERIFIER_TEMPLATE = Path(__file__).with_name("test.sh.template")
VERIFIER_TEMPLATE_NAME = "test.sh.template"
DEFAULT_ORACLE = "cp /solution/submission.json /workspace/submission.json\n"
# The parts every category folder holds (checked by the registry and by the tests).
PARTS = ("__init__.py", "grader.py", "generator.py")


@dataclasses.dataclass(frozen=True)
class Category:
    """One benchmark category: display metadata, output spec, verifier settings, oracle.

    ``package`` and ``path`` are filled in by the registry from the folder it found.
    """

    slug: str
    name: str  # display name
    group: Literal["imaging", "text"]
    position: int  # order on the site (the paper's order)
    modality: str
    paper_data: str  # the corpus the paper uses; synthetic packages are shaped like it
    paper_access: str
    success_criterion: str
    # Output spec: where the agent writes its answer; a trailing "/" means a directory.
    submission_path: str
    # Verifier settings written into a new package's task.toml.
    verifier_timeout_sec: float = 300.0
    # An LLM judge the verifier reaches (network and [verifier.env] in task.toml; the runner and
    # validate_task start the judge stand-in for it).
    needs_judge: bool = False
    # What a synthetic package's oracle (solution/solve.sh) runs after `set -euo pipefail`.
    synthetic_oracle: str = DEFAULT_ORACLE
    package: str = ""
    path: Path | None = None

    # ---- output spec -----------------------------------------------------------------------
    @property
    def output_is_directory(self) -> bool:
        return self.submission_path.endswith("/")

    @property
    def answer_path(self) -> str:
        """Where test.sh finds the hidden answer: a directory for directory outputs."""
        return "/tests/expected" if self.output_is_directory else "/tests/answer.json"

    # ---- the parts of the folder -----------------------------------------------------------
    def grader(self) -> ModuleType:
        """The category's grader module (standard library + numpy: it runs in containers)."""
        return importlib.import_module(f"{self.package}.grader")

    def grade(self, answer_path, submission_path, **options):
        return self.grader().grade(answer_path, submission_path, **options)

    def generator(self) -> ModuleType:
        """The synthetic data generator (build-time dependencies: numpy, pillow, ...)."""
        return importlib.import_module(f"{self.package}.generator")

    def verifier_template(self) -> str:
        own = self.path / VERIFIER_TEMPLATE_NAME if self.path else None
        path = own if own is not None and own.is_file() else DEFAULT_VERIFIER_TEMPLATE
        return path.read_text(encoding="utf-8")

    def render_test_sh(self) -> str:
        """The package's tests/test.sh (every task's script equals this; a test checks drift)."""
        return self.verifier_template().format(
            category=self.slug,
            answer=self.answer_path,
            submission=self.submission_path.rstrip("/"),
        )


class RegistryError(ValueError):
    """A category folder is incomplete or clashes with another one."""
