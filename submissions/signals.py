"""Signals the submissions layer sends upward (the leaderboard listens; submissions never imports it).

`published_set_changed` is sent inside the transaction that publishes or withdraws a submission,
with `benchmark_version=` and `agent_ids=`; receivers run in that transaction, so the leaderboard's aggregates are
rebuilt atomically with the status change (leaderboard/signals.py).
"""

from django.dispatch import Signal

published_set_changed = Signal()
