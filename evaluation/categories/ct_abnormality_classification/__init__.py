"""ct-abnormality-classification: a yes/no label for every listed abnormality of a chest CT."""

from evaluation.categories.spec import Category

CATEGORY = Category(
    slug="ct-abnormality-classification",
    name="CT abnormality classification",
    group="imaging",
    position=2,
    modality="3D chest CT volumes",
    paper_data="CT-RATE",
    paper_access="accept the OpenRAIL license on Hugging Face",
    success_criterion="yes/no label for every listed abnormality; accuracy == 1.0 (all labels "
                      "right)",
    submission_path="/workspace/submission.json",
)
