"""Lighthouse (npm, pinned in package.json: 12.2.3, which runs on Node 20) on one page, driving
Debian's chromium (CHROME_PATH = pagecheck.CHROMIUM; never a downloaded browser). Used by the
browser test (accessibility and best practices, asserted) and `scripts/measure-pages`
(all four categories, printed with the layout shift and blocking time, never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.browser.pagecheck import CHROMIUM

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "node_modules" / ".bin" / "lighthouse"
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")


@dataclass
class Scores:
    url: str
    form_factor: str
    scores: dict  # category -> 0..100
    cls: float | None
    tbt_ms: float | None
    failing: list  # (category, audit id, title) of the audits below 1 that weigh in a score


def lighthouse(url: str, *, form_factor: str = "mobile",
               categories: tuple[str, ...] = CATEGORIES, timeout_s: float = 180,
               attempts: int = 3) -> Scores:
    """Scores of one run. Lighthouse itself sometimes fails to record a trace on a loaded
    machine ("NO_NAVSTART", "NO_FCP"): such a run is repeated, up to ``attempts`` in all; the
    last failure is raised."""
    for attempt in range(1, attempts + 1):
        try:
            return _run(url, form_factor=form_factor, categories=categories, timeout_s=timeout_s)
        except RuntimeError:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _run(url: str, *, form_factor: str, categories: tuple[str, ...],
         timeout_s: float) -> Scores:
    if not BIN.exists():
        raise FileNotFoundError(f"lighthouse is missing ({BIN}): run `npm ci` at the repository "
                                "root (scripts/run-tests does it)")
    with tempfile.TemporaryDirectory(prefix="hab-lh-") as tmp:
        out = Path(tmp) / "report.json"
        cmd = [str(BIN), url, "--quiet", "--output=json", f"--output-path={out}",
               f"--only-categories={','.join(categories)}",
               "--chrome-flags=--headless=new --no-sandbox --disable-gpu",
               # Its own profile per run, in the temporary directory.
               f"--form-factor={form_factor}"]
        if form_factor == "desktop":
            cmd.append("--preset=desktop")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,  # noqa: S603
                              env={**os.environ, "CHROME_PATH": CHROMIUM, "TMPDIR": tmp},
                              check=False)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"lighthouse failed on {url} (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout)[-2000:]}")
        report = json.loads(out.read_text())
    audits = report["audits"]
    failing = []
    for key, cat in report["categories"].items():
        for ref in cat["auditRefs"]:
            audit = audits.get(ref["id"], {})
            if ref.get("weight", 0) > 0 and audit.get("score") is not None and audit["score"] < 1:
                failing.append((key, ref["id"], audit.get("title", "")))
    return Scores(
        url=url, form_factor=form_factor,
        scores={k: round(100 * (c["score"] or 0)) for k, c in report["categories"].items()},
        cls=audits.get("cumulative-layout-shift", {}).get("numericValue"),
        tbt_ms=audits.get("total-blocking-time", {}).get("numericValue"),
        failing=failing)
