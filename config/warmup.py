"""Warm a web worker before it accepts its first connection (gunicorn's ``post_worker_init``).

A fresh worker's first request pays for everything Django does lazily: the URLconf and every
view module it imports, DRF's and the templates' first use, the database connection, and with
a per-process cache (local memory) the page itself. Measured here (R14, 2 loaded cores): 6.1 s
for the first ``/api/v1/leaderboard/`` of a new worker, 6 ms for the next; every reader whose
connection that worker had accepted waited behind it. The worker answers its warm paths to
itself first, through the same WSGI application (so the cache holds them before anyone asks).
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)


def _host() -> str:
    """A host name the site accepts (``ALLOWED_HOSTS``), as a request from outside names it."""
    for host in settings.ALLOWED_HOSTS:
        if host and host != "*":
            return host.lstrip(".")
    return "localhost"


def _environ(path: str) -> dict:
    parts = urlsplit(path)
    host = _host()
    return {
        "REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": parts.path or "/",
        "QUERY_STRING": parts.query, "SERVER_NAME": host, "SERVER_PORT": "443",
        "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": host, "REMOTE_ADDR": "127.0.0.1",
        # As the TLS proxy forwards it, so SECURE_SSL_REDIRECT answers the page, not a 301.
        "HTTP_X_FORWARDED_PROTO": "https", "wsgi.url_scheme": "https",
        "wsgi.input": io.BytesIO(b""), "wsgi.errors": io.StringIO(), "wsgi.version": (1, 0),
        "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False,
    }


def warm(app: Callable, paths: Iterable[str], *, tick: Callable[[], None] = lambda: None,
         close_connections: bool = True) -> list[tuple[str, str, float]]:
    """GET each path through ``app`` (its body read and closed); returns (path, status line,
    seconds). Never raises: a path that fails is logged and the worker starts anyway. ``tick``
    runs after each path (gunicorn's heartbeat, so a slow warm-up is not taken for a hang);
    then this thread's database connections are closed (the request threads open their own)."""
    done = []
    for path in paths:
        started = time.perf_counter()
        status: list[str] = []

        def start_response(line, headers, exc_info=None, status=status):
            status.append(line)
            return lambda _data: None

        try:
            body = app(_environ(path), start_response)
            try:
                for _chunk in body:
                    pass
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()
        except Exception:  # noqa: BLE001 - a warm-up never stops a worker from serving
            logger.exception("warming %s failed", path)
            status.append("error")
        done.append((path, status[0] if status else "no response",
                     time.perf_counter() - started))
        tick()
    if close_connections:
        connections.close_all()
    return done
