"""The re-run sample: secret, committed before the run, revealed after it.

When intake accepts an upload, the order in which the site will re-run its trials is fixed:
every (task, attempt) the submission claims, sorted by HMAC-SHA256 under the site secret
(VERIFICATION_SAMPLE_SECRET) of the archive's sha256, the task and the attempt. The re-run takes
trials from the front of that order, stage by stage (submissions.verification.design). Only a
commitment is public until the verdict: sha256 over the canonical JSON of the order and a random
salt. When the verdict is recorded, the order and the salt are revealed (status page, API), so
anyone can check that ``commitment(order, salt)`` equals what was published before the run.

A submitter who knows neither the secret nor the salt learns nothing from the commitment, and
sequential, visible submission ids no longer predict anything: the order depends only on the
secret and the archive's bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from submissions.models import Submission, Trial


def sample_order(*, secret: str, archive_sha256: str, trials: list[tuple[str, int]]) -> list:
    """Every (task name, attempt) of ``trials`` in the order the site re-runs them."""
    def key(item):
        task, attempt = item
        msg = f"{archive_sha256}\x1f{task}\x1f{int(attempt)}".encode()
        return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest(), task, attempt

    return [[task, int(attempt)] for task, attempt in sorted(set(trials), key=key)]


def canonical(order: list) -> bytes:
    return json.dumps([[str(t), int(a)] for t, a in order], separators=(",", ":")).encode()


def commitment(order: list, salt: str) -> str:
    """sha256 hex of the canonical JSON of the order followed by the salt (hex)."""
    return hashlib.sha256(canonical(order) + salt.encode()).hexdigest()


def rerun_commit(*, submission_id: int) -> str:
    """Fix and commit a submission's re-run order (idempotent: an existing one is kept).
    Run inside the transaction in which intake accepts the upload. Returns the commitment."""
    with transaction.atomic():
        sub = Submission.objects.select_for_update().only(
            "pk", "archive_sha256", "rerun_commitment", "lineage").get(pk=submission_id)
        if sub.rerun_commitment:
            return sub.rerun_commitment
        trials = list(Trial.objects.filter(submission_id=submission_id)
                      .values_list("benchmark_task__name", "attempt"))
        # A linked re-upload is ordered by its chain's first archive, so re-rolling the bytes
        # never buys a new sample. Demo or hand-made rows without an archive are ordered by
        # their trial set instead.
        root = (Submission.objects.only("archive_sha256").get(pk=sub.lineage_id)
                if sub.lineage_id else sub)
        digest = (root.archive_sha256 or sub.archive_sha256
                  or hashlib.sha256(canonical(sorted(trials))).hexdigest())
        order = sample_order(secret=settings.VERIFICATION_SAMPLE_SECRET,
                             archive_sha256=digest, trials=trials)
        salt = secrets.token_hex(32)
        value = commitment(order, salt)
        Submission.objects.filter(pk=submission_id).update(
            rerun_sample=order, rerun_salt=salt, rerun_commitment=value,
            rerun_committed_at=timezone.now(), updated_at=timezone.now())
        return value


def rerun_reveal(*, submission_id: int) -> None:
    """The verdict is recorded: the order and the salt become public (idempotent)."""
    Submission.objects.filter(pk=submission_id, rerun_revealed_at__isnull=True).exclude(
        rerun_commitment="").update(rerun_revealed_at=timezone.now())


def secret_rank(*, purpose: str, digest: str, key: str) -> str:
    """A rank no submitter can predict, for any other sample the site draws (the replay of
    failing trials): an HMAC under the same secret."""
    return hmac.new(settings.VERIFICATION_SAMPLE_SECRET.encode(),
                    f"{purpose}\x1f{digest}\x1f{key}".encode(), hashlib.sha256).hexdigest()


def public_sample(sub: Submission) -> dict:
    """What the status page and the API show of the sample: the commitment always (once
    made); the order and the salt only once revealed, with whether they match it."""
    if not sub.rerun_commitment:
        return {"commitment": None, "committed_at": None, "revealed": False}
    out = {"commitment": sub.rerun_commitment,
           "committed_at": sub.rerun_committed_at.isoformat() if sub.rerun_committed_at else None,
           "revealed": sub.rerun_revealed_at is not None,
           "how": "sha256 of the canonical JSON of the re-run order, [[task, attempt], ...] "
                  "without spaces, followed by the salt"}
    if sub.rerun_revealed_at is not None:
        out.update(revealed_at=sub.rerun_revealed_at.isoformat(), order=sub.rerun_sample,
                   salt=sub.rerun_salt,
                   matches=commitment(sub.rerun_sample, sub.rerun_salt) == sub.rerun_commitment)
    return out
