"""The board as it stood: one snapshot of the leaderboard table per benchmark version and day,
taken after every rebuild that changed it, and read back by ``?as_of=YYYY-MM-DD`` on the
leaderboard page, its CSV and its API, and by the rank changes the page shows.

A snapshot holds the rows exactly as the leaderboard CSV had them (the same declaration,
``tables.LEADERBOARD``), so a past day's board is the site's own finding of that day: a later
re-grade or withdrawal changes the next snapshot, never an earlier one. History starts with the
first rebuild after this module was deployed; an earlier day has no board, and says so."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

from django.db import transaction
from django.utils import timezone

from evaluation.models import BenchmarkVersion
from leaderboard import tables
from leaderboard.filters import EntryFilters
from leaderboard.models import LeaderboardSnapshot

RANK_CHANGE_DAYS = 30  # the page's ↑/↓ compares with the board of about a month before


class BadDate(ValueError):
    pass


def parse_day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise BadDate(f"as_of must be a date, YYYY-MM-DD (got {text[:40]!r})") from None


def _digest(rows: list[dict]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def snapshot_take(*, benchmark_version_id: int, day: dt.date | None = None) -> bool:
    """Record today's board of the version (or ``day``'s); True when a snapshot was written.
    Idempotent: a board equal to the last one recorded is not written again, and a second
    change on the same day replaces that day's snapshot."""
    bv = BenchmarkVersion.objects.get(pk=benchmark_version_id)
    day = day or timezone.localdate()
    rows = list(tables.leaderboard_table(bv, EntryFilters()).dicts())
    digest = _digest(rows)
    with transaction.atomic():
        last = (LeaderboardSnapshot.objects.select_for_update()
                .filter(benchmark_version=bv, day__lte=day).order_by("-day").first())
        if last is not None and last.digest == digest:
            return False
        LeaderboardSnapshot.objects.update_or_create(
            benchmark_version=bv, day=day,
            defaults={"rows": rows, "digest": digest, "taken_at": timezone.now()})
    return True


def snapshot_after_commit(benchmark_version: BenchmarkVersion) -> None:
    """Take the snapshot once the rebuild's transaction commits (outside it: readers of the
    rebuild never wait for it)."""
    pk = benchmark_version.pk
    transaction.on_commit(lambda: snapshot_take(benchmark_version_id=pk), robust=True)


def board_as_of(benchmark_version: BenchmarkVersion, day: dt.date) -> LeaderboardSnapshot | None:
    """The board at the end of ``day``: the last snapshot taken on or before it."""
    return (LeaderboardSnapshot.objects.filter(benchmark_version=benchmark_version, day__lte=day)
            .order_by("-day").first())


def first_day(benchmark_version: BenchmarkVersion) -> dt.date | None:
    return (LeaderboardSnapshot.objects.filter(benchmark_version=benchmark_version)
            .order_by("day").values_list("day", flat=True).first())


def rows_filtered(rows: list[dict], filters: EntryFilters) -> list[dict]:
    """A snapshot's rows under the page's filters (harness, provider, verified only), ranked
    rows first in rank order, then the unranked ones by agent, as the live board lists them.
    Columns added to the table after the snapshot was taken read as empty."""
    keep = [
        {name: r.get(name) for name in tables.LEADERBOARD.names} for r in rows
        if (not filters.harness or r.get("harness") == filters.harness)
        and (not filters.provider or r.get("provider") == filters.provider)
        and (not filters.verified_only or r.get("verified"))
    ]
    return sorted(keep, key=lambda r: (r["rank"] is None, r["rank"] or 0, r["agent"] or ""))


def rank_changes(benchmark_version: BenchmarkVersion, *, today: dt.date | None = None
                 ) -> dict[int, int]:
    """agent id -> places gained (positive) or lost since the board of RANK_CHANGE_DAYS ago,
    for agents ranked on both boards."""
    today = today or timezone.localdate()
    before = board_as_of(benchmark_version, today - dt.timedelta(days=RANK_CHANGE_DAYS))
    now = board_as_of(benchmark_version, today)
    if before is None or now is None or before.pk == now.pk:
        return {}
    old = {r["agent_id"]: r["rank"] for r in before.rows if r.get("rank") is not None}
    return {r["agent_id"]: old[r["agent_id"]] - r["rank"] for r in now.rows
            if r.get("rank") is not None and r["agent_id"] in old
            and old[r["agent_id"]] != r["rank"]}
