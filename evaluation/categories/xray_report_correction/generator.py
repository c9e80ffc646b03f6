"""xray-report-correction: longitudinal synthetic chest X-rays, prior reports, and a target
report whose FINDINGS carry three injected, clinically significant errors.

The images agree with the reference findings (effusion side and size, heart size, line,
basal opacity), so the errors can be found from the pixels and the priors.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, PngImagePlugin

from evaluation.generating import SYNTHETIC_NOTICE, reset_dir, write_bytes, write_json, write_readme, write_text

SIZE = 256
OTHER = {"left": "right", "right": "left"}
LINE_OK = "terminates in the lower superior vena cava"
LINE_BAD = "terminates in the right internal jugular vein"


def _facts(rng: np.random.Generator) -> dict:
    size = ["small", "moderate"][rng.integers(2)]
    return {
        "side": ["left", "right"][rng.integers(2)],
        "size": size,
        # The prior had the other size, so the change follows from the size.
        "prior_size": "moderate" if size == "small" else "small",
        "change": "decreased" if size == "small" else "increased",
        "heart": ["normal in size", "mildly enlarged"][rng.integers(2)],
        "line": bool(rng.integers(2)),
        "opacity": bool(rng.integers(2)),
    }


def _sentences(f: dict) -> dict[str, str]:
    s = {}
    if f["line"]:
        s["line"] = f"A right-sided PICC {LINE_OK}."
    s["effusion"] = (
        f"There is a {f['size']} {f['side']} pleural effusion, "
        f"{f['change']} in size compared with the prior study."
    )
    s["opacity"] = (
        f"Patchy opacity at the {OTHER[f['side']]} lung base may reflect atelectasis "
        "or early pneumonia."
        if f["opacity"]
        else "No focal consolidation."
    )
    s["ptx"] = "No pneumothorax."
    s["heart"] = f"The cardiac silhouette is {f['heart']}, unchanged."
    s["mediastinum"] = "Mediastinal contours are within normal limits."
    return s


ERROR_KINDS = ("device", "heart", "interval", "laterality", "omission", "pneumothorax", "severity")
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def _errors(f: dict, s: dict[str, str], rng: np.random.Generator, n_errors: int = 3,
            kinds: tuple[str, ...] | None = None) -> tuple[dict, list[str]]:
    """Apply ``n_errors`` distinct error operations (drawn from ``kinds``, default every one the
    facts allow); return the erroneous sentences and phrases."""
    other_heart = "mildly enlarged" if f["heart"] == "normal in size" else "normal in size"
    wrong_size = "large" if f["size"] == "small" else "small"
    wrong_change = "increased" if f["change"] == "decreased" else "decreased"
    ops = {
        "laterality": ("effusion", f"{f['size']} {f['side']} pleural effusion",
                       f"{f['size']} {OTHER[f['side']]} pleural effusion"),
        "severity": ("effusion", f"{f['size']} {f['side']} pleural effusion",
                     f"{wrong_size} {f['side']} pleural effusion"),
        "interval": ("effusion", f"{f['change']} in size compared",
                     f"{wrong_change} in size compared"),
        "pneumothorax": ("ptx", "No pneumothorax.",
                         f"Small {OTHER[f['side']]} apical pneumothorax."),
        "heart": ("heart", f"silhouette is {f['heart']}", f"silhouette is {other_heart}"),
    }
    if f["line"]:
        ops["device"] = ("line", LINE_OK, LINE_BAD)
    if f["opacity"]:
        ops["omission"] = ("opacity", s["opacity"], "No focal consolidation.")
    names = sorted(n for n in ops if kinds is None or n in kinds)
    if len(names) - ({"laterality", "severity"} <= set(names)) < n_errors:
        raise ValueError(f"{n_errors} errors cannot be drawn from the kinds {names}")
    while True:
        picked = sorted(rng.choice(names, size=n_errors, replace=False).tolist())
        if not {"laterality", "severity"} <= set(picked):
            break
    out, phrases = dict(s), []
    for name in picked:
        key, old, new = ops[name]
        out[key] = out[key].replace(old, new)
        phrases.append(new.rstrip("."))
    return out, phrases


def _image(rng: np.random.Generator, f: dict, effusion: str | None, line: bool) -> np.ndarray:
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(float)
    img = np.full((SIZE, SIZE), 95.0)
    img += 25 * np.exp(-(((xx - 128) / 120) ** 2))  # soft tissue
    # Radiological convention: the patient's right is on the viewer's left.
    centres = {"right": 78.0, "left": 178.0}
    lungs = {}
    for side, cx in centres.items():
        lung = ((xx - cx) / 46) ** 2 + ((yy - 120) / 88) ** 2 <= 1.0
        lungs[side] = lung & (yy < 200 - 12 * np.cos((xx - cx) / 30))
        img[lungs[side]] = 38.0
    for r in range(8):  # ribs
        arc = np.abs(yy - (52 + 19 * r) - 0.004 * (xx - 128) ** 2) < 3.0
        img[arc & (lungs["left"] | lungs["right"])] += 22.0
    heart_w = 58.0 if f["heart"] == "mildly enlarged" else 42.0
    heart = ((xx - 138) / heart_w) ** 2 + ((yy - 172) / 36) ** 2 <= 1.0
    img[heart & (yy > 130)] = 165.0
    img[np.abs(xx - 128) < 9] = np.maximum(img[np.abs(xx - 128) < 9], 150.0)  # spine
    for side, cx in centres.items():  # clavicles
        img[(np.abs(yy - 44 - 0.08 * np.abs(xx - 128)) < 3) & (np.abs(xx - cx) < 45)] = 175.0
    if effusion is not None:
        level = {"small": 170, "moderate": 140}[effusion]
        lung = lungs[f["side"]]
        outward = 1.0 if f["side"] == "left" else -1.0
        lateral = np.clip(outward * (xx - centres[f["side"]]) / 46, 0, 1)
        meniscus = yy > level - 22 * lateral  # fluid climbs the lateral chest wall
        img[lung & meniscus] = 150.0
    if f["opacity"]:
        lung = lungs[OTHER[f["side"]]]
        patch = lung & (yy > 150) & (rng.random((SIZE, SIZE)) < 0.55)
        img[patch] += 45.0
    if line:
        path = np.abs(xx - (20 + 0.9 * (yy - 40))) < 1.5
        img[path & (yy > 40) & (yy < 100) & (xx < 115)] = 230.0
    img += rng.normal(0, 3.0, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def _png(pixels: np.ndarray) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", SYNTHETIC_NOTICE)
    buf = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buf, format="PNG", pnginfo=info, compress_level=9)
    return buf.getvalue()


def _report(date: str, findings: str, impression: str) -> str:
    return (
        f"SYNTHETIC REPORT (not a real patient)\nEXAMINATION: Chest radiograph, PA view\n"
        f"DATE: {date}\n\nFINDINGS:\n{findings}\n\nIMPRESSION:\n{impression}\n"
    )


def generate(task_dir: Path, rng: np.random.Generator, case_id: str = "case_01", *,
             n_errors: int = 3, error_kinds: tuple[str, ...] | None = None,
             n_priors: int = 2) -> None:
    """``n_errors`` injected errors of ``error_kinds`` (default: any the case allows) and a
    history of ``n_priors`` earlier studies (the last one shows the effusion first)."""
    data = reset_dir(task_dir / "environment" / "data")
    f = _facts(rng)
    if error_kinds is not None:
        unknown = set(error_kinds) - set(ERROR_KINDS)
        if unknown:
            raise ValueError(f"unknown error kinds {sorted(unknown)}")
        # A device or omission error needs a line or an opacity to corrupt.
        f["line"] = f["line"] or "device" in error_kinds
        f["opacity"] = f["opacity"] or "omission" in error_kinds
    if n_priors < 1:
        raise ValueError("the history needs at least the prior that shows the effusion")
    s = _sentences(f)
    reference = " ".join(s.values())
    wrong, phrases = _errors(f, s, rng, n_errors, error_kinds)
    draft = " ".join(wrong.values())
    for phrase in phrases:
        assert phrase.lower() not in reference.lower(), phrase
        assert phrase in draft, phrase
    heart = f"The cardiac silhouette is {f['heart']}."
    clear = [(f"study_{i + 1:02d}", f"{2181 - (n_priors - 2 - i)}-03-02", None, False,
              f"The lungs are clear. No pleural effusion or pneumothorax. {heart}",
              "No acute cardiopulmonary process.") for i in range(n_priors - 1)]
    studies = [*clear,
        (f"study_{n_priors:02d}", "2183-07-19", f["prior_size"], f["line"],
         (f"A right-sided PICC {LINE_OK}. " if f["line"] else "")
         + f"New {f['prior_size']} {f['side']} pleural effusion. No pneumothorax. {heart}",
         f"New {f['prior_size']} {f['side']} pleural effusion."),
    ]
    target = f"study_{n_priors + 1:02d}"
    case = data / case_id
    for sid, date, eff, line, findings, impression in studies:
        write_bytes(case / sid / "image.png", _png(_image(rng, f, eff, line)))
        write_text(case / sid / "report.txt", _report(date, findings, impression))
    write_bytes(case / target / "image.png", _png(_image(rng, f, f["size"], f["line"])))
    write_text(
        case / target / "report_draft.txt",
        _report("2183-08-04", draft, "Pleural effusion, see findings. Comparison with prior."),
    )
    write_json(
        case / "studies.json",
        {
            "_synthetic": SYNTHETIC_NOTICE,
            "case_id": case_id,
            "studies": [
                *({"study": sid, "date": date, "role": "prior"} for sid, date, *_ in studies),
                {"study": target, "date": "2183-08-04", "role": "target"},
            ],
        },
    )
    write_readme(
        data / "README.md",
        "Chest radiographs and reports (synthetic)",
        f"One case with {NUMBER_WORDS[n_priors + 1]} PA chest radiographs in date order (8-bit "
        "PNG, 256 x 256, patient's right on the viewer's left). "
        + ("Studies 1 and 2 carry their final reports; " if n_priors == 2 else
           f"Studies 1 to {n_priors} carry their final reports; " if n_priors > 2 else
           "Study 1 carries its final report; ")
        + f"study {n_priors + 1} carries a draft report to correct.",
    )
    write_json(task_dir / "tests" / "answer.json",
               {"reference_findings": reference, "injected_errors": phrases})
    write_json(task_dir / "solution" / "submission.json", {"findings": reference})
