"""Warm anonymous GETs of cached leaderboard pages, answered before the rest of the stack.

``cached_response`` (leaderboard/caching.py) stores a page's body under a key made of the
version state and the request, with a random stamp naming those bytes. Two layers answer a
warm anonymous GET from it without a database query:

- ``CachedPagesApp``, a WSGI application in front of Django (``config/wsgi.py``, named by
  ``settings.WSGI_FRONTS``): the layer a static file is served at. It replays the final status
  and headers the whole stack gave that page (kept per representation: scheme and gzip) with
  the stored bytes, so a warm page costs a few cache reads and no Django request, middleware
  or response object. Conditional requests, and anything it has not seen answered yet, go on.
- ``CachedPageMiddleware``, right after WhiteNoise (before sessions, CSRF, auth and messages):
  the same answer inside Django (any handler: the test client, a request the front passed
  on), 304 for conditional requests, with the headers the stack below gave that page.

Both recompute the key from the version state remembered in the cache. The gzip-compressed
body is kept beside the plain one, so a browser's request is not compressed again on every hit
(GZipMiddleware leaves an encoded response alone). Every hit carries ``Content-Length`` (the
body is whole: no chunked framing). Each process keeps the bodies it served lately in memory
(``LEADERBOARD_MEMO_BYTES``), used only while the cache names the same stamp: a hit does not
copy megabytes out of the cache (or over the network from Redis) each time.

Anything else (a session cookie, another method, an unknown or forgotten version state, a page
not stored yet) goes down the stack as usual; on the way back, the headers of a stored
anonymous page are kept for the next hit.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

from django.conf import settings
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.cache import get_conditional_response, patch_vary_headers
from django.utils.text import compress_string

from leaderboard import caching
from leaderboard.csv_export import bytes_chunks

# Set by the responses' own path and recomputed on a hit (or meaningless for stored bytes).
_NOT_KEPT = {"set-cookie", "content-length", "content-encoding"}
# Final headers the front does not replay: the server writes its own Date and Server, and
# the length is the stored body's.
_NOT_REPLAYED = {"set-cookie", "content-length", "date", "server"}
_CONDITIONAL = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_MATCH",
                "HTTP_IF_UNMODIFIED_SINCE", "HTTP_RANGE")
_GZIP = re.compile(r"\bgzip\b")


class CachedPageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # A session (signed in) or a pending message makes the page personal: full stack.
        anonymous = _anonymous(request)
        if anonymous:
            hit = _answer(request)
            if hit is not None:
                return hit
        response = self.get_response(request)
        key = getattr(response, "lb_cache_key", None)
        if anonymous and key and response.status_code == 200 and not response.has_header(
                "Set-Cookie"):
            headers = [(h, v) for h, v in response.items() if h.lower() not in _NOT_KEPT]
            cache.set(key + ":h", {"stamp": getattr(response, "lb_cache_stamp", None),
                                   "headers": headers}, settings.LEADERBOARD_CACHE_TIMEOUT_S)
        return response


class CachedPagesApp:
    """The WSGI front: a warm anonymous GET of a page the stack has answered before is
    answered with that answer's final status and headers and the stored bytes."""

    def __init__(self, app: Callable):
        self.app = app

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "GET" or any(h in environ for h in _CONDITIONAL):
            return self.app(environ, start_response)
        request = WSGIRequest(environ)
        if not _anonymous(request):
            return self.app(environ, start_response)
        representation = (("s" if request.is_secure() else "p")
                          + ("g" if _accepts_gzip(request) else "i"))
        found = _key(request)
        if found is not None:
            entry = cache.get(found[0] + ":w" + representation)
            if isinstance(entry, dict):
                body = _body(found[0], entry["stamp"], entry["encoded"])
                if body is not None and body[1] == entry["encoded"]:
                    start_response(entry["status"],
                                   [*entry["headers"], ("Content-Length", str(len(body[0])))])
                    return [body[0]]
        final: list = []

        def keep(status: str, headers: list, exc_info=None):
            final[:] = [status, headers]
            return start_response(status, headers, exc_info)

        result = self.app(environ, keep)
        key = getattr(result, "lb_cache_key", None)
        if key and final and final[0].startswith("200 ") and not any(
                h.lower() == "set-cookie" for h, _ in final[1]):
            encodings = {v.strip().lower() for h, v in final[1] if h.lower() == "content-encoding"}
            if encodings <= {"gzip"}:
                cache.set(key + ":w" + representation, {
                    "stamp": getattr(result, "lb_cache_stamp", None), "status": final[0],
                    "headers": [(h, v) for h, v in final[1] if h.lower() not in _NOT_REPLAYED],
                    "encoded": bool(encodings)}, settings.LEADERBOARD_CACHE_TIMEOUT_S)
        return result


def _anonymous(request: HttpRequest) -> bool:
    return (request.method == "GET" and "messages" not in request.COOKIES
            and settings.SESSION_COOKIE_NAME not in request.COOKIES)


def _accepts_gzip(request: HttpRequest) -> bool:
    return bool(_GZIP.search(request.META.get("HTTP_ACCEPT_ENCODING", "")))


def _key(request: HttpRequest) -> tuple[str, float] | None:
    """The cache key of this request under the remembered version state, and the version's
    last-modified timestamp; None when no state is remembered (or trusted) now."""
    state = caching.state_lookup(request.GET.get("benchmark", ""))
    if state is None:
        return None
    pk, number, modified_ts = state
    return caching.key_for(pk, number, modified_ts, request.path,
                           caching.canonical_query(request)), modified_ts


def _answer(request: HttpRequest) -> HttpResponse | None:
    found = _key(request)
    if found is None:
        return None
    key, modified_ts = found
    entry = cache.get(key + ":h")
    if not isinstance(entry, dict):  # not stored (or by an older release)
        return None
    headers = entry["headers"]
    probe = HttpResponse()
    etag = caching.etag_for(key, "anon")
    conditional = get_conditional_response(request, etag=etag, last_modified=int(modified_ts),
                                           response=probe)
    if conditional is not probe:
        for header, value in headers:
            if header.lower() in ("etag", "last-modified", "cache-control", "vary"):
                conditional[header] = value
        return conditional
    body = _body(key, entry["stamp"], _accepts_gzip(request))
    if body is None:
        return None
    content, encoded, streaming = body
    response = (StreamingHttpResponse(bytes_chunks(content)) if streaming and not encoded
                else HttpResponse(content))
    for header, value in headers:
        response[header] = value
    # Whole bytes: their length is known (GZipMiddleware drops it if it compresses a stream).
    response["Content-Length"] = str(len(content))
    if encoded:
        response["Content-Encoding"] = "gzip"
        # As GZipMiddleware does: the compressed bytes are a different representation.
        if response.has_header("ETag"):
            response["ETag"] = re.sub(r'^"', 'W/"', response["ETag"])
    patch_vary_headers(response, ("Accept-Encoding",))
    # The front keeps the final headers of this answer for its own next hits.
    response.lb_cache_key, response.lb_cache_stamp = key, entry["stamp"]
    return response


def _body(key: str, stamp: str | None, gzip: bool) -> tuple[bytes, bool, bool] | None:
    """(bytes, gzip-encoded, stored as a stream) of the page stored under ``key``, compressed
    when ``gzip`` and that makes it smaller; from this process's memory while the cache names
    the same ``stamp``. None when the cache no longer holds it."""
    found = _MEMO.get((key, gzip), stamp)
    if found is not None:
        return found
    stored = cache.get_many([key, key + ":gz"] if gzip else [key])
    hit = stored.get(key)
    if hit is None:
        return None
    body = (hit["content"], False, hit["streaming"])
    if gzip:
        packed = stored.get(key + ":gz")
        if not (isinstance(packed, dict) and packed["stamp"] == hit.get("stamp")):
            compressed = compress_string(hit["content"])
            packed = {"stamp": hit.get("stamp"),
                      "body": compressed if len(compressed) < len(hit["content"]) else None}
            cache.set(key + ":gz", packed, settings.LEADERBOARD_CACHE_TIMEOUT_S)
        if packed["body"] is not None:
            body = (packed["body"], True, False)
    if stamp is not None and hit.get("stamp") == stamp:
        _MEMO.put((key, gzip), stamp, body)
    return body


class _Memo:
    """The bodies this process served lately (least recently used first out), each under
    the stamp it was stored with, within ``LEADERBOARD_MEMO_BYTES``; a body over a quarter of
    that is not kept (a ``show=all`` page of 10,000 agents)."""

    def __init__(self):
        self._items: OrderedDict = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: tuple, stamp: str | None):
        if stamp is None:
            return None
        with self._lock:
            found = self._items.get(key)
            if found is None or found[0] != stamp:
                return None
            self._items.move_to_end(key)
            return found[1]

    def put(self, key: tuple, stamp: str, body: tuple) -> None:
        budget = settings.LEADERBOARD_MEMO_BYTES
        size = len(body[0])
        if size > budget // 4:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= len(old[1][0])
            self._items[key] = (stamp, body)
            self._size += size
            while self._size > budget:
                _, (_, dropped) = self._items.popitem(last=False)
                self._size -= len(dropped[0])


_MEMO = _Memo()
