"""ehr-format-conversion: customise a MEDS ETL so its output matches the expected cohort."""

from evaluation.categories.spec import Category

CATEGORY = Category(
    slug="ehr-format-conversion",
    name="EHR format conversion",
    group="text",
    position=4,
    modality="structured EHR + a MEDS ETL code repository",
    paper_data="MIMIC-IV demo",
    paper_access="public (demo)",
    success_criterion="customised MEDS ETL output matches the expected patient cohort exactly",
    submission_path="/workspace/output/",
    synthetic_oracle="cd /workspace/data/etl\n"
                     "cp /solution/config.toml config.toml\n"
                     "python3 -m meds_etl_lite --config config.toml --raw /workspace/data/raw "
                     "--output /workspace/output\n",
)
