"""ehr-format-conversion: raw MIMIC-IV-shaped files plus a small MEDS ETL repository.

The shipped ETL (``assets/meds_etl_lite``) runs as is, but its default config leaves out a
demographic field (race) and keeps subjects who were never admitted. The task's SPEC asks
for both; the oracle config switches them on. The expected MEDS output is produced by
running the shipped ETL with the oracle config, so the two can never drift apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from evaluation.generating import reset_dir, write_csv, write_readme, write_text
from evaluation.categories.ehr_data_quality_audit.generator import COLUMNS, _Builder

ASSETS = Path(__file__).parent / "assets"
# Every sixth subject is kept without admissions, so the cohort filter matters (22 -> 19).
N_SUBJECTS = 22
RAW_TABLES = ("patients", "admissions", "diagnoses_icd", "labevents")
SPEC = """\
# Required MEDS output (SYNTHETIC task)

Write `/workspace/output/data.csv` with the header `subject_id,time,code,numeric_value`
(time as `YYYY-MM-DD HH:MM:SS`; empty for static measurements; numeric_value empty when the
measurement has no value).

Cohort: only subjects with at least one hospital admission (a row in `hosp/admissions.csv`).

Measurements, one per source row:

| code | time | numeric_value | source |
|---|---|---|---|
| `MEDS_BIRTH` | Jan 1 of (anchor_year - anchor_age), 00:00:00 | | patients |
| `GENDER//<gender>` | static (empty) | | patients |
| `MEDS_DEATH` | dod, 00:00:00 (only when dod is set) | | patients |
| `HOSPITAL_ADMISSION//<admission_type>` | admittime | | admissions |
| `HOSPITAL_DISCHARGE//<discharge_location>` | dischtime | | admissions |
| `RACE//<race>` | admittime | | admissions |
| `DIAGNOSIS//ICD//<icd_version>//<icd_code>` | the admission's dischtime | | diagnoses_icd |
| `LAB//<itemid>//<valueuom>` | charttime | valuenum | labevents |

Row order does not matter.
"""


def oracle_config(default: str) -> str:
    """The customised config: cohort filter on, race events on."""
    fixed = default.replace("require_admission = false", "require_admission = true")
    fixed = fixed.replace('time = "admittime"\nenabled = false', 'time = "admittime"\nenabled = true')
    assert fixed.count("enabled = true") == 1 and "require_admission = true" in fixed
    return fixed


def _raw_tables(rng: np.random.Generator, raw: Path) -> None:
    builder = _Builder(rng)
    subjects = sorted(10_000_000 + rng.choice(9_999_999, N_SUBJECTS, False))
    for n, sid in enumerate(subjects):
        builder.patient(int(sid))
        if n % 6 == 5:  # a subject known only from the patients table (e.g. ED-only visit)
            builder.t["admissions"] = [a for a in builder.t["admissions"] if a["subject_id"] != sid]
            for name in ("diagnoses_icd", "labevents"):
                builder.t[name] = [r for r in builder.t[name] if r["subject_id"] != sid]
    for name in RAW_TABLES:
        write_csv(raw / "hosp" / f"{name}.csv", COLUMNS[name],
                  ([row[c] for c in COLUMNS[name]] for row in builder.t[name]))


def _run_etl(etl_dir: Path, config: Path, raw: Path, out: Path) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, "-m", "meds_etl_lite", "--config", str(config),
                    "--raw", str(raw), "--output", str(out)],
                   cwd=etl_dir, env=env, check=True, capture_output=True)


def generate(task_dir: Path, rng: np.random.Generator, case_id: str = "case_01") -> None:
    data = reset_dir(task_dir / "environment" / "data")
    raw = data / "raw"
    _raw_tables(rng, raw)
    etl = data / "etl"
    shutil.copytree(ASSETS / "meds_etl_lite", etl / "meds_etl_lite",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    default = (ASSETS / "config.default.toml").read_text()
    write_text(etl / "config.toml", default)
    write_text(etl / "SPEC.md", SPEC)
    write_readme(
        etl / "README.md",
        "meds_etl_lite",
        "A tiny MIMIC-IV -> MEDS extractor (standard library only).\n\n"
        "    cd /workspace/data/etl\n"
        "    python3 -m meds_etl_lite --config config.toml --raw /workspace/data/raw "
        "--output /workspace/output\n\n"
        "Edit `config.toml` to choose which measurements are extracted; see its header comment.",
    )
    write_readme(
        data / "README.md",
        "Raw EHR files and ETL repository (synthetic)",
        "`raw/hosp/` holds MIMIC-IV-demo-shaped CSV files; `etl/` holds the ETL repository "
        "to customise; `etl/SPEC.md` states the required MEDS output.",
    )
    solution_config = oracle_config(default)
    write_text(task_dir / "solution" / "config.toml", solution_config)
    expected = reset_dir(task_dir / "tests" / "expected")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.toml"
        cfg.write_text(solution_config)
        _run_etl(etl, cfg, raw, Path(tmp) / "out")
        shutil.copyfile(Path(tmp) / "out" / "data.csv", expected / "data.csv")
