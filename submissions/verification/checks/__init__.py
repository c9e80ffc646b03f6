"""The verification checks, as a registry (like the categories in evaluation/categories/).

One module per kind: `infra` (re-attempt of claimed infrastructure errors), `regrade`,
`replay`, `screen` (reward hacking: rules), `trajectory_judge` (reward hacking: an LLM
reading each counted pass), `rerun`, `judge` (the X-ray judge's part). Each defines a
`Check` (base.py) that says what it runs and what it contributes to a trial's level, the
coverage and the verdict, runs itself against a `CheckContext`, and summarizes its rows.
`run_checks` walks REGISTRY in order (the order matters: the infrastructure re-attempt decides
what the re-grade grades; the screen reads the replay's container activity); `summarize` asks
every check for its part of the verdict. Adding a check is a module here, its entry in
REGISTRY and its test.
"""

from __future__ import annotations

from submissions.models import FLAG_NOT_REPLAYABLE
from submissions.verification.checks import (
    infra,
    judge,
    regrade,
    replay,
    rerun,
    screen,
    trajectory_judge,
)
from submissions.verification.checks.base import (
    MAX_TRAJECTORY_BYTES,
    Check,
    CheckContext,
    Contribution,
    grader_digest,
    grader_version,
    job_config,
    load_trajectory,
    materialize_outputs,
    outputs_digest,
    screen_trial,
    task_dir_of,
)
from submissions.verification.checks.regrade import FLAG_REGRADE
from submissions.verification.checks.replay import FLAG_REPLAY

REGISTRY: tuple[Check, ...] = (
    infra.CHECK, regrade.CHECK, replay.CHECK, screen.CHECK, trajectory_judge.CHECK, rerun.CHECK,
    judge.CHECK)

VERIFICATION_FLAGS = (FLAG_REGRADE, FLAG_REPLAY, FLAG_NOT_REPLAYABLE)  # + reward_hack:RH<n>


def run_checks(job, heartbeat) -> None:
    """Run every registered check that applies to this job, in registry order."""
    ctx = CheckContext(job, heartbeat)
    for check in REGISTRY:
        if check.applies(ctx):
            check.run(ctx)


def summarize(job, checks) -> list[Contribution]:
    """Every check's part of the job's verdict, in the headline's order."""
    return [c.summarize(job, checks)
            for c in sorted(REGISTRY, key=lambda c: c.report_order)]


__all__ = [
    "FLAG_NOT_REPLAYABLE", "FLAG_REGRADE", "FLAG_REPLAY", "MAX_TRAJECTORY_BYTES", "REGISTRY",
    "VERIFICATION_FLAGS", "Check", "CheckContext", "Contribution", "grader_digest",
    "grader_version", "job_config", "load_trajectory", "materialize_outputs", "outputs_digest",
    "run_checks", "screen_trial", "summarize", "task_dir_of",
]
