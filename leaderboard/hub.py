"""The leaderboard as a curated board of Harbor's hub (``harbor hub leaderboard create --config
leaderboard.json --rows rows.json``), where Terminal-Bench's boards live.

The definition (metadata and metrics schemas, columns, ``rank_by``) and the rows come from the
leaderboard table's own declaration (``tables.LEADERBOARD``), so the hub shows the columns and
values the site's CSV and API do: numbers go to ``metrics``, everything else to ``metadata``.
A row the site never ranks (a discrepancy, a reference run) is exported hidden, since the hub
would rank it by ``rank_by``; its metadata says why."""

from __future__ import annotations

import re
from collections.abc import Iterator

from evaluation.models import BenchmarkVersion
from leaderboard import selectors, tables

ROWS_PER_FILE = 500  # Harbor's LeaderboardRowsCreateConfig takes at most 500 rows per request
JSON_TYPES = {tables.INT: "integer", tables.FLOAT: "number", tables.BOOL: "boolean",
              tables.TEXT: "string", tables.DATE: "string"}
HUB_TYPES = {tables.INT: "number", tables.FLOAT: "number", tables.BOOL: "boolean",
             tables.TEXT: "text", tables.DATE: "date"}
# The columns a hub reader sees, in order, with their headers: the site's first screen.
SHOWN = (("rank", "Rank"), ("agent", "Agent"), ("harness", "Harness"), ("model", "Model"),
         ("success_rate", "Success"), ("ci_low", "95% CI low"), ("ci_high", "95% CI high"),
         ("tie_group", "Tie group"), ("reported_cost_per_attempt_usd", "Reported cost / attempt"),
         ("verification_level", "Verification"), ("provenance", "Provenance"),
         ("date", "Date"))
METRIC_KINDS = (tables.INT, tables.FLOAT)


def _section(column: tables.Column) -> str:
    return "metrics" if column.kind in METRIC_KINDS else "metadata"


def _schema(section: str) -> dict:
    props = {}
    for c in tables.LEADERBOARD.columns:
        if _section(c) != section:
            continue
        kind = JSON_TYPES[c.kind]
        prop: dict = {"type": [kind, "null"] if c.null else kind}
        if c.kind == tables.DATE:
            prop["format"] = "date"
        if c.help:
            prop["description"] = c.help
        props[c.name] = prop
    if section == "metadata":
        props["submission_url"] = {"type": "string", "format": "uri",
                                   "description": "the submission's page on the site"}
    return {"type": "object", "properties": props}


def board_name(bv: BenchmarkVersion) -> str:
    """The hub's name for the board: lower case, the version's dots kept (``^[a-z0-9][a-z0-9._-]*$``)."""
    return re.sub(r"[^a-z0-9._-]+", "-", f"{bv.name}-{bv.version}".lower()).strip("-")[:100]


def definition(bv: BenchmarkVersion, *, site_url: str) -> dict:
    """The board's definition, as Harbor's ``LeaderboardCreateConfig`` takes it."""
    by_name = {c.name: c for c in tables.LEADERBOARD.columns}
    columns = []
    for name, header in SHOWN:
        c = by_name[name]
        col = {"id": name, "header": header, "accessor": f"{_section(c)}.{name}",
               "type": HUB_TYPES[c.kind]}
        if c.kind in METRIC_KINDS:
            col["align"] = "right"
        if c.help:
            col["description"] = c.help
        columns.append(col)
    columns.append({"id": "submission", "header": "Submission", "type": "link",
                    "accessor": "metadata.submission_url"})
    return {
        "package": f"healthagentbench/{re.sub(r'[^a-z0-9_.-]+', '-', bv.name.lower())}",
        "name": board_name(bv),
        "title": f"HealthAgentBench leaderboard ({bv.slug})",
        "description": (
            f"Exported from {site_url.rstrip('/')}/?benchmark={bv.slug}: success pooled over "
            "every scored attempt with a 95% task-clustered interval; ranks and tie groups are "
            "the site's. Cost, time and tokens are as each submission reported them. Rows the "
            "site does not rank (discrepancies, reference runs) are hidden."),
        "visibility": "public",
        "metadata_schema": _schema("metadata"),
        "metrics_schema": _schema("metrics"),
        "columns": columns,
        "rank_by": [{"accessor": "metrics.success_rate", "direction": "desc", "nulls": "last"},
                    {"accessor": "metrics.ci_low", "direction": "desc", "nulls": "last"}],
    }


def rows(bv: BenchmarkVersion, *, site_url: str) -> list[dict]:
    """Every published row of the version, as Harbor's ``LeaderboardRowCreate``."""
    table = tables.leaderboard_table(bv, selectors.EntryFilters())
    out = []
    for row in table.dicts():
        metadata = {c.name: row[c.name] for c in tables.LEADERBOARD.columns
                    if _section(c) == "metadata"}
        metadata["submission_url"] = (f"{site_url.rstrip('/')}/submissions/"
                                      f"{row['submission_id']}/")
        metrics = {c.name: row[c.name] for c in tables.LEADERBOARD.columns
                   if _section(c) == "metrics"}
        out.append({"metadata": metadata, "metrics": metrics,
                    "status": "display" if row["ranked"] else "hide"})
    return out


def row_files(all_rows: list[dict]) -> Iterator[dict]:
    """The rows as ``--rows`` files of at most ROWS_PER_FILE rows each."""
    for start in range(0, len(all_rows), ROWS_PER_FILE):
        yield {"rows": all_rows[start:start + ROWS_PER_FILE]}
