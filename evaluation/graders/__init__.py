"""HealthAgentBench graders: one per category, standard library + numpy, no Django.

    GRADERS[slug](answer_path, submission_path, **options) -> GradeResult
    grade(category, answer, submission, judge=None) -> GradeResult

Raises GradingInputError (malformed/oversized input; the message names the file and the
problem) or JudgeUnavailable (infrastructure error of the X-ray LLM judge; never a failure).
The command line (`python3 -m evaluation.graders --help`) is what verifier containers run.
Each category module's docstring records its decisions (duplicates, missing and unknown ids,
empty sets).
"""

from . import (
    clinical_trial_matching,
    ct_abnormality_classification,
    ehr_data_quality_audit,
    ehr_event_modeling,
    ehr_format_conversion,
    pathology_tumor_region,
    xray_report_correction,
)
from .base import GradeResult, GradingInputError, JudgeUnavailable, load_json
from .judge import ChatJudge

_MODULES = (
    xray_report_correction,
    pathology_tumor_region,
    ct_abnormality_classification,
    ehr_data_quality_audit,
    ehr_format_conversion,
    ehr_event_modeling,
    clinical_trial_matching,
)

GRADERS = {module.CATEGORY: module.grade for module in _MODULES}
CATEGORIES = tuple(GRADERS)
# Categories whose answer and submission are directories rather than JSON files.
DIRECTORY_CATEGORIES = frozenset({ehr_format_conversion.CATEGORY})


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
    "JudgeUnavailable",
    "grade",
    "load_json",
]
