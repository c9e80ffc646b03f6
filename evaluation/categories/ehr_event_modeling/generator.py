"""ehr-event-modeling: longitudinal events with a planted signal and held-out patients.

Target (shaped like EHRSHOT's "new hypertension within a year"): a latent risk driven
mostly by the *values* of blood-pressure and BMI measurements and by age, and only weakly by
how often a patient visits. The baseline, fixed at generation time, is the paper's: per-code
count features + sklearn GradientBoostingClassifier (random_state=0); its held-out AUROC is
stored in the answer. The oracle (``assets/event_oracle.py``) reads the values and beats it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from evaluation.generating import reset_dir, write_csv, write_json, write_readme

ASSETS = Path(__file__).parent / "assets"
FMT = "%Y-%m-%d %H:%M:%S"
N_TRAIN, N_HELDOUT = 240, 120
MIN_MARGIN = 0.03  # the oracle must beat the baseline by at least this much
MIN_BASELINE = 0.62


def _patient(rng: np.random.Generator, pid: str, value_signal: float = 1.0,
             count_signal: float = 1.0) -> tuple[list[tuple], str, int]:
    t_pred = datetime(2160, 1, 1) + timedelta(days=int(rng.integers(0, 3000)))
    age = float(rng.uniform(30, 80))
    sbp_level = float(rng.normal(128, 11))
    bmi = float(rng.normal(29, 5))
    diabetic = rng.random() < 0.2 + 0.004 * (bmi - 29)
    lipid = rng.random() < 0.25
    risk = (value_signal * (0.16 * (sbp_level - 128) + 0.12 * (bmi - 29) + 0.06 * (age - 55))
            + 1.2 * diabetic + 0.9 * lipid + rng.normal(0, 0.5))
    label = int(rng.random() < 1 / (1 + np.exp(-(risk - 1.0))))
    # Sicker patients visit more often: with the diagnosis flags, the signal counts can see.
    n_visits = int(rng.poisson(2.5 + count_signal * 0.7 * max(risk + 1.5, 0)))
    birth = t_pred - timedelta(days=int(age * 365.25))
    events = [(pid, birth.strftime(FMT), "MEDS_BIRTH", "")]
    history = sorted(t_pred - timedelta(days=int(d), minutes=int(rng.integers(480, 1080)))
                     for d in rng.integers(5, 1095, size=max(n_visits, 1)))
    first = True
    for when in history:
        t = when.strftime(FMT)
        events.append((pid, t, "Visit/OP" if rng.random() < 0.85 else "Visit/IP", ""))
        events.append((pid, t, "LOINC/8480-6", f"{sbp_level + rng.normal(0, 9):.0f}"))
        events.append((pid, t, "LOINC/8462-4", f"{0.6 * sbp_level + rng.normal(0, 6):.0f}"))
        if rng.random() < 0.5:
            events.append((pid, t, "LOINC/39156-5", f"{bmi + rng.normal(0, 0.6):.1f}"))
        if first and diabetic:
            events.append((pid, t, "SNOMED/44054006", ""))
            events.append((pid, t, "RxNorm/6809", ""))
        if first and lipid:
            events.append((pid, t, "SNOMED/55822004", ""))
        if rng.random() < 0.3:
            events.append((pid, t, "LOINC/4548-4", f"{rng.normal(6.8 if diabetic else 5.4, 0.5):.1f}"))
        first = False
    return events, t_pred.strftime(FMT), label


def _cohort(rng: np.random.Generator, value_signal: float = 1.0,
            count_signal: float = 1.0) -> tuple[list[tuple], list[tuple], list[tuple]]:
    ids = [f"{n:07d}" for n in rng.choice(9_000_000, N_TRAIN + N_HELDOUT, False) + 1_000_000]
    events, cohort = [], []
    for pid in ids:
        evs, t_pred, label = _patient(rng, pid, value_signal, count_signal)
        events.extend(evs)
        cohort.append((pid, t_pred, label))
    return events, cohort[:N_TRAIN], cohort[N_TRAIN:]


def _count_features(events: list[tuple], ids: list[str], codes: list[str]) -> np.ndarray:
    index = {c: i for i, c in enumerate(codes)}
    row = {pid: n for n, pid in enumerate(ids)}
    x = np.zeros((len(ids), len(codes)))
    for pid, _, code, _ in events:
        if pid in row:
            x[row[pid], index[code]] += 1
    return x


def baseline_auroc(events, train, heldout) -> float:
    from sklearn.ensemble import GradientBoostingClassifier  # slow import: only when building
    from sklearn.metrics import roc_auc_score

    codes = sorted({e[2] for e in events})
    model = GradientBoostingClassifier(random_state=0)
    model.fit(_count_features(events, [p for p, _, _ in train], codes), [y for _, _, y in train])
    scores = model.predict_proba(_count_features(events, [p for p, _, _ in heldout], codes))[:, 1]
    return float(roc_auc_score([y for _, _, y in heldout], scores))


def _oracle_auroc(task_dir: Path, labels: dict[str, int]) -> float:
    from sklearn.metrics import roc_auc_score

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "submission.json"
        subprocess.run([sys.executable, str(task_dir / "solution" / "solve.py"), "--data",
                        str(task_dir / "environment" / "data"), "--output", str(out)],
                       check=True, capture_output=True,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        predictions = json.loads(out.read_text())["predictions"]
    ids = sorted(labels)
    return float(roc_auc_score([labels[i] for i in ids], [predictions[i] for i in ids]))


def generate(task_dir: Path, rng: np.random.Generator, case_id: str = "case_01", *,
             value_signal: float = 1.0, count_signal: float = 1.0) -> None:
    """``value_signal`` scales the weight of the measured values (what the oracle reads) and
    ``count_signal`` how strongly risk shows in visit counts (what the baseline sees): a lower
    ratio leaves less room above the baseline."""
    data = reset_dir(task_dir / "environment" / "data")
    # Redraw (deterministically, from the same stream) until the baseline is strong enough
    # that random scores beat it less than 10% of the time (needs AUROC >~ 0.59 here).
    for _ in range(20):
        events, train, heldout = _cohort(rng, value_signal, count_signal)
        baseline = round(baseline_auroc(events, train, heldout), 4)
        if baseline >= MIN_BASELINE:
            break
    else:
        raise RuntimeError("could not draw a cohort with a usable baseline")
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    write_csv(data / "events.csv", ["patient_id", "time", "code", "numeric_value"], events)
    write_csv(data / "train_labels.csv", ["patient_id", "prediction_time", "label"],
              sorted(train))
    write_csv(data / "heldout_patients.csv", ["patient_id", "prediction_time"],
              sorted((p, t) for p, t, _ in heldout))
    write_readme(
        data / "README.md",
        "Longitudinal EHR events (synthetic)",
        "`events.csv`: one row per measurement (`patient_id,time,code,numeric_value`; codes "
        "are OMOP-style vocabulary/concept strings; `MEDS_BIRTH` marks the birth date). Every "
        "event precedes the patient's prediction time.\n`train_labels.csv`: patients with "
        "known outcomes (label 1 = new hypertension diagnosed within one year after "
        "prediction_time).\n`heldout_patients.csv`: patients to score.",
    )
    shutil.copyfile(ASSETS / "event_oracle.py", task_dir / "solution" / "solve.py")
    labels = {p: y for p, _, y in heldout}
    oracle = _oracle_auroc(task_dir, labels)
    if oracle < baseline + MIN_MARGIN:
        raise RuntimeError(f"oracle AUROC {oracle:.3f} does not beat baseline {baseline:.3f}")
    write_json(task_dir / "tests" / "answer.json",
               {"labels": dict(sorted(labels.items())), "baseline_auroc": baseline})
