"""Cache invalidation for catalogue edits (R6 allows signals for exactly this).

Pages show catalogue rows (task and category names, agent, harness and model names) besides the
aggregates; an edit to one (``sync_tasks``, the admin) bumps the aggregate version of what it
belongs to, in the edit's transaction, so cached pages keyed by the old number are unreachable.
Publishing does not rely on this: its services bump the version themselves.
"""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save

from leaderboard.services import aggregate_version_bump
from leaderboard.models import AIModel, Agent, BenchmarkTask, BenchmarkVersion, Category, Harness


def _bump_own_version(sender, instance, **kwargs) -> None:
    aggregate_version_bump(benchmark_version_ids=[instance.benchmark_version_id])


def _bump_every_version(sender, instance, signal, **kwargs) -> None:
    ids = BenchmarkVersion.objects.values_list("pk", flat=True)
    if sender is BenchmarkVersion and signal is post_delete:
        ids = ids.exclude(pk=instance.pk)  # gone, with its aggregate version
    aggregate_version_bump(benchmark_version_ids=list(ids))


def connect() -> None:
    for model in (Category, BenchmarkTask):
        post_save.connect(_bump_own_version, sender=model, dispatch_uid=f"lb-cache-{model}")
        post_delete.connect(_bump_own_version, sender=model, dispatch_uid=f"lb-cache-d-{model}")
    for model in (BenchmarkVersion, Agent, Harness, AIModel):
        post_save.connect(_bump_every_version, sender=model, dispatch_uid=f"lb-cache-{model}")
        post_delete.connect(_bump_every_version, sender=model,
                            dispatch_uid=f"lb-cache-d-{model}")
