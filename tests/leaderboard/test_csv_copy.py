"""/trials.csv and /task-matrix.csv: PostgreSQL's COPY path (csv_copy) writes byte for byte what
the Python path (tables + csv_export, the SQLite path) writes for the same data, hostile text,
missing values, flags and integral floats included. On SQLite the served bytes are the Python
path's by construction, and the comparison still holds."""

from decimal import Decimal

import pytest

from leaderboard import selectors, tables
from leaderboard.csv_export import _lines
from leaderboard.services import leaderboard_recompute
from submissions.models import Outcome, Trial
from tests.factories import AgentFactory, AIModelFactory, HarnessFactory, published_submission

HOSTILE = ['=HYPERLINK("http://evil","x")', "+cmd, with comma", "@SUM(A1)",
           '-1 "quoted"\nsecond line', "\tTabbed", "Plain agent"]


@pytest.fixture
def mixed(small_benchmark):
    bv, tasks = small_benchmark
    for i, name in enumerate(HOSTILE):
        agent = AgentFactory(display_name=name,
                             harness=HarnessFactory(slug=f"h-{i}", display_name=f"H{i}"),
                             model=AIModelFactory(slug=f"m-{i}", display_name=f"M{i}"))
        sub = published_submission(agent, tasks, ["PFT", "FFF", "PPI", "EFF", "PP"],
                                   cost=Decimal("1.2500") if i % 2 else Decimal("2.0000"),
                                   duration_s=600.0 if i % 3 else 61.75, is_verified=i % 2 == 0)
        trials = list(sub.trials.order_by("pk"))
        # missing cost and time, a re-grade (integral and fractional), flags, a changed claim
        Trial.objects.filter(pk=trials[0].pk).update(cost_usd=None, duration_s=None,
                                                     verified_reward=1.0,
                                                     grader_version="img@2",
                                                     flags=["regrade-mismatch", "=x"])
        # a claimed infrastructure error confirmed, with a hostile reason
        Trial.objects.filter(pk=trials[8].pk).update(infra_confirm_reason="=cmd|' /C calc'!A0")
        # reported input and cached tokens (the factory leaves them empty)
        Trial.objects.filter(pk=trials[2].pk).update(input_tokens=123_456, cached_tokens=7_890)
        Trial.objects.filter(pk=trials[1].pk).update(verified_reward=0.25, reward=None,
                                                     claimed_outcome=Outcome.PASSED,
                                                     claimed_success=True)
    leaderboard_recompute(benchmark_version=bv)
    return bv


@pytest.mark.parametrize("table", ["trials", "task-matrix"])
@pytest.mark.parametrize("query", ["", "&verified=1", "&harness=h-1"])
def test_copy_and_python_paths_write_identical_bytes(table, query, client, mixed):
    bv = mixed
    response = client.get(f"/{table}.csv?benchmark={bv.slug}{query}")
    served = b"".join(response.streaming_content)
    filters = selectors.EntryFilters(harness="h-1" if "harness" in query else "",
                                     verified_only="verified" in query)
    python = "".join(_lines(tables.TABLES[table](bv, filters))).encode()
    assert served == python
    if table == "trials":  # cost, time and tokens named as the submission's figures
        assert served.split(b"\r\n")[0].split(b",")[6:11] == [
            b"reported_cost_usd", b"reported_duration_s", b"reported_output_tokens",
            b"reported_input_tokens", b"reported_cached_tokens"]
    if not query:  # what the comparison covered
        for text in (b"'=HYPERLINK", b"'+cmd", b'"\'-1 ""quoted""\nsecond line"', b"'\tTabbed",
                     b"regrade-mismatch;=x",
                     b"\r\n"):
            assert text in served, text
        if table == "trials":  # grader version, confirmed infrastructure error, hostile reason
            for text in (b",img@2,", b",true,site,'=cmd|' /C calc'!A0", b",123456,7890,"):
                assert text in served, text
    assert response["Content-Disposition"] == f'attachment; filename="{table}.csv"'
