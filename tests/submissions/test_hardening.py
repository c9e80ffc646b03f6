"""A9 and friends: production responses carry security headers and never show a traceback."""

import pytest
from django.test import Client, override_settings
from django.urls import include, path


def _boom(request):
    raise RuntimeError("secret internals: DATABASE_PASSWORD=hunter2")


urlpatterns = [path("boom/", _boom), path("", include("config.urls"))]


@override_settings(ROOT_URLCONF=__name__, DEBUG=False, SECURE_SSL_REDIRECT=False)
def test_a_server_error_shows_no_traceback(db):
    """A9: a forced 500 with DEBUG off shows no traceback and no secret."""
    client = Client(raise_request_exception=False)
    response = client.get("/boom/")
    assert response.status_code == 500
    body = response.content.decode()
    assert "hunter2" not in body and "Traceback" not in body and "RuntimeError" not in body


@override_settings(ROOT_URLCONF=__name__, DEBUG=False, SECURE_SSL_REDIRECT=False,
                   SECURE_HSTS_SECONDS=31536000)
def test_security_headers_are_present(db):
    """A9: HSTS, nosniff, referrer policy, frame-ancestors and a CSP without inline scripts."""
    response = Client().get("/methods/", secure=True)
    assert response.status_code == 200
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert "unsafe-inline" not in response["Content-Security-Policy"].split("script-src")[1].split(";")[0]
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")


def test_settings_refuse_to_start_without_secrets_when_debug_is_off():
    import subprocess
    import sys

    env = {"DEBUG": "0", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", "import django, os; os.environ['DJANGO_SETTINGS_MODULE']="
         "'config.settings'; django.setup()"],
        env=env, capture_output=True, text=True, cwd=str(__import__("pathlib").Path(
            __file__).resolve().parents[2]))
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def _check_with_debug_off(tmp_path, **env: str):
    """`manage.py check` as production starts it: DEBUG off, every other required setting set."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    base = {"DEBUG": "0", "PATH": "/usr/bin:/bin", "SECRET_KEY": "k" * 50,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
            "CELERY_BROKER_URL": "memory://", **env}
    return subprocess.run([sys.executable, str(repo / "manage.py"), "check"], env=base,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("secret", [None, "", "insecure-dev-only-sample-secret", "s" * 31])
def test_the_site_refuses_to_start_without_a_private_sample_secret_when_debug_is_off(
        tmp_path, secret):
    env = {} if secret is None else {"VERIFICATION_SAMPLE_SECRET": secret}
    result = _check_with_debug_off(tmp_path, **env)
    assert result.returncode != 0
    assert "VERIFICATION_SAMPLE_SECRET" in result.stderr, result.stderr[-2000:]


def test_the_site_starts_with_a_private_sample_secret_or_its_file(tmp_path):
    secret = "s" * 32
    result = _check_with_debug_off(tmp_path, VERIFICATION_SAMPLE_SECRET=secret)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no issues" in result.stdout
    (tmp_path / "sample-secret").write_text(secret + "\n")
    from_file = _check_with_debug_off(
        tmp_path, VERIFICATION_SAMPLE_SECRET_FILE=str(tmp_path / "sample-secret"))
    assert from_file.returncode == 0, from_file.stderr[-2000:]


@pytest.mark.parametrize("header", ["", "x" * 20])
def test_invalid_content_length_is_a_400_not_a_500(header, db):
    response = Client().generic("POST", "/api/v1/submissions/", b"", CONTENT_LENGTH=header or "abc")
    assert response.status_code in (400, 401, 403)


def test_upload_handler_stops_a_body_that_lies_about_its_size(settings, rf):
    """U2: whatever Content-Length said, the byte counter stops the upload past the limit and
    the temporary file is gone."""
    import os

    from django.core.files.uploadhandler import StopUpload

    from submissions.uploads import LimitedTemporaryFileUploadHandler, request_upload_too_large

    settings.SUBMISSION_MAX_UPLOAD_BYTES = 1000
    request = rf.post("/api/v1/submissions/")
    handler = LimitedTemporaryFileUploadHandler(request)
    handler.new_file("archive", "run.tar.gz", "application/gzip", content_length=10)
    handler.receive_data_chunk(b"x" * 600, 0)
    path = handler.file.temporary_file_path()
    with pytest.raises(StopUpload):
        handler.receive_data_chunk(b"x" * 600, 600)
    assert request_upload_too_large(request)
    assert not os.path.exists(path)


def test_too_many_multipart_files_is_a_400(db):
    """U3: 10,000 file parts are refused by Django's DATA_UPLOAD_MAX_NUMBER_FILES, not a 500."""
    from django.contrib.auth import get_user_model

    from submissions.services import token_issue

    user = get_user_model().objects.create_user("many")
    _, raw = token_issue(user=user)
    boundary = "BOUNDARY"
    part = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\nx\r\n")
    body = (part * 10_000 + f"--{boundary}--\r\n").encode()
    response = Client(HTTP_AUTHORIZATION=f"Token {raw}").generic(
        "POST", "/api/v1/submissions/", body,
        content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 400
