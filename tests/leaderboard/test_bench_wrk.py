"""bench_scale reads wrk's report: the latency percentiles and every error it counts."""

import pytest

from devtools.bench.web import parse_wrk

REPORT = """Running 30s test @ http://127.0.0.1:8123/leaderboard.csv
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    12.31ms   20.02ms 736.10ms   86.50%
    Req/Sec   531.22    120.40     0.99k    72.99%
  Latency Distribution
     50%    8.12ms
     75%   11.60ms
     90%   15.71ms
     99%  736.00us
  31713 requests in 30.01s, 66.20GB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:   1056.75
Transfer/sec:      2.21GB
"""


def test_the_percentiles_come_from_the_distribution_not_the_thread_stats():
    # "86.50%" and "72.99%" above end in "50%" and "99%"; the figures are the distribution's.
    r = parse_wrk(REPORT)
    assert (r.requests, r.rps) == (31713, 1056.75)
    assert r.p50_ms == 8.12
    assert r.p99_ms == pytest.approx(0.736)
    assert r.errors == 2 + 1 + 4  # socket read and timeout errors, and non-2xx responses


def test_a_clean_run_counts_no_error():
    clean = REPORT.replace("  Socket errors: connect 0, read 2, write 0, timeout 1\n", "")
    clean = clean.replace("  Non-2xx or 3xx responses: 4\n", "")
    r = parse_wrk(clean)
    assert r.errors == 0 and r.detail == ""
    assert parse_wrk(clean.replace("8.12ms", "1.20s")).p50_ms == 1200.0
