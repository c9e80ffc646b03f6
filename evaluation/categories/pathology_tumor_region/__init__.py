"""pathology-tumor-region: select the tumour tiles of a whole-slide image on a fixed grid."""

from evaluation.categories.spec import Category

CATEGORY = Category(
    slug="pathology-tumor-region",
    name="Pathology tumour region",
    group="imaging",
    position=1,
    modality="H&E whole-slide images",
    paper_data="CAMELYON16",
    paper_access="public",
    success_criterion="select tumor tiles on a fixed grid; tile-level F1 >= 0.9",
    submission_path="/workspace/submission.json",
)
