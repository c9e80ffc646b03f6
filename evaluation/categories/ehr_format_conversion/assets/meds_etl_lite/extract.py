"""Event extraction: raw CSV rows -> MEDS measurements, driven by the TOML config."""

import csv
import tomllib
from pathlib import Path

MEDS_COLUMNS = ["subject_id", "time", "code", "numeric_value"]


def load_config(path: Path) -> dict:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def _read(raw: Path, name: str) -> list[dict]:
    with open(raw / name, newline="") as fh:
        return list(csv.DictReader(fh))


def _time(row: dict, spec: dict, joined: dict) -> str:
    """Resolve an event's time: a column, a joined column, a derived birth year, or static."""
    kind = spec.get("time", "")
    if kind == "":
        return ""  # static measurement (MEDS: null time)
    if kind == "year_of_birth":
        return f"{int(row['anchor_year']) - int(row['anchor_age']):04d}-01-01 00:00:00"
    if kind.startswith("join:"):
        value = joined.get(row[spec["join_on"]], {}).get(kind[5:], "")
    else:
        value = row[kind]
    if value and len(value) == 10:  # a bare date
        value += " 00:00:00"
    return value


def _events(raw: Path, spec: dict) -> list[tuple]:
    rows = _read(raw, spec["file"])
    joined = {}
    if "join_file" in spec:
        joined = {r[spec["join_on"]]: r for r in _read(raw, spec["join_file"])}
    out = []
    for row in rows:
        if any(row.get(col, "") == "" for col in spec.get("require", [])):
            continue
        time = _time(row, spec, joined)
        if spec.get("time", "") != "" and not time:
            continue
        code = spec["code"].format(**row)
        value = row.get(spec["numeric_value"], "") if spec.get("numeric_value") else ""
        out.append((int(row["subject_id"]), time, code, value))
    return out


def run(config: dict, raw: Path, output: Path) -> int:
    measurements = []
    for spec in config["events"]:
        if spec.get("enabled", True):
            measurements.extend(_events(raw, spec))
    if config.get("cohort", {}).get("require_admission", False):
        admitted = {int(r["subject_id"]) for r in _read(raw, "hosp/admissions.csv")}
        measurements = [m for m in measurements if m[0] in admitted]
    # MEDS order: by subject, static (empty time) first, then time, then code.
    measurements.sort(key=lambda m: (m[0], m[1] != "", m[1], m[2], m[3]))
    output.mkdir(parents=True, exist_ok=True)
    with open(output / "data.csv", "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(MEDS_COLUMNS)
        writer.writerows(measurements)
    return len(measurements)
