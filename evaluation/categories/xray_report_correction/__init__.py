"""xray-report-correction: correct the FINDINGS of a chest X-ray report with injected errors."""

from evaluation.categories.spec import Category

# The paper's criterion: the judge scores the corrected FINDINGS VOTES times independently; the
# attempt passes when at least PASS_VOTES of them find zero clinically significant errors
# (the judge client: evaluation/graders/judge.py).
VOTES = 5
PASS_VOTES = 3

CATEGORY = Category(
    slug="xray-report-correction",
    name="X-ray report correction",
    group="imaging",
    position=0,
    modality="chest X-ray images (longitudinal studies) + prior reports",
    paper_data="MIMIC-CXR",
    paper_access="PhysioNet credentialed access",
    success_criterion="LLM judge (CheXprompt rubric) scores the corrected FINDINGS 5 times "
                      "independently; pass when at least 3 of 5 find zero clinically "
                      "significant errors",
    submission_path="/workspace/submission.json",
    verifier_timeout_sec=600.0,
    needs_judge=True,
)
