"""ehr-data-quality-audit: flag every erroneous row of an EHR extract."""

from evaluation.categories.spec import Category

CATEGORY = Category(
    slug="ehr-data-quality-audit",
    name="EHR data-quality audit",
    group="text",
    position=3,
    modality="structured EHR, 8 tables",
    paper_data="MIMIC-IV demo with rule-injected errors",
    paper_access="public (demo)",
    success_criterion="flag every erroneous row; recall == 1.0 and precision > 0.01",
    submission_path="/workspace/submission.json",
)
