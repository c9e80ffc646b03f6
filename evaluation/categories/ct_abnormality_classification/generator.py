"""ct-abnormality-classification: a small chest-CT-shaped NIfTI volume with planted findings.

64 x 64 x 48 voxels of int16 Hounsfield units (RAS+: +i = left, +j = anterior,
+k = superior; 5.5 x 5.5 x 6 mm voxels). Six abnormalities are listed; each is planted
or left out at random, so a random yes/no guess is right with probability 1/64.
"""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np

from evaluation.generating import SYNTHETIC_NOTICE, gzip_bytes, reset_dir, write_bytes, write_json, write_readme

SHAPE = (64, 64, 48)
SPACING = (5.5, 5.5, 6.0)
FINDINGS = [
    "Arterial wall calcification",
    "Cardiomegaly",
    "Consolidation",
    "Emphysema",
    "Lung nodule",
    "Pleural effusion",
]
# Planted only when a task lists more than the six findings above.
EXTRA_FINDINGS = ["Pericardial effusion", "Pneumothorax"]


def _ellipsoid(grid, centre, axes) -> np.ndarray:
    return sum(((g - c) / a) ** 2 for g, c, a in zip(grid, centre, axes, strict=True)) <= 1.0


def _choose_labels(rng: np.random.Generator, findings: list[str]) -> dict[str, bool]:
    # Between a third and two thirds present (2 to 4 of six), so neither "all no" nor "all
    # yes" is ever right.
    lo, hi = len(findings) // 3, len(findings) - len(findings) // 3
    while True:
        labels = {name: bool(rng.integers(2)) for name in findings}
        if lo <= sum(labels.values()) <= hi:
            return labels


def _anatomy(grid, heart_axes):
    i, j, k = grid
    body = ((i - 31.5) / 29) ** 2 + ((j - 30) / 21) ** 2 <= 1.0
    inner = ((i - 31.5) / 26.5) ** 2 + ((j - 30) / 18.5) ** 2 <= 1.0
    right = _ellipsoid(grid, (19, 31, 24), (9.5, 13, 21))
    left = _ellipsoid(grid, (44, 31, 24), (9.5, 13, 21))
    heart = _ellipsoid(grid, (36, 38, 17), heart_axes)
    spine = ((i - 31.5) / 3.2) ** 2 + ((j - 12) / 3.2) ** 2 <= 1.0
    aorta = ((i - 36) / 2.3) ** 2 + ((j - 17) / 2.3) ** 2 <= 1.0
    return body, inner, right & ~heart, left & ~heart, heart, spine, aorta


def _volume(rng: np.random.Generator, labels: dict[str, bool]) -> np.ndarray:
    grid = np.meshgrid(*(np.arange(n, dtype=float) for n in SHAPE), indexing="ij")
    i, j, k = grid
    labels = {name: labels.get(name, False) for name in FINDINGS + EXTRA_FINDINGS}
    heart_axes = (13.5, 11, 10) if labels["Cardiomegaly"] else (8.5, 7, 8)
    body, inner, right, left, heart, spine, aorta = _anatomy(grid, heart_axes)
    hu = np.full(SHAPE, -1000.0)
    hu[body] = -90.0  # subcutaneous fat
    hu[inner] = 40.0  # muscle / mediastinum
    ribs = body & ~inner & (np.sin(k * 0.9) > 0.55)
    hu[ribs] = 650.0
    hu[right | left] = -860.0
    hu[heart] = 38.0
    hu[aorta] = 45.0
    hu[spine] = 720.0
    lungs = right | left
    if labels["Emphysema"]:
        # Clustered low-attenuation areas, upper zones of both lungs.
        blobs = (rng.random(SHAPE) < 0.02) & lungs & (k > 26)
        grown = blobs | np.roll(blobs, 1, 0) | np.roll(blobs, 1, 1) | np.roll(blobs, 1, 2)
        hu[grown & lungs] = -975.0
    if labels["Consolidation"]:
        side = right if rng.integers(2) else left
        region = side & (k < 20) & (j > 30)
        hu[region] = 25.0
        bronchus = region & (np.abs(j - 36) < 1) & (k > 10)
        hu[bronchus] = -900.0  # air bronchogram
    if labels["Pleural effusion"]:
        side = right if rng.integers(2) else left
        hu[side & (j < 24) & (k < 22)] = 12.0  # dependent (posterior), basal
    if labels["Lung nodule"]:
        cx = 18 if rng.integers(2) else 45
        nodule = _ellipsoid(grid, (cx, 36, 30 + int(rng.integers(0, 6))), (2.2, 2.2, 2.0))
        hu[nodule & lungs] = 35.0
    if labels["Arterial wall calcification"]:
        wall = aorta & ~(((i - 36) / 1.3) ** 2 + ((j - 17) / 1.3) ** 2 <= 1.0)
        hu[wall & (rng.random(SHAPE) < 0.35)] = 480.0
    if labels["Pericardial effusion"]:
        shell = _ellipsoid(grid, (36, 38, 17), tuple(a + 2.0 for a in heart_axes)) & ~heart
        hu[shell & ~spine & ~aorta] = 10.0  # fluid rim around the heart
    if labels["Pneumothorax"]:
        side = right if rng.integers(2) else left
        hu[side & (j > 36) & (k > 24)] = -1000.0  # anterior apical air, no lung markings
    noise = rng.normal(0.0, 12.0, SHAPE)
    hu = np.where(hu > -1000, hu + noise, hu)
    return np.clip(np.round(hu), -1024, 3071).astype(np.int16)


def _nifti_bytes(volume: np.ndarray) -> bytes:
    affine = np.diag([*SPACING, 1.0])
    affine[:3, 3] = [-(n - 1) * s / 2 for n, s in zip(SHAPE, SPACING, strict=True)]
    img = nib.Nifti1Image(volume, affine)
    img.header.set_data_dtype(np.int16)
    img.header.set_xyzt_units("mm")
    img.header["descrip"] = b"SYNTHETIC chest CT (HU), HealthAgentBench"
    img.header.set_qform(affine, code=1)
    img.header.set_sform(affine, code=1)
    return gzip_bytes(img.to_bytes())


def generate(task_dir: Path, rng: np.random.Generator, case_id: str = "case_01", *,
             n_labels: int = len(FINDINGS)) -> None:
    """``n_labels`` abnormalities to label: fewer than six are a seeded subset of FINDINGS,
    more add EXTRA_FINDINGS."""
    every = FINDINGS + EXTRA_FINDINGS
    if not 4 <= n_labels <= len(every):
        # Under four labels a random guess is right more than 1 time in 10.
        raise ValueError(f"n_labels must be 4 to {len(every)}")
    if n_labels < len(FINDINGS):
        findings = sorted(rng.choice(FINDINGS, size=n_labels, replace=False).tolist())
    else:
        findings = sorted(every[:n_labels])
    data = reset_dir(task_dir / "environment" / "data")
    labels = _choose_labels(rng, findings)
    write_bytes(data / case_id / "ct.nii.gz", _nifti_bytes(_volume(rng, labels)))
    write_json(
        data / case_id / "findings.json",
        {
            "_synthetic": SYNTHETIC_NOTICE,
            "case_id": case_id,
            "volume": "ct.nii.gz",
            "units": "Hounsfield units (int16, no rescaling)",
            "orientation": "RAS+: +i left, +j anterior, +k superior",
            "findings": findings,
        },
    )
    write_readme(
        data / "README.md",
        "Chest CT volume (synthetic)",
        "One NIfTI-1 volume per case (gzip), shaped like a down-sampled chest CT, plus the "
        "list of abnormalities to label yes/no in `findings.json`.",
    )
    answer = {"labels": {name: "yes" if labels[name] else "no" for name in findings}}
    write_json(task_dir / "tests" / "answer.json", answer)
    write_json(task_dir / "solution" / "submission.json", answer)
