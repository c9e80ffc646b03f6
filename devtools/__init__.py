"""Developer tooling, kept out of the runtime apps (house style HS44).

Benchmarks (``bench/`` and the ``bench_*`` commands), the chaos soak (``chaos_soak``), the
statistics simulation (``simulation.py``, ``simulate_stats``: it writes the tables under
``leaderboard/data/`` that the methods page reads through ``leaderboard.simulation_results``) and
the Harbor job-directory builder that the tests and ``bench_load`` share (``harbor_fixtures.py``).

An app only for its management commands: in INSTALLED_APPS only with HAB_DEVTOOLS (default: DEBUG,
so under ``make run``'s .env, pytest and CI; never in production). The runtime apps never import
it (lint-imports, contract ``devtools``); it imports them freely.
"""
