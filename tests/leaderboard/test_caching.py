"""Pages, CSVs and API payloads are served from the cache until a publish commits; conditional
requests get 304; large tables are windowed with the window in the URL."""

import gzip
import re
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from leaderboard import caching, selectors
from leaderboard.caching import cache_key
from leaderboard.models import AggregateVersion
from leaderboard.services import leaderboard_recompute
from submissions.models import SubmissionStatus
from submissions.services import submission_publish, submission_withdraw
from tests.factories import AgentFactory, published_submission

CACHED = ["/", "/categories/", "/imaging-vs-text/", "/harness-effect/", "/cost/",
          "/task-matrix/", "/tasks/", "/agents/alpha/", "/tasks/img/case_01/",
          "/leaderboard.csv", "/categories.csv", "/api/v1/leaderboard/", "/api/v1/trials/"]


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.fixture
def ranked(two_agents, settings):
    # A slow test machine must not let the remembered version state age out between requests.
    settings.LEADERBOARD_STATE_TTL_S = 60
    bv, tasks, a, b = two_agents
    leaderboard_recompute(benchmark_version=bv)
    return bv, tasks


@pytest.mark.parametrize("path", CACHED)
def test_a_warm_anonymous_request_makes_no_query(path, client, ranked):
    bv, _ = ranked
    url = f"{path}?benchmark={bv.slug}"
    cold = client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        warm = client.get(url)
    # Answered by leaderboard.middleware from the remembered version state: no query at all.
    assert len(ctx.captured_queries) == 0, [q["sql"] for q in ctx.captured_queries]
    assert warm.status_code == 200 and _body(warm) == _body(cold)
    assert warm["ETag"] == cold["ETag"] and "Last-Modified" in warm
    # The same headers the full stack gave it (CSP, framing, type, disposition, ...).
    for header in ("Content-Type", "Content-Security-Policy", "X-Frame-Options",
                   "Cache-Control", "Content-Disposition"):
        assert warm.get(header) == cold.get(header), header


def test_a_warm_hit_keeps_its_gzip_bytes(client, ranked):
    bv, _ = ranked
    url = f"/?benchmark={bv.slug}"
    plain = client.get(url).content
    first = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    with CaptureQueriesContext(connection) as ctx:
        second = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert not ctx.captured_queries
    assert second["Content-Encoding"] == "gzip" and "Accept-Encoding" in second["Vary"]
    assert second.content == first.content and gzip.decompress(second.content) == plain
    # A conditional request with the compressed representation's (weak) ETag: 304, no body.
    again = client.get(url, HTTP_ACCEPT_ENCODING="gzip", HTTP_IF_NONE_MATCH=second["ETag"])
    assert again.status_code == 304 and again.content == b""


def test_a_signed_in_warm_request_reads_only_the_version(client, ranked):
    bv, _ = ranked
    url = f"/?benchmark={bv.slug}"
    client.get(url)
    user = get_user_model().objects.create_user("dave", password="pw-dave-123")
    client.force_login(user)
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        mine = client.get(url)
    sqls = [q["sql"] for q in ctx.captured_queries]
    # Session and user (the auth middleware), then the version lookup; no aggregate read.
    assert len(sqls) == 3 and not any("leaderboard_leaderboardentry" in q for q in sqls), sqls
    assert b"dave" in mine.content


def test_conditional_requests_get_304_until_a_publish_commits(client, ranked):
    bv, tasks = ranked
    first = client.get(f"/?benchmark={bv.slug}")
    again = client.get(f"/?benchmark={bv.slug}", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304 and again.content == b""
    since = client.get(f"/?benchmark={bv.slug}", HTTP_IF_MODIFIED_SINCE=first["Last-Modified"])
    assert since.status_code == 304

    agent = AgentFactory(display_name="Gamma (M3)", slug="gamma")
    sub = published_submission(agent, tasks, ["PPP"] * 5, status=SubmissionStatus.VERIFIED,
                               published_at=None)
    number = AggregateVersion.objects.get(benchmark_version=bv).number
    submission_publish(submission=sub, actor=None)
    assert AggregateVersion.objects.get(benchmark_version=bv).number == number + 1
    after = client.get(f"/?benchmark={bv.slug}", HTTP_IF_NONE_MATCH=first["ETag"])
    assert after.status_code == 200 and b"Gamma (M3)" in after.content
    assert after["ETag"] != first["ETag"]
    submission_withdraw(submission=sub, actor=None, reason="test")
    assert b"Gamma (M3)" not in client.get(f"/?benchmark={bv.slug}").content


@pytest.mark.parametrize("path", ["/api/v1/leaderboard/", "/leaderboard.csv"])
def test_the_load_paths_revalidate_with_304_and_no_query_until_a_publish(path, client, ranked):
    """R14's read paths: a warm conditional request is a 304 from the middleware (no query, no
    body); the publish that commits makes the stored copy unreachable at once (200, new ETag,
    the new agent in the body), and the new copy revalidates again without a query."""
    bv, tasks = ranked
    url = f"{path}?benchmark={bv.slug}"
    first = client.get(url)
    assert first.status_code == 200 and first["ETag"] and "no-cache" in first["Cache-Control"]
    with CaptureQueriesContext(connection) as ctx:
        again = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert not ctx.captured_queries, [q["sql"] for q in ctx.captured_queries]
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == first["ETag"]

    agent = AgentFactory(display_name="Gamma (M3)", slug="gamma")
    sub = published_submission(agent, tasks, ["PPP"] * 5, status=SubmissionStatus.VERIFIED,
                               published_at=None)
    submission_publish(submission=sub, actor=None)
    after = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert after.status_code == 200 and after["ETag"] != first["ETag"]
    assert b"Gamma (M3)" in _body(after)
    with CaptureQueriesContext(connection) as ctx:
        revalidated = client.get(url, HTTP_IF_NONE_MATCH=after["ETag"])
    assert revalidated.status_code == 304 and not ctx.captured_queries


def test_a_worker_warmed_before_serving_answers_its_first_reader_from_the_cache(client, ranked):
    """gunicorn's post_worker_init (config/gunicorn.py) runs config.warmup: the worker answers
    the read paths to itself through its WSGI application, so its first reader is a warm hit
    (no query) instead of a cold start; a path that fails does not stop the warm-up."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from config import warmup

    bv, _ = ranked
    url = f"/api/v1/leaderboard/?benchmark={bv.slug}"
    # As the test client does: the test's transaction must outlive each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    ticks = []
    try:
        done = warmup.warm(WSGIHandler(), ["/healthz", url, "/no-such-page/"],
                           tick=lambda: ticks.append(1), close_connections=False)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    assert [(path, status.split()[0]) for path, status, _s in done] == [
        ("/healthz", "200"), (url, "200"), ("/no-such-page/", "404")]
    assert len(ticks) == 3
    with CaptureQueriesContext(connection) as ctx:
        first = client.get(url)
    assert first.status_code == 200 and not ctx.captured_queries, ctx.captured_queries


def test_a_signed_in_visitor_gets_the_cached_page_with_their_own_navigation(client, ranked):
    bv, _ = ranked
    anonymous = client.get(f"/?benchmark={bv.slug}").content
    user = get_user_model().objects.create_user("carol", password="pw-carol-123")
    client.force_login(user)
    mine = client.get(f"/?benchmark={bv.slug}")
    assert b"carol" in mine.content and b"Sign out" in mine.content
    assert b"Sign in" not in mine.content
    # Same page otherwise, and the anonymous copy never learns who asked.
    assert mine.content.split(b"</header>")[1] == anonymous.split(b"</header>")[1]
    client.logout()
    assert b"carol" not in client.get(f"/?benchmark={bv.slug}").content


def test_a_catalogue_edit_bumps_the_version(client, ranked):
    bv, tasks = ranked
    assert b"case_01" in client.get(f"/tasks/?benchmark={bv.slug}").content
    tasks[0].name = "img/renamed_01"
    tasks[0].save()
    assert b"img/renamed_01" in client.get(f"/tasks/?benchmark={bv.slug}").content


@pytest.fixture
def seven_agents(small_benchmark, settings):
    settings.LEADERBOARD_PAGE_SIZE = 3
    settings.LEADERBOARD_MATRIX_PAGE_SIZE = 2
    bv, tasks = small_benchmark
    for i in range(7):
        outcomes = ["PPP"] * (5 - i % 5) + ["FFF"] * (i % 5)
        published_submission(AgentFactory(display_name=f"Agent {i} (Model)", slug=f"a{i}"),
                             tasks, outcomes)
    leaderboard_recompute(benchmark_version=bv)
    return bv


def _agents_in_table(body: str) -> list[str]:
    table = body.split("<tbody>")[1].split("</tbody>")[0]
    return [part.split("</a>")[0] for part in table.split('">Agent ')[1:]]


def test_the_leaderboard_shows_the_top_n_then_next_or_all(client, seven_agents):
    bv = seven_agents
    body = client.get(f"/?benchmark={bv.slug}&harness=").content.decode()
    assert len(_agents_in_table(body)) == 3
    assert "Agents 1–3 of 7" in body
    assert "page=2" in body and "show=all" in body
    page3 = client.get(f"/?benchmark={bv.slug}&page=3").content.decode()
    assert len(_agents_in_table(page3)) == 1 and "Agents 7–7 of 7" in page3
    everyone = client.get(f"/?benchmark={bv.slug}&show=all").content.decode()
    assert len(_agents_in_table(everyone)) == 7
    # The CSV link covers every agent, whatever the window.
    csv = _body(client.get(f"/leaderboard.csv?benchmark={bv.slug}&page=2"))
    assert csv.count(b"\n") == 8


def test_search_and_sort_stay_in_the_window_links(client, seven_agents):
    bv = seven_agents
    body = client.get(f"/?benchmark={bv.slug}&q=agent 6&sort=agent&order=desc").content.decode()
    assert _agents_in_table(body) == ["6 (Model)"]
    assert "matching “agent 6”" in body
    body = client.get(f"/?benchmark={bv.slug}&sort=agent&order=desc").content.decode()
    assert _agents_in_table(body) == ["6 (Model)", "5 (Model)", "4 (Model)"]
    assert "sort=agent" in body.split('rel="next"')[0].rsplit("href=", 1)[1]


def test_the_task_matrix_pages_by_agents(client, seven_agents):
    bv = seven_agents
    body = client.get(f"/task-matrix/?benchmark={bv.slug}&page=2").content.decode()
    # one letter per third attempt, each linking to its trial (2 agents x 5 tasks)
    assert len(re.findall(r'#t\d+-3"[^>]*>[PFTEI]</a>', body)) == 2 * 5
    assert "Agents 3–4 of 7" in body


def test_a_cold_page_another_request_is_rendering_is_waited_for_not_rendered(client, ranked):
    """The stampede guard: while one request holds a page's render lock, another waits for
    the bytes it stores instead of rendering the page again."""
    bv, _ = ranked
    url = f"/?benchmark={bv.slug}"
    rendered = client.get(url)
    cache.clear()
    key = cache_key(selectors.benchmark_version_get(slug=bv.slug),
                    RequestFactory().get("/", {"benchmark": bv.slug}))
    cache.add(key + ":render", 1, 30)
    entry = {"content": b"<p>rendered by the other request</p>", "streaming": False,
             "content_type": "text/html; charset=utf-8", "headers": {}}
    timer = threading.Timer(0.3, lambda: cache.set(key, entry, 60))
    timer.start()
    started = time.monotonic()
    with CaptureQueriesContext(connection) as ctx:
        waited = client.get(url)
    timer.join()
    assert waited.status_code == 200 and waited.content == entry["content"]
    assert 0.25 < time.monotonic() - started < 5
    assert not any("leaderboard_leaderboardentry" in q["sql"] for q in ctx.captured_queries)
    assert rendered.content != waited.content


def test_a_new_release_is_not_served_the_previous_releases_pages(client, ranked, monkeypatch):
    """A deploy that changes a template (or a LEADERBOARD_ setting) must not keep serving, from a
    shared cache, the page the previous release rendered, nor answer 304 to its ETag."""
    bv, _ = ranked
    url = f"/?benchmark={bv.slug}"
    before = client.get(url)
    assert client.get(url, HTTP_IF_NONE_MATCH=before["ETag"]).status_code == 304
    monkeypatch.setattr(caching, "release", lambda: "next-release")
    after = client.get(url)
    assert after.status_code == 200 and after["ETag"] != before["ETag"]
    assert client.get(url, HTTP_IF_NONE_MATCH=before["ETag"]).status_code == 200


def test_the_release_digest_follows_code_templates_and_settings(tmp_path):
    for top in caching._RELEASE_DIRS:
        (tmp_path / top).mkdir()
    page = tmp_path / "templates" / "page.html"
    page.write_text("<p>{{ rate }}</p>")
    (tmp_path / "leaderboard" / "data.csv").write_text("not rendering code")
    first = caching.release_digest(tmp_path, {"LEADERBOARD_PAGE_SIZE": 100})
    assert caching.release_digest(tmp_path, {"LEADERBOARD_PAGE_SIZE": 100}) == first
    assert caching.release_digest(tmp_path, {"LEADERBOARD_PAGE_SIZE": 50}) != first
    (tmp_path / "leaderboard" / "data.csv").write_text("changed, still not rendering code")
    assert caching.release_digest(tmp_path, {"LEADERBOARD_PAGE_SIZE": 100}) == first
    page.write_text("<p>{{ rate|floatformat:1 }}</p>")
    assert caching.release_digest(tmp_path, {"LEADERBOARD_PAGE_SIZE": 100}) != first
