"""The submission state machine: the one place a submission's status changes.

Status changes happen only here, by compare-and-swap UPDATEs, each recorded in SubmissionEvent.
A module of its own so that verification (below services in the import graph) can move a
submission without importing the moderation and upload services.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from submissions.models import TRANSITIONS, Submission, SubmissionEvent, SubmissionStatus


class SubmissionError(Exception):
    """Base of the domain errors the views and the API map to HTTP responses."""

    code = "submission_error"


class InvalidTransition(SubmissionError):
    code = "invalid_transition"


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
        rows = Submission.objects.filter(pk=submission.pk, status=current)
        # A reference run is published only on a try-out version (also a constraint).
        if to_status == SubmissionStatus.PUBLISHED:
            if rows.filter(is_reference=True, on_tryout_version=False).exists():
                raise InvalidTransition(f"submission {submission.pk} is a reference run: "
                                        "reference runs are published (unranked) only on a "
                                        "try-out version")
        changed = rows.update(status=to_status, updated_at=timezone.now(), **fields)
        if changed != 1:
            raise InvalidTransition(f"submission {submission.pk} changed concurrently")
        SubmissionEvent.objects.create(submission_id=submission.pk, from_status=current,
                                       to_status=to_status, actor=actor, note=note[:5000])
    submission.refresh_from_db()
    return submission
