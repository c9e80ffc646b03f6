"""Accounts that resist abuse, tried as a visitor would, each limit at the rate the settings
give it (none is raised or lowered here unless the test says so): the verified e-mail, the
failed-login lockout by account and by address with its message and its unlock (A13), the API's
read and upload throttles answering 429 with Retry-After (A14), the sign-up limit per address
and the maintainers' view of one address's accounts, the lower quota of a new account, and the
client script waiting out a 429 and a 503. Last, an honest submitter's three commands go
through all of it untouched."""

import io
import json
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command
from django.test import Client

from devtools.harbor_fixtures import HarborJobBuilder, build_metadata
from submissions.models import AccountOrigin, Submission
from submissions.services import QuotaExceeded, quota_consume, token_issue
from tests.accounts_support import PASSWORD, client_sign_up, confirmation_link

User = get_user_model()


@pytest.fixture(autouse=True)
def fast_password_hashes(settings):
    """Django's PBKDF2 (over a million rounds) takes a second or more per wrong password on a
    busy machine, and these tests type about a hundred; the hash's cost is not what they
    measure, the counting is, so they hash with MD5 (test settings only)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _sign_in(client, login: str, password: str):
    return client.post("/accounts/login/", {"login": login, "password": password})


# --- The verified e-mail ------------------------------------------------------------------


def test_a_local_account_signs_in_only_once_its_address_is_confirmed(db):
    client = Client()
    response = client.post("/accounts/signup/", {
        "username": "carol", "email": "carol@example.org", "password1": PASSWORD,
        "password2": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/accounts/confirm-email/"
    assert "confirm" in client.get("/accounts/confirm-email/").content.decode().lower()
    assert client.get("/account/").status_code == 302  # not signed in yet
    # Signing in before confirming sends the link again and signs nothing in.
    anew = Client()
    before = len(mail.outbox)
    response = _sign_in(anew, "carol", PASSWORD)
    assert response.status_code == 302 and response["Location"] == "/accounts/confirm-email/"
    assert anew.get("/account/").status_code == 302
    assert len(mail.outbox) == before  # the cooldown: one e-mail per address per 3 minutes
    link = confirmation_link("carol@example.org")
    page = anew.get(link.split("testserver", 1)[1]).content.decode()
    assert "carol@example.org" in page and "Confirm" in page
    response = anew.post(link.split("testserver", 1)[1])
    assert response.status_code == 302
    assert anew.get("/account/").status_code == 200
    assert _sign_in(Client(), "carol@example.org", PASSWORD)["Location"] == "/account/"


def test_an_account_a_maintainer_made_signs_in_without_an_e_mail_step(db):
    """createsuperuser / the admin / create_user: the maintainer vouched for the address."""
    User.objects.create_user("made", "made@example.org", "pw-made-123!")
    client = Client()
    response = _sign_in(client, "made", "pw-made-123!")
    assert response.status_code == 302 and response["Location"] == "/account/"
    assert client.get("/account/").status_code == 200


def test_without_oauth_apps_the_pages_offer_local_accounts_only(db, settings):
    assert settings.SOCIALACCOUNT_PROVIDERS == {}  # no GITHUB_OAUTH_* / HUGGINGFACE_OAUTH_* set
    for path in ("/accounts/login/", "/accounts/signup/"):
        page = Client().get(path).content.decode()
        assert "GitHub" not in page and "Hugging Face" not in page
        assert 'name="password' in page


def test_the_oauth_providers_are_installed_only_when_configured():
    """A settings import with the two OAuth apps' variables set installs GitHub's provider and
    Hugging Face's (OpenID Connect); the same import without them installs none (what make run
    and the tests get)."""
    code = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'; "
            "django.setup(); from django.conf import settings as s; "
            "from allauth.socialaccount.providers import registry as r; "
            "print(sorted(c.id for c in r.get_class_list()), "
            "[a.get('provider_id') or p for p, c in s.SOCIALACCOUNT_PROVIDERS.items() "
            "for a in c['APPS']])")
    env = {"DEBUG": "1", "PATH": "/usr/bin:/bin", "GITHUB_OAUTH_CLIENT_ID": "gh-id",
           "GITHUB_OAUTH_SECRET": "gh-secret", "HUGGINGFACE_OAUTH_CLIENT_ID": "hf-id",
           "HUGGINGFACE_OAUTH_SECRET": "hf-secret"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,  # noqa: S603
                         timeout=120, check=False)
    assert run.stdout.strip() == "['github', 'openid_connect'] ['github', 'huggingface']", \
        run.stderr
    env = {k: v for k, v in env.items() if "OAUTH" not in k}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,  # noqa: S603
                         timeout=120, check=False)
    assert run.stdout.strip() == "[] []", run.stderr


# --- A13: failed-login lockout --------------------------------------------------------------


def test_a13_twenty_wrong_passwords_lock_the_account_with_a_clear_message(db):
    """A13: 19 wrong passwords are answered by the form; the 20th locks the account: 429,
    Retry-After, a page that says what happened, for how long and what to do. Then even the
    right password, from another address too, is refused, until a maintainer unlocks it with
    `manage.py axes_reset_username`."""
    User.objects.create_user("victim", "victim@example.org", "pw-victim-123!")
    attacker = Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(19):
        response = _sign_in(attacker, "victim", "wrong-guess")
        assert response.status_code == 200
        assert "not correct" in response.content.decode()
    response = _sign_in(attacker, "victim", "wrong-guess")
    assert response.status_code == 429
    assert int(response["Retry-After"]) == 3600
    page = response.content.decode()
    assert "Sign-in locked" in page and "Too many failed sign-ins" in page
    assert "after 20 wrong passwords" in page and "locked for 1\xa0hour" in page
    assert "ask a maintainer" in page and "/accounts/password/reset/" in page
    # By account: the owner, elsewhere, with the right password, is refused too.
    owner = Client(REMOTE_ADDR="203.0.113.5")
    response = _sign_in(owner, "victim", "pw-victim-123!")
    assert response.status_code == 429 and owner.get("/account/").status_code == 302
    # Another account signs in from the owner's address.
    User.objects.create_user("bystander", "b@example.org", "pw-bystander-1!")
    assert _sign_in(Client(REMOTE_ADDR="203.0.113.5"), "bystander",
                    "pw-bystander-1!").status_code == 302
    out = io.StringIO()
    call_command("axes_reset_username", "victim", stdout=out)
    response = _sign_in(owner, "victim", "pw-victim-123!")
    assert response.status_code == 302 and owner.get("/account/").status_code == 200


def test_a13_twenty_failures_from_one_address_lock_the_address_whatever_the_account(db):
    """A13: a spray of wrong passwords over many account names from one address locks the
    address (an account there, right password, is refused); other addresses are untouched;
    `manage.py axes_reset_ip` lifts it."""
    User.objects.create_user("sprayed", "s@example.org", "pw-sprayed-123!")
    sprayer = "198.51.100.9"
    for n in range(20):
        response = _sign_in(Client(REMOTE_ADDR=sprayer), f"guess{n}", "wrong")
    assert response.status_code == 429 and "Sign-in locked" in response.content.decode()
    assert _sign_in(Client(REMOTE_ADDR=sprayer), "sprayed", "pw-sprayed-123!").status_code == 429
    assert _sign_in(Client(REMOTE_ADDR="192.0.2.1"), "sprayed",
                    "pw-sprayed-123!").status_code == 302
    call_command("axes_reset_ip", sprayer, stdout=io.StringIO())
    assert _sign_in(Client(REMOTE_ADDR=sprayer), "sprayed", "pw-sprayed-123!").status_code == 302


def test_a13_maintainers_see_and_clear_lockouts_in_the_admin(db):
    User.objects.create_user("locked", "l@example.org", "pw-locked-123!")
    for _ in range(20):
        _sign_in(Client(REMOTE_ADDR="198.51.100.20"), "locked", "wrong")
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "r@example.org", "pw-root-123!"))
    page = admin.get("/admin/axes/accessattempt/").content.decode()
    assert "locked" in page and "198.51.100.20" in page


# --- A14: throttled reads and uploads --------------------------------------------------------


def test_a14_an_anonymous_reader_past_the_read_limit_gets_429_with_retry_after(db, settings):
    """A14: at the configured anonymous read rate (120 a minute), the 121st read from one
    address is a 429 whose Retry-After says when to come back; another address, and the same
    reader with a token (the authenticated read rate), still read."""
    rate = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["anon_read"]
    assert rate == "120/minute"
    scraper = Client(REMOTE_ADDR="198.51.100.30")
    for _ in range(120):
        assert scraper.get("/api/v1/benchmarks/").status_code == 200
    response = scraper.get("/api/v1/trials/")
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "throttled" in response.json()["detail"]
    assert Client(REMOTE_ADDR="198.51.100.31").get("/api/v1/benchmarks/").status_code == 200
    user = User.objects.create_user("reader", "r@example.org", "pw-reader-123!")
    token = token_issue(user=user)[1]
    signed = Client(REMOTE_ADDR="198.51.100.30", HTTP_AUTHORIZATION=f"Token {token}")
    assert signed.get("/api/v1/submissions/").status_code == 200


def test_a14_uploads_past_the_upload_rate_get_429_with_retry_after(db, settings):
    """A14: the upload rate is per account (30 an hour by default; 3 here, so that the test
    sends 4 requests, not 31): the next upload is a 429 with Retry-After before its body is
    looked at, and another account still uploads."""
    assert settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["upload"] == "30/hour"
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "upload": "3/hour"}}
    token = token_issue(user=User.objects.create_user("up", "u@example.org", "pw-up-123!"))[1]
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    for _ in range(3):  # empty bodies: refused by validation, but counted
        assert client.post("/api/v1/submissions/", {}).status_code == 400
    response = client.post("/api/v1/submissions/", {})
    assert response.status_code == 429 and 3000 < int(response["Retry-After"]) <= 3600
    other = token_issue(user=User.objects.create_user("up2", "u2@example.org", "pw-up-123!"))[1]
    assert Client(HTTP_AUTHORIZATION=f"Token {other}").post(
        "/api/v1/submissions/", {}).status_code == 400
    # Reads by the throttled uploader are another rate: its list still answers.
    assert client.get("/api/v1/submissions/").status_code == 200


# --- Sign-up limit, origins, the new-account quota --------------------------------------------


def test_sign_ups_are_limited_per_address_and_maintainers_see_one_addresss_accounts(db):
    for n in range(5):
        client_sign_up(Client(REMOTE_ADDR="198.51.100.40"), f"sock{n}")
    response = Client(REMOTE_ADDR="198.51.100.40").post("/accounts/signup/", {
        "username": "sock5", "email": "sock5@example.org", "password1": PASSWORD,
        "password2": PASSWORD})
    assert response.status_code == 429 and 3500 < int(response["Retry-After"]) <= 3601
    assert "Too many sign-ups" in response.content.decode()
    assert not User.objects.filter(username="sock5").exists()
    client_sign_up(Client(REMOTE_ADDR="198.51.100.41"), "honest")
    assert sorted(AccountOrigin.objects.filter(address="198.51.100.40")
                  .values_list("user__username", flat=True)) == [f"sock{n}" for n in range(5)]
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "r@example.org", "pw-root-123!"))
    page = admin.get("/admin/submissions/accountorigin/?q=198.51.100.40").content.decode()
    assert all(f"sock{n}" in page for n in range(5)) and "honest" not in page
    assert '<a href="?q=198.51.100.40">5</a>' in page


def test_a_new_account_has_the_lower_quota_until_its_first_submission_is_published(db):
    from tests.factories import SubmissionFactory

    client_sign_up(Client(), "fresh")
    fresh = User.objects.get(username="fresh")
    assert quota_consume(user=fresh) == 1 and quota_consume(user=fresh) == 2
    with pytest.raises(QuotaExceeded, match="daily quota of 2 submissions .a new account's"):
        quota_consume(user=fresh)
    SubmissionFactory(owner=fresh)  # published
    assert quota_consume(user=fresh) == 3
    # An account a maintainer made has the full quota from the start.
    made = User.objects.create_user("made", "m@example.org", "pw-made-123!")
    assert [quota_consume(user=made) for _ in range(5)] == [1, 2, 3, 4, 5]
    with pytest.raises(QuotaExceeded, match="daily quota of 5 submissions reached"):
        quota_consume(user=made)


# --- The client script waits out a 429 and retries a 503 -------------------------------------


class _Busy(BaseHTTPRequestHandler):
    """Answers the upload with the scripted statuses in turn, then 202."""

    script: list = []
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        length = int(self.headers["Content-Length"])
        self.rfile.read(length)
        type(self).seen.append(self.headers["Idempotency-Key"])
        status, headers = type(self).script.pop(0) if type(self).script else (202, {})
        body = json.dumps({"id": 7, "status": "received", "url": "/submissions/7/"}
                          if status == 202 else {"detail": "slow down"}).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_client_waits_out_a_429_and_retries_a_503_with_backoff(tmp_path):
    from submissions import client

    assert client.__version__ == "1.2.0"
    _Busy.script = [(429, {"Retry-After": "7"}), (503, {}), (503, {}),
                    (503, {"Retry-After": "30"})]
    _Busy.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    archive = tmp_path / "run.tar.gz"
    archive.write_bytes(b"x" * 1000)
    slept: list[float] = []
    try:
        body = client.upload(f"http://127.0.0.1:{server.server_port}", "hab_t", archive, None,
                             "key-1", out=io.StringIO(), sleep=slept.append)
    finally:
        server.shutdown()
    assert body["status"] == "received"
    assert slept == [7.0, 2.0, 4.0, 30.0]  # Retry-After, else 1 s doubling from the 2nd try
    assert _Busy.seen == ["key-1"] * 5  # one upload: every repeat under its Idempotency-Key
    # A 429 without Retry-After is the daily quota: no waiting, the refusal is printed.
    _Busy.script, slept = [(429, {})], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(SystemExit, match="upload refused .429."):
            client.upload(f"http://127.0.0.1:{server.server_port}", "hab_t", archive, None,
                          "key-2", out=io.StringIO(), sleep=slept.append)
    finally:
        server.shutdown()
    assert slept == []


# --- None of it stops an honest submitter ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_honest_submitters_three_commands_go_through_every_limit(live_server, settings,
                                                                     tmp_path):
    """Sign up (the e-mail's link), a token from the account page, then the Submit page's three
    commands against the live site at its default rates: fetch the client, write metadata,
    upload. Accepted, validated, queued; the client polled its status through the throttles."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from evaluation.models import BenchmarkVersion
    from submissions.intake import submission_intake

    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    call_command("sync_tasks", verbosity=0)
    browser = Client()
    assert client_sign_up(browser, "honest")["Location"] == "/account/"
    browser.post("/account/tokens/", {"name": "cli"})
    token = browser.get("/account/").context["new_token"]
    assert token.startswith("hab_")
    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    work = tmp_path / "work"
    HarborJobBuilder({t.name: t.content_digest for t in bv.tasks.all()}, agent="codex",
                     model="openai/gpt-5.5").build(work / "jobs")
    # 1: the client, as the Submit page's curl -O fetches it.
    with urllib.request.urlopen(live_server.url + "/client/hab-submit.py") as response:  # noqa: S310
        (work / "hab-submit.py").write_bytes(response.read())
    # 2: metadata from what Harbor recorded; the submitter fills in what Harbor does not know.
    run = subprocess.run([sys.executable, "hab-submit.py", "metadata", *sorted(  # noqa: S603
        str(p.relative_to(work)) for p in (work / "jobs").iterdir())], cwd=work,
        capture_output=True, text=True, timeout=120, check=True)
    assert "TODO" in run.stdout
    (work / "metadata.yaml").write_text(yaml.safe_dump(build_metadata()))
    # 3: the upload, polling until the upload is queued; the intake worker's service runs
    # beside it, as a worker would.
    upload = subprocess.Popen(  # noqa: S603
        [sys.executable, "hab-submit.py", "--url", live_server.url, "--token", token,
         "--metadata", "metadata.yaml", "--until", "queued", "--interval", "0.5",
         *sorted(str(p.relative_to(work)) for p in (work / "jobs").iterdir())],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time

    deadline = time.monotonic() + 60
    while not Submission.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    submission = Submission.objects.get()

    def intake() -> str:
        try:
            return submission_intake(submission_id=submission.pk)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(intake).result() == "queued"
    out, err = upload.communicate(timeout=120)
    assert upload.returncode == 0, err
    assert json.loads(out.splitlines()[0])["status"] == "received"
    assert "status queued" in err and "HTTP 429" not in err and "HTTP 503" not in err
    assert submission.owner.username == "honest"
    assert AccountOrigin.objects.get(user=submission.owner).address == "127.0.0.1"
