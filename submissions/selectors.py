"""Reads for submissions, scoped by who asks: owners see their own, maintainers see all, the
public sees published ones only. A submission the caller may not see does not exist (404)."""

from __future__ import annotations

from django.db.models import Prefetch, Q, QuerySet

from evaluation import screen as screen_rules
from submissions.measured import RerunFigures, figures_of
from submissions.models import (
    CheckKind,
    CheckStatus,
    Outcome,
    ScoreRevision,
    Submission,
    SubmissionEvent,
    SubmissionStatus,
    Trial,
    TrialCheck,
)

PUBLIC_STATUSES = (SubmissionStatus.PUBLISHED,)


def submissions_visible_to(*, user) -> QuerySet[Submission]:
    """Every submission this user may see (the single access rule, used by every route)."""
    qs = Submission.objects.all()
    if user is not None and user.is_authenticated and user.is_staff:
        return qs
    public = Q(status__in=PUBLIC_STATUSES)
    if user is not None and user.is_authenticated:
        return qs.filter(public | Q(owner=user))
    return qs.filter(public)


def submission_get_for_user(*, user, pk: int) -> Submission | None:
    """One visible submission with what its status page shows. Five queries."""
    return (
        submissions_visible_to(user=user)
        .filter(pk=pk)
        .select_related("agent", "agent__harness", "agent__model", "benchmark_version", "owner")
        .prefetch_related(
            # The audit log and validation problems are listed on the page: one query each.
            Prefetch("events", queryset=SubmissionEvent.objects.select_related("actor")
                     .order_by("created_at", "pk"), to_attr="event_list"),
            "problems",
            Prefetch("score_revisions", queryset=ScoreRevision.objects.order_by(
                "-created_at", "-pk"), to_attr="score_history"),
        )
        .first()
    )


def submission_list_for_user(*, user, limit: int = 200) -> list[Submission]:
    """The user's own submissions, newest first. One query."""
    return list(
        Submission.objects.filter(owner=user)
        .select_related("agent", "benchmark_version")
        .order_by("-created_at")[:limit]
    )


def moderation_queue(*, limit: int = 500) -> list[Submission]:
    """Submissions a maintainer can act on, oldest first. One query."""
    return list(
        Submission.objects.exclude(status__in=[SubmissionStatus.REJECTED,
                                               SubmissionStatus.REFUSED,
                                               SubmissionStatus.WITHDRAWN])
        .filter(is_reconstructed=False)
        .select_related("agent", "benchmark_version", "owner")
        .order_by("created_at")[:limit]
    )


def queue_position(*, submission: Submission) -> int | None:
    """1-based position among queued submissions (arrival order), or None if not queued."""
    if submission.status != SubmissionStatus.QUEUED or submission.queued_at is None:
        return None
    ahead = Submission.objects.filter(
        status=SubmissionStatus.QUEUED
    ).filter(Q(queued_at__lt=submission.queued_at) |
             Q(queued_at=submission.queued_at, pk__lt=submission.pk)).count()
    return ahead + 1


def trial_get_for_user(*, user, submission_pk: int, trial_pk: int) -> Trial | None:
    return (
        Trial.objects.filter(pk=trial_pk, submission_id=submission_pk,
                             submission__in=submissions_visible_to(user=user))
        .select_related("submission", "benchmark_task", "submission__agent")
        .first()
    )


def trial_list(*, submission: Submission) -> list[Trial]:
    return list(submission.trials.select_related("benchmark_task").order_by(
        "benchmark_task__position", "benchmark_task__name", "attempt"))


def rerun_figures(*, submission: Submission,
                  trials: list[Trial] | None = None) -> dict[int, RerunFigures]:
    """Trial id -> the site's latest re-run of that trial's task and attempt (a re-run check
    that ran: match or mismatch), its measured time, tokens and cost beside the trial's reported
    cost. Public wherever the trial is, once the verdict revealed the sample: before it, which
    trials are re-run is the site's secret. Two queries (one with ``trials`` given)."""
    if submission.rerun_commitment and submission.rerun_revealed_at is None:
        return {}
    latest: dict[tuple[int, int], TrialCheck] = {}
    for check in TrialCheck.objects.filter(
            job__submission=submission, kind=CheckKind.RERUN,
            status__in=(CheckStatus.MATCH, CheckStatus.MISMATCH)).order_by("created_at", "pk"):
        latest[(check.benchmark_task_id, check.sample_index)] = check
    if not latest:
        return {}
    if trials is None:
        trials = list(submission.trials.only("pk", "benchmark_task_id", "attempt", "cost_usd"))
    return {t.pk: figures_of(latest[(t.benchmark_task_id, t.attempt)], t.cost_usd)
            for t in trials if (t.benchmark_task_id, t.attempt) in latest}


def trial_neighbours(*, trial: Trial) -> tuple[Trial | None, Trial | None]:
    """The previous and next trial with a trajectory in the same submission, in the order of the
    status page's trial table (task position, task name, attempt). Two queries."""
    pks = list(trial.submission.trials.exclude(trajectory_path="").order_by(
        "benchmark_task__position", "benchmark_task__name", "attempt").values_list("pk", flat=True))
    if trial.pk not in pks:
        return None, None
    i = pks.index(trial.pk)
    prev_pk = pks[i - 1] if i > 0 else None
    next_pk = pks[i + 1] if i + 1 < len(pks) else None
    found = {t.pk: t for t in Trial.objects.filter(pk__in=[prev_pk, next_pk])
             .select_related("benchmark_task")}
    return found.get(prev_pk), found.get(next_pk)


def screen_findings(*, submission: Submission, trial: Trial | None = None) -> list[dict]:
    """What the reward-hacking screen found on this submission's trials (or one trial): each
    flagged or cleared trial with its rules (id, title), the evidence of its latest screen and
    the maintainer's clearance. Public wherever the trial is. Three queries."""
    trials = submission.trials.exclude(screen_hits=[]).select_related(
        "benchmark_task", "screen_cleared_by").order_by(
        "benchmark_task__position", "benchmark_task__name", "attempt")
    if trial is not None:
        trials = trials.filter(pk=trial.pk)
    trials = list(trials)
    latest: dict[int, TrialCheck] = {}
    for check in TrialCheck.objects.filter(trial__in=trials, kind=CheckKind.SCREEN).order_by(
            "created_at", "pk"):
        latest[check.trial_id] = check
    rules = screen_rules.load_rules()
    out = []
    for t in trials:
        check = latest.get(t.pk)
        hits = (check.detail or {}).get("hits", []) if check is not None else []
        out.append({
            "trial": t,
            "rules": [{"id": r, "title": rules.get(r).title if rules.get(r) else "(retired rule)",
                       "cleared": r in (t.screen_cleared or []),
                       "evidence": [h for h in hits if h.get("rule") == r]}
                      for r in t.screen_hits],
            "open": t.screen_open,
            "rules_version": (check.detail or {}).get("rules_version", "") if check else "",
        })
    return out


def trial_isolation(*, trial: Trial) -> list[tuple[str, str]]:
    """(check, in words) for each of the trial's latest container checks that recorded what
    separated its containers from the host: kernel (runc or gVisor) and user mapping. One
    query."""
    latest: dict[str, str] = {}
    for kind, detail in TrialCheck.objects.filter(trial=trial).order_by(
            "created_at", "pk").values_list("kind", "detail"):
        if (detail or {}).get("isolation"):
            latest[kind] = detail["isolation"]
    return [(CheckKind(kind).label, words) for kind, words in latest.items()]


def screened_count(*, submission: Submission) -> int:
    """How many of this submission's trials the reward-hacking screen has looked at (one
    screen check per counted pass and job). Zero means the screen never ran: the status page
    says why instead of "no pass tripped a rule". One query."""
    return TrialCheck.objects.filter(trial__submission=submission,
                                     kind=CheckKind.SCREEN).values("trial_id").distinct().count()


def infra_claims(*, submission: Submission) -> list[dict]:
    """The trials this submission reports as infrastructure errors: whether the site counts
    them (confirmed: left out of the denominator; else a failure), who confirmed and why, and
    the latest infrastructure re-attempt of the site. Public wherever the trial is. Two
    queries."""
    trials = list(submission.trials.filter(claimed_outcome=Outcome.INFRA_ERROR).select_related(
        "benchmark_task", "infra_confirmed_user").order_by(
        "benchmark_task__position", "benchmark_task__name", "attempt"))
    latest: dict[int, TrialCheck] = {}
    for check in TrialCheck.objects.filter(trial__in=trials, kind=CheckKind.INFRA).order_by(
            "created_at", "pk"):
        latest[check.trial_id] = check
    return [{"trial": t, "check": latest.get(t.pk)} for t in trials]


def published_entry(*, submission):
    """The leaderboard row of a published submission (its citation and card), else None."""
    if submission.status != SubmissionStatus.PUBLISHED:
        return None
    return submission.entries.select_related("agent", "benchmark_version").first()
