"""Tabular views of selector output, shared by the CSV downloads and the JSON API so both always
carry the same columns and values. Rates are fractions in [0, 1].

Each table is declared once, as a ``TableSpec``: its columns in order, each with its type,
whether it can be empty, what it means and how its value is read. The CSV header, the
``/downloads/`` column list, the API's row serializer (leaderboard.api.row_serializer) and its
OpenAPI component all come from that declaration."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

from leaderboard import reconstruction_spread, selectors
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


# The kinds a column can have; leaderboard.api maps each to a serializer field.
INT, FLOAT, BOOL, TEXT, DATE = "int", "float", "bool", "text", "date"


@dataclass(frozen=True)
class Column:
    """One column of a table: its name, kind, whether it may be null, what it means (the API
    schema's help text) and how its value is read from one source row."""

    name: str
    kind: str
    get: Callable[[Any], Any]
    null: bool = False
    help: str = ""


@dataclass(frozen=True)
class TableSpec:
    """A table's declaration: its URL name, the API schema component of its rows, its
    columns in order."""

    name: str
    component: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def row(self, source) -> tuple:
        return tuple(c.get(source) for c in self.columns)

    def table(self, sources: Iterable) -> Table:
        return Table(self.name.replace("-", "_"), self.names, (self.row(s) for s in sources))


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


def _cov(key: str) -> Callable:
    """A coverage count of the entry's verification record; None where never checked."""
    return lambda e: e.verification[key] if e.verification else None


def _prov(e) -> str:
    return provenance(e.reconstructed, e.verified)


REPORTED = "as the submission reported it (not measured by the site)"


def _spread_columns(names: tuple[str, ...], values: Callable, kinds: dict
                    ) -> tuple[Column, ...]:
    """The columns of a reconstructed row's spread across reconstructions
    (leaderboard.reconstruction_spread), value i of ``values(source)``; floats unless ``kinds``
    says otherwise; null on every real submission's row."""
    def column(i: int, name: str) -> Column:
        kind, help_text = kinds.get(name, (FLOAT, "reconstructed rows: the smallest or largest "
                                                  "value across reconstructions"))
        return Column(name, kind, lambda s: values(s)[i], null=True, help=help_text)
    return tuple(column(i, name) for i, name in enumerate(names))

# The first 13 columns are the published, fixed CSV interface; extras follow (stable ids last).
# reported_*: the submission's own figures (its Harbor result.json), never measured by the site.
LEADERBOARD = TableSpec("leaderboard", "LeaderboardRow", (
    Column("rank", INT, lambda e: e.rank, null=True,
           help="competition rank; empty on a row that is never ranked (ranked: false)"),
    Column("agent", TEXT, lambda e: e.agent.display_name),
    Column("harness", TEXT, lambda e: e.agent.harness.slug),
    Column("model", TEXT, lambda e: e.agent.model.slug),
    Column("success_rate", FLOAT, lambda e: _r(e.success_rate)),
    Column("ci_low", FLOAT, lambda e: _r(e.ci_low)),
    Column("ci_high", FLOAT, lambda e: _r(e.ci_high)),
    Column("successes", INT, lambda e: e.successes),
    Column("attempts", INT, lambda e: e.attempts),
    Column("reported_cost_per_attempt_usd", FLOAT, lambda e: _money(e.cost_per_attempt_usd),
           null=True, help=f"mean USD per scored attempt, {REPORTED}"),
    Column("reported_mean_duration_s", FLOAT, lambda e: _r(e.mean_duration_s, 1), null=True,
           help=f"mean seconds per scored attempt, {REPORTED}"),
    Column("reported_mean_output_tokens", FLOAT, lambda e: _r(e.mean_output_tokens, 1),
           null=True, help="mean output tokens per scored attempt, as the submission reported "
                           "them (not measured by the site)"),
    Column("verified", BOOL, lambda e: e.verified),
    Column("tie_group", INT, lambda e: e.tie_group, null=True,
           help="empty on a row that is never ranked (ranked: false)"),
    Column("provider", TEXT, lambda e: e.agent.model.provider),
    Column("infra_errors", INT, lambda e: e.infra_errors, help="= infra_errors_confirmed"),
    Column("coverage", FLOAT, lambda e: _r(e.coverage)),
    Column("reported_cost_per_success_usd", FLOAT, lambda e: _money(e.cost_per_success_usd),
           null=True, help="total reported cost / successes (the cost as the submission "
                           "reported it)"),
    Column("pass_at_3", FLOAT, lambda e: _r(e.pass_at_k)),
    Column("pass_hat_3", FLOAT, lambda e: _r(e.pass_hat_k)),
    Column("reconstructed", BOOL, lambda e: e.reconstructed),
    Column("date", DATE, lambda e: e.submitted_on.isoformat() if e.submitted_on else None,
           null=True),
    Column("provenance", TEXT, _prov),
    Column("claimed_successes", INT, lambda e: e.claimed_successes),
    Column("flagged_trials", INT, lambda e: e.flagged_trials),
    Column("infra_errors_claimed", INT, lambda e: e.infra_errors_claimed,
           help="trials the submission reports as infrastructure errors"),
    Column("infra_errors_confirmed", INT, lambda e: e.infra_errors,
           help="of those, confirmed by the site (only these leave the denominator)"),
    Column("verification_level", TEXT, lambda e: e.verification_level,
           help="verified | consistent | discrepancy | unverified | reconstructed "
                "(/methods/#verdicts)"),
    Column("regraded_trials", INT, _cov("regraded"), null=True),
    Column("reproduced_trials", INT, _cov("reproduced"), null=True),
    Column("rerun_trials", INT, _cov("rerun"), null=True),
    Column("counted_trials", INT, _cov("counted"), null=True),
    Column("passes_not_reproduced_or_rerun", INT, _cov("passes_uncovered"), null=True),
    Column("badge", TEXT, lambda e: e.badge),
    Column("ranked", BOOL, lambda e: e.ranked,
           help="false for a published row whose verdict is discrepancy: never ranked, and "
                "left out of the other rows' ranks and tie groups"),
    Column("unranked_reason", TEXT, lambda e: e.unranked_reason,
           help="why the row is not ranked, in the site's words (its badge); empty when "
                "ranked"),
    # A reconstructed row's seeded figures across reconstructions (null otherwise)
    *_spread_columns(
        reconstruction_spread.LEADERBOARD_COLUMNS, reconstruction_spread.leaderboard_columns,
        {"tie_group_shares": (TEXT, "reconstructed rows: share of reconstructions placing the "
                                    "agent in each tie group, '1:0.815;2:0.185'"),
         "reconstructions": (INT, "reconstructed rows: how many reconstructions the ranges "
                                  "span")}),
    Column("agent_id", INT, lambda e: e.agent_id, help="stable id of the agent"),
    Column("agent_slug", TEXT, lambda e: e.agent.slug,
           help="the agent page's /agents/<slug>/"),
    Column("submission_id", INT, lambda e: e.submission_id,
           help="the ranked (latest published) submission: /submissions/<id>/"),
))
LEADERBOARD_COLUMNS = LEADERBOARD.names


def leaderboard_row(e) -> tuple:
    """One entry as the leaderboard CSV/API row (LEADERBOARD_COLUMNS)."""
    return LEADERBOARD.row(e)


def leaderboard_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    return LEADERBOARD.table(selectors.leaderboard_rows(benchmark_version=bv, filters=filters))


class _CategoryCell(NamedTuple):
    entry: Any
    category: Any
    result: Any


CATEGORIES = TableSpec("categories", "CategoryRow", (
    Column("agent", TEXT, lambda s: s.entry.agent.display_name),
    Column("category", TEXT, lambda s: s.category.slug),
    Column("group", TEXT, lambda s: s.category.group),
    Column("successes", INT, lambda s: s.result.successes),
    Column("attempts", INT, lambda s: s.result.attempts),
    Column("success_rate", FLOAT, lambda s: _r(s.result.success_rate)),
    Column("ci_low", FLOAT, lambda s: _r(s.result.ci_low)),
    Column("ci_high", FLOAT, lambda s: _r(s.result.ci_high)),
    Column("provenance", TEXT, lambda s: _prov(s.entry)),
    # The interval's bounds across reconstructions (null on real rows)
    *_spread_columns(reconstruction_spread.CATEGORY_COLUMNS,
                     lambda s: reconstruction_spread.category_columns(s.entry, s.category.slug),
                     {}),
    Column("agent_id", INT, lambda s: s.entry.agent_id, help="stable id of the agent"),
    Column("submission_id", INT, lambda s: s.entry.submission_id, help="the ranked submission"),
))


def categories_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    categories, entries = selectors.category_matrix(benchmark_version=bv, filters=filters)
    return CATEGORIES.table(
        _CategoryCell(e, c, e.category_results[c.slug])
        for e in entries for c in categories if c.slug in e.category_results)


class _GroupRate(NamedTuple):
    entry: Any
    group: str
    macro: float | None
    pooled: float | None


GROUPS = TableSpec("groups", "GroupRow", (
    Column("agent", TEXT, lambda s: s.entry.agent.display_name),
    Column("harness", TEXT, lambda s: s.entry.agent.harness.slug),
    Column("group", TEXT, lambda s: s.group),
    Column("macro_success_rate", FLOAT, lambda s: _r(s.macro)),
    Column("pooled_success_rate", FLOAT, lambda s: _r(s.pooled)),
    Column("provenance", TEXT, lambda s: _prov(s.entry)),
    Column("agent_id", INT, lambda s: s.entry.agent_id, help="stable id of the agent"),
    Column("submission_id", INT, lambda s: s.entry.submission_id, help="the ranked submission"),
))


def groups_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    entries = selectors.leaderboard_rows(benchmark_version=bv, filters=filters)
    return GROUPS.table(
        rate for e in entries
        for rate in (_GroupRate(e, "imaging", e.imaging_macro, e.imaging_pooled),
                     _GroupRate(e, "text", e.text_macro, e.text_pooled))
        if rate.macro is not None)


HARNESS_FAMILIES = TableSpec("harness-families", "HarnessFamilyRow", (
    Column("harness_family", TEXT, lambda a: a.key),
    Column("agents", INT, lambda a: a.agents),
    Column("mean_success_rate", FLOAT, lambda a: _r(a.mean_success_rate)),
    Column("pooled_success_rate", FLOAT, lambda a: _r(a.pooled_success_rate)),
    Column("imaging_macro_success_rate", FLOAT, lambda a: _r(a.imaging_macro), null=True),
    Column("text_macro_success_rate", FLOAT, lambda a: _r(a.text_macro), null=True),
    Column("imaging_pooled_success_rate", FLOAT, lambda a: _r(a.imaging_pooled), null=True),
    Column("text_pooled_success_rate", FLOAT, lambda a: _r(a.text_pooled), null=True),
))


def harness_families_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    return HARNESS_FAMILIES.table(selectors.harness_family_aggregates(benchmark_version=bv))


def flags_text(flags: list | None) -> str:
    return ";".join(flags or [])


def _t(key: str) -> Callable[[dict], Any]:
    """A trial column read as it is from selectors.trial_rows' row."""
    return lambda r: r[key]


# outcome and success are the site's (what every aggregate counts); the claim follows.
# reported_*: the submission's own figures (its Harbor result.json), never measured by the site.
TRIALS = TableSpec("trials", "TrialRow", (
    Column("agent", TEXT, _t("agent")),
    Column("task", TEXT, _t("task")),
    Column("category", TEXT, _t("category")),
    Column("attempt", INT, _t("attempt")),
    Column("outcome", TEXT, _t("outcome"),
           help="the site's outcome (counted by every aggregate)"),
    Column("success", BOOL, _t("success"), help="the site's: outcome == passed"),
    Column("reported_cost_usd", FLOAT, lambda r: _money(r["cost_usd"]), null=True,
           help="USD as the submission reported it (computed from its reported tokens with "
                "the dated price table when it recorded none); not measured by the site"),
    Column("reported_duration_s", FLOAT, _t("duration_s"), null=True,
           help="seconds, as the submission reported them"),
    Column("reported_output_tokens", INT, _t("output_tokens"), null=True,
           help="as the submission reported them"),
    Column("reported_input_tokens", INT, _t("input_tokens"), null=True,
           help="as the submission reported them (cached ones included)"),
    Column("reported_cached_tokens", INT, _t("cached_tokens"), null=True,
           help="as the submission reported them"),
    Column("provenance", TEXT, lambda r: provenance(r["reconstructed"], r["verified"])),
    Column("claimed_outcome", TEXT, _t("claimed_outcome"),
           help="what the submitted run recorded"),
    Column("claimed_success", BOOL, _t("claimed_success")),
    Column("claimed_reward", FLOAT, _t("reward"), null=True),
    Column("verified_reward", FLOAT, _t("verified_reward"), null=True,
           help="the site's re-grade (null: not re-graded)"),
    Column("verification_level", TEXT,
           lambda r: "reconstructed" if r["reconstructed"] else r["verification_level"],
           help="re-run | reproduced | re-graded | claimed | reconstructed, strongest first "
                "(/methods/#verification-levels)"),
    Column("flags", TEXT, lambda r: flags_text(r["flags"]),
           help="integrity flags, ';'-separated (awaiting_judge: not scored, no X-ray judge)"),
    Column("submission", INT, _t("submission_id")),
    Column("judge_model", TEXT, _t("judge_model"),
           help="the LLM judge model of the site's re-grade (X-ray; empty otherwise)"),
    Column("judge_prompt_version", TEXT, _t("judge_prompt_version"),
           help="the judge prompt's version id (X-ray; empty otherwise)"),
    Column("trial_id", INT, _t("pk")),
    Column("agent_id", INT, _t("agent_id")),
    Column("grader_version", TEXT, _t("grader_version"),
           help="<category>@<version> of the grader the site's score was graded with "
                "(empty: not re-graded)"),
    Column("infra_confirmed", BOOL, _t("infra_confirmed"),
           help="a claimed infrastructure error the site counts as one (left out of the "
                "denominator); false for every other trial"),
    Column("infra_confirmed_by", TEXT, _t("infra_confirmed_by"),
           help="site (its own re-attempt hit an infrastructure failure) | maintainer | empty"),
    Column("infra_confirm_reason", TEXT, _t("infra_confirm_reason"), help="why (public)"),
    Column("trajectory_judgement", TEXT, _t("trajectory_judgement"),
           help="the trajectory judge's reading of a counted pass: clean | suspicious | hack | "
                "awaiting (no judge configured) | empty (not a counted pass)"),
    Column("trajectory_judge_model", TEXT, _t("trajectory_judge_model"),
           help="its model (empty: none)"),
    Column("trajectory_judge_prompt_version", TEXT, _t("trajectory_judge_prompt_version"),
           help="its prompt's version id (empty: none)"),
))
TRIAL_COLUMNS = TRIALS.names


def trials_table(bv: BenchmarkVersion, filters: selectors.EntryFilters, *, offset: int = 0,
                 limit: int | None = None) -> Table:
    """Every trial row, or the page offset..offset+limit of them, read from the database."""
    return TRIALS.table(selectors.trial_rows(benchmark_version=bv, filters=filters,
                                             offset=offset, limit=limit))


# The letters of outcomes/claimed_outcomes (submissions.models.OUTCOME_CODES), as documented on
# /downloads/.
OUTCOME_LETTERS = {code: str(outcome) for outcome, code in OUTCOME_CODES.items()}


def outcome_names(codes: str) -> str:
    return "|".join(OUTCOME_LETTERS[c] for c in codes)


class _MatrixCell(NamedTuple):
    entry: Any
    task: Any
    cell: Any


def _cell(read: Callable, empty="") -> Callable[[_MatrixCell], Any]:
    return lambda s: read(s.cell) if s.cell else empty


# outcomes are the site's codes per attempt (OUTCOME_LETTERS; outcome_names spells them out);
# claimed_outcomes the submission's; flags one ";"-list per attempt, attempts separated by "|".
TASK_MATRIX = TableSpec("task-matrix", "TaskMatrixRow", (
    Column("agent", TEXT, lambda s: s.entry.agent.display_name),
    Column("task", TEXT, lambda s: s.task.name),
    Column("category", TEXT, lambda s: s.task.category.slug),
    Column("outcomes", TEXT, _cell(lambda c: c.outcomes)),
    Column("successes", INT, _cell(lambda c: c.successes, 0)),
    Column("provenance", TEXT, lambda s: _prov(s.entry)),
    Column("claimed_outcomes", TEXT, _cell(lambda c: c.claimed_outcomes)),
    Column("flags", TEXT, _cell(lambda c: "|".join(flags_text(f) for f in c.flags))),
    Column("outcome_names", TEXT, _cell(lambda c: outcome_names(c.outcomes))),
    Column("agent_id", INT, lambda s: s.entry.agent_id),
    Column("submission_id", INT, lambda s: s.entry.submission_id),
    Column("task_id", INT, lambda s: s.task.pk),
))
TASK_MATRIX_COLUMNS = TASK_MATRIX.names


def task_matrix_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    tasks, entries = selectors.task_matrix(benchmark_version=bv, filters=filters)
    return TASK_MATRIX.table(
        _MatrixCell(e, t, cell)
        for e in entries for t, cell in zip(tasks, e.cell_list, strict=True))


TASKS = TableSpec("tasks", "TaskRow", (
    Column("task", TEXT, lambda t: t.name),
    Column("category", TEXT, lambda t: t.category.slug),
    Column("group", TEXT, lambda t: t.category.group),
    Column("modality", TEXT, lambda t: t.category.modality),
    Column("data_source", TEXT, lambda t: t.category.data_source),
    Column("access", TEXT, lambda t: t.category.access),
    Column("success_criterion", TEXT, lambda t: t.category.success_criterion),
    Column("runnable_here", BOOL, lambda t: t.runnable_here),
    Column("solved_attempts", INT, lambda t: t.solved),
    Column("scored_attempts", INT, lambda t: t.scored),
    Column("solve_rate", FLOAT, lambda t: _r(t.solve_rate), null=True),
))


def tasks_table(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> Table:
    return TASKS.table(selectors.task_catalogue(benchmark_version=bv))


class _CompareCell(NamedTuple):
    row: Any  # compare.GridRow
    entry: Any
    cell: Any  # compare.GridCell


# The compare page's grid (/compare.csv, the API's ``grid``): tasks where the chosen agents
# differ first, as the page lists them; not one of TABLES (it needs the agents named).
COMPARE = TableSpec("compare", "CompareCell", (
    Column("task", TEXT, lambda s: s.row.task.name),
    Column("category", TEXT, lambda s: s.row.task.category.slug),
    Column("agent", TEXT, lambda s: s.entry.agent.display_name),
    Column("agent_slug", TEXT, lambda s: s.entry.agent.slug),
    Column("outcomes", TEXT, lambda s: s.cell.outcomes,
           help="the site's outcome per attempt (P F T E I), empty without a trial"),
    Column("successes", INT, lambda s: s.cell.passes),
    Column("scored_attempts", INT, lambda s: s.cell.scored,
           help="attempts scored (infrastructure errors are not)"),
    Column("success_share", FLOAT, lambda s: _r(s.cell.share), null=True,
           help="successes / scored attempts on this task; the paired test's per-task value"),
    Column("agents_differ", BOOL, lambda s: s.row.differ,
           help="the chosen agents' success shares on this task are not all equal"),
    Column("provenance", TEXT, lambda s: _prov(s.entry)),
    Column("submission_id", INT, lambda s: s.entry.submission_id),
    Column("task_id", INT, lambda s: s.row.task.pk),
))


def compare_table(found, bv: BenchmarkVersion | None = None) -> Table:
    """A comparison's grid (``compare.Comparison``), one row per task and agent."""
    return COMPARE.table(_CompareCell(row, e, cell) for row in found.rows
                         for e, cell in zip(found.entries, row.cells, strict=True))


SPECS = {spec.name: spec for spec in (LEADERBOARD, CATEGORIES, GROUPS, HARNESS_FAMILIES,
                                      TRIALS, TASK_MATRIX, TASKS)}

TABLES = {
    "leaderboard": leaderboard_table,
    "categories": categories_table,
    "groups": groups_table,
    "harness-families": harness_families_table,
    "trials": trials_table,
    "task-matrix": task_matrix_table,
    "tasks": tasks_table,
}

# Each CSV's columns, for the downloads page.
COLUMNS_OF = {name: spec.names for name, spec in SPECS.items()}
