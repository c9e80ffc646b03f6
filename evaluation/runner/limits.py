"""Resource limits of a run, read from the task's task.toml, and the phase's user."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from evaluation import task_specs

MiB = 1024 * 1024
DEFAULT_PIDS_LIMIT = 512
DEFAULT_LOG_CAP_BYTES = 4 * MiB  # output kept from one command; the rest is counted and dropped
DEFAULT_OUTPUT_CAP_BYTES = 256 * MiB  # largest archive copied out of a container
MAX_TMPFS_MB = 8192
TMP_TMPFS_MB = 512
LOGS_TMPFS_MB = 64
AGENT_UID = 1000


def load_task_toml(task_dir: Path) -> dict:
    with open(Path(task_dir) / "task.toml", "rb") as fh:
        return tomllib.load(fh)


@dataclasses.dataclass(frozen=True)
class Limits:
    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int = 1024  # size of the /workspace tmpfs volume
    pids: int = DEFAULT_PIDS_LIMIT
    timeout_s: float = 600.0
    log_cap_bytes: int = DEFAULT_LOG_CAP_BYTES
    output_cap_bytes: int = DEFAULT_OUTPUT_CAP_BYTES

    @classmethod
    def from_task(cls, task_dir: Path, phase: str = "agent", **overrides) -> Limits:
        """Limits from task.toml: [environment] cpus/memory_mb/storage_mb, [<phase>].timeout_sec."""
        spec = load_task_toml(task_dir)
        env = spec.get("environment") or {}
        phase_cfg = spec.get(phase) or {}
        values = {}
        if env.get("cpus"):
            values["cpus"] = float(env["cpus"])
        if env.get("memory_mb"):
            values["memory_mb"] = int(env["memory_mb"])
        if env.get("storage_mb"):
            values["storage_mb"] = min(int(env["storage_mb"]), MAX_TMPFS_MB)
        if phase_cfg.get("timeout_sec"):
            values["timeout_s"] = float(phase_cfg["timeout_sec"])
        values.update(overrides)
        return cls(**values)


def task_user(task_dir: Path, phase: str = "agent") -> str:
    """The user a phase runs as: `[<phase>].user` from task.toml, else the base image's `agent`."""
    from evaluation.runner.engine import RootUserRefused

    user = (load_task_toml(task_dir).get(phase) or {}).get("user")
    if task_specs.is_root_user(user):
        raise RootUserRefused(f"{task_dir}: task.toml [{phase}] user = {user!r} is root; "
                              "the runner never runs a task as root")
    return str(user) if user not in (None, "") else str(AGENT_UID)


def declared_outputs(task_dir: Path) -> list[str]:
    """Container paths the agent must produce (see evaluation.task_specs.declared_outputs)."""
    return task_specs.declared_outputs(load_task_toml(task_dir))
