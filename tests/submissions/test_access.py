"""Authorisation and output hygiene (reliability matrix A1-A8): a submission the caller may not
see does not exist, on every route; anonymous callers only read; state changes only through the
maintainer actions; trajectories are escaped and downloaded as attachments."""

import pytest
from django.test import Client
from django.urls import get_resolver

from submissions.models import SubmissionStatus
from submissions.services import token_issue
from tests.accounts_support import client_sign_up

SUBMISSION_ROUTE_NAMES = {
    "submission-status", "submission-moderate", "trajectory", "trajectory-download",
    "api-submission",
}


# Routes only maintainers reach: refused (sign-in redirect or 403) before the id is looked up.
MAINTAINER_ONLY = {"submission-moderate", "infra-confirm", "screen-clear"}


def _submission_routes(sub, trial):
    """Every URL pattern of the project that takes a submission id, filled in (generated from
    the URLconf, so a new route is covered automatically)."""
    urls = []
    for name, entries in get_resolver().reverse_dict.lists():
        if not isinstance(name, str):
            continue
        for possibilities, _pattern, _defaults, _converters in entries:
            for template, params in possibilities:
                if "pk" not in params:
                    continue
                # Filled from the route's template (the regex pattern itself is no URL: filled
                # in, it used to give 404s that no view answered).
                values = {"pk": sub.pk, "trial_pk": trial.pk, "action": "publish"}
                urls.append((name, "/" + template % {k: values[k] for k in params}))
    return urls


def test_route_enumeration_covers_the_submission_routes(owned_submission):
    names = {n for n, _ in _submission_routes(owned_submission, owned_submission.trials.first())}
    assert SUBMISSION_ROUTE_NAMES <= names


@pytest.mark.parametrize("method", ["get", "post"])
def test_a_stranger_gets_404_on_every_route_of_a_foreign_submission(
        method, owned_submission, stranger):
    """A1: every route taking a submission id (generated from the URLconf) answers 404 to a
    user who may not see it, for GET and POST."""
    client = Client()
    client.force_login(stranger)
    for name, url in _submission_routes(owned_submission, owned_submission.trials.first()):
        response = getattr(client, method)(url)
        if name in MAINTAINER_ONLY:
            # maintainer-only: the same refusal whatever the id, so no existence oracle
            assert response.status_code in (302, 403, 404), (url, response.status_code)
        elif method == "post" and response.status_code == 405:
            continue
        else:
            assert response.status_code == 404, (method, url, response.status_code)


def test_anonymous_callers_get_404_and_cannot_write(owned_submission, client):
    for name, url in _submission_routes(owned_submission, owned_submission.trials.first()):
        assert client.get(url).status_code in (302, 404), url
    assert client.post("/api/v1/submissions/").status_code in (401, 403)
    assert client.get("/api/v1/submissions/").status_code in (401, 403)
    assert client.get("/account/").status_code == 302
    # The Submit page is a public how-to; uploading through it needs an account.
    assert client.get("/submit/").status_code == 200
    assert client.post("/submit/").status_code == 302
    assert client.get("/moderation/").status_code == 302


def test_the_owner_sees_their_submission_and_the_public_sees_it_once_published(
        owned_submission, owner, maintainer, client):
    c = Client()
    c.force_login(owner)
    doc = c.get(f"/api/v1/submissions/{owned_submission.pk}/").json()
    assert doc["status"] == "queued" and doc["queue_position"] == 1
    assert "events" in doc
    assert client.get(f"/submissions/{owned_submission.pk}/").status_code == 404
    from submissions.services import submission_publish, submission_transition

    submission_transition(submission=owned_submission, to_status=SubmissionStatus.VERIFYING)
    submission_transition(submission=owned_submission, to_status=SubmissionStatus.VERIFIED)
    submission_publish(submission=owned_submission, actor=maintainer)
    public = client.get(f"/api/v1/submissions/{owned_submission.pk}/").json()
    assert public["status"] == "published" and "events" not in public


def test_api_token_sees_only_its_owners_submissions(owned_submission, owner, stranger):
    _, raw = token_issue(user=stranger)
    c = Client(HTTP_AUTHORIZATION=f"Token {raw}")
    assert c.get(f"/api/v1/submissions/{owned_submission.pk}/").status_code == 404
    assert c.get("/api/v1/submissions/").json() == []
    _, raw = token_issue(user=owner)
    c = Client(HTTP_AUTHORIZATION=f"Token {raw}")
    assert [s["id"] for s in c.get("/api/v1/submissions/").json()] == [owned_submission.pk]


def test_bad_tokens_are_refused(db):
    c = Client(HTTP_AUTHORIZATION="Token hab_nope_nope")
    assert c.get("/api/v1/submissions/").status_code == 401
    c = Client(HTTP_AUTHORIZATION="Token a b")
    assert c.get("/api/v1/submissions/").status_code == 401


def test_owner_cannot_change_status_or_scores(owned_submission, owner):
    """A4: there is no write route for owners; PATCH/PUT are refused and change nothing."""
    _, raw = token_issue(user=owner)
    c = Client(HTTP_AUTHORIZATION=f"Token {raw}")
    url = f"/api/v1/submissions/{owned_submission.pk}/"
    body = {"status": "published", "is_verified": True, "owner": 99}
    for method in ("patch", "put", "delete"):
        response = getattr(c, method)(url, body, content_type="application/json")
        assert response.status_code == 405
    owned_submission.refresh_from_db()
    assert owned_submission.status == SubmissionStatus.QUEUED
    assert not owned_submission.is_verified


def test_session_posts_need_a_csrf_token(owned_submission, maintainer):
    """A5: enforce_csrf_checks client; maintainer actions and token creation refuse without it."""
    c = Client(enforce_csrf_checks=True)
    c.force_login(maintainer)
    assert c.post(f"/submissions/{owned_submission.pk}/publish/").status_code == 403
    assert c.post("/account/tokens/", {"name": "x"}).status_code == 403
    assert c.post("/api/v1/submissions/", {}).status_code == 403
    owned_submission.refresh_from_db()
    assert owned_submission.status == SubmissionStatus.QUEUED


def test_no_view_is_csrf_exempt():
    import pathlib

    for path in pathlib.Path(__file__).resolve().parents[2].glob("*/views.py"):
        assert "csrf_exempt" not in path.read_text(), path


def test_trajectory_viewer_escapes_and_folds(owned_submission, owner):
    c = Client()
    c.force_login(owner)
    trial = owned_submission.trials.first()
    body = c.get(f"/submissions/{owned_submission.pk}/trials/{trial.pk}/trajectory/").content
    body = body.decode()
    assert "<script>alert('x')</script>" not in body
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in body
    assert "<details>" in body  # the 6,000-character observation is folded
    assert "Bash" in body


def test_trajectory_download_is_an_attachment_never_inline(owned_submission, owner, maintainer,
                                                           client):
    """A8: an uploaded artefact is served only as an attachment, octet-stream, nosniff."""
    trial = owned_submission.trials.first()
    url = f"/submissions/{owned_submission.pk}/trials/{trial.pk}/trajectory.json"
    assert client.get(url).status_code == 404  # not published yet
    c = Client()
    c.force_login(owner)
    response = c.get(url)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Type"] == "application/octet-stream"


def test_moderation_actions_are_for_maintainers(owned_submission, owner, maintainer):
    c = Client()
    c.force_login(owner)
    c.post(f"/submissions/{owned_submission.pk}/publish/")
    owned_submission.refresh_from_db()
    assert owned_submission.status == SubmissionStatus.QUEUED
    c.force_login(maintainer)
    assert c.get("/moderation/").status_code == 200
    c.post(f"/submissions/{owned_submission.pk}/reject/", {"reason": "incomplete logs"})
    owned_submission.refresh_from_db()
    assert owned_submission.status == SubmissionStatus.REJECTED
    assert owned_submission.status_reason == "incomplete logs"


def test_price_table_page_shows_its_date(client, db):
    from submissions.pricing import PRICE_TABLE_DATE

    body = client.get("/pricing/").content.decode()
    assert PRICE_TABLE_DATE in body and "gpt-5-5" in body


@pytest.mark.parametrize(("wanted", "lands_on"), [
    ("/submit/", "/submit/"),                      # a visitor sent to sign in from the form
    ("https://evil.example/steal", "/account/"),   # never off this site
    ("", "/account/"),                             # the token is created there
])
def test_sign_up_returns_to_the_page_asked_for_on_this_site_only(db, client, wanted, lands_on):
    query = f"?next={wanted}" if wanted else ""
    page = client.get("/accounts/signup/" + query).content.decode()
    assert ('name="next"' in page) == (lands_on == wanted)
    # Signed in by the link in the confirmation e-mail, which keeps where the sign-up was headed.
    response = client_sign_up(client, "newbie", query=query)
    assert response.status_code == 302 and response["Location"] == lands_on
    assert client.get(lands_on).status_code == 200  # signed in


def test_sign_in_and_sign_up_link_to_each_other_keeping_next(db, client):
    login_page = client.get("/accounts/login/?next=/submit/").content.decode()
    assert 'href="/accounts/signup/?next=/submit/"' in login_page
    signup_page = client.get("/accounts/signup/?next=/submit/").content.decode()
    assert 'href="/accounts/login/?next=/submit/"' in signup_page
