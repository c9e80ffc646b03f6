"""Writes for submissions: tokens, quota, moderation (publish, reject, withdraw, re-verify).

Status changes go through submissions.states (the state machine); trial check values through
submissions.trials.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import date, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from evaluation.judge import cache as judging
from evaluation.judge import trajectory as trajectory_judge
from submissions.rescore import rescore_candidates, submission_rescore
from submissions.models import (
    FLAG_AWAITING_JUDGE,
    FLAG_AWAITING_TRAJECTORY_JUDGE,
    AccountOrigin,
    ApiToken,
    DailyQuota,
    CheckKind,
    InfraConfirmation,
    CheckStatus,
    Outcome,
    Submission,
    SubmissionEvent,
    SubmissionStatus,
    Trial,
    TrialCheck,
    VerificationLevel,
    site_outcome,
)
from submissions.publishing import submission_publish
from submissions.signals import published_set_changed
from submissions.states import InvalidTransition, SubmissionError, submission_transition
from submissions.trials import (
    trial_check_record,
    trial_infra_confirm,
    trial_infra_unconfirm,
    trial_screen_clear,
    trial_screen_record,
)
from submissions.verification import screen_trial, verification_enqueue
from submissions.verification.verdict import submission_verdict_record

# Re-exported: callers import the domain errors, the state machine and the trial writes here.
__all__ = ["InvalidTransition", "SubmissionError", "rescore_candidates", "submission_publish",
           "submission_rescore", "submission_transition", "submission_verdict_record",
           "trial_check_record", "trial_infra_confirm", "trial_screen_record"]


class QuotaExceeded(SubmissionError):
    code = "quota_exceeded"


class IdempotencyConflict(SubmissionError):
    code = "idempotency_conflict"


class StorageUnavailable(SubmissionError):
    """The upload store (the filesystem or the S3 store) refused or did not answer: nothing was
    kept, the upload may be sent again (the API answers 503 with Retry-After)."""

    code = "storage_unavailable"


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


def quota_limit(*, user) -> int:
    """Today's quota of ``user``: the new-account quota for an account that signed up on the
    site and has no published submission yet, else the daily quota."""
    if (AccountOrigin.objects.filter(user=user).exists()
            and not Submission.objects.filter(owner=user, published_at__isnull=False).exists()):
        return min(settings.SUBMISSION_NEW_ACCOUNT_DAILY_QUOTA, settings.SUBMISSION_DAILY_QUOTA)
    return settings.SUBMISSION_DAILY_QUOTA


def quota_consume(*, user, today: date | None = None) -> int:
    """Take one submission from today's quota under a row lock; raise QuotaExceeded when spent.

    Runs inside the transaction that creates the submission, so a failed upload takes nothing.
    Deleting a submission later does not refund it. Staff (maintainers) have no quota.
    """
    if user.is_staff:
        return 0
    today = today or timezone.now().date()
    limit = quota_limit(user=user)
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
        first = (" (a new account's, until its first submission is published)"
                 if limit < settings.SUBMISSION_DAILY_QUOTA else "")
        raise QuotaExceeded(f"daily quota of {limit} submissions{first} reached; try again "
                            "tomorrow (UTC)")
    return DailyQuota.objects.get(user=user, day=today).used


# --- Accounts --------------------------------------------------------------------------------


def account_origin_record(*, user, address: str, method: str = "email") -> AccountOrigin:
    """Remember the address ``user`` signed up from (once: a later social link changes nothing)."""
    origin, _ = AccountOrigin.objects.get_or_create(
        user=user, defaults={"address": address, "method": method[:30]})
    return origin


def signup_wait_seconds(*, address: str, now=None) -> int:
    """0 when ``address`` may sign up now, else the seconds until its oldest sign-up of the last
    hour leaves the window (ACCOUNT_SIGNUPS_PER_ADDRESS_PER_HOUR)."""
    now = now or timezone.now()
    window = timedelta(hours=1)
    recent = list(AccountOrigin.objects.filter(address=address, created_at__gt=now - window)
                  .order_by("-created_at").values_list("created_at", flat=True)
                  [:settings.ACCOUNT_SIGNUPS_PER_ADDRESS_PER_HOUR])
    if len(recent) < settings.ACCOUNT_SIGNUPS_PER_ADDRESS_PER_HOUR:
        return 0
    return max(1, int((recent[-1] + window - now).total_seconds()) + 1)


def quota_refund(*, user, day: date) -> None:
    """Give back the submission taken from ``day``'s quota (an upload the intake refused: a
    refused upload costs nothing, as when it was refused inside the request). Staff took none."""
    if user.is_staff:
        return
    DailyQuota.objects.filter(user=user, day=day, used__gt=0).update(
        used=F("used") - 1, updated_at=timezone.now())


def submission_reject(*, submission: Submission, actor, reason: str) -> Submission:
    if not reason.strip():
        raise SubmissionError("a rejection needs a reason")
    return submission_transition(submission=submission, to_status=SubmissionStatus.REJECTED,
                                 actor=actor, note=reason, status_reason=reason[:5000])


def submission_withdraw(*, submission: Submission, actor, reason: str) -> Submission:
    """Take a published submission down; the leaderboard rebuilds this agent's rows in the same
    transaction (its receiver of `published_set_changed`)."""
    with transaction.atomic():
        submission = submission_transition(
            submission=submission, to_status=SubmissionStatus.WITHDRAWN, actor=actor,
            note=reason or "taken down", status_reason=reason[:5000],
        )
        # Only this agent's rows are rebuilt (then ranks, tie groups and family aggregates).
        published_set_changed.send(sender=Submission,
                                   benchmark_version=submission.benchmark_version,
                                   agent_ids=[submission.agent_id])
    return submission


def submission_reverify(*, submission: Submission, actor, reason: str = "") -> Submission:
    """Put a verified, discrepant or failed submission back in the queue with a new job
    (e.g. after a grader update). Earlier jobs and their check rows are kept."""
    with transaction.atomic():
        submission = submission_transition(
            submission=submission, to_status=SubmissionStatus.QUEUED, actor=actor,
            note=reason or "re-verification requested", queued_at=timezone.now(),
            trials_done=0, is_verified=False, coverage={})
        # The new job's checks alone decide the levels (the re-grades set them again).
        Trial.objects.filter(submission=submission).update(
            verification_level=VerificationLevel.CLAIMED)
        verification_enqueue(submission=submission)
    return submission


# --- The reward-hacking screen ---------------------------------------------------------------


def _published_changed(submission: Submission) -> None:
    """A published submission's trial outcomes changed: the leaderboard rebuilds this agent's
    rows (then ranks, tie groups and family aggregates) in the caller's transaction."""
    if submission.status == SubmissionStatus.PUBLISHED:
        published_set_changed.send(sender=Submission,
                                   benchmark_version=submission.benchmark_version,
                                   agent_ids=[submission.agent_id])


def screen_flag_clear(*, trial: Trial, actor, reason: str) -> Trial:
    """A maintainer clears a trial's reward-hacking flags with a written reason (moderation).
    The reason goes to the submission's audit log and is shown with the trial; the trial counts
    by its grade again, and a published submission's aggregates are rebuilt."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=trial.submission_id)
        before = Trial.objects.get(pk=trial.pk).screen_open
        trial = trial_screen_clear(trial_id=trial.pk, actor=actor, reason=reason)
        SubmissionEvent.objects.create(
            submission=submission, from_status=submission.status, to_status=submission.status,
            actor=actor, note=(f"reward-hacking flag{'s' if len(before) > 1 else ''} "
                               f"{', '.join(before)} cleared on trial {trial.pk} "
                               f"({trial.benchmark_task.name} attempt {trial.attempt}): "
                               f"{reason.strip()}")[:5000])
        _verdict_refresh(submission)
        _published_changed(submission)
    return trial


def _verdict_refresh(submission: Submission) -> None:
    """A trial of a verified submission changed (clearance, re-screen, infrastructure
    confirmation or revocation): the one verdict function recomputes its coverage, verdict and
    badge in the caller's transaction, before the leaderboard rebuilds its rows."""
    if submission.coverage:
        submission_verdict_record(submission_id=submission.pk)
        submission.refresh_from_db(fields=["coverage", "status", "is_verified"])


def infra_error_confirm(*, trial: Trial, actor, reason: str) -> Trial:
    """A maintainer confirms a trial the submission reports as an infrastructure error, with a
    written reason (moderation, `manage.py confirm_infra`): the trial leaves the denominator.
    The reason goes to the audit log and is shown with the trial; a published submission's
    aggregates are rebuilt in the same transaction."""
    if not (reason or "").strip():
        raise SubmissionError("confirming an infrastructure error needs a written reason")
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=trial.submission_id)
        if Trial.objects.filter(pk=trial.pk, infra_confirmed=True).exists():
            raise SubmissionError(f"trial {trial.pk}'s infrastructure error is already confirmed")
        trial = trial_infra_confirm(trial_id=trial.pk, by=InfraConfirmation.MAINTAINER,
                                    reason=reason, actor=actor)
        SubmissionEvent.objects.create(
            submission=submission, from_status=submission.status, to_status=submission.status,
            actor=actor, note=(f"infrastructure error confirmed on trial {trial.pk} "
                               f"({trial.benchmark_task.name} attempt {trial.attempt}): "
                               f"{reason.strip()}")[:5000])
        _verdict_refresh(submission)
        _published_changed(submission)
    return trial


def infra_error_revoke(*, trial: Trial, actor, reason: str) -> Trial:
    """A maintainer takes a confirmation back (the site's or a maintainer's), with a written
    reason: the trial counts as a failure again. Audited; aggregates rebuilt in the same
    transaction."""
    if not (reason or "").strip():
        raise SubmissionError("revoking a confirmation needs a written reason")
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=trial.submission_id)
        before = Trial.objects.get(pk=trial.pk)
        if not before.infra_confirmed:
            raise SubmissionError(f"trial {trial.pk} has no confirmed infrastructure error")
        trial = trial_infra_unconfirm(
            trial_id=trial.pk, reason=f"confirmation ({before.get_infra_confirmed_by_display()}: "
                                      f"{before.infra_confirm_reason}) revoked by a maintainer: "
                                      f"{reason.strip()}")
        SubmissionEvent.objects.create(
            submission=submission, from_status=submission.status, to_status=submission.status,
            actor=actor, note=(f"infrastructure error confirmation revoked on trial {trial.pk} "
                               f"({trial.benchmark_task.name} attempt {trial.attempt}): "
                               f"{reason.strip()}")[:5000])
        _verdict_refresh(submission)
        _published_changed(submission)
    return trial


def screen_result_apply(*, trial: Trial, hits: list[str], actor=None, note: str = "") -> Trial:
    """Store a re-screen's result on a trial outside a verification job (``manage.py
    screen_trials`` after a rule was added): flags and outcome change together, the change is
    logged when it flags or unflags, and a published submission's aggregates are rebuilt."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=trial.submission_id)
        before = Trial.objects.get(pk=trial.pk).screen_open
        trial = trial_screen_record(trial_id=trial.pk, hits=hits)
        if trial.screen_open != before:
            SubmissionEvent.objects.create(
                submission=submission, from_status=submission.status,
                to_status=submission.status, actor=actor,
                note=(f"re-screen of trial {trial.pk}: open reward-hacking flags "
                      f"{', '.join(before) or 'none'} -> {', '.join(trial.screen_open) or 'none'}"
                      + (f" ({note})" if note else ""))[:5000])
            _verdict_refresh(submission)
            _published_changed(submission)
    return trial


RESCREENABLE = (SubmissionStatus.VERIFIED, SubmissionStatus.CONSISTENT,
                SubmissionStatus.DISCREPANCY, SubmissionStatus.PUBLISHED)


def submission_rescreen(*, submission: Submission, actor=None) -> dict:
    """Apply the current rules to a verified (or published) submission's counted passes, from
    their stored trajectories and their last replay's activity (``manage.py screen_trials``,
    after a maintainer added a rule). Each result replaces the screen row of the submission's
    last job; flags, outcomes, the audit log and a published submission's aggregates follow
    (screen_result_apply). Returns {"screened", "flagged", "changed"}."""
    job = submission.verification_jobs.order_by("-created_at").first()
    if submission.status not in RESCREENABLE or job is None:
        raise SubmissionError(f"submission {submission.pk} ({submission.status}) has no finished "
                              "verification to screen again")
    report = {"screened": 0, "flagged": 0, "changed": 0}
    for trial in submission.trials.select_related("benchmark_task", "submission"):
        if site_outcome(claimed=trial.claimed_outcome, verified_reward=trial.verified_reward,
                        infra_confirmed=trial.infra_confirmed) != Outcome.PASSED:
            continue
        replay = TrialCheck.objects.filter(trial=trial, kind=CheckKind.REPLAY).order_by(
            "-created_at").first()
        activity = (replay.detail or {}).get("activity") if replay is not None else None
        rules, hits, evidence, _traj = screen_trial(trial, activity=activity)
        tripped = sorted({h.rule for h in hits}, key=lambda r: (len(r), r))
        before = trial.screen_open
        with transaction.atomic():
            values = {"status": CheckStatus.MISMATCH if tripped else CheckStatus.MATCH,
                      "flags": [f"reward_hack:{r}" for r in tripped],
                      "reason": "; ".join(f"{h.rule}: {h.source}: {h.excerpt}" for h in hits),
                      "detail": {"rules_version": rules.version,
                                 "rules": [r.id for r in rules.rules],
                                 "hits": [h.as_dict() for h in hits],
                                 "evidence_items": len(evidence), "rescreen": True},
                      "grader_version": rules.version, "benchmark_task": trial.benchmark_task}
            TrialCheck.objects.update_or_create(
                job=job, trial=trial, kind=CheckKind.SCREEN,
                defaults={**values, "executions": F("executions") + 1},
                create_defaults={**values, "job_attempt": job.attempt})
            trial = screen_result_apply(trial=trial, hits=tripped, actor=actor,
                                        note=f"rules {rules.version}")
        report["screened"] += 1
        report["flagged"] += bool(trial.screen_open)
        report["changed"] += trial.screen_open != before
    return report
# Statuses whose submission a maintainer may put back in the queue (TRANSITIONS).
_REVERIFIABLE = (SubmissionStatus.VERIFIED, SubmissionStatus.CONSISTENT,
                 SubmissionStatus.DISCREPANCY, SubmissionStatus.FAILED)


def judge_pending_requeue(*, actor=None) -> dict:
    """`manage.py judge_pending`: once an X-ray judge is configured, re-verify every
    submission with trials awaiting it (a new job re-grades them; the judge cache makes the
    already judged ones free). Submissions still in the queue or verifying are left to that
    run. Returns {"requeued": [ids], "left": {id: why}}."""
    # Each judge's waiting trials, once that judge is configured (the X-ray judge's
    # XRAY_JUDGE_URL, the trajectory judge's TRAJECTORY_JUDGE_URL).
    awaited = ([FLAG_AWAITING_JUDGE] if judging.judge_configured() else []) + (
        [FLAG_AWAITING_TRAJECTORY_JUDGE] if trajectory_judge.configured() else [])
    if not awaited:
        raise SubmissionError("no judge is configured: set XRAY_JUDGE_URL (and "
                              "XRAY_JUDGE_MODEL, XRAY_JUDGE_API_KEY) or TRAJECTORY_JUDGE_URL "
                              "first")
    waiting: dict[int, int] = {}
    # Only trials with flags are read; the membership test runs here because SQLite (make run)
    # has no JSON containment lookup.
    for sub_id, flags in Trial.objects.exclude(flags=[]).values_list("submission_id", "flags"):
        if any(f in (flags or []) for f in awaited):
            waiting[sub_id] = waiting.get(sub_id, 0) + 1
    requeued, left = [], {}
    for submission in Submission.objects.filter(pk__in=waiting).order_by("pk"):
        n = waiting[submission.pk]
        if submission.status not in _REVERIFIABLE:
            left[submission.pk] = f"{submission.status}: picked up by its next verification"
            continue
        submission_reverify(submission=submission, actor=actor,
                            reason=f"judge_pending: {n} trial{'' if n == 1 else 's'} awaited "
                                   f"a judge")
        requeued.append(submission.pk)
    return {"requeued": requeued, "left": left}

