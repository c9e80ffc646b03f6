"""Writes to trials that verification makes: integrity flags, the site's check values and
outcome, confirmed infrastructure errors."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from submissions.models import (
    FLAG_AWAITING_TRAJECTORY_JUDGE,
    FLAG_INFRA_UNCONFIRMED,
    FLAG_REWARD_HACK,
    FLAG_TRAJECTORY_SUSPICIOUS,
    TRAJECTORY_JUDGE_HIT,
    LEVEL_ORDER,
    InfraConfirmation,
    Outcome,
    Trial,
    VerificationLevel,
    site_outcome,
)
from submissions.states import SubmissionError


def trial_check_record(*, trial_id: int, flag: str | None, on: bool = False,
                       level: str | None = None, clear: tuple[str, ...] = (),
                       **fields) -> None:
    """Set or clear one integrity flag of a trial and store the site's check values with it.

    A re-grade (``verified_reward``) also sets the site's outcome (``site_outcome``), so the
    outcome every public view reads and the check that decided it change together. ``clear``
    names further flags this check settles (a re-grade clears "awaiting judge"). Locks the
    row; run it inside the transaction that writes the check row (R7 in reliability-matrix).
    """
    with transaction.atomic():
        trial = Trial.objects.select_for_update().only(*_OUTCOME_FIELDS).get(pk=trial_id)
        # flag=None leaves the flags as they are (a re-score, R11).
        flags = ([f for f in (trial.flags or []) if f != flag and f not in clear]
                 + ([flag] if on and flag is not None else []))
        if "verified_reward" in fields or "infra_confirmed" in fields:
            fields.update(_outcome(trial, **fields))
        # The trial keeps its strongest check (a re-grade at least, replayed via ``level``).
        if fields.get("verified_reward") is not None and level is None:
            level = VerificationLevel.REGRADED
        if level is not None and LEVEL_ORDER[level] > LEVEL_ORDER[trial.verification_level]:
            fields["verification_level"] = level
        Trial.objects.filter(pk=trial_id).update(flags=flags, updated_at=timezone.now(), **fields)


_OUTCOME_FIELDS = ("flags", "claimed_outcome", "verified_reward", "infra_confirmed",
                   "verification_level", "screen_hits", "screen_cleared")


def _outcome(trial: Trial, **changes) -> dict:
    """The site's outcome of a locked trial with these field changes applied (site_outcome)."""
    hits = changes.get("screen_hits", trial.screen_hits) or []
    cleared = changes.get("screen_cleared", trial.screen_cleared) or []
    outcome = site_outcome(
        claimed=trial.claimed_outcome,
        verified_reward=changes.get("verified_reward", trial.verified_reward),
        infra_confirmed=changes.get("infra_confirmed", trial.infra_confirmed),
        screened=any(r not in cleared for r in hits))
    return {"outcome": outcome, "success": outcome == Outcome.PASSED}


def _screen_flags(flags: list, hits: list, cleared: list) -> list:
    kept = [f for f in flags or [] if not str(f).startswith(FLAG_REWARD_HACK + ":")]
    return kept + [f"{FLAG_REWARD_HACK}:{r}" for r in hits if r not in cleared]


def trial_screen_record(*, trial_id: int, hits: list[str], judge: bool = False) -> Trial:
    """Store the rules the reward-hacking screen tripped on a trial: one public flag per rule a
    maintainer has not cleared, and the site's outcome (a flagged pass counts as a failure).
    A clearance holds for the rules it cleared; a rule it did not clear flags the trial again.
    The trajectory judge's "hack" is the hit TRAJECTORY_JUDGE_HIT: `judge` replaces only it,
    the rules replace only theirs. Run inside the transaction that writes the check row (R7)."""
    with transaction.atomic():
        trial = Trial.objects.select_for_update().only(*_OUTCOME_FIELDS).get(pk=trial_id)
        kept = [h for h in trial.screen_hits or [] if (h == TRAJECTORY_JUDGE_HIT) != judge]
        mine = [h for h in hits if (h == TRAJECTORY_JUDGE_HIT) == judge]
        hits = sorted(set(kept + mine), key=lambda r: (len(r), r))
        fields = {"screen_hits": hits, **_outcome(trial, screen_hits=hits),
                  "flags": _screen_flags(trial.flags, hits, trial.screen_cleared)}
        Trial.objects.filter(pk=trial_id).update(updated_at=timezone.now(), **fields)
        trial.refresh_from_db()
    return trial


def trial_trajectory_judgement_record(*, trial_id: int, judgement: str, model: str = "",
                                      prompt_version: str = "", reason: str = "",
                                      steps: list[int] | tuple = ()) -> Trial:
    """Store the trajectory judge's judgement of a counted pass (clean, suspicious, hack, or
    awaiting without a judge) with its model and prompt version, its state flags, and for a
    hack the screen hit TRAJECTORY_JUDGE_HIT (a failure until a maintainer clears it). Run
    inside the transaction that writes the check row (R7)."""
    with transaction.atomic():
        trial = Trial.objects.select_for_update().only("flags").get(pk=trial_id)
        flags = [f for f in trial.flags or []
                 if f not in (FLAG_AWAITING_TRAJECTORY_JUDGE, FLAG_TRAJECTORY_SUSPICIOUS)]
        flags += {"awaiting": [FLAG_AWAITING_TRAJECTORY_JUDGE],
                  "suspicious": [FLAG_TRAJECTORY_SUSPICIOUS]}.get(judgement, [])
        Trial.objects.filter(pk=trial_id).update(
            flags=flags, trajectory_judgement=judgement, trajectory_judge_model=model,
            trajectory_judge_prompt_version=prompt_version,
            trajectory_judge_reason=reason[:5000], trajectory_judge_steps=list(steps),
            updated_at=timezone.now())
        return trial_screen_record(
            trial_id=trial_id, hits=[TRAJECTORY_JUDGE_HIT] if judgement == "hack" else [],
            judge=True)


def trial_screen_clear(*, trial_id: int, actor, reason: str) -> Trial:
    """A maintainer clears the screen's open flags of a trial with a written reason: the trial
    counts by its grade again. Raises SubmissionError without a reason or an open flag."""
    if not (reason or "").strip():
        raise SubmissionError("clearing a reward-hacking flag needs a written reason")
    with transaction.atomic():
        trial = Trial.objects.select_for_update().only(*_OUTCOME_FIELDS).get(pk=trial_id)
        if not trial.screen_open:
            raise SubmissionError("this trial has no open reward-hacking flag")
        cleared = sorted(set(trial.screen_cleared or []) | set(trial.screen_hits),
                         key=lambda r: (len(r), r))
        Trial.objects.filter(pk=trial_id).update(
            screen_cleared=cleared, screen_clear_reason=reason.strip()[:5000],
            screen_cleared_by=actor, screen_cleared_at=timezone.now(),
            flags=_screen_flags(trial.flags, trial.screen_hits, cleared),
            updated_at=timezone.now(), **_outcome(trial, screen_cleared=cleared))
        trial.refresh_from_db()
    return trial


def trial_infra_confirm(*, trial_id: int, by: str = InfraConfirmation.SITE, reason: str = "",
                        actor=None) -> Trial:
    """Confirm a claimed infrastructure error: the trial leaves the denominator. ``by`` says who
    (the site's re-attempt hit an infrastructure failure too, or a maintainer) and ``reason``
    why; both are public. Only a claimed infrastructure error can be confirmed (a claimed
    attempt of the agent cannot be turned into one). Locks the row; run it inside the
    transaction that writes the check row or the audit entry (R7)."""
    if by not in InfraConfirmation.values:
        raise SubmissionError(f"unknown confirmer {by!r}")
    if not (reason or "").strip():
        raise SubmissionError("confirming an infrastructure error needs a reason")
    with transaction.atomic():
        if not Trial.objects.select_for_update().filter(
                pk=trial_id, claimed_outcome=Outcome.INFRA_ERROR).exists():
            raise SubmissionError("only a trial the submission reports as an infrastructure "
                                  "error can be confirmed as one")
        trial_check_record(trial_id=trial_id, flag=FLAG_INFRA_UNCONFIRMED, on=False,
                           infra_confirmed=True, infra_confirmed_by=by,
                           infra_confirm_reason=reason.strip()[:5000], infra_confirmed_user=actor,
                           infra_confirmed_at=timezone.now())
        return Trial.objects.get(pk=trial_id)


def trial_infra_unconfirm(*, trial_id: int, reason: str = "") -> Trial:
    """Take a confirmation back: the claimed infrastructure error counts as a failure again
    (flag ``infra_unconfirmed``). ``reason`` is kept as the trial's public note."""
    with transaction.atomic():
        trial_check_record(trial_id=trial_id, flag=FLAG_INFRA_UNCONFIRMED, on=True,
                           infra_confirmed=False, infra_confirmed_by="",
                           infra_confirm_reason=(reason or "").strip()[:5000],
                           infra_confirmed_user=None, infra_confirmed_at=None)
        return Trial.objects.get(pk=trial_id)
