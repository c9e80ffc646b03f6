"""Writes to trials that verification makes: integrity flags, the site's check values and
outcome, confirmed infrastructure errors."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from submissions.models import FLAG_INFRA_UNCONFIRMED, Outcome, Trial, site_outcome
from submissions.states import SubmissionError


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
