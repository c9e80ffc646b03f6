"""Writes for submissions: tokens, quota, the status state machine, moderation, and uploads.

Status changes happen only here, by compare-and-swap UPDATEs, each recorded in SubmissionEvent.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import date

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from submissions.models import (
    TRANSITIONS,
    ApiToken,
    DailyQuota,
    Outcome,
    Submission,
    SubmissionEvent,
    SubmissionStatus,
    FLAG_INFRA_UNCONFIRMED,
    Trial,
    site_outcome,
)


class SubmissionError(Exception):
    """Base of the domain errors the views and the API map to HTTP responses."""

    code = "submission_error"


class InvalidTransition(SubmissionError):
    code = "invalid_transition"


class QuotaExceeded(SubmissionError):
    code = "quota_exceeded"


class IdempotencyConflict(SubmissionError):
    code = "idempotency_conflict"


# --- API tokens ------------------------------------------------------------------------------

TOKEN_PREFIX = "hab"


def _token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class TokenNameTaken(ValueError):
    """The user already has an active token of that name."""


def token_name_free(*, user, base: str = "default") -> str:
    """``base``, or ``base-2``, ``base-3``... : the first name none of the user's active tokens has."""
    taken = set(ApiToken.objects.filter(user=user, revoked_at__isnull=True)
                .values_list("name", flat=True))
    name, n = base[:100], 1
    while name in taken:
        n += 1
        name = f"{base[:90]}-{n}"
    return name


def token_issue(*, user, name: str | None = None, base: str = "default") -> tuple[ApiToken, str]:
    """Create a token; the raw secret is returned once and never stored.

    Names are unique among a user's active tokens: an explicit ``name`` already in use raises
    TokenNameTaken; without one, the first free of ``base``, ``base-2``, ... is used.
    """
    prefix = secrets.token_hex(4)
    raw = f"{TOKEN_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    name = name.strip()[:100] if name and name.strip() else token_name_free(user=user, base=base)
    token = ApiToken(user=user, name=name, prefix=prefix, key_sha256=_token_hash(raw))
    try:
        with transaction.atomic():
            token.save()
    except IntegrityError:
        if ApiToken.objects.filter(user=user, name=name, revoked_at__isnull=True).exists():
            raise TokenNameTaken(f"you already have a token named {name!r}; "
                                 "pick another name or revoke that one") from None
        raise
    return token, raw


def token_revoke(*, user, token_id: int) -> bool:
    """Revoke one of the user's own tokens. Returns False if it is not theirs (or unknown)."""
    return bool(ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True)
                .update(revoked_at=timezone.now()))


def token_authenticate(*, raw: str):
    """The active user owning this token, or None. Constant work whatever the input."""
    token = (ApiToken.objects.select_related("user")
             .filter(key_sha256=_token_hash(raw), revoked_at__isnull=True).first())
    if token is None or not token.user.is_active:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token.user


# --- Quota -----------------------------------------------------------------------------------


def quota_consume(*, user, today: date | None = None) -> int:
    """Take one submission from today's quota under a row lock; raise QuotaExceeded when spent.

    Runs inside the transaction that creates the submission, so a failed upload takes nothing.
    Deleting a submission later does not refund it. Staff (maintainers) have no quota.
    """
    if user.is_staff:
        return 0
    today = today or timezone.now().date()
    limit = settings.SUBMISSION_DAILY_QUOTA
    try:
        with transaction.atomic():
            DailyQuota.objects.get_or_create(user=user, day=today)
    except IntegrityError:
        pass  # a concurrent request created the row first
    # One conditional UPDATE: atomic on PostgreSQL and SQLite alike, so parallel requests can
    # never both take the last slot (A10). Throttles would not be (DRF#8127).
    taken = DailyQuota.objects.filter(user=user, day=today, used__lt=limit).update(
        used=F("used") + 1, updated_at=timezone.now())
    if taken != 1:
        raise QuotaExceeded(f"daily quota of {limit} submissions reached; try again tomorrow (UTC)")
    return DailyQuota.objects.get(user=user, day=today).used


# --- State machine ---------------------------------------------------------------------------


def submission_transition(
    *, submission: Submission, to_status: str, actor=None, note: str = "", **fields
) -> Submission:
    """Move a submission from its current status to to_status if the state machine allows it.

    Compare-and-swap on the status column, so two concurrent transitions cannot both win;
    records the change in the audit log. Raises InvalidTransition otherwise.
    """
    with transaction.atomic():
        current = Submission.objects.filter(pk=submission.pk).values_list("status", flat=True)
        current = current.first()
        if current is None or to_status not in TRANSITIONS[current]:
            raise InvalidTransition(f"cannot move submission {submission.pk} from {current} "
                                    f"to {to_status}")
        changed = Submission.objects.filter(pk=submission.pk, status=current).update(
            status=to_status, updated_at=timezone.now(), **fields
        )
        if changed != 1:
            raise InvalidTransition(f"submission {submission.pk} changed concurrently")
        SubmissionEvent.objects.create(submission_id=submission.pk, from_status=current,
                                       to_status=to_status, actor=actor, note=note[:5000])
    submission.refresh_from_db()
    return submission


def submission_publish(*, submission: Submission, actor) -> Submission:
    """Publish and rebuild the leaderboard of its benchmark version in the same transaction."""
    from leaderboard.services import leaderboard_recompute

    with transaction.atomic():
        submission = submission_transition(
            submission=submission, to_status=SubmissionStatus.PUBLISHED, actor=actor,
            note="published", published_at=timezone.now(),
        )
        # Only this agent's rows are rebuilt (then ranks, tie groups and family aggregates).
        leaderboard_recompute(benchmark_version=submission.benchmark_version,
                              agent_ids=[submission.agent_id])
    return submission


def submission_reject(*, submission: Submission, actor, reason: str) -> Submission:
    if not reason.strip():
        raise SubmissionError("a rejection needs a reason")
    return submission_transition(submission=submission, to_status=SubmissionStatus.REJECTED,
                                 actor=actor, note=reason, status_reason=reason[:5000])


def submission_withdraw(*, submission: Submission, actor, reason: str) -> Submission:
    """Take a published submission down; the leaderboard is rebuilt in the same transaction."""
    from leaderboard.services import leaderboard_recompute

    with transaction.atomic():
        submission = submission_transition(
            submission=submission, to_status=SubmissionStatus.WITHDRAWN, actor=actor,
            note=reason or "taken down", status_reason=reason[:5000],
        )
        # Only this agent's rows are rebuilt (then ranks, tie groups and family aggregates).
        leaderboard_recompute(benchmark_version=submission.benchmark_version,
                              agent_ids=[submission.agent_id])
    return submission


def submission_reverify(*, submission: Submission, actor, reason: str = "") -> Submission:
    """Put a verified, discrepant or failed submission back in the queue with a new job
    (e.g. after a grader update). Earlier jobs and their check rows are kept."""
    from evaluation.verification import verification_enqueue

    with transaction.atomic():
        submission = submission_transition(
            submission=submission, to_status=SubmissionStatus.QUEUED, actor=actor,
            note=reason or "re-verification requested", queued_at=timezone.now(),
            trials_done=0, is_verified=False)
        verification_enqueue(submission=submission)
    return submission


# --- Trials ----------------------------------------------------------------------------------


def trial_check_record(*, trial_id: int, flag: str, on: bool, **fields) -> None:
    """Set or clear one integrity flag of a trial and store the site's check values with it.

    A re-grade (``verified_reward``) also sets the site's outcome (``site_outcome``), so the
    outcome every public view reads and the check that decided it change together. Locks the
    row; run it inside the transaction that writes the check row (R7 in reliability-matrix).
    """
    with transaction.atomic():
        trial = Trial.objects.select_for_update().only(
            "flags", "claimed_outcome", "verified_reward", "infra_confirmed").get(pk=trial_id)
        flags = [f for f in (trial.flags or []) if f != flag] + ([flag] if on else [])
        if "verified_reward" in fields or "infra_confirmed" in fields:
            outcome = site_outcome(
                claimed=trial.claimed_outcome,
                verified_reward=fields.get("verified_reward", trial.verified_reward),
                infra_confirmed=fields.get("infra_confirmed", trial.infra_confirmed))
            fields.update(outcome=outcome, success=outcome == Outcome.PASSED)
        Trial.objects.filter(pk=trial_id).update(flags=flags, updated_at=timezone.now(), **fields)


def trial_infra_confirm(*, trial_id: int) -> None:
    """The site hit an infrastructure failure on this trial itself: its claimed infrastructure
    error is confirmed and leaves the denominator. Idempotent; only a claimed infrastructure
    error can be confirmed (a claimed attempt of the agent cannot be turned into one)."""
    if not Trial.objects.filter(pk=trial_id, claimed_outcome=Outcome.INFRA_ERROR).exists():
        raise SubmissionError("only a trial the submission reports as an infrastructure error "
                              "can be confirmed as one")
    trial_check_record(trial_id=trial_id, flag=FLAG_INFRA_UNCONFIRMED, on=False,
                       infra_confirmed=True)
