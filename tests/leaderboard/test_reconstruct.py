"""Checks the synthetic per-trial reconstruction against every published figure of the paper.

All aggregates are recomputed here from the rows (exact fractions), independently of the helpers
in leaderboard.demo.reconstruct. No database needed:
    .venv/bin/python -m pytest tests/leaderboard/test_reconstruct.py -q -p no:django
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from leaderboard.demo.reconstruct import TrialRow, load_paper, reconstruct

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference" / "healthagentbench-paper.yaml"

CATEGORIES = {  # slug: (group, tasks)
    "xray-report-correction": ("imaging", 10),
    "pathology-tumor-region": ("imaging", 10),
    "ct-abnormality-classification": ("imaging", 10),
    "ehr-data-quality-audit": ("text", 8),
    "ehr-format-conversion": ("text", 1),
    "ehr-event-modeling": ("text", 6),
    "clinical-trial-matching": ("text", 9),
}
IMAGING = [c for c, (g, _) in CATEGORIES.items() if g == "imaging"]
TEXT = [c for c, (g, _) in CATEGORIES.items() if g == "text"]
N = {c: 3 * t for c, (_, t) in CATEGORIES.items()}

# rank order: (agent, success_pct, cost per attempt)
LEADERBOARD = [
    ("Codex (GPT 5.5)", 42, "2.8"),
    ("Copilot (Opus 4.8)", 36, "3.1"),
    ("Copilot (GPT 5.5)", 35, "2.6"),
    ("Claude Code (Opus 4.8)", 32, "4.0"),
    ("Codex (GPT 5.4)", 28, "1.3"),
    ("Claude Code (Opus 4.7)", 27, "4.8"),
    ("Codex (GPT 5.3)", 22, "1.0"),
    ("Claude Code (Opus 4.6)", 19, "4.1"),
    ("Claude Code (Sonnet 4.6)", 17, "2.9"),
    ("Codex (GPT 5.4 Mini)", 16, "0.6"),
]
AGENTS = [a for a, _, _ in LEADERBOARD]
CODEX = [a for a in AGENTS if a.startswith("Codex (")]
CLAUDE = [a for a in AGENTS if a.startswith("Claude Code (")]
COPILOT = [a for a in AGENTS if a.startswith("Copilot (")]
C55 = "Codex (GPT 5.5)"


def pct(x) -> int:
    """Nearest integer percent, half up, exactly."""
    return math.floor(Fraction(x) * 100 + Fraction(1, 2))


@pytest.fixture(scope="module")
def paper() -> dict:
    return load_paper()


DEFAULT_SEED = 20260602


# The published figures must hold for the default seed and for any other seed.
@pytest.fixture(scope="module", params=[DEFAULT_SEED, 7, 424242], ids=lambda v: f"seed{v}")
def seed(request) -> int:
    return request.param


@pytest.fixture(scope="module")
def rows(paper, seed) -> list[TrialRow]:
    return reconstruct(paper, seed=seed)


@pytest.fixture(scope="module")
def default_rows(paper) -> list[TrialRow]:
    return reconstruct(paper)


@pytest.fixture(scope="module")
def s(rows) -> dict[tuple[str, str], int]:
    out: Counter = Counter()
    for r in rows:
        out[(r.agent, r.category)] += r.success
    return out


def by_agent(rows, agent):
    return [r for r in rows if r.agent == agent]


def macro(s, agent, cats) -> Fraction:
    return sum(Fraction(s[(agent, c)], N[c]) for c in cats) / len(cats)


def family_macro(s, agents, cats) -> Fraction:
    return sum(macro(s, a, cats) for a in agents) / len(agents)


# ---------------------------------------------------------------------------- paper.yaml


def test_paper_yaml_keeps_reference(paper):
    assert [e["agent"] for e in sorted(paper["leaderboard"], key=lambda e: e["rank"])] == AGENTS
    if REFERENCE.exists():
        ref = yaml.safe_load(REFERENCE.read_text(encoding="utf-8"))
        for key in ("benchmark", "categories", "leaderboard", "facts"):
            assert paper[key] == ref[key], key
        # comments of the reference are kept verbatim at the top of the copy
        text = (ROOT / "leaderboard" / "demo" / "paper.yaml").read_text(encoding="utf-8")
        assert text.startswith(REFERENCE.read_text(encoding="utf-8"))
    for e in paper["leaderboard"]:
        assert (e["agent"], e["success_pct"], str(e["cost_usd_per_attempt"])) in LEADERBOARD
    assert {c["slug"]: (c["group"], c["tasks"]) for c in paper["categories"]} == CATEGORIES
    extras = {e["agent"]: e for e in paper["agents"]}
    assert set(extras) == set(AGENTS)
    for a in AGENTS:
        e = extras[a]
        assert f"{e['harness_name']} ({e['model_name']})" == a
        assert e["harness"] in {"codex", "claude-code", "copilot-cli"}
        assert e["model_provider"] in {"OpenAI", "Anthropic"}


# ---------------------------------------------------------------------------- shape, types


def test_shape(rows):
    assert len(rows) == 1620
    assert {r.agent for r in rows} == set(AGENTS)
    assert len({r.task for r in rows}) == 54
    cells = defaultdict(list)
    for r in rows:
        cells[(r.agent, r.task)].append(r.attempt)
        m = re.fullmatch(r"([a-z-]+)/case_(\d\d)", r.task)
        assert m and m.group(1) == r.category
        assert 1 <= int(m.group(2)) <= CATEGORIES[r.category][1]
    assert len(cells) == 10 * 54
    assert all(sorted(v) == [1, 2, 3] for v in cells.values())
    for c, (_, t) in CATEGORIES.items():
        names = {r.task for r in rows if r.category == c}
        assert names == {f"{c}/case_{i:02d}" for i in range(1, t + 1)}
    for a in AGENTS:
        assert len(by_agent(rows, a)) == 162


def test_row_types(rows):
    for r in rows:
        assert r.outcome in {"passed", "failed", "timeout", "agent_error"}
        assert r.success is (r.outcome == "passed")
        assert r.reward == (1.0 if r.success else 0.0)
        assert isinstance(r.cost_usd, Decimal) and r.cost_usd.as_tuple().exponent == -4
        assert r.cost_usd > 0
        for v in (r.duration_s, r.input_tokens, r.cached_tokens, r.output_tokens):
            assert isinstance(v, int) and not isinstance(v, bool) and v > 0
        assert r.cached_tokens <= r.input_tokens
        assert r.input_tokens > r.output_tokens
        assert isinstance(r.soft_metrics, dict) and r.soft_metrics
        assert all(type(v) in (int, float) for v in r.soft_metrics.values())


def test_determinism(paper, rows, seed):
    assert reconstruct(paper, seed=seed) == rows
    assert reconstruct(load_paper(), seed=seed) == rows
    assert (reconstruct(paper, seed=seed + 1) == rows) is False


def test_default_seed(paper, default_rows):
    assert reconstruct(paper, seed=DEFAULT_SEED) == default_rows


def _digest(rows) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def test_determinism_across_processes(default_rows):
    code = (
        "import hashlib;from leaderboard.demo.reconstruct import load_paper,reconstruct;"
        "print(hashlib.sha256(repr(reconstruct(load_paper())).encode()).hexdigest())"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == _digest(default_rows)


def test_fast(paper):
    t0 = time.perf_counter()
    reconstruct(paper)
    assert time.perf_counter() - t0 < 5.0


# ---------------------------------------------------------------------------- success figures


def test_leaderboard(s):
    totals = [sum(s[(a, c)] for c in CATEGORIES) for a in AGENTS]
    for (a, p, _), tot in zip(LEADERBOARD, totals, strict=True):
        assert pct(Fraction(tot, 162)) == p, a
    assert all(x > y for x, y in zip(totals, totals[1:], strict=False))


def test_group_macros(s):
    both = CODEX + CLAUDE
    assert len(both) == 8 and len(CODEX) == 4 and len(CLAUDE) == 4
    assert pct(family_macro(s, both, IMAGING)) == 17
    assert pct(family_macro(s, both, TEXT)) == 49
    assert pct(family_macro(s, CODEX, IMAGING)) == 22
    assert pct(family_macro(s, CLAUDE, IMAGING)) == 12
    assert pct(family_macro(s, CODEX, TEXT)) == 50
    assert pct(family_macro(s, CLAUDE, TEXT)) == 48


def test_imaging_caps(s):
    for a in AGENTS:
        for c in IMAGING:
            assert Fraction(s[(a, c)], N[c]) <= Fraction(40, 100)
    assert abs(macro(s, C55, IMAGING) - Fraction(35, 100)) <= Fraction(1, 100)


def test_ehr_data_quality_audit(s):
    c = "ehr-data-quality-audit"
    best = "Claude Code (Opus 4.6)"
    assert s[(best, c)] == 10 and pct(Fraction(10, 24)) == 42
    assert all(s[(a, c)] < 10 for a in AGENTS if a != best)
    assert all(Fraction(s[(a, c)], 24) <= Fraction(1, 2) for a in AGENTS)
    for a in ("Codex (GPT 5.4)", "Codex (GPT 5.3)", "Codex (GPT 5.4 Mini)"):
        assert s[(a, c)] <= 3 and Fraction(s[(a, c)], 24) < Fraction(13, 100)


def test_ehr_format_conversion(rows, s):
    c = "ehr-format-conversion"
    full = [a for a in AGENTS if s[(a, c)] == 3]
    assert full == [a for a in AGENTS if a != "Claude Code (Opus 4.6)"]
    assert s[("Claude Code (Opus 4.6)", c)] == 0
    for r in rows:
        if r.category == c and r.agent == "Claude Code (Opus 4.6)":
            assert r.outcome == "failed" and r.soft_metrics["missing_fields"] == 1


def test_ehr_event_modeling(s):
    c = "ehr-event-modeling"
    assert s[("Claude Code (Opus 4.7)", c)] == 14 and pct(Fraction(14, 18)) == 78
    assert s[(C55, c)] == 13 and pct(Fraction(13, 18)) == 72
    assert all(s[(a, c)] < 14 for a in AGENTS if a != "Claude Code (Opus 4.7)")
    assert sum(Fraction(s[(a, c)], 18) > Fraction(1, 2) for a in AGENTS) >= 6


def test_clinical_trial_matching(s):
    c = "clinical-trial-matching"
    assert s[("Copilot (Opus 4.8)", c)] == 18 and pct(Fraction(18, 27)) == 67
    assert s[(C55, c)] == 14 and pct(Fraction(14, 27)) == 52
    assert all(s[(a, c)] < 18 for a in AGENTS if a != "Copilot (Opus 4.8)")
    others = [a for a in AGENTS if a not in ("Copilot (Opus 4.8)", C55)]
    assert sum(11 <= pct(Fraction(s[(a, c)], 27)) <= 26 for a in others) >= 5
    assert all(s[(a, c)] < 27 for a in AGENTS)


# ---------------------------------------------------------------------------- cost, time, tokens


def test_costs(rows):
    for a, _, cost in LEADERBOARD:
        rs = by_agent(rows, a)
        assert sum(r.cost_usd for r in rs) == 162 * Decimal(cost), a
        assert len({r.cost_usd for r in rs}) > 100  # varies per trial
        timeouts = [r.cost_usd for r in rs if r.outcome == "timeout"]
        rest = [r.cost_usd for r in rs if r.outcome != "timeout"]
        if timeouts:
            assert sum(timeouts) / len(timeouts) > sum(rest) / len(rest), a
    highest = max(LEADERBOARD, key=lambda e: Decimal(e[2]))[0]
    assert highest == "Claude Code (Opus 4.7)"


def _mean(rows, agent, attr) -> Fraction:
    rs = by_agent(rows, agent)
    return Fraction(sum(getattr(r, attr) for r in rs), len(rs))


def test_durations(rows):
    mean = {a: _mean(rows, a, "duration_s") for a in AGENTS}
    order = sorted(AGENTS, key=lambda a: mean[a], reverse=True)
    assert order[0] == "Claude Code (Sonnet 4.6)"
    assert order[1] == "Claude Code (Opus 4.7)" and mean[order[1]] > mean[order[2]]
    assert abs(mean["Claude Code (Sonnet 4.6)"] - 24 * 60) <= 30
    assert abs(mean[C55] - 15 * 60) <= 30
    for a in AGENTS:
        assert 5 * 60 <= mean[a] <= 24.5 * 60, a
        if a not in ("Claude Code (Sonnet 4.6)", "Claude Code (Opus 4.7)"):
            assert mean[a] <= 20 * 60, a
    for r in rows:
        if r.outcome == "timeout":
            assert r.duration_s >= 3600
        else:
            assert r.duration_s < 3600


def test_tokens(rows):
    for a in CLAUDE:
        assert 43500 <= _mean(rows, a, "output_tokens") < 44500, a
    assert 19500 <= _mean(rows, C55, "output_tokens") < 20500
    for a in AGENTS:
        out = _mean(rows, a, "output_tokens")
        inp = _mean(rows, a, "input_tokens")
        cached = _mean(rows, a, "cached_tokens")
        assert 5000 <= out <= 60000, a
        assert inp >= 10 * out, a
        assert Fraction(3, 10) <= cached / inp <= Fraction(95, 100), a


# ---------------------------------------------------------------- outcomes, soft metrics


def test_outcome_mix(rows):
    fails = Counter(r.outcome for r in rows if not r.success)
    total = sum(fails.values())
    assert fails["failed"] > 0.7 * total
    assert 0 < fails["timeout"] < 0.15 * total
    assert 0 < fails["agent_error"] < 0.10 * total

    def timeout_share(cats):
        f = [r for r in rows if not r.success and r.category in cats]
        return sum(r.outcome == "timeout" for r in f) / len(f)

    em = "ehr-event-modeling"
    assert timeout_share([em]) > timeout_share([c for c in CATEGORIES if c != em])


def test_soft_metrics_consistent_with_success(rows):
    for r in rows:
        m = r.soft_metrics
        c = r.category
        if c == "clinical-trial-matching":
            assert set(m) == {"recall_at_50"} and 0 <= m["recall_at_50"] <= 1
            assert r.success == (m["recall_at_50"] == 1.0)
        elif c == "pathology-tumor-region":
            assert set(m) == {"tile_f1"} and 0 <= m["tile_f1"] <= 1
            assert r.success == (m["tile_f1"] >= 0.9)
        elif c == "ct-abnormality-classification":
            assert set(m) == {"accuracy", "false_negatives", "false_positives"}
            assert 0 <= m["accuracy"] <= 1
            assert r.success == (m["accuracy"] == 1.0)
            assert (m["false_negatives"] + m["false_positives"] == 0) == r.success
        elif c == "ehr-data-quality-audit":
            assert set(m) == {"recall", "precision"}
            assert 0 <= m["recall"] <= 1 and 0 <= m["precision"] <= 1
            assert r.success == (m["recall"] == 1.0 and m["precision"] > 0.01)
        elif c == "ehr-event-modeling":
            assert set(m) == {"auroc", "baseline_auroc"}
            assert 0.5 <= m["baseline_auroc"] < 1 and 0 < m["auroc"] < 1
            assert r.success == (m["auroc"] >= m["baseline_auroc"])
        elif c == "xray-report-correction":
            assert set(m) == {"judge_zero_error_votes"}
            v = m["judge_zero_error_votes"]
            assert isinstance(v, int) and 0 <= v <= 5
            assert r.success == (v >= 3)
        elif c == "ehr-format-conversion":
            assert set(m) == {"missing_fields", "rows_matched_fraction"}
            assert r.success == (m["missing_fields"] == 0 and m["rows_matched_fraction"] == 1.0)
        else:
            pytest.fail(c)


def test_baseline_is_per_task(rows):
    base = defaultdict(set)
    for r in rows:
        if r.category == "ehr-event-modeling":
            base[r.task].add(r.soft_metrics["baseline_auroc"])
    assert all(len(v) == 1 for v in base.values())


def test_trial_matching_recall(rows):
    c = "clinical-trial-matching"
    for a in ("Copilot (Opus 4.8)", C55):
        rs = [r for r in rows if r.agent == a and r.category == c]
        mean = sum(r.soft_metrics["recall_at_50"] for r in rs) / len(rs)
        assert 0.85 <= mean <= 0.93, (a, mean)
    for a in AGENTS:
        rs = [r for r in rows if r.agent == a and r.category == c]
        assert not all(r.soft_metrics["recall_at_50"] == 1.0 for r in rs)


def test_ct_errors_balanced(rows):
    f = [r for r in rows if r.category == "ct-abnormality-classification" and not r.success]
    fn = sum(r.soft_metrics["false_negatives"] for r in f)
    fp = sum(r.soft_metrics["false_positives"] for r in f)
    assert fn > 0 and fp > 0
    assert abs(fn - fp) <= 0.10 * max(fn, fp)


def test_successes_cluster_on_easier_tasks(rows):
    """Per-task pass rates correlate across agents (latent task difficulty)."""
    passes = Counter((r.agent, r.task) for r in rows if r.success)
    corr = []
    for c, (_, t) in CATEGORIES.items():
        if t < 6:
            continue
        tasks = [f"{c}/case_{i:02d}" for i in range(1, t + 1)]
        for i, a in enumerate(AGENTS):
            for b in AGENTS[i + 1 :]:
                x = [passes[(a, k)] for k in tasks]
                y = [passes[(b, k)] for k in tasks]
                mx, my = sum(x) / t, sum(y) / t
                sx = sum((v - mx) ** 2 for v in x) ** 0.5
                sy = sum((v - my) ** 2 for v in y) ** 0.5
                if sx and sy:
                    cov = sum((u - mx) * (v - my) for u, v in zip(x, y, strict=True))
                    corr.append(cov / sx / sy)
    assert sum(corr) / len(corr) > 0.3


def test_passes_spread_over_attempts(rows):
    by_attempt = Counter(r.attempt for r in rows if r.success)
    total = sum(by_attempt.values())
    for k in (1, 2, 3):
        assert 0.25 * total <= by_attempt[k] <= 0.42 * total
