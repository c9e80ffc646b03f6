"""gunicorn settings for every way the site is served: `gunicorn -c config/gunicorn.py config.wsgi`
(docker-compose's `web`, the production command, bench_scale, the R14 load test).

Threaded workers (gthread): a sync worker serves one request at a time, so a few slow uploads
(a client streaming a 200 MB archive at its own pace) held every worker while readers queued
behind them (R14 measured reader p95 of 32-45 s during uploads). With threads, each worker
reads many sockets at once; uploads stream to disk in chunks and release the GIL on I/O,
readers are answered between them. WEB_CONCURRENCY and GUNICORN_THREADS override the counts.
Each worker warms itself before its first connection (``post_worker_init``, config/warmup.py).
"""

import multiprocessing
import os

worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", min(4, multiprocessing.cpu_count() + 1)))
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
# A request may take this long (a large CSV download, an upload on a slow link); threads of the
# same worker keep serving others meanwhile, and the worker's heartbeat is independent of them.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "120"))
keepalive = 5
backlog = 2048
# Log to stderr (the container's log); access lines only when asked.
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None


# Paths each worker answers to itself before accepting connections (config/warmup.py): the
# pages a crowd hits first. Empty: no warm-up.
warm_paths = [p for p in os.environ.get(
    "GUNICORN_WARM_PATHS", "/healthz,/api/v1/leaderboard/,/leaderboard.csv,/").split(",") if p]


def post_worker_init(worker):
    from config import warmup  # Django is set up only once the worker has loaded the app

    for path, status, seconds in warmup.warm(worker.wsgi, warm_paths, tick=worker.notify):
        worker.log.debug("warmed %s: %s in %.2f s", path, status, seconds)

