"""Reliability matrix rows for the web and API surface that no other module covers whole:
U1 (oversized body refused before it is read, over a real socket), A2 (list and filter endpoints
return only permitted rows), A3 (anonymous sweep of every route and method) and A12 (score-oracle
probing)."""

import json
import socket
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import get_resolver
from django.utils import timezone

from submissions.models import DailyQuota, Submission, SubmissionStatus
from submissions.services import QuotaExceeded, quota_consume, token_issue
from tests.factories import AgentFactory, BenchmarkTaskFactory, SubmissionFactory, TrialFactory

# Routes whose GET answers 200 to anyone. Everything else is private (404 / login redirect).
PUBLIC_READS = {
    "leaderboard", "categories", "groups", "harness", "cost", "task_matrix", "tasks", "task",
    "agent", "methods", "contribute", "healthz", "csv", "pricing", "login", "signup", "submit",
    "registry", "changelog", "downloads", "client-script", "badge", "agent-cite",
    "card-leaderboard", "card-agent", "compare", "compare-csv", "chart-svg",
    "api-root", "api-schema", "api-docs", "api-benchmarks", "api-leaderboard", "api-categories",
    "api-groups", "api-harness-families", "api-trials", "api-compare",
    # allauth's pages for the signed-out: its own names of sign-in and sign-up, the e-mail
    # confirmation (an unknown key: "expired or used"), the password reset by e-mail.
    "account_login", "account_signup", "account_confirm_email",
    "account_email_verification_sent", "account_inactive", "account_reset_password",
    "account_reset_password_done", "account_reset_password_from_key",
    "account_reset_password_from_key_done", "socialaccount_login_cancelled",
}
# Anonymous POSTs that are the way in (a form answered with its errors, nothing created), and
# signing out while signed out (a no-op).
ANONYMOUS_FORMS = {"login", "signup", "account_login", "account_signup", "account_reset_password",
                   "account_reset_password_from_key", "logout", "account_logout"}
# The pages that carry a password field.
PASSWORD_FORMS = {"login", "signup", "account_login", "account_signup",
                  "account_reset_password_from_key"}
REFUSED = {301, 302, 401, 403, 404, 405}


@pytest.fixture
def world(owner, stranger, tmp_path, settings):
    """A published submission by `owner` (public), a queued one by `owner` (private), and a
    token of the owner's, all with text that must never leak to the public."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    task = BenchmarkTaskFactory(name="cat-a/case_01", category__slug="cat-a")
    bv = task.benchmark_version
    public_agent = AgentFactory(slug="public-agent", display_name="Public Agent")
    private_agent = AgentFactory(slug="private-agent", display_name="Private Agent Zeta")
    published = SubmissionFactory(owner=owner, agent=public_agent, benchmark_version=bv,
                                  status_reason="PRIVATE-REASON", idempotency_key="IDEMP-KEY")
    TrialFactory(submission=published, benchmark_task=task)
    queued = SubmissionFactory(owner=owner, agent=private_agent, benchmark_version=bv,
                               status=SubmissionStatus.QUEUED, published_at=None,
                               queued_at=timezone.now())
    trial = TrialFactory(submission=queued, benchmark_task=task)
    from leaderboard.services import leaderboard_recompute

    leaderboard_recompute(benchmark_version=bv)
    token, raw = token_issue(user=owner)
    return {"bv": bv, "task": task, "published": published, "queued": queued, "trial": trial,
            "public_agent": public_agent, "private_agent": private_agent, "token": token,
            "raw_token": raw}


def _routes(world) -> list[tuple[str, str]]:
    """Every named top-level URL pattern of the project, filled in with real ids (generated from
    the URLconf, so a new route is swept automatically)."""
    task = world["task"]
    category, case = task.name.split("/")
    values = {"pk": world["queued"].pk, "trial_pk": world["trial"].pk, "action": "publish",
              "token_id": world["token"].pk, "table": "leaderboard", "category": category,
              "case": case, "slug": world["public_agent"].slug, "fmt": "bib",
              "key": "not-a-key", "uidb36": "0", "chart": "lb-chart"}
    routes = []
    for name, entries in get_resolver().reverse_dict.lists():
        if not isinstance(name, str):
            continue
        for possibilities, _pattern, _defaults, _converters in entries:
            for template, params in possibilities:
                missing = set(params) - set(values)
                assert not missing, f"route {name} takes {missing}: add a value to the sweep"
                routes.append((name, "/" + template % {k: values[k] for k in params}))
    return sorted(set(routes))


# Keys of the owner-only part of a submission's status: no public payload carries them, except
# the OpenAPI schema, which names (documents) them without any value.
PRIVATE_KEYS = ("secret_findings", "events")


def test_a3_anonymous_sweep_of_every_route_and_method(world, client):
    """A3: anonymous callers, every route and every method: only the public read routes answer
    200; every write is refused (401/403/405, or the login redirect); the way-in forms (login,
    sign-up) answer with their errors and create nothing; no public payload carries a secret."""
    routes = _routes(world)
    assert {n for n, _ in routes} >= PUBLIC_READS | {"api-submissions", "submission-moderate"}
    secrets = ["owner@example.org", "PRIVATE-REASON", "IDEMP-KEY", world["raw_token"],
               world["token"].key_sha256, "Private Agent Zeta", "secret_findings", "events",
               "password"]
    users_before = type(world["published"].owner).objects.count()
    state_before = sorted(Submission.objects.values_list("pk", "status"))
    seen_public = set()
    for name, url in routes:
        response = client.get(url)
        if name in PUBLIC_READS:
            assert response.status_code == 200, (url, response.status_code)
            seen_public.add(name)
            body = (b"".join(response.streaming_content) if response.streaming
                    else response.content).decode(errors="replace")  # the cards are PNGs
            for secret in secrets:
                if secret == "password" and (name in PASSWORD_FORMS or "password" in url):
                    continue  # the forms have a password field
                if secret in PRIVATE_KEYS and name == "api-schema":
                    continue  # the schema documents the owner's fields by name, holding no value
                assert secret not in body, (url, secret)
        else:
            assert response.status_code in REFUSED, (url, response.status_code)
        for method in ("post", "put", "patch", "delete"):
            response = getattr(client, method)(url, {}, content_type="application/json")
            if name in ANONYMOUS_FORMS and response.status_code in (200, 400):
                continue  # the form with its errors (400: allauth's answer to a JSON body)
            assert response.status_code in REFUSED, (method, url, response.status_code)
            assert response.status_code != 200
    assert seen_public == PUBLIC_READS
    assert client.get("/admin/").status_code == 302
    assert client.post("/admin/login/", {}).status_code in (200, 403)
    assert type(world["published"].owner).objects.count() == users_before
    assert sorted(Submission.objects.values_list("pk", "status")) == state_before


def test_a2_list_and_filter_endpoints_return_only_permitted_rows(world, stranger, owner):
    """A2: a stranger's list with `?owner=` / `?status=` filters shows none of the owner's
    private rows; the public tables (API and CSV) list published submissions only; the OPTIONS
    metadata of the upload endpoint offers no choices that enumerate users or submissions."""
    bv = world["bv"].slug
    c = Client()
    c.force_login(stranger)
    for query in (f"?owner={owner.pk}", "?status=queued", f"?owner={owner.pk}&status=pending",
                  "?search=Private", f"?id={world['queued'].pk}"):
        response = c.get("/api/v1/submissions/" + query)
        assert response.status_code == 200 and response.json() == [], query
    anon = Client()
    for path in ("/api/v1/leaderboard/", "/api/v1/trials/", "/api/v1/categories/",
                 "/api/v1/groups/", "/api/v1/harness-families/"):
        for query in (f"?benchmark={bv}", f"?benchmark={bv}&verified=0&status=queued"):
            response = anon.get(path + query)
            assert response.status_code == 200, path
            text = response.content.decode()
            assert "Private Agent Zeta" not in text, path
        if path == "/api/v1/leaderboard/":
            assert [r["agent"] for r in response.json()["results"]] == ["Public Agent"]
    for table in ("leaderboard", "trials", "task-matrix"):
        body = b"".join(anon.get(f"/{table}.csv?benchmark={bv}").streaming_content).decode()
        assert "Public Agent" in body and "Private Agent Zeta" not in body, table
    options = c.options("/api/v1/submissions/")
    assert options.status_code == 200
    text = json.dumps(options.json())
    assert "choices" not in text and owner.username not in text
    # The owner sees their own queued row, and only their own rows.
    c.force_login(owner)
    assert sorted(s["id"] for s in c.get("/api/v1/submissions/?owner=0").json()) == sorted(
        [world["published"].pk, world["queued"].pk])


def test_a12_score_oracle_probing(world, owner, stranger, settings):
    """A12: nothing about an unpublished submission's grading is visible to anyone but its
    owner and the maintainers, and probing is rate-limited by the daily quota in the database
    (the 6th submission of the day is refused whatever the request path).

    Where the matrix is wrong for this site: there is no hidden split to protect. The benchmark's
    task packages are public, answers included (Harbor keeps them under `tests/` of each package
    in the repository), so a score oracle reveals nothing that is not already published. What
    the site protects is the leaderboard: only published submissions' aggregates are public."""
    settings.SUBMISSION_DAILY_QUOTA = 5
    queued = world["queued"]
    for client_user in (None, stranger):
        c = Client()
        if client_user is not None:
            c.force_login(client_user)
        assert c.get(f"/api/v1/submissions/{queued.pk}/").status_code == 404
        assert c.get(f"/submissions/{queued.pk}/").status_code == 404
    for _ in range(5):
        quota_consume(user=owner)
    with pytest.raises(QuotaExceeded):
        quota_consume(user=owner)
    assert DailyQuota.objects.get(user=owner).used == 5
    # The public leaderboard shows each agent's aggregate, never a per-trial reward of an
    # unpublished run.
    rows = Client().get(f"/api/v1/leaderboard/?benchmark={world['bv'].slug}").json()["results"]
    assert [(r["agent"], r["successes"], r["attempts"]) for r in rows] == [("Public Agent", 1, 1)]


def test_u1_oversized_body_is_refused_before_it_is_read(live_server, owner, transactional_db):
    """U1: a body declared larger than the limit (202 MiB against 200 MiB) gets 413 over a real
    socket after only 64 KB were sent: the server answered without reading the body, created
    nothing, and did not consume the quota.

    Where the matrix differs for this site: it ships no nginx. The proxy in front of gunicorn
    is the deployer's (docs/deploy.md); Django's own middleware is the refusal tested here,
    so the limit holds whatever proxy is used."""
    _token, raw = token_issue(user=owner)
    url = urlsplit(live_server.url)
    from django.conf import settings

    # The limit is the archive's; the middleware allows 1 MiB more for the multipart envelope.
    declared = settings.SUBMISSION_MAX_UPLOAD_BYTES + 2 * 1024 * 1024
    head = (f"POST /api/v1/submissions/ HTTP/1.1\r\nHost: {url.hostname}\r\n"
            f"Authorization: Token {raw}\r\n"
            f"Content-Type: multipart/form-data; boundary=xyz\r\n"
            f"Content-Length: {declared}\r\n\r\n").encode()
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(head + b"\0" * 65536)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    status_line = reply.split(b"\r\n", 1)[0]
    assert b" 413 " in status_line, reply[:2000]
    assert Submission.objects.count() == 0
    assert not DailyQuota.objects.filter(user=owner, used__gt=0).exists()
