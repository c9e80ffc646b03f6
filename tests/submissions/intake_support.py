"""Following an upload through intake in-process: the request answers 202 (`received`), then the
intake worker's service runs as the worker runs it (called directly, house style HS32: no eager
Celery), and the test reads the verdict where a submitter does, on the status API.

The real worker on the `intake` queue is exercised in tests/submissions/test_intake_worker.py."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from django.test import Client


def targz(root: Path) -> bytes:
    """``root``'s files as a .tar.gz upload, sorted, names relative to ``root``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    return buf.getvalue()


def submission_id(response) -> int:
    """The id of a received upload: the API's 202 body, or the form's redirect to its page."""
    if response.status_code == 302:
        return int(response["Location"].rstrip("/").rsplit("/", 1)[-1])
    assert response.status_code == 202, (response.status_code, response.content[:2000])
    body = response.json()
    assert body["status"] == "received" and body["url"] == f"/submissions/{body['id']}/", body
    return body["id"]


def run_intake(pk: int, capture) -> str:
    """The intake task's body for one submission, committing its on-commit work (the archive of
    a refused upload is deleted; an accepted one's verification job is published)."""
    from submissions.intake import submission_intake

    with capture(execute=True):
        return submission_intake(submission_id=pk)


def validated(response, *, token: str, capture) -> dict:
    """Intake of the upload `response` received; the owner's status document afterwards."""
    pk = submission_id(response)
    run_intake(pk, capture)
    doc = Client(HTTP_AUTHORIZATION=f"Token {token}").get(f"/api/v1/submissions/{pk}/").json()
    assert doc["status"] in ("queued", "refused"), doc
    return doc


def problem_codes(doc: dict) -> set[str]:
    return {p["code"] for p in doc["problems"]}
