"""Tabular views of selector output, shared by the CSV downloads and the JSON API so both always
carry the same columns and values. Rates are fractions in [0, 1]."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from leaderboard import selectors
from evaluation.models import BenchmarkVersion
from submissions.models import OUTCOME_CODES


RECONSTRUCTED = "reconstructed-from-published-aggregates"
PROVENANCE_NOTE = (
    "Rows whose provenance is 'reconstructed-from-published-aggregates' are the paper's agents: "
    "their per-trial outcomes are reconstructed from published aggregates, not real runs."
)


def provenance(reconstructed: bool, verified: bool) -> str:
    if reconstructed:
        return RECONSTRUCTED
    return "verified" if verified else "submitted"


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    rows: Iterable[tuple]

    def dicts(self) -> Iterator[dict]:
        for row in self.rows:
            yield dict(zip(self.columns, row, strict=True))


def _money(v: Decimal | None) -> float | None:
    return float(v) if v is not None else None


def _r(v: float | None, nd: int = 6) -> float | None:
    return round(v, nd) if v is not None else None


def _checked(cov: dict) -> tuple:
    """(re-graded, reproduced, re-run, counted, uncovered passes); None where never checked."""
    if not cov:
        return (None,) * 5
    return (cov["regraded"], cov["reproduced"], cov["rerun"], cov["counted"],
            cov["passes_uncovered"])


# The first 13 columns are the published, fixed CSV interface; extras follow (stable ids last).
# reported_*: the submission's own figures (its Harbor result.json), never measured by the site.
LEADERBOARD_COLUMNS = (
    "rank", "agent", "harness", "model", "success_rate", "ci_low", "ci_high", "successes",
    "attempts", "reported_cost_per_attempt_usd", "reported_mean_duration_s",
    "reported_mean_output_tokens", "verified", "tie_group", "provider", "infra_errors",
    "coverage", "reported_cost_per_success_usd",
    "pass_at_3", "pass_hat_3", "reconstructed", "date", "provenance",
    "claimed_successes", "flagged_trials", "infra_errors_claimed",
    "infra_errors_confirmed", "verification_level", "regraded_trials", "reproduced_trials",
    "rerun_trials", "counted_trials", "passes_not_reproduced_or_rerun", "badge",
    "agent_id", "agent_slug", "submission_id")


def leaderboard_row(e) -> tuple:
    """One entry as the leaderboard CSV/API row (LEADERBOARD_COLUMNS)."""
    return (e.rank, e.agent.display_name, e.agent.harness.slug, e.agent.model.slug,
            _r(e.success_rate), _r(e.ci_low), _r(e.ci_high), e.successes, e.attempts,
            _money(e.cost_per_attempt_usd), _r(e.mean_duration_s, 1),
            _r(e.mean_output_tokens, 1), e.verified, e.tie_group, e.agent.model.provider,
            e.infra_errors, _r(e.coverage), _money(e.cost_per_success_usd), _r(e.pass_at_k),
            _r(e.pass_hat_k), e.reconstructed,
            e.submitted_on.isoformat() if e.submitted_on else None,
            provenance(e.reconstructed, e.verified), e.claimed_successes, e.flagged_trials,
            e.infra_errors_claimed, e.infra_errors, e.verification_level,
            *_checked(e.verification), e.badge, e.agent_id, e.agent.slug, e.submission_id)


def leaderboard_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    entries = selectors.leaderboard_rows(benchmark_version=bv, filters=filters)
    return Table("leaderboard", LEADERBOARD_COLUMNS, [leaderboard_row(e) for e in entries])


def categories_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    categories, entries = selectors.category_matrix(benchmark_version=bv, filters=filters)
    rows = []
    for e in entries:
        for c in categories:
            ce = e.category_results.get(c.slug)
            if ce is None:
                continue
            rows.append((e.agent.display_name, c.slug, c.group, ce.successes, ce.attempts,
                         _r(ce.success_rate), _r(ce.ci_low), _r(ce.ci_high),
                         provenance(e.reconstructed, e.verified), e.agent_id, e.submission_id))
    return Table("categories", ("agent", "category", "group", "successes", "attempts",
                                "success_rate", "ci_low", "ci_high", "provenance", "agent_id",
                                "submission_id"), rows)


def groups_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    entries = selectors.leaderboard_rows(benchmark_version=bv, filters=filters)
    rows = []
    for e in entries:
        for group, macro, pooled in (("imaging", e.imaging_macro, e.imaging_pooled),
                                     ("text", e.text_macro, e.text_pooled)):
            if macro is None:
                continue
            rows.append((e.agent.display_name, e.agent.harness.slug, group, _r(macro),
                         _r(pooled), provenance(e.reconstructed, e.verified), e.agent_id,
                         e.submission_id))
    return Table("groups", ("agent", "harness", "group", "macro_success_rate",
                            "pooled_success_rate", "provenance", "agent_id", "submission_id"),
                 rows)


def harness_families_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    aggs = selectors.harness_family_aggregates(benchmark_version=bv)
    return Table(
        "harness_families",
        ("harness_family", "agents", "mean_success_rate", "pooled_success_rate",
         "imaging_macro_success_rate", "text_macro_success_rate", "imaging_pooled_success_rate",
         "text_pooled_success_rate"),
        [(a.key, a.agents, _r(a.mean_success_rate), _r(a.pooled_success_rate),
          _r(a.imaging_macro), _r(a.text_macro), _r(a.imaging_pooled), _r(a.text_pooled))
         for a in aggs],
    )


def flags_text(flags: list | None) -> str:
    return ";".join(flags or [])


# outcome and success are the site's (what every aggregate counts); the claim follows.
# reported_*: the submission's own figures (its Harbor result.json), never measured by the site.
TRIAL_COLUMNS = ("agent", "task", "category", "attempt", "outcome", "success",
                 "reported_cost_usd", "reported_duration_s", "reported_output_tokens",
                 "reported_input_tokens", "reported_cached_tokens", "provenance",
                 "claimed_outcome",
                 "claimed_success", "claimed_reward", "verified_reward", "verification_level",
                 "flags", "submission", "judge_model", "judge_prompt_version", "trial_id",
                 "agent_id", "grader_version", "infra_confirmed", "infra_confirmed_by",
                 "infra_confirm_reason", "trajectory_judgement", "trajectory_judge_model",
                 "trajectory_judge_prompt_version")


def trials_table(bv: BenchmarkVersion, filters: selectors.EntryFilters, *, offset: int = 0,
                 limit: int | None = None) -> Table:
    """Every trial row, or the page offset..offset+limit of them, read from the database."""
    rows = (
        (agent, task, cat, attempt, outcome, success, _money(cost), duration, out_tokens,
         in_tokens, cached_tokens, provenance(reconstructed, verified), claimed, claimed_success, claimed_reward,
         verified_reward, "reconstructed" if reconstructed else level, flags_text(flags),
         submission, judge_model, judge_prompt_version, trial_id, agent_id, grader_version,
         infra_confirmed, infra_by, infra_reason, tj, tj_model, tj_prompt)
        for agent, task, cat, attempt, outcome, success, cost, duration, out_tokens, in_tokens,
        cached_tokens, reconstructed, verified, claimed, claimed_success, claimed_reward, verified_reward,
        flags, submission, level, judge_model, judge_prompt_version, trial_id, agent_id,
        grader_version, infra_confirmed, infra_by, infra_reason, tj, tj_model, tj_prompt
        in selectors.trial_rows(benchmark_version=bv, filters=filters, offset=offset,
                                limit=limit)
    )
    return Table("trials", TRIAL_COLUMNS, rows)


# outcomes are the site's codes per attempt (OUTCOME_LETTERS; outcome_names spells them out);
# claimed_outcomes the submission's; flags one ";"-list per attempt, attempts separated by "|".
TASK_MATRIX_COLUMNS = ("agent", "task", "category", "outcomes", "successes", "provenance",
                       "claimed_outcomes", "flags", "outcome_names", "agent_id",
                       "submission_id", "task_id")
# The letters of outcomes/claimed_outcomes (submissions.models.OUTCOME_CODES), as documented on
# /downloads/.
OUTCOME_LETTERS = {code: str(outcome) for outcome, code in OUTCOME_CODES.items()}


def outcome_names(codes: str) -> str:
    return "|".join(OUTCOME_LETTERS[c] for c in codes)


def task_matrix_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    tasks, entries = selectors.task_matrix(benchmark_version=bv, filters=filters)
    rows = []
    for e in entries:
        for t, cell in zip(tasks, e.cell_list, strict=True):
            rows.append((e.agent.display_name, t.name, t.category.slug,
                         cell.outcomes if cell else "", cell.successes if cell else 0,
                         provenance(e.reconstructed, e.verified),
                         cell.claimed_outcomes if cell else "",
                         "|".join(flags_text(f) for f in cell.flags) if cell else "",
                         outcome_names(cell.outcomes) if cell else "", e.agent_id,
                         e.submission_id, t.pk))
    return Table("task_matrix", TASK_MATRIX_COLUMNS, rows)


def tasks_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    tasks = selectors.task_catalogue(benchmark_version=bv)
    return Table(
        "tasks",
        ("task", "category", "group", "modality", "data_source", "access", "success_criterion",
         "runnable_here", "solved_attempts", "scored_attempts", "solve_rate"),
        [(t.name, t.category.slug, t.category.group, t.category.modality, t.category.data_source,
          t.category.access, t.category.success_criterion, t.runnable_here, t.solved, t.scored,
          _r(t.solve_rate)) for t in tasks],
    )


TABLES = {
    "leaderboard": leaderboard_table,
    "categories": categories_table,
    "groups": groups_table,
    "harness-families": harness_families_table,
    "trials": trials_table,
    "task-matrix": task_matrix_table,
    "tasks": tasks_table,
}


# Each CSV's columns, for the downloads page (the small tables' headers are fixed here too).
COLUMNS_OF = {
    "leaderboard": LEADERBOARD_COLUMNS,
    "categories": ("agent", "category", "group", "successes", "attempts", "success_rate",
                   "ci_low", "ci_high", "provenance", "agent_id", "submission_id"),
    "groups": ("agent", "harness", "group", "macro_success_rate", "pooled_success_rate",
               "provenance", "agent_id", "submission_id"),
    "harness-families": ("harness_family", "agents", "mean_success_rate", "pooled_success_rate",
                         "imaging_macro_success_rate", "text_macro_success_rate",
                         "imaging_pooled_success_rate", "text_pooled_success_rate"),
    "trials": TRIAL_COLUMNS,
    "task-matrix": TASK_MATRIX_COLUMNS,
    "tasks": ("task", "category", "group", "modality", "data_source", "access",
              "success_criterion", "runnable_here", "solved_attempts", "scored_attempts",
              "solve_rate"),
}
