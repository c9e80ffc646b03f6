"""Agents the site itself can run (re-run check): oracle, nop, replay and command agents.

    oracle   copies the task's solution/ to /solution and runs solve.sh (Harbor's oracle)
    nop      runs nothing (Harbor's nop): the task's initial state is graded
    replay   replays a recorded trajectory of the submission for that task (evaluation.replay)
    command  an install script plus a run-command template, from settings
             VERIFICATION_COMMAND_AGENTS[<harness slug>] = {"install": "...", "run": "...",
             "env": ["OPENAI_API_KEY", ...]}; the template may use {instruction_file} and
             {workdir}; keys named in "env" come from settings VERIFICATION_AGENT_SECRETS.
             This is how harness agents (codex, claude-code, copilot-cli) are described.

Every agent runs through runner.run_agent: a fresh task container with the task's limits, no
network, no capabilities, a non-root user; the hidden answers never enter it. A command agent
that needs a model API therefore needs an egress path the runner does not open today (see the
README); the install script must work offline against the task image.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from django.conf import settings

from evaluation import replay as replay_mod
from evaluation import runner

BUILTIN = ("oracle", "nop", "replay")


@dataclasses.dataclass(frozen=True)
class SiteAgent:
    kind: str  # oracle | nop | replay | command
    name: str
    install: str = ""
    run: str = ""
    env_keys: tuple[str, ...] = ()


def site_agent_for(harness_slug: str) -> SiteAgent | None:
    """The agent the site runs for a submission of this harness, or None (not runnable here)."""
    slug = (harness_slug or "").strip().lower()
    if slug in ("oracle", "nop"):
        return SiteAgent(kind=slug, name=slug)
    spec = (settings.VERIFICATION_COMMAND_AGENTS or {}).get(slug)
    if spec:
        return SiteAgent(
            kind="command",
            name=slug,
            install=str(spec.get("install") or ""),
            run=str(spec.get("run") or ""),
            env_keys=tuple(spec.get("env") or ()),
        )
    return None


def _run_oracle(agent: SiteAgent, task_dir: Path, tmp: Path, trajectory, **run) -> runner.AgentRun:
    return runner.run_agent(task_dir, command="bash /solution/solve.sh",
                            copy_in={"/solution": task_dir / "solution"}, **run)


def _run_nop(agent: SiteAgent, task_dir: Path, tmp: Path, trajectory, **run) -> runner.AgentRun:
    return runner.run_agent(task_dir, command=None, **run)


def _run_replay(agent: SiteAgent, task_dir: Path, tmp: Path, trajectory, **run) -> runner.AgentRun:
    plan = replay_mod.plan_from_trajectory(trajectory or {})
    files = replay_mod.render_replay(plan)
    replay_dir = tmp / "replay"
    replay_dir.mkdir()
    for name, data in files.items():
        (replay_dir / name).write_bytes(data)
    # Submitter-written commands: gVisor when the engine has a working runsc.
    return runner.run_agent(task_dir, command="bash /replay/run.sh",
                            copy_in={"/replay": replay_dir}, runtime=runner.sandbox_runtime(),
                            **run)


def _run_command(agent: SiteAgent, task_dir: Path, tmp: Path, trajectory, **run) -> runner.AgentRun:
    agent_dir = tmp / "agent"
    agent_dir.mkdir()
    (agent_dir / "instruction.md").write_bytes((task_dir / "instruction.md").read_bytes())
    (agent_dir / "install.sh").write_text("#!/bin/bash\nset -e\n" + agent.install + "\n")
    run_cmd = agent.run.replace("{instruction_file}", "/agent/instruction.md").replace(
        "{workdir}", "/workspace"
    )
    (agent_dir / "run.sh").write_text("#!/bin/bash\n" + run_cmd + "\n")
    secrets = settings.VERIFICATION_AGENT_SECRETS or {}
    env = {k: str(secrets[k]) for k in agent.env_keys if k in secrets}
    return runner.run_agent(task_dir, command="bash /agent/install.sh && bash /agent/run.sh",
                            copy_in={"/agent": agent_dir}, env=env,
                            runtime=runner.sandbox_runtime(), **run)


# One registry of site agent kinds: a new kind is one function and one entry here.
AGENT_RUNNERS = {"oracle": _run_oracle, "nop": _run_nop, "replay": _run_replay,
                 "command": _run_command}


def run_site_agent(
    agent: SiteAgent,
    task_dir: Path,
    *,
    job_id: str,
    attempt: int,
    out_dir: Path,
    trajectory: dict | None = None,
) -> runner.AgentRun:
    """Run one agent on one task in a fresh container; declared outputs land under out_dir."""
    run_kind = AGENT_RUNNERS.get(agent.kind)
    if run_kind is None:
        raise ValueError(f"unknown agent kind {agent.kind!r}")
    task_dir = Path(task_dir)
    image, _built = runner.build_task_image(task_dir)  # cached by content digest
    with tempfile.TemporaryDirectory(prefix="hab-agent-") as tmp:
        return run_kind(agent, task_dir, Path(tmp), trajectory, job_id=job_id, attempt=attempt,
                        out_dir=out_dir, image=image)
