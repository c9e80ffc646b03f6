"""Cached pages, fragments and API payloads, keyed by the benchmark version's aggregate version.

Every change to a version's aggregates bumps ``AggregateVersion.number`` in the same
transaction (``services.aggregate_version_bump``). A key is (version pk, that number, path,
canonical query string), so once a publish commits every earlier key is unreachable: there is
nothing to delete and no moment where a reader mixes old and new. Reading the number is one
indexed query, joined to the benchmark-version lookup every page makes anyway.

Every key also carries ``release()``: a digest of the code, templates and static files that
render a page and of the LEADERBOARD_ settings. A deploy that changes any of them (a template
fix, a new page size) makes every page stored by the previous release unreachable, in a shared
cache too, and changes every ETag, so no visitor keeps a 304 for a page the new release renders
differently.

Responses carry an ETag derived from the key (plus the visitor, for HTML) and the version's
Last-Modified, and conditional requests get 304 without touching the cache.

Warm anonymous requests do not reach the view, nor the database: ``leaderboard.middleware``
answers them from the cache before the session, CSRF and auth middleware run, using the
version state (pk, number, last modified) remembered in the cache under ``STATE_KEY`` and a
generation number. Every bump starts a new generation, at once and again when its transaction
commits, so the next request reads the new number from the database (a reader that read the
old number meanwhile remembers it under a generation nobody reads). A remembered state is
trusted for ``LEADERBOARD_STATE_TTL_S``: by default an hour with a shared cache, 0.5 s with
local memory, where a bump in another process cannot reach this one's copy.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import time
from collections.abc import Callable
from datetime import datetime
from functools import wraps

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.db import transaction
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


STATE_KEY = "lb:states"
GENERATION_KEY = "lb:states-generation"


def state_generation() -> int:
    """The current generation of remembered states (every bump starts a new one). Read it
    before reading a version from the database, and remember under it."""
    found = cache.get(GENERATION_KEY)
    if found is None:
        # Started from the clock: an evicted counter never restarts at a used generation.
        cache.add(GENERATION_KEY, int(time.time() * 1000), None)
        found = cache.get(GENERATION_KEY) or 0
    return found


def state_remember(slug: str, bv: BenchmarkVersion, generation: int) -> None:
    """Remember which version (and aggregate version) ``?benchmark=<slug>`` names, under the
    generation read before ``bv`` was: a bump in between makes it unreachable."""
    number, modified = version_state(bv)
    key = f"{STATE_KEY}:{generation}"
    states = cache.get(key) or {}
    states[slug] = (bv.pk, number, modified.timestamp(), time.time())
    cache.set(key, states, settings.LEADERBOARD_CACHE_TIMEOUT_S)


def _state_ttl() -> float:
    ttl = settings.LEADERBOARD_STATE_TTL_S
    if ttl is not None:
        return ttl
    # A bump in another process reaches a shared cache (Redis, files) at once, never another
    # process's local memory: there only a short trust bounds how stale a page can be.
    return 0.5 if "LocMemCache" in settings.CACHES["default"]["BACKEND"] else 3600.0


def state_lookup(slug: str) -> tuple[int, int, float] | None:
    """(version pk, aggregate number, last modified timestamp) remembered for ``slug`` in the
    current generation, or None: unknown, or older than the trust (``_state_ttl``)."""
    generation = cache.get(GENERATION_KEY)
    if generation is None:
        return None
    found = (cache.get(f"{STATE_KEY}:{generation}") or {}).get(slug)
    if found is None or time.time() - found[3] > _state_ttl():
        return None
    return found[:3]


def _new_generation() -> None:
    try:
        cache.incr(GENERATION_KEY)
    except ValueError:  # never set (or evicted)
        cache.set(GENERATION_KEY, int(time.time() * 1000), None)


def state_forget() -> None:
    """Called by every bump: a new generation now and again at commit (a reader between the
    two read the number from before the commit; what it remembers is unreachable)."""
    _new_generation()
    transaction.on_commit(_new_generation)


# What renders a cached response, besides the data: these directories' files of these kinds.
_RELEASE_DIRS = ("config", "leaderboard", "submissions", "evaluation", "templates", "static")
_RELEASE_SUFFIXES = {".py", ".html", ".txt", ".css", ".js", ".svg"}


@functools.cache
def release() -> str:
    """16 hex digits naming this release's rendering (``release_digest`` of this checkout and
    its settings), read once per process: about 250 files, 3 MB, 50 ms."""
    names = sorted(n for n in dir(settings) if n.startswith("LEADERBOARD_"))
    return release_digest(settings.BASE_DIR, {n: getattr(settings, n) for n in names})


def release_digest(base, rendering_settings: dict) -> str:
    """Every file of ``_RELEASE_SUFFIXES`` under ``_RELEASE_DIRS`` of ``base`` (path and bytes)
    and the given settings."""
    digest = hashlib.sha256()
    for top in _RELEASE_DIRS:
        for path in sorted((base / top).rglob("*")):
            if path.suffix in _RELEASE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(base)).encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    for name, value in sorted(rendering_settings.items()):
        digest.update(f"{name}={value!r}\0".encode())
    return digest.hexdigest()[:16]


def key_for(pk: int, number: int, modified_ts: float, path: str, query: list) -> str:
    # The bump time joins the number: a restored database (or a rolled-back test) can reuse a
    # number, never the pair.
    digest = hashlib.sha256(repr((path, query, modified_ts)).encode())
    return f"lb:{release()}:{pk}:{number}:{digest.hexdigest()[:40]}"


def canonical_query(request: HttpRequest) -> list:
    return sorted((k, v) for k in request.GET for v in request.GET.getlist(k))


def etag_for(key: str, who: str) -> str:
    return '"' + hashlib.sha256(f"{key}|{who}".encode()).hexdigest()[:32] + '"'


def cache_key(bv: BenchmarkVersion, request: HttpRequest) -> str:
    number, modified = version_state(bv)
    return key_for(bv.pk, number, modified.timestamp(), request.path, canonical_query(request))


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
        slug = request.GET.get("benchmark", "")
        generation = state_generation()
        try:
            bv = selectors.benchmark_version_get(slug=slug)
        except selectors.UnknownBenchmark:
            return view(request, *args, **kwargs)  # the view answers 404
        request.benchmark_version = bv  # the view's own lookup reuses it (no second query)
        key = cache_key(bv, request)
        signed_in, etag = _viewer_etag(request, key)
        _number, modified = version_state(bv)
        if (not_modified := _not_modified(request, etag, modified)) is not None:
            return not_modified
        # Remembered for the middleware's next hits (after the version was read, as late as
        # possible: the remembered state's age counts from here).
        state_remember(slug, bv, generation)
        return _serve(view, request, args, kwargs, key=key, etag=etag, modified=modified,
                      signed_in=signed_in)

    return wrapper


def cached_site_response(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``cached_response`` for a page about every benchmark version at once (the changelog):
    keyed by the state of all of them (``selectors.site_data_state``, one query), so a publish,
    take-down or rebuild of any version, or a new version, makes the stored page unreachable."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        state, modified = selectors.site_data_state()
        digest = hashlib.sha256(repr((state, request.path, canonical_query(request))).encode())
        key = f"lb:{release()}:site:{digest.hexdigest()[:40]}"
        signed_in, etag = _viewer_etag(request, key)
        if (not_modified := _not_modified(request, etag, modified)) is not None:
            return not_modified
        return _serve(view, request, args, kwargs, key=key, etag=etag, modified=modified,
                      signed_in=signed_in)

    return wrapper


def _viewer_etag(request: HttpRequest, key: str) -> tuple[bool, str]:
    """Whether the visitor is signed in, and the ETag of ``key`` as they see it (a signed-in
    visitor's copy carries their own navigation)."""
    signed_in = bool(getattr(request, "user", None) and request.user.is_authenticated)
    return signed_in, etag_for(key, f"u{request.user.pk}" if signed_in else "anon")


def _not_modified(request: HttpRequest, etag: str, modified) -> HttpResponse | None:
    """The 304 (or 412) a conditional request gets for (``etag``, ``modified``), else None."""
    probe = _validators(HttpResponse(), etag, modified)
    conditional = get_conditional_response(request, etag=etag,
                                           last_modified=int(modified.timestamp()),
                                           response=probe)
    return None if conditional is probe else conditional


def _serve(view, request: HttpRequest, args, kwargs, *, key: str, etag: str,
           modified: datetime, signed_in: bool) -> HttpResponse:
    """The stored page under ``key`` (the signed-in visitor's navigation spliced in), or the
    view's rendering, stored when anonymous (a crowd's cold miss is rendered once)."""
    hit = cache.get(key)
    rendering = False
    if hit is None and not signed_in:
        hit, rendering = _render_turn(key)
    if hit is not None:
        response = _from_cache(hit, request, signed_in)
        if response is not None:
            # The middleware keeps its final headers, tagged with the stored bytes' stamp.
            response.lb_cache_key, response.lb_cache_stamp = key, hit.get("stamp")
            return _validators(response, etag, modified)
    try:
        response = view(request, *args, **kwargs)
        # A streamed response is kept only when its view built the body whole
        # (cache_content).
        content = (getattr(response, "cache_content", None) if response.streaming
                   else response.content)
        if response.status_code == 200 and content is not None and not signed_in:
            # The stamp names these very bytes: a process that kept a copy of them
            # (leaderboard.middleware) knows it is still the stored one.
            stamp = secrets.token_hex(8)
            cache.set(key, {
                "content": content, "streaming": response.streaming,
                "content_type": response["Content-Type"],
                "headers": {h: response[h] for h in _KEPT_HEADERS if h in response},
                "stamp": stamp,
            }, settings.LEADERBOARD_CACHE_TIMEOUT_S)
            response.lb_cache_key, response.lb_cache_stamp = key, stamp
    finally:
        if rendering:
            cache.delete(key + ":render")
    return _validators(response, etag, modified)


def _render_turn(key: str) -> tuple[dict | None, bool]:
    """A miss: render it, or wait for the request already rendering it (a cold page hit by a
    crowd is rendered once, not once per request). Returns (the entry another request stored,
    False), or (None, True) when this request holds the key's render lock, or (None, False)
    when the wait ran out (render without the lock)."""
    wait = settings.LEADERBOARD_RENDER_WAIT_S
    if cache.add(key + ":render", 1, wait):
        return None, True
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(0.02)  # a thread sleeping here releases the GIL to the one rendering
        hit = cache.get(key)
        if hit is not None:
            return hit, False
        if cache.add(key + ":render", 1, wait):  # the renderer failed: take over
            return None, True
    return None, False


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
