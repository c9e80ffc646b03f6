"""meds_etl_lite: a tiny MIMIC-IV -> MEDS (CSV flavour) extractor. SYNTHETIC task asset.

Each ``[[events]]`` block of the TOML config turns the rows of one raw CSV file into MEDS
measurements ``subject_id,time,code,numeric_value``. Standard library only (Python >= 3.11).
"""

__version__ = "0.3.1"
