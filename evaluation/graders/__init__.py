"""HealthAgentBench graders: the dispatch over the category registry, standard library + numpy,
no Django. Each category's grader is evaluation/categories/<category>/grader.py; the shared
result type, errors and JSON loader are evaluation/grading.py; the X-ray LLM judge client is evaluation/judge/client.py.

    GRADERS[slug](answer_path, submission_path, **options) -> GradeResult
    grade(category, answer, submission, judge=None) -> GradeResult
    VERSIONS[slug] -> int; version_label(slug) -> "<slug>@<version>"

Raises GradingInputError (malformed/oversized input; the message names the file and the
problem) or JudgeUnavailable (infrastructure error of the X-ray LLM judge; never a failure).
The command line (`python3 -m evaluation.graders --help`) is what verifier containers run.
Each category's grader docstring records its decisions (duplicates, missing and unknown ids,
empty sets).
"""

from evaluation.categories import CATEGORIES as _REGISTRY
from evaluation.grading import GradeResult, GradingInputError, JudgeUnavailable, load_json

from evaluation.judge.client import ChatJudge

# One grader per registered category (evaluation/categories/<category>/grader.py).
GRADERS = {slug: category.grader().grade for slug, category in _REGISTRY.items()}
CATEGORIES = tuple(GRADERS)
# Each grader's version (its grader.py's VERSION, 1 until it declares one): bumped with any
# change that can change a grade; every score the site records carries the version that
# produced it (tests/evaluation/test_grader_versions.py wants its digest committed).
VERSIONS = {slug: getattr(category.grader(), "VERSION", 1) for slug, category in _REGISTRY.items()}
# Categories whose answer and submission are directories rather than JSON files.
DIRECTORY_CATEGORIES = frozenset(slug for slug, c in _REGISTRY.items() if c.output_is_directory)
# Categories graded by an LLM judge (the command line builds a ChatJudge for them).
JUDGE_CATEGORIES = frozenset(slug for slug, c in _REGISTRY.items() if c.needs_judge)


def version_label(category):
    """The version a score records: "<category>@<VERSION>"."""
    return f"{category}@{VERSIONS[category]}"


def grade(category, answer, submission, judge=None):
    """Grade one attempt of `category`; `judge` is needed for xray-report-correction only."""
    try:
        grader = GRADERS[category]
    except KeyError:
        raise GradingInputError(
            f"unknown category {category!r}; expected one of: {', '.join(CATEGORIES)}"
        ) from None
    return grader(answer, submission, judge=judge)


__all__ = [
    "CATEGORIES",
    "ChatJudge",
    "DIRECTORY_CATEGORIES",
    "GRADERS",
    "GradeResult",
    "GradingInputError",
    "JUDGE_CATEGORIES",
    "JudgeUnavailable",
    "VERSIONS",
    "grade",
    "load_json",
    "version_label",
]
