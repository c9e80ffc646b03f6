"""clinical-trial-matching: ~400 synthetic trial protocols and one patient profile.

Protocols look like ClinicalTrials.gov records (structured sex/age limits plus free-text
inclusion and exclusion criteria). Twelve are eligible for the patient. About half of the
protocols target the patient's own conditions, and most of those fail on one near-miss
criterion (a lab range just missed, a drug the patient takes, an old myocardial infarction),
so a condition keyword filter alone returns far more than 50 candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation.generating import SYNTHETIC_NOTICE, reset_dir, write_json, write_readme, write_text

N_T2DM, N_HTN, N_OTHER = 150, 60, 190
N_ELIGIBLE_T2DM, N_ELIGIBLE_HTN = 9, 3
OTHER_CONDITIONS = ["Asthma", "Chronic Obstructive Pulmonary Disease", "Breast Cancer",
                    "Rheumatoid Arthritis", "Migraine", "Heart Failure With Reduced Ejection "
                    "Fraction", "Major Depressive Disorder", "Atrial Fibrillation", "Psoriasis",
                    "Parkinson Disease", "Type 1 Diabetes Mellitus", "Ulcerative Colitis"]
PHASES = ["Phase 2", "Phase 3", "Phase 2/Phase 3", "Phase 4"]


@dataclass
class Patient:
    age: int
    sex: str
    hba1c: float
    egfr: int
    bmi: float
    sbp: int
    dbp: int
    glp1: bool
    smoker: bool


def _patient(rng: np.random.Generator) -> Patient:
    return Patient(
        age=int(rng.integers(52, 69)), sex=["female", "male"][rng.integers(2)],
        hba1c=round(float(rng.uniform(7.6, 9.2)), 1), egfr=int(rng.integers(46, 71)),
        bmi=round(float(rng.uniform(30.5, 37.5)), 1), sbp=int(rng.integers(128, 149)),
        dbp=int(rng.integers(78, 92)), glp1=bool(rng.integers(2)), smoker=bool(rng.integers(2)))


def _profile(p: Patient) -> str:
    she = "She" if p.sex == "female" else "He"
    her = "her" if p.sex == "female" else "his"
    return (
        f"SYNTHETIC patient profile (case_01).\n\nA {p.age}-year-old {'woman' if p.sex == 'female' else 'man'} "
        f"comes for follow-up of type 2 diabetes mellitus diagnosed 9 years ago. {she} takes "
        f"metformin 1000 mg twice daily, unchanged for two years"
        + (", and weekly semaglutide started 5 weeks ago" if p.glp1 else "")
        + f"; {she.lower()} has never used insulin. {she} also has essential hypertension "
        f"treated with lisinopril 20 mg daily, and obesity. {she} had a myocardial infarction "
        f"treated with a drug-eluting stent 4 years ago, with no angina since. No history of "
        f"pancreatitis, thyroid cancer or stroke. "
        + (f"{she} smokes 10 cigarettes a day. " if p.smoker else f"{she} has never smoked. ")
        + f"On examination {her} blood pressure is {p.sbp}/{p.dbp} mmHg and BMI is {p.bmi} "
        f"kg/m2. Laboratory results this week: HbA1c {p.hba1c}%, eGFR {p.egfr} mL/min/1.73m2, "
        f"normal liver enzymes.\n"
    )


def _range(rng, value: float, ok: bool, width: float, dec: int) -> tuple[float, float]:
    """A [lo, hi] range that contains value (ok) or just misses it by >= one printed unit."""
    unit = 10.0**-dec

    def margin(top: float) -> float:
        return max(unit, round(float(rng.uniform(unit, top)), dec))

    if ok:
        lo, hi = value - margin(width), value + margin(width)
    elif rng.random() < 0.5:
        hi = value - margin(width / 2)
        lo = hi - width * 2
    else:
        lo = value + margin(width / 2)
        hi = lo + width * 2
    return round(lo, dec), round(hi, dec)


def _criteria_t2dm(rng, p: Patient, ok: bool, kind: str) -> tuple[str, str]:
    """Return (section, text) for one criterion; ok says whether the patient satisfies it."""
    if kind == "hba1c":
        lo, hi = _range(rng, p.hba1c, ok, 1.2, 1)
        return "inc", f"HbA1c between {lo}% and {hi}% (inclusive) at screening"
    if kind == "bmi":
        lo, hi = _range(rng, p.bmi, ok, 4.0, 1)
        return "inc", f"Body mass index between {lo} and {hi} kg/m2"
    if kind == "egfr":
        cut = p.egfr - int(rng.integers(1, 16)) if ok else p.egfr + int(rng.integers(1, 16))
        return "exc", f"eGFR below {cut} mL/min/1.73m2 at screening"
    if kind == "metformin":
        return ("inc", "On a stable dose of metformin (at least 1000 mg/day) for 3 months or "
                "longer") if ok else ("inc", "Treatment-naive: no glucose-lowering medication "
                                              "in the 3 months before screening")
    if kind == "insulin":
        return ("exc", "Use of any insulin within 12 months before screening") if ok else (
            "inc", "Treated with basal insulin for at least 6 months")
    if kind == "glp1":
        text = "Use of a GLP-1 receptor agonist within 90 days before screening"
        if ok == p.glp1:  # the exclusion must bite exactly when the patient is not ok
            text = "Use of a DPP-4 inhibitor within 90 days before screening" if ok else text
        return "exc", text
    if kind == "smoking":
        if ok == p.smoker:
            return "exc", "Current use of oral tobacco products" if ok else "Current smoker"
        return "exc", "Current smoker"
    if kind == "cardio":
        return ("exc", "Myocardial infarction, unstable angina or stroke within 6 months before "
                "screening") if ok else ("exc", "Any history of myocardial infarction or "
                                                "coronary revascularisation")
    if kind == "bp":
        cut = p.sbp + int(rng.integers(2, 20)) if ok else p.sbp - int(rng.integers(2, 15))
        return "exc", f"Uncontrolled hypertension (systolic blood pressure above {cut} mmHg)"
    raise ValueError(kind)


def _criteria_htn(rng, p: Patient, ok: bool, kind: str) -> tuple[str, str]:
    if kind == "sbp":
        lo, hi = _range(rng, p.sbp, ok, 12, 0)
        return "inc", f"Mean seated systolic blood pressure between {int(lo)} and {int(hi)} mmHg"
    if kind == "treated":
        return ("inc", "Receiving an ACE inhibitor or angiotensin receptor blocker") if ok else (
            "inc", "Not receiving any antihypertensive medication for at least 4 weeks")
    if kind == "diabetes":
        return ("exc", "Type 1 diabetes mellitus") if ok else ("exc", "Diabetes mellitus of any type")
    if kind == "egfr":
        cut = p.egfr - int(rng.integers(1, 16)) if ok else p.egfr + int(rng.integers(1, 16))
        return "exc", f"eGFR below {cut} mL/min/1.73m2"
    return _criteria_t2dm(rng, p, ok, kind)


T2DM_KINDS = ["hba1c", "bmi", "egfr", "metformin", "insulin", "glp1", "smoking", "cardio", "bp"]
HTN_KINDS = ["sbp", "treated", "diabetes", "egfr", "smoking", "cardio"]
FIXED = ["Pregnant or breastfeeding, or planning pregnancy during the study",
         "History of acute or chronic pancreatitis",
         "Active malignancy within 5 years (except basal cell carcinoma)",
         "Participation in another interventional study within 30 days"]


def _protocol(rng, p: Patient, nct: str, condition: str, eligible: bool, n: int) -> dict:
    sex, min_age, max_age = "All", 18, int(rng.choice([65, 70, 75, 80, 85]))
    if condition == "Type 2 Diabetes Mellitus":
        kinds, make = T2DM_KINDS, _criteria_t2dm
    elif condition == "Hypertension":
        kinds, make = HTN_KINDS, _criteria_htn
    else:
        kinds, make = [], None
    chosen = list(rng.choice(kinds, size=int(rng.integers(3, 6)), replace=False)) if kinds else []
    structural = []  # failures that live in the structured fields instead of the text
    failing: set[str] = set()
    if make and not eligible:
        # A criterion about a habit or drug can only exclude a patient who has it.
        absent = {"glp1"} if not p.glp1 else set()
        absent |= {"smoking"} if not p.smoker else set()
        pool = [k for k in [*chosen, "age", "sex"] if k not in absent]
        failing = set(rng.choice(pool, size=1 if rng.random() < 0.8 else 2, replace=False))
    if "age" in failing:
        max_age = p.age - int(rng.integers(1, 8))
        structural.append("age")
    elif make:
        max_age = max(max_age, p.age + int(rng.integers(1, 10)))
    if "sex" in failing:
        sex = "Male" if p.sex == "female" else "Female"
    inc = [f"Diagnosis of {condition.lower()}" if make else f"Confirmed diagnosis of {condition}"]
    exc = []
    for kind in chosen:
        section, text = make(rng, p, kind not in failing, kind)
        (inc if section == "inc" else exc).append(text)
    exc.extend(str(t) for t in rng.choice(FIXED, size=int(rng.integers(1, 3)), replace=False))
    drug = f"SYN-{int(rng.integers(100, 999))}"
    criteria = ("Inclusion Criteria:\n\n" + "\n".join(f"* {t}" for t in inc)
                + "\n\nExclusion Criteria:\n\n" + "\n".join(f"* {t}" for t in exc))
    return {
        "_synthetic": SYNTHETIC_NOTICE,
        "nct_id": nct,
        "brief_title": f"A {PHASES[n % 4]} Study of {drug} in Adults With {condition}",
        "conditions": [condition],
        "phase": PHASES[n % 4],
        "brief_summary": f"This study evaluates the efficacy and safety of {drug} compared with "
        f"placebo in adults with {condition.lower()}.",
        "eligibility": {"sex": sex, "minimum_age": f"{min_age} Years",
                        "maximum_age": f"{max_age} Years", "healthy_volunteers": "No",
                        "criteria": criteria},
    }


def _pool(size: int) -> tuple[int, int, int]:
    """(T2DM, hypertension, other) protocol counts in the 150 : 60 : 190 mix of 400."""
    n_t2dm, n_htn = round(size * N_T2DM / 400), round(size * N_HTN / 400)
    return n_t2dm, n_htn, size - n_t2dm - n_htn


def generate(task_dir: Path, rng: np.random.Generator, case_id: str = "case_01", *,
             pool_size: int = N_T2DM + N_HTN + N_OTHER,
             n_eligible: int = N_ELIGIBLE_T2DM + N_ELIGIBLE_HTN) -> None:
    """``pool_size`` protocols, ``n_eligible`` of them eligible (three in four on diabetes)."""
    n_t2dm, n_htn, n_other = _pool(pool_size)
    eligible_htn = round(n_eligible * N_ELIGIBLE_HTN / (N_ELIGIBLE_T2DM + N_ELIGIBLE_HTN))
    eligible_t2dm = n_eligible - eligible_htn
    # All eligible ids must fit in the 50 a submission may rank, with near misses to spare.
    if not 1 <= n_eligible <= 40 or eligible_t2dm > n_t2dm // 2 or eligible_htn > n_htn // 2:
        raise ValueError(f"{n_eligible} eligible trials do not fit a pool of {pool_size}")
    data = reset_dir(task_dir / "environment" / "data")
    p = _patient(rng)
    n_total = n_t2dm + n_htn + n_other
    ids = [f"NCT9{n:07d}" for n in sorted(rng.choice(10**7, n_total, replace=False))]
    order = rng.permutation(n_total)  # which id gets which condition
    conditions = (["Type 2 Diabetes Mellitus"] * n_t2dm + ["Hypertension"] * n_htn
                  + [OTHER_CONDITIONS[i % len(OTHER_CONDITIONS)] for i in range(n_other)])
    eligible_slots = set(range(eligible_t2dm)) | set(range(n_t2dm, n_t2dm + eligible_htn))
    eligible = []
    for slot, condition in enumerate(conditions):
        nct = ids[order[slot]]
        ok = slot in eligible_slots
        write_json(data / "trials" / f"{nct}.json", _protocol(rng, p, nct, condition, ok, slot))
        if ok:
            eligible.append(nct)
    write_text(data / case_id / "patient.txt", _profile(p))
    write_readme(
        data / "README.md",
        "Trial protocols and patient profile (synthetic)",
        f"`trials/` holds {n_total} protocols shaped like ClinicalTrials.gov records (NCT9... "
        "ids do not exist in the real registry). `case_01/patient.txt` is the patient.",
    )
    eligible.sort()
    write_json(task_dir / "tests" / "answer.json", {"eligible_trials": eligible})
    write_json(task_dir / "solution" / "submission.json", {"ranked_trials": eligible})
