"""``manage.py bench_scale``: the leaderboard at 1,000 and 10,000 agents against its floors.

dataset: a generated benchmark version and N published agents x 162 trials (PostgreSQL COPY);
web: gunicorn and the measuring clients (p50 per page, wrk load); duck: DuckDB group-bys on the
same trials (the rebuild's floor); wsgi: the site plus a static route serving the same bytes as
files (the pages' floor). Nothing here is imported by the site itself.
"""
