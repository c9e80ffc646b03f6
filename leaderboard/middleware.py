"""Warm anonymous GETs of cached leaderboard pages, answered before the rest of the stack.

``cached_response`` (leaderboard/caching.py) stores a page's body under a key made of the
version state and the request; this middleware, placed right after WhiteNoise (before sessions,
CSRF, auth and messages), recomputes that key from the version state remembered in the cache
and answers 304 or the stored bytes, with the headers the full stack gave that page, without a
database query. The gzip-compressed body is kept beside the plain one, so a browser's request
is not compressed again on every hit (GZipMiddleware leaves an encoded response alone).

Anything else (a session cookie, another method, an unknown or forgotten version state, a page
not stored yet) goes down the stack as usual; on the way back, the final headers of a stored
anonymous page are kept for the next hit.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.cache import get_conditional_response, patch_vary_headers
from django.utils.text import compress_string

from leaderboard import caching
from leaderboard.csv_export import bytes_chunks

# Set by the responses' own path and recomputed on a hit (or meaningless for stored bytes).
_NOT_KEPT = {"set-cookie", "content-length", "content-encoding"}
_GZIP = re.compile(r"\bgzip\b")


class CachedPageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # A session (signed in) or a pending message makes the page personal: full stack.
        anonymous = (request.method == "GET" and "messages" not in request.COOKIES
                     and settings.SESSION_COOKIE_NAME not in request.COOKIES)
        if anonymous:
            hit = _answer(request)
            if hit is not None:
                return hit
        response = self.get_response(request)
        key = getattr(response, "lb_cache_key", None)
        if anonymous and key and response.status_code == 200 and not response.has_header(
                "Set-Cookie"):
            headers = [(h, v) for h, v in response.items() if h.lower() not in _NOT_KEPT]
            cache.set(key + ":h", headers, settings.LEADERBOARD_CACHE_TIMEOUT_S)
        return response


def _answer(request: HttpRequest) -> HttpResponse | None:
    state = caching.state_lookup(request.GET.get("benchmark", ""))
    if state is None:
        return None
    pk, number, modified_ts = state
    key = caching.key_for(pk, number, modified_ts, request.path, caching.canonical_query(request))
    headers = cache.get(key + ":h")
    if headers is None:
        return None
    probe = HttpResponse()
    etag = caching.etag_for(key, "anon")
    conditional = get_conditional_response(request, etag=etag, last_modified=int(modified_ts),
                                           response=probe)
    if conditional is not probe:
        for header, value in headers:
            if header.lower() in ("etag", "last-modified", "cache-control", "vary"):
                conditional[header] = value
        return conditional
    gzip = bool(_GZIP.search(request.META.get("HTTP_ACCEPT_ENCODING", "")))
    stored = cache.get_many([key, key + ":gz"] if gzip else [key])
    hit = stored.get(key)
    if hit is None:
        return None
    body = stored.get(key + ":gz")
    if gzip and body is None:
        body = compress_string(hit["content"])
        if len(body) >= len(hit["content"]):
            body = None
        else:
            cache.set(key + ":gz", body, settings.LEADERBOARD_CACHE_TIMEOUT_S)
    if body is not None:
        response = HttpResponse(body)
    elif hit["streaming"]:
        response = StreamingHttpResponse(bytes_chunks(hit["content"]))
    else:
        response = HttpResponse(hit["content"])
    for header, value in headers:
        response[header] = value
    if body is not None:
        response["Content-Encoding"] = "gzip"
        response["Content-Length"] = str(len(body))
        # As GZipMiddleware does: the compressed bytes are a different representation.
        if response.has_header("ETag"):
            response["ETag"] = re.sub(r'^"', 'W/"', response["ETag"])
    patch_vary_headers(response, ("Accept-Encoding",))
    return response
