"""The trials of the latest published submissions as (submission, task) cells, for the aggregate
rebuild (``recompute.entries_write``): PostgreSQL's one pass, every trial packed in a small
integer and scattered by numpy (``packed_trials``), and the few flagged cells' per-attempt
flags (``cell_flags``, shared with the SQLite path)."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import numpy as np
import psycopg

from submissions.models import OUTCOME_CODES, Outcome, Trial, is_flagged


def cell_flags(pairs: list[tuple[int, int]]
                ) -> tuple[dict[int, dict[str, list]], dict[int, int]]:
    """The few cells (submission, task) with an attempt that has flags: each present
    attempt's flags (in attempt order) by task pk, per submission; and each submission's count
    of flagged trials (those with a finding against the claim, ``is_flagged``; a state such as
    "not replayable" is shown with its attempt but not counted)."""
    if not pairs:
        return {}, {}
    subs = sorted({p[0] for p in pairs})
    wanted = set(pairs)
    cells: dict[tuple[int, int], list[list]] = defaultdict(list)
    for sub_id, task_id, flags in (
            Trial.objects.filter(submission_id__in=subs)
            .order_by("submission_id", "benchmark_task_id", "attempt")
            .values_list("submission_id", "benchmark_task_id", "flags")):
        if (sub_id, task_id) in wanted:
            cells[(sub_id, task_id)].append(list(flags) if flags else [])
    by_sub: dict[int, dict[str, list]] = defaultdict(dict)
    flagged: dict[int, int] = defaultdict(int)
    for (sub_id, task_id), attempts in sorted(cells.items()):
        flagged[sub_id] += sum(1 for f in attempts if is_flagged(f))
        by_sub[sub_id][str(task_id)] = attempts
    return by_sub, flagged


# PostgreSQL's one pass: each trial packed into a small integer, outcome code (1-5, the order
# of OUTCOME_CODES) in bits 0-2, claimed code in bits 3-5 (0: none), then whether it has flags
# and whether its cost, duration and output tokens are known, and a bit set for every trial.
_ORDER = list(OUTCOME_CODES)
_FLAGGED, _COST, _DUR, _OUT, _ROW = 64, 128, 256, 512, 1024
_PLACE_BITS = 11
_PLACE = 1 << _PLACE_BITS  # a trial's place (task pk x 16 + attempt) is above its 11 code bits
_LETTERS = np.frombuffer(b"\0" + "".join(OUTCOME_CODES[o] for o in _ORDER).encode()
                         + b"\0" * (7 - len(_ORDER)), dtype=np.uint8)


def _small_code(column: str) -> str:
    whens = " ".join(f"WHEN '{o}' THEN {i}" for i, o in enumerate(_ORDER, 1))
    return f"CASE {column} {whens} ELSE 0 END"


def _dense_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for small non-negative integers (primary
    keys of tasks) by a table over their range instead of a sort of every trial's."""
    if not len(values):
        return values[:0], values[:0]
    low = int(values.min())
    present = np.zeros(int(values.max()) - low + 1, dtype=bool)
    present[values - low] = True
    if len(present) > 4 * len(values) + 1_000_000:  # sparse keys: a sort is cheaper
        return np.unique(values, return_inverse=True)
    return np.flatnonzero(present) + low, (np.cumsum(present) - 1)[values - low]


def _fetch_packed(cursor, subs: list[tuple]) -> list[tuple]:
    """The rows of packed_trials' one statement: (submission id, the packed trials as bytes,
    scored cost in 1/10,000 dollars, scored output tokens)."""
    scored = f"t.outcome <> '{Outcome.INFRA_ERROR}'"
    code = (f"{_ROW} + {_small_code('t.outcome')} + 8 * {_small_code('t.claimed_outcome')} "
            f"+ CASE WHEN t.flags <> '[]'::jsonb THEN {_FLAGGED} ELSE 0 END "
            f"+ CASE WHEN t.cost_usd IS NULL THEN 0 ELSE {_COST} END "
            f"+ CASE WHEN t.duration_s IS NULL THEN 0 ELSE {_DUR} END "
            f"+ CASE WHEN t.output_tokens IS NULL THEN 0 ELSE {_OUT} END")
    place = f"((t.benchmark_task_id::int8 * 16 + t.attempt) * {_PLACE} + {code})"
    sql = (
        "SELECT t.submission_id::int8, "
        f"string_agg(int8send({place}) || float8send(COALESCE(t.duration_s, 0)), ''::bytea), "
        f"(COALESCE(SUM(t.cost_usd) FILTER (WHERE {scored}), 0) * 10000)::int8, "
        f"COALESCE(SUM(t.output_tokens) FILTER (WHERE {scored}), 0)::int8 "
        f"FROM {Trial._meta.db_table} t WHERE t.submission_id = ANY(%s::int8[]) "
        "GROUP BY t.submission_id")
    # A streaming GroupAggregate over the submission index, in one process (a hash aggregate
    # of every submission's bytes would hold them all at once; on 2 cores parallel workers did
    # not pay), and without JIT: at 10,000 agents compiling the expressions cost 0.2-0.4 s of
    # a 1.1 s statement. The settings are put back for the rest of the transaction.
    cursor.execute("SELECT current_setting('enable_hashagg'), "
                   "current_setting('max_parallel_workers_per_gather'), current_setting('jit')")
    hashagg, workers, jit = cursor.fetchone()
    cursor.execute("SELECT set_config('enable_hashagg', 'off', true), "
                   "set_config('max_parallel_workers_per_gather', '0', true), "
                   "set_config('jit', 'off', true)")
    # Binary results need psycopg's server-side binding (Django's cursors bind client-side).
    with psycopg.Cursor(cursor.cursor.connection) as raw:
        raw.execute(sql, [[s[0] for s in subs]], binary=True)
        rows = raw.fetchall()
    cursor.execute("SELECT set_config('enable_hashagg', %s, true), "
                   "set_config('max_parallel_workers_per_gather', %s, true), "
                   "set_config('jit', %s, true)", [hashagg, workers, jit])
    return rows


def packed_trials(cursor, subs: list[tuple], attempts: int) -> tuple | None:
    """One ``GROUP BY submission`` over the trials returning, per submission, every trial
    packed in 16 bytes (task, attempt and code in a big-endian int8, then its duration as a
    float8) concatenated into one ``bytea`` (in no particular order: each trial carries its
    own place), the scored cost (in 1/10,000 dollars, exact) and output tokens; 1,000 rows
    for 1,000 agents, not a row per cell or trial, which psycopg would hand over one Python
    call each. numpy scatters the trials into (submission, task, attempt) arrays, where the
    counts, sums and code strings of ``_read_cells``, ``_read_costs`` and ``_cell_columns``
    are derived. None when an attempt is numbered outside 1..``attempts`` or a (task,
    attempt) repeats (the caller then takes the ordered aggregates)."""
    if not 1 <= attempts < 16:
        return None
    rows = _fetch_packed(cursor, subs)
    sub_ids = np.array([s[0] for s in subs], dtype=np.int64)
    order = np.argsort(sub_ids)
    shape_rows = len(subs)
    got = np.array([r[0] for r in rows], dtype=np.int64)
    row_of = order[np.searchsorted(sub_ids[order], got)]
    trials = np.frombuffer(b"".join(bytes(r[1]) for r in rows),
                           dtype=np.dtype([("place", ">i8"), ("duration", ">f8")]))
    counts = np.array([len(r[1]) // 16 for r in rows], dtype=np.int64)
    row = np.repeat(row_of, counts)
    place = trials["place"].astype(np.int64)  # never negative: shifts and masks split it
    packed = place & (_PLACE - 1)
    attempt = (place >> _PLACE_BITS) & 15
    if ((attempt < 1) | (attempt > attempts)).any():
        return None
    task_ids, col = _dense_ids(place >> (_PLACE_BITS + 4))
    shape = (shape_rows, len(task_ids))
    flat = (row * len(task_ids) + col) * attempts + (attempt - 1)
    p = np.zeros(shape_rows * len(task_ids) * attempts, dtype=np.int64)
    p[flat] = packed
    p = p.reshape(*shape, attempts)
    if int((p != 0).sum()) != len(place):
        return None  # a (submission, task, attempt) twice: the unique index says never
    d = np.zeros(p.size)
    d[flat] = trials["duration"].astype(np.float64)
    d = d.reshape(*shape, attempts)
    cell = (p != 0).any(axis=-1)
    cost = np.zeros(shape_rows, dtype=np.int64)
    cost[row_of] = [r[2] for r in rows]
    out_sum = np.zeros((shape_rows, 1), dtype=np.int64)  # per submission, summed as a cell
    out_sum[row_of, 0] = [r[3] for r in rows]
    outcome, claimed = p & 7, (p >> 3) & 7
    passed, timeout, agent_error, infra = (
        _ORDER.index(o) + 1 for o in (Outcome.PASSED, Outcome.TIMEOUT, Outcome.AGENT_ERROR,
                                      Outcome.INFRA_ERROR))
    is_scored = (outcome > 0) & (outcome != infra)

    def count(mask: np.ndarray) -> np.ndarray:
        # Attempt by attempt: numpy reduces a short last axis many times slower than it adds
        # whole (agent x task) planes.
        total = mask[..., 0].astype(np.int64)
        for k in range(1, mask.shape[-1]):
            total += mask[..., k]
        return total

    a = {"task_ids": task_ids.tolist(), "cell": cell,
         "successes": count(outcome == passed), "present": count(outcome > 0),
         "infra": count(outcome == infra), "timeouts": count(outcome == timeout),
         "agent_errors": count(outcome == agent_error),
         "claimed_passes": count(claimed == passed), "claimed_infra": count(claimed == infra),
         "flagged": count((p & _FLAGGED) != 0), "cost_n": count(is_scored & ((p & _COST) != 0)),
         "dur_n": count(is_scored & ((p & _DUR) != 0)),
         "out_n": count(is_scored & ((p & _OUT) != 0))}
    a["out_sum"] = out_sum
    # Durations of scored attempts added in attempt order, ((d1 + d2) + d3), as before.
    known = np.where(is_scored & ((p & _DUR) != 0), d, 0.0)
    dur_sum = known[..., 0]
    for k in range(1, attempts):
        dur_sum = dur_sum + known[..., k]
    a["dur_sum"] = dur_sum
    total = cost.tolist()
    has_cost = a["cost_n"].any(axis=1).tolist()
    costs: dict[int, Decimal] = {
        s[0]: Decimal(total[i]).scaleb(-4) for i, s in enumerate(subs) if has_cost[i]}
    return a, costs, _packed_cell_columns(subs, a, outcome, claimed)


def _packed_cell_columns(subs: list[tuple], a: dict, outcome: np.ndarray, claimed: np.ndarray
                         ) -> dict:
    """``_cell_columns`` from the packed codes: each cell's letters in attempt order (a missing
    attempt adds none), cells comma-separated in task id order (a task without a cell adds
    nothing, not even its comma)."""
    cell = a["cell"]
    out: dict[str, list] = {}
    for name, codes in (("cell_outcomes", outcome), ("cell_claimed", claimed)):
        chars = np.zeros((*codes.shape[:2], codes.shape[2] + 1), dtype=np.uint8)
        chars[..., 0] = np.where(cell, ord(","), 0)
        chars[..., 1:] = _LETTERS[codes]
        out[name] = [r.tobytes().replace(b"\0", b"")[1:].decode() for r in chars]
    names = [str(t) for t in a["task_ids"]]
    if cell.all():
        out["cell_tasks"] = [",".join(names)] * len(subs)
    else:
        out["cell_tasks"] = [",".join(n for n, m in zip(names, r, strict=True) if m)
                             for r in cell.tolist()]
    rows, cols = np.nonzero(a["flagged"] > 0)
    flags, flagged = cell_flags([(subs[i][0], a["task_ids"][j])
                                  for i, j in zip(rows.tolist(), cols.tolist(), strict=True)])
    out["cell_flags"] = [flags.get(s[0], {}) for s in subs]
    out["flagged_trials"] = [flagged.get(s[0], 0) for s in subs]
    return out
