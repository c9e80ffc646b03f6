"""ehr-data-quality-audit: eight MIMIC-IV-demo-shaped tables with rule-injected errors.

Clean rows obey every rule below; then six rows per published error kind are corrupted:
implausible physiological values, inconsistent clinical records, demographic conflicts and
cross-table conflicts. Each table carries a synthetic ``row_id`` column; the answer is the
list of corrupted (table, row_id) pairs. Errors are under 1% of rows, so flagging
everything fails the precision > 0.01 rule.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from evaluation.generating import reset_dir, write_csv, write_json, write_readme

FMT = "%Y-%m-%d %H:%M:%S"
NUMBER_WORDS = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
N_PATIENTS = 48

COLUMNS = {
    "patients": ["subject_id", "gender", "anchor_age", "anchor_year", "anchor_year_group", "dod"],
    "admissions": ["subject_id", "hadm_id", "admittime", "dischtime", "deathtime",
                   "admission_type", "admission_location", "discharge_location", "insurance",
                   "language", "marital_status", "race", "hospital_expire_flag"],
    "transfers": ["subject_id", "hadm_id", "transfer_id", "eventtype", "careunit", "intime",
                  "outtime"],
    "icustays": ["subject_id", "hadm_id", "stay_id", "first_careunit", "last_careunit",
                 "intime", "outtime", "los"],
    "diagnoses_icd": ["subject_id", "hadm_id", "seq_num", "icd_code", "icd_version"],
    "labevents": ["labevent_id", "subject_id", "hadm_id", "specimen_id", "itemid", "charttime",
                  "storetime", "value", "valuenum", "valueuom", "ref_range_lower",
                  "ref_range_upper", "flag"],
    "chartevents": ["subject_id", "hadm_id", "stay_id", "charttime", "storetime", "itemid",
                    "value", "valuenum", "valueuom"],
    "prescriptions": ["subject_id", "hadm_id", "pharmacy_id", "starttime", "stoptime",
                      "drug_type", "drug", "prod_strength", "dose_val_rx", "dose_unit_rx",
                      "route"],
}
# itemid: (label, unit, clean low, clean high, ref low, ref high, decimals)
LABS = {
    50971: ("Potassium", "mEq/L", 3.1, 5.9, 3.5, 5.1, 1),
    50983: ("Sodium", "mEq/L", 129, 149, 135, 145, 0),
    50912: ("Creatinine", "mg/dL", 0.5, 3.2, 0.5, 1.2, 1),
    51222: ("Hemoglobin", "g/dL", 7.5, 16.5, 12.0, 16.0, 1),
    50931: ("Glucose", "mg/dL", 65, 260, 70, 100, 0),
    51301: ("White Blood Cells", "K/uL", 3.0, 16.0, 4.0, 11.0, 1),
}
VITALS = {
    220045: ("Heart Rate", "bpm", 52, 125, 0),
    220179: ("Non Invasive Blood Pressure systolic", "mmHg", 88, 175, 0),
    220210: ("Respiratory Rate", "insp/min", 10, 30, 0),
    223762: ("Temperature Celsius", "°C", 35.8, 39.2, 1),
    220277: ("O2 saturation pulseoxymetry", "%", 88, 100, 0),
}
NEUTRAL_DX = ["I10", "E119", "E785", "J189", "N179", "I4891", "K219", "F329", "J449", "D649",
              "E871", "N390", "I509", "E039", "Z87891", "G4733"]
FEMALE_ONLY = ["O80", "O99419", "N809", "Z3A39"]
MALE_ONLY = ["N400", "C61", "N4231"]
DRUGS = [("Metoprolol Tartrate", "25mg Tab", "25", "mg", "PO"),
         ("Heparin", "5000 Unit/mL", "5000", "UNIT", "SC"),
         ("Furosemide", "40mg Tab", "40", "mg", "PO"),
         ("Insulin", "100 Unit/mL", "4", "UNIT", "SC"),
         ("Acetaminophen", "500mg Tab", "1000", "mg", "PO"),
         ("Vancomycin", "1g Vial", "1000", "mg", "IV"),
         ("Pantoprazole", "40mg Tab", "40", "mg", "PO"),
         ("Atorvastatin", "40mg Tab", "40", "mg", "PO")]
UNITS = ["Medical Intensive Care Unit (MICU)", "Surgical Intensive Care Unit (SICU)",
         "Cardiac Vascular Intensive Care Unit (CVICU)"]
WARDS = ["Medicine", "Med/Surg", "Cardiology", "Surgery"]


def _t(d: datetime) -> str:
    return d.strftime(FMT)


class _Builder:
    """Builds clean tables as lists of dicts (row_id assigned at write time)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.t = {name: [] for name in COLUMNS}
        self.ids = iter(range(1, 10**6))
        self.hadm_ids: set[int] = set()

    def uniform_time(self, start: datetime, end: datetime) -> datetime:
        span = int((end - start).total_seconds() // 60)
        return start + timedelta(minutes=int(self.rng.integers(0, max(span, 1))))

    def patient(self, subject_id: int) -> None:
        r = self.rng
        gender = "F" if r.random() < 0.5 else "M"
        anchor_year = int(r.integers(2110, 2190))
        info = {"subject_id": subject_id, "gender": gender,
                "anchor_age": int(r.integers(21, 90)), "anchor_year": anchor_year,
                "anchor_year_group": ["2008 - 2010", "2011 - 2013", "2014 - 2016",
                                      "2017 - 2019"][r.integers(4)], "dod": ""}
        race = ["WHITE", "BLACK/AFRICAN AMERICAN", "HISPANIC/LATINO - PUERTO RICAN",
                "ASIAN - CHINESE", "OTHER"][r.integers(5)]
        start = datetime(anchor_year, 1, 1) + timedelta(days=int(r.integers(0, 300)))
        n_adm = int(r.integers(1, 4))
        dies = r.random() < 0.2
        for a in range(n_adm):
            admit = start + timedelta(hours=int(r.integers(0, 24)), minutes=int(r.integers(60)))
            disch = admit + timedelta(hours=int(r.integers(30, 300)))
            last_and_dies = dies and a == n_adm - 1
            self.admission(info, admit, disch, race, last_and_dies)
            if last_and_dies:
                info["dod"] = disch.strftime("%Y-%m-%d")
            start = disch + timedelta(days=int(r.integers(20, 400)))
        if not dies and r.random() < 0.1:  # died after discharge, outside hospital
            info["dod"] = (start + timedelta(days=30)).strftime("%Y-%m-%d")
        self.t["patients"].append(info)

    def admission(self, info, admit, disch, race, died) -> None:
        r, sid = self.rng, info["subject_id"]
        hadm = int(r.integers(20_000_000, 30_000_000))
        while hadm in self.hadm_ids:  # MIMIC ids are unique; redraw on a (rare) collision
            hadm = int(r.integers(20_000_000, 30_000_000))
        self.hadm_ids.add(hadm)
        self.t["admissions"].append({
            "subject_id": sid, "hadm_id": hadm, "admittime": _t(admit), "dischtime": _t(disch),
            "deathtime": _t(disch) if died else "",
            "admission_type": ["EW EMER.", "URGENT", "ELECTIVE", "OBSERVATION ADMIT"][
                r.integers(4)],
            "admission_location": ["EMERGENCY ROOM", "PHYSICIAN REFERRAL", "TRANSFER FROM HOSPITAL"][
                r.integers(3)],
            "discharge_location": "DIED" if died else ["HOME", "HOME HEALTH CARE",
                                                       "SKILLED NURSING FACILITY"][r.integers(3)],
            "insurance": ["Medicare", "Medicaid", "Other"][r.integers(3)],
            "language": "ENGLISH", "marital_status": ["MARRIED", "SINGLE", "WIDOWED"][r.integers(3)],
            "race": race, "hospital_expire_flag": int(died)})
        self.transfers_and_icu(sid, hadm, admit, disch)
        self.diagnoses(info, hadm)
        self.labs(sid, hadm, admit, disch)
        self.prescriptions(sid, hadm, admit, disch)

    def transfers_and_icu(self, sid, hadm, admit, disch) -> None:
        r = self.rng
        cuts = sorted(self.uniform_time(admit, disch) for _ in range(2))
        icu = r.random() < 0.45
        units = [WARDS[r.integers(4)], UNITS[r.integers(3)] if icu else WARDS[r.integers(4)],
                 WARDS[r.integers(4)]]
        bounds = [admit, *cuts, disch]
        for i, unit in enumerate(units):
            self.t["transfers"].append({
                "subject_id": sid, "hadm_id": hadm, "transfer_id": 30_000_000 + next(self.ids),
                "eventtype": "admit" if i == 0 else "transfer", "careunit": unit,
                "intime": _t(bounds[i]), "outtime": _t(bounds[i + 1])})
        self.t["transfers"].append({
            "subject_id": sid, "hadm_id": hadm, "transfer_id": 30_000_000 + next(self.ids),
            "eventtype": "discharge", "careunit": "", "intime": _t(disch), "outtime": ""})
        if icu:
            stay = 39_000_000 + next(self.ids)
            intime, outtime = cuts
            self.t["icustays"].append({
                "subject_id": sid, "hadm_id": hadm, "stay_id": stay, "first_careunit": units[1],
                "last_careunit": units[1], "intime": _t(intime), "outtime": _t(outtime),
                "los": round((outtime - intime).total_seconds() / 86400, 4)})
            self.vitals(sid, hadm, stay, intime, outtime)

    def diagnoses(self, info, hadm) -> None:
        r = self.rng
        codes = list(r.choice(NEUTRAL_DX, size=int(r.integers(3, 8)), replace=False))
        specific = FEMALE_ONLY if info["gender"] == "F" else MALE_ONLY
        if r.random() < 0.3:
            codes.append(specific[r.integers(len(specific))])
        for seq, code in enumerate(codes, 1):
            self.t["diagnoses_icd"].append({"subject_id": info["subject_id"], "hadm_id": hadm,
                                            "seq_num": seq, "icd_code": code, "icd_version": 10})

    def labs(self, sid, hadm, admit, disch) -> None:
        r = self.rng
        for _ in range(int(r.integers(2, 5))):
            when = self.uniform_time(admit, disch - timedelta(hours=2))
            specimen = int(r.integers(10_000_000, 99_999_999))
            for itemid, (_, uom, lo, hi, rlo, rhi, dec) in LABS.items():
                v = round(float(r.uniform(lo, hi)), dec)
                self.t["labevents"].append({
                    "labevent_id": next(self.ids), "subject_id": sid, "hadm_id": hadm,
                    "specimen_id": specimen, "itemid": itemid, "charttime": _t(when),
                    "storetime": _t(when + timedelta(minutes=int(r.integers(20, 90)))),
                    "value": f"{v:.{dec}f}", "valuenum": f"{v:.{dec}f}", "valueuom": uom,
                    "ref_range_lower": rlo, "ref_range_upper": rhi,
                    "flag": "abnormal" if not rlo <= v <= rhi else ""})

    def vitals(self, sid, hadm, stay, intime, outtime) -> None:
        r = self.rng
        when = intime + timedelta(minutes=15)
        while when < outtime and len(self.t["chartevents"]) < 10**6:
            for itemid, (_, uom, lo, hi, dec) in VITALS.items():
                v = round(float(r.uniform(lo, hi)), dec)
                self.t["chartevents"].append({
                    "subject_id": sid, "hadm_id": hadm, "stay_id": stay, "charttime": _t(when),
                    "storetime": _t(when + timedelta(minutes=int(r.integers(1, 30)))),
                    "itemid": itemid, "value": f"{v:.{dec}f}", "valuenum": f"{v:.{dec}f}",
                    "valueuom": uom})
            when += timedelta(hours=int(r.integers(4, 9)))

    def prescriptions(self, sid, hadm, admit, disch) -> None:
        r = self.rng
        for i in r.choice(len(DRUGS), size=int(r.integers(2, 5)), replace=False):
            drug, strength, dose, unit, route = DRUGS[int(i)]
            start = self.uniform_time(admit, disch - timedelta(hours=6))
            stop = self.uniform_time(start + timedelta(hours=2), disch)
            self.t["prescriptions"].append({
                "subject_id": sid, "hadm_id": hadm, "pharmacy_id": next(self.ids),
                "starttime": _t(start), "stoptime": _t(stop), "drug_type": "MAIN", "drug": drug,
                "prod_strength": strength, "dose_val_rx": dose, "dose_unit_rx": unit,
                "route": route})


class _Injector:
    """Corrupts chosen rows in place and records (table, row index, kind, note)."""

    def __init__(self, rng: np.random.Generator, tables: dict[str, list[dict]]):
        self.rng, self.t, self.log = rng, tables, []
        self.taken: set[tuple[str, int]] = set()
        self.patients = {p["subject_id"]: p for p in tables["patients"]}
        self.adm = {a["hadm_id"]: a for a in tables["admissions"]}

    def pick(self, table: str, ok) -> int:
        idx = [i for i, row in enumerate(self.t[table]) if (table, i) not in self.taken and ok(row)]
        if not idx:
            raise RuntimeError(f"no candidate row in {table}")
        i = idx[int(self.rng.integers(len(idx)))]
        self.taken.add((table, i))
        return i

    def record(self, table: str, i: int, kind: str, note: str) -> None:
        self.log.append((table, i, kind, note))

    def implausible(self) -> None:
        for itemid, value in ((220045, "412"), (223762, "51.3"), (220277, "137"), (220179, "520")):
            i = self.pick("chartevents", lambda r, it=itemid: r["itemid"] == it)
            self.t["chartevents"][i].update(value=value, valuenum=value)
            self.record("chartevents", i, "implausible_value", f"itemid {itemid} = {value}")
        for itemid, value in ((50971, "21.4"), (51222, "58.0")):
            i = self.pick("labevents", lambda r, it=itemid: r["itemid"] == it)
            self.t["labevents"][i].update(value=value, valuenum=value, flag="abnormal")
            self.record("labevents", i, "implausible_value", f"itemid {itemid} = {value}")

    def inconsistent(self) -> None:
        kind = "inconsistent_record"
        i = self.pick("admissions", lambda r: not r["deathtime"])
        row = self.t["admissions"][i]
        row["dischtime"] = _t(datetime.strptime(row["admittime"], FMT) - timedelta(days=3))
        self.record("admissions", i, kind, "dischtime before admittime")
        i = self.pick("icustays", lambda r: True)
        row = self.t["icustays"][i]
        row["intime"], row["outtime"] = row["outtime"], row["intime"]
        self.record("icustays", i, kind, "outtime before intime")
        i = self.pick("icustays", lambda r: True)
        self.t["icustays"][i]["los"] = round(self.t["icustays"][i]["los"] + 7.25, 4)
        self.record("icustays", i, kind, "los disagrees with intime/outtime")
        i = self.pick("prescriptions", lambda r: True)
        row = self.t["prescriptions"][i]
        row["starttime"], row["stoptime"] = row["stoptime"], row["starttime"]
        self.record("prescriptions", i, kind, "stoptime before starttime")
        i = self.pick("transfers", lambda r: r["eventtype"] == "transfer")
        row = self.t["transfers"][i]
        row["intime"], row["outtime"] = row["outtime"], row["intime"]
        self.record("transfers", i, kind, "outtime before intime")
        i = self.pick("labevents", lambda r: True)
        row = self.t["labevents"][i]
        row["storetime"] = _t(datetime.strptime(row["charttime"], FMT) - timedelta(hours=3))
        self.record("labevents", i, kind, "storetime before charttime")

    def demographic(self) -> None:
        kind = "demographic_conflict"
        for gender, codes in (("M", ("O80", "N809")), ("F", ("C61", "N400"))):
            for code in codes:
                i = self.pick("diagnoses_icd", lambda r, g=gender: (
                    self.patients[r["subject_id"]]["gender"] == g and r["icd_code"] in NEUTRAL_DX))
                self.t["diagnoses_icd"][i]["icd_code"] = code
                self.record("diagnoses_icd", i, kind, f"{code} on a patient with gender {gender}")
        for age in (134, 146):
            i = self.pick("patients", lambda r: True)
            self.t["patients"][i]["anchor_age"] = age
            self.record("patients", i, kind, f"anchor_age {age}")

    def cross_table(self) -> None:
        kind = "cross_table_conflict"
        i = self.pick("transfers", lambda r: r["eventtype"] == "transfer")
        self.t["transfers"][i]["hadm_id"] = 19_999_999
        self.record("transfers", i, kind, "hadm_id not in admissions")
        i = self.pick("diagnoses_icd", lambda r: True)
        row = self.t["diagnoses_icd"][i]
        row["hadm_id"] = self._other_admission(row["subject_id"])
        self.record("diagnoses_icd", i, kind, "hadm_id belongs to another subject")
        i = self.pick("prescriptions", lambda r: True)
        row = self.t["prescriptions"][i]
        row["subject_id"] = self.adm[self._other_admission(row["subject_id"])]["subject_id"]
        self.record("prescriptions", i, kind, "subject_id differs from the admission's")
        i = self.pick("labevents", lambda r: bool(self.patients[r["subject_id"]]["dod"]))
        row = self.t["labevents"][i]
        when = datetime.strptime(self.patients[row["subject_id"]]["dod"], "%Y-%m-%d")
        when += timedelta(days=5, hours=9)
        row["charttime"], row["storetime"] = _t(when), _t(when + timedelta(minutes=40))
        self.record("labevents", i, kind, "charttime after the patient's dod")
        i = self.pick("admissions", lambda r: not self.patients[r["subject_id"]]["dod"])
        self.t["admissions"][i]["deathtime"] = self.t["admissions"][i]["dischtime"]
        self.record("admissions", i, kind, "deathtime but patients.dod is empty")
        i = self.pick("icustays", lambda r: True)
        row = self.t["icustays"][i]
        admit = datetime.strptime(self.adm[row["hadm_id"]]["admittime"], FMT)
        row["intime"] = _t(admit - timedelta(days=2))
        row["los"] = round((datetime.strptime(row["outtime"], FMT) - (admit - timedelta(days=2)))
                           .total_seconds() / 86400, 4)
        self.record("icustays", i, kind, "intime before the admission's admittime")

    def _other_admission(self, subject_id: int) -> int:
        others = sorted(h for h, a in self.adm.items() if a["subject_id"] != subject_id)
        return others[int(self.rng.integers(len(others)))]


ERROR_KINDS = ("implausible", "inconsistent", "demographic", "cross_table")
# Every error is checkable against these two (gender, death, admission ids and times), and the
# two large tables keep the errors under 1% of the rows.
CORE_TABLES = ("patients", "admissions", "labevents", "chartevents")
TABLES = tuple(COLUMNS)
LISTED_ORDER = ("patients", "admissions", "transfers", "diagnoses_icd", "labevents", "chartevents",
                "prescriptions", "icustays")
MAX_ERROR_SHARE = 0.01


def generate(task_dir: Path, rng: np.random.Generator, case_id: str = "case_01", *,
             tables: tuple[str, ...] = TABLES, error_kinds: tuple[str, ...] = ERROR_KINDS) -> None:
    """The extract holds ``tables`` (always CORE_TABLES) with errors of ``error_kinds``; errors
    injected into a table left out go with it."""
    if not set(CORE_TABLES) <= set(tables) <= set(TABLES):
        raise ValueError(f"tables must include {CORE_TABLES} and come from {TABLES}")
    if not error_kinds or not set(error_kinds) <= set(ERROR_KINDS):
        raise ValueError(f"error_kinds must be a non-empty subset of {ERROR_KINDS}")
    data = reset_dir(task_dir / "environment" / "data")
    builder = _Builder(rng)
    subjects = sorted(10_000_000 + rng.choice(9_999_999, N_PATIENTS, replace=False))
    for sid in subjects:
        builder.patient(int(sid))
    tables_built = builder.t
    injector = _Injector(rng, tables_built)
    for kind in ERROR_KINDS:
        if kind in error_kinds:
            getattr(injector, kind)()
    tables_built = {name: rows for name, rows in tables_built.items() if name in tables}
    injector.taken = {(t, i) for t, i in injector.taken if t in tables}
    injector.log = [e for e in injector.log if e[0] in tables]
    n_rows = sum(len(rows) for rows in tables_built.values())
    if len(injector.taken) >= MAX_ERROR_SHARE * n_rows:
        raise ValueError(f"{len(injector.taken)} errors in {n_rows} rows: flagging every row "
                         "would pass")
    for name, rows in tables_built.items():
        write_csv(data / case_id / f"{name}.csv", ["row_id", *COLUMNS[name]],
                  ([i + 1, *(row[c] for c in COLUMNS[name])] for i, row in enumerate(rows)))
    listed = ", ".join(n for n in LISTED_ORDER if n in tables)
    write_readme(
        data / "README.md",
        "Hospital EHR extract (synthetic)",
        f"{NUMBER_WORDS[len(tables)].capitalize()} CSV tables shaped like the MIMIC-IV demo "
        f"`hosp` and `icu` modules ({listed}). "
        "Every table has a synthetic `row_id` column (1-based, unique within the table) used "
        "to name rows. Dates are shifted into the 22nd century, as in MIMIC.",
    )
    errors = [{"table": t, "row_id": i + 1} for t, i in sorted(injector.taken)]
    write_json(task_dir / "tests" / "answer.json", {"error_rows": errors})
    write_json(task_dir / "tests" / "error_log.json", [
        {"table": t, "row_id": i + 1, "kind": k, "note": n}
        for t, i, k, n in sorted(injector.log, key=lambda e: (e[0], e[1]))])
    write_json(task_dir / "solution" / "submission.json", {"flagged_rows": errors})
