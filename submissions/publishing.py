"""Publishing a submission: the one path to a published row (a maintainer's publish, and the
site's own publish of a try-out reference run when its verdict is recorded)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from submissions.models import (
    FLAG_AWAITING_JUDGE,
    FLAG_AWAITING_TRAJECTORY_JUDGE,
    Submission,
    SubmissionStatus,
)
from submissions.signals import published_set_changed
from submissions.states import SubmissionError, submission_transition

# The verdicts after which the site publishes a try-out reference run itself.
TRYOUT_PUBLISHED_VERDICTS = (SubmissionStatus.VERIFIED, SubmissionStatus.CONSISTENT)
TRYOUT_PUBLISH_NOTE = ("published by the site: a reference run on a try-out version, "
                       "shown unranked")


def submission_publish(*, submission: Submission, actor, note: str = "published") -> Submission:
    """Publish; the leaderboard rebuilds this agent's rows in the same transaction (its
    receiver of `published_set_changed`). Refused while trials await the X-ray judge: a
    published row counts only what the site could grade. A reference run (the site's own agent,
    or a maintainer's labelled reference) is never ranked: it is published, as an unranked row,
    only on a try-out version."""
    if submission.is_reference and not submission.on_tryout_version:
        harness = submission.agent.harness.slug if submission.agent else "a site agent"
        raise SubmissionError(
            f"submission {submission.pk} is a reference run ({harness}, no model) of a ranked "
            "version: reference runs are never ranked, so it cannot be published")
    xray, trajectory = _awaiting(submission)
    if xray:
        raise SubmissionError(
            f"{xray} trial{'' if xray == 1 else 's'} await the X-ray judge: configure "
            "XRAY_JUDGE_URL and run `manage.py judge_pending` first")
    if trajectory:
        raise SubmissionError(
            f"{trajectory} pass{'' if trajectory == 1 else 'es'} await the trajectory judge: "
            "configure TRAJECTORY_JUDGE_URL and run `manage.py judge_pending` first")
    with transaction.atomic():
        submission = submission_transition(
            submission=submission, to_status=SubmissionStatus.PUBLISHED, actor=actor,
            note=note, published_at=timezone.now(),
        )
        # Only this agent's rows are rebuilt (then ranks, tie groups and family aggregates).
        published_set_changed.send(sender=Submission,
                                   benchmark_version=submission.benchmark_version,
                                   agent_ids=[submission.agent_id])
    return submission



def tryout_reference_publish(*, submission: Submission) -> bool:
    """Publish a reference run of a try-out version whose verdict was just recorded, in the
    caller's transaction: a newcomer's try-out (Harbor's oracle, on the Submit page) ends in a
    row without a maintainer, labelled and unranked. Nothing else is published this way: a
    discrepancy, a ranked version's run, or one with trials still awaiting a judge stays for a
    maintainer. Returns whether it published."""
    if not (submission.is_reference and submission.on_tryout_version
            and submission.status in TRYOUT_PUBLISHED_VERDICTS):
        return False
    if any(_awaiting(submission)):
        return False
    submission_publish(submission=submission, actor=None, note=TRYOUT_PUBLISH_NOTE)
    return True


def _awaiting(submission: Submission) -> tuple[int, int]:
    """How many trials await the X-ray judge and how many passes the trajectory judge."""
    flags = [f or [] for f in submission.trials.values_list("flags", flat=True)]
    return (sum(FLAG_AWAITING_JUDGE in f for f in flags),
            sum(FLAG_AWAITING_TRAJECTORY_JUDGE in f for f in flags))
