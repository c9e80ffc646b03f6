"""ehr-event-modeling: risk scores for held-out patients from longitudinal EHR events."""

from evaluation.categories.spec import Category

CATEGORY = Category(
    slug="ehr-event-modeling",
    name="EHR event modelling",
    group="text",
    position=5,
    modality="longitudinal EHR events",
    paper_data="EHRSHOT (Stanford STARR)",
    paper_access="Redivis access request",
    success_criterion="risk scores for held-out patients; AUROC >= the baseline of count "
                      "features + a gradient-boosting model",
    submission_path="/workspace/submission.json",
    synthetic_oracle="python3 /solution/solve.py --data /workspace/data "
                     "--output /workspace/submission.json\n",
)
