"""Cached pages, fragments and API payloads, keyed by the benchmark version's aggregate version.

Every change to a version's aggregates bumps ``AggregateVersion.number`` in the same
transaction (``services.aggregate_version_bump``). A key is (version pk, that number, path,
canonical query string), so once a publish commits every earlier key is unreachable: there is
nothing to delete and no moment where a reader mixes old and new. Reading the number is one
indexed query, joined to the benchmark-version lookup every page makes anyway.

Responses carry an ETag derived from the key (plus the visitor, for HTML) and the version's
Last-Modified, and conditional requests get 304 without touching the cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from functools import wraps

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.template.loader import render_to_string
from django.utils.cache import get_conditional_response, patch_cache_control, patch_vary_headers
from django.utils.http import http_date

from leaderboard import selectors
from leaderboard.csv_export import bytes_chunks
from evaluation.models import BenchmarkVersion

USER_NAV = "_partials/user_nav.html"
# Response headers kept with a cached body.
_KEPT_HEADERS = ("Content-Disposition", "X-Content-Type-Options", "X-Data-Provenance")


def version_state(bv: BenchmarkVersion) -> tuple[int, datetime]:
    """(aggregate version number, last modified) of a version fetched by benchmark_version_get."""
    av = getattr(bv, "aggregate_version", None)  # joined by the lookup: no query
    return (av.number, av.updated_at) if av is not None else (0, bv.updated_at)


def cache_key(bv: BenchmarkVersion, request: HttpRequest) -> str:
    number, modified = version_state(bv)
    query = sorted((k, v) for k in request.GET for v in request.GET.getlist(k))
    # The bump time joins the number: a restored database (or a rolled-back test) can reuse a
    # number, never the pair.
    digest = hashlib.sha256(repr((request.path, query, modified.isoformat())).encode())
    return f"lb:{bv.pk}:{number}:{digest.hexdigest()[:40]}"


def _anonymous_nav() -> str:
    return render_to_string(USER_NAV, {"user": AnonymousUser()})


def _validators(response: HttpResponse, etag: str, modified: datetime) -> HttpResponse:
    response["ETag"] = etag
    response["Last-Modified"] = http_date(modified.timestamp())
    # Stored by browsers and proxies, but revalidated (a 304 when nothing was published).
    patch_cache_control(response, no_cache=True)
    patch_vary_headers(response, ("Cookie",))
    return response


def cached_response(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Serve a leaderboard view from the cache while its benchmark version's aggregates are
    unchanged. Anonymous renderings are stored; a signed-in visitor gets the stored page with
    their own navigation spliced in (the only per-user part of these pages)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            bv = selectors.benchmark_version_get(slug=request.GET.get("benchmark", ""))
        except selectors.UnknownBenchmark:
            return view(request, *args, **kwargs)  # the view answers 404
        request.benchmark_version = bv  # the view's own lookup reuses it (no second query)
        key = cache_key(bv, request)
        signed_in = bool(getattr(request, "user", None) and request.user.is_authenticated)
        who = f"u{request.user.pk}" if signed_in else "anon"
        etag = '"' + hashlib.sha256(f"{key}|{who}".encode()).hexdigest()[:32] + '"'
        _number, modified = version_state(bv)
        probe = _validators(HttpResponse(), etag, modified)
        conditional = get_conditional_response(request, etag=etag,
                                               last_modified=int(modified.timestamp()),
                                               response=probe)
        if conditional is not probe:
            return conditional
        hit = cache.get(key)
        if hit is not None:
            response = _from_cache(hit, request, signed_in)
            if response is not None:
                return _validators(response, etag, modified)
        response = view(request, *args, **kwargs)
        # A streamed response is kept only when its view built the body whole (cache_content).
        content = (getattr(response, "cache_content", None) if response.streaming
                   else response.content)
        if response.status_code == 200 and content is not None and not signed_in:
            cache.set(key, {
                "content": content, "streaming": response.streaming,
                "content_type": response["Content-Type"],
                "headers": {h: response[h] for h in _KEPT_HEADERS if h in response},
            }, settings.LEADERBOARD_CACHE_TIMEOUT_S)
        return _validators(response, etag, modified)

    return wrapper


def _from_cache(hit: dict, request: HttpRequest, signed_in: bool) -> HttpResponse | None:
    content = hit["content"]
    if signed_in and hit["content_type"].startswith("text/html"):
        anonymous = _anonymous_nav().encode()
        if anonymous not in content:
            return None  # a page without the shared navigation: render it instead
        mine = render_to_string(USER_NAV, {"user": request.user}, request=request).encode()
        content = content.replace(anonymous, mine, 1)
    response = (StreamingHttpResponse(bytes_chunks(content), content_type=hit["content_type"])
                if hit["streaming"] else HttpResponse(content, content_type=hit["content_type"]))
    for header, value in hit["headers"].items():
        response[header] = value
    return response
