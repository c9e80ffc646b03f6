"""clinical-trial-matching: find every trial a patient is eligible for among ~400 protocols."""

from evaluation.categories.spec import Category

CATEGORY = Category(
    slug="clinical-trial-matching",
    name="Clinical trial matching",
    group="text",
    position=6,
    modality="free text (patient profiles, ~400 trial protocols)",
    paper_data="TREC Clinical Trials 2021",
    paper_access="public",
    success_criterion="find every eligible trial; recall@50 == 1.0",
    submission_path="/workspace/submission.json",
)
