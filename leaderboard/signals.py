"""The leaderboard's receivers of lower-layer signals (connected in LeaderboardConfig.ready).

Publishing: `submissions.signals.published_set_changed` is sent inside the transaction that
publishes or withdraws a submission; the receiver rebuilds that agent's rows of the benchmark
version in the same transaction (submissions never imports the leaderboard).

Cache invalidation for catalogue edits (house style HS6 allows signals for exactly this).

Pages show catalogue rows (task and category names, agent, harness and model names) besides the
aggregates; an edit to one (``sync_tasks``, the admin) bumps the aggregate version of what it
belongs to, in the edit's transaction, so cached pages keyed by the old number are unreachable.
Publishing does not rely on this: its services bump the version themselves.
"""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save

from evaluation.models import AIModel, Agent, BenchmarkTask, BenchmarkVersion, Category, Harness
from leaderboard.services import aggregate_version_bump, leaderboard_recompute
from submissions.signals import published_set_changed


def recompute_on_publish(sender, *, benchmark_version, agent_ids=None, **kwargs) -> None:
    """A submission was published or withdrawn: rebuild its agent's rows (same transaction)."""
    leaderboard_recompute(benchmark_version=benchmark_version, agent_ids=agent_ids)


def _bump_own_version(sender, instance, **kwargs) -> None:
    aggregate_version_bump(benchmark_version_ids=[instance.benchmark_version_id])


def _bump_every_version(sender, instance, signal, **kwargs) -> None:
    ids = BenchmarkVersion.objects.values_list("pk", flat=True)
    if sender is BenchmarkVersion and signal is post_delete:
        ids = ids.exclude(pk=instance.pk)  # gone, with its aggregate version
    aggregate_version_bump(benchmark_version_ids=list(ids))


def connect() -> None:
    published_set_changed.connect(recompute_on_publish, dispatch_uid="lb-recompute-on-publish")
    for model in (Category, BenchmarkTask):
        post_save.connect(_bump_own_version, sender=model, dispatch_uid=f"lb-cache-{model}")
        post_delete.connect(_bump_own_version, sender=model, dispatch_uid=f"lb-cache-d-{model}")
    for model in (BenchmarkVersion, Agent, Harness, AIModel):
        post_save.connect(_bump_every_version, sender=model, dispatch_uid=f"lb-cache-{model}")
        post_delete.connect(_bump_every_version, sender=model,
                            dispatch_uid=f"lb-cache-d-{model}")
