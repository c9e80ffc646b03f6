"""The two-container grading phases: run_agent (declared outputs out) and run_verifier (outputs
and tests/ in, reward out), with the X-ray judge gateway beside the verifier (gateway.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from pathlib import Path, PurePosixPath

from evaluation.runner.base import base_image_tag
from evaluation.runner.container import ContainerRun
from evaluation.runner.engine import (
    InfrastructureError,
    OutputTooLargeError,
    UnsafeArchiveError,
)
from evaluation.runner.judge.container import SOCKET_DIR, JudgeGateway, judge_gateway
from evaluation.runner.images import _iter_files, task_image_tag
from evaluation.runner.limits import (
    AGENT_UID,
    LOGS_TMPFS_MB,
    Limits,
    MiB,
    declared_outputs,
    task_user,
)
from evaluation.runner.results import ExecResult
from evaluation.runner.sandbox import sandbox_runtime

log = logging.getLogger(__name__)


@dataclasses.dataclass
class AgentRun:
    result: ExecResult
    outputs_dir: Path
    collected: list[str]  # container paths copied out
    missing: list[str]  # declared outputs that did not exist
    output_error: str | None = None  # unsafe or oversized output
    # Files the command created or changed in the container's writable places (the root
    # filesystem is read-only), as the runner saw them after it: the screen's container activity.
    written: list[str] = dataclasses.field(default_factory=list)
    # The shell trace a replay wrote inside the container (`trace_path`): the commands bash ran,
    # with variables, globs and substitutions expanded (what ran, not what the trajectory says).
    trace: str = ""


# Where a run can write; the runner lists what changed there (its own copy-ins excluded).
WRITABLE_PLACES = ("/workspace", "/tmp", "/logs/agent", "/logs/verifier",  # noqa: S108
                   "/logs/artifacts")
MAX_WRITTEN_LISTED = 2000


def _epoch(run: ContainerRun) -> str:
    res = run.exec(["date", "+%s"], timeout_s=30, workdir="/")
    epoch = res.text.strip() if res.exit_code == 0 else ""
    if not epoch.isdigit():
        log.warning("%s: the container's clock could not be read (exit %s, output %r): the "
                    "files the command writes will not be listed", run.name, res.exit_code,
                    res.text[:200])
    return epoch


MAX_TRACE_BYTES = 1024 * 1024  # of a replay's shell trace (the end is kept)


def _written_since(run: ContainerRun, epoch: str, skip: list[str]) -> list[str]:
    """Regular files and links under the writable places modified at or after `epoch` (the
    container's clock, read just before the command), except under `skip` and the run's own
    scratch files. GNU find of the Debian base image."""
    if not epoch.isdigit():
        return []
    places = [p for p in WRITABLE_PLACES if p not in skip]
    res = run.exec(["find", *places, "(", "-type", "f", "-o", "-type", "l", ")",
                    "-newermt", f"@{int(epoch) - 1}", "-print"], timeout_s=120, workdir="/")
    if res.exit_code != 0 and not res.text.strip():
        log.warning("%s: listing the files written failed (exit %s, timed out %s)", run.name,
                    res.exit_code, res.timed_out)
    paths = sorted({line for line in res.text.splitlines()
                    if line.startswith("/") and not any(
                        line == s or line.startswith(s.rstrip("/") + "/") for s in skip)
                    and not line.startswith("/tmp/.replay-")})
    return paths[:MAX_WRITTEN_LISTED]


@dataclasses.dataclass
class VerifierRun:
    result: ExecResult
    reward: float | None
    rewards: dict
    error: str | None = None
    judge_log: list | None = None  # the judge gateway's requests (hits, new replies)
    judge: dict | None = None  # the site's record of them (evaluation/judge/cache.py)
    # What the grader reported in /logs/verifier/grader.json ({"category", "version",
    # "grader"}); empty when the image's grader predates versions (R11).
    grader: dict = dataclasses.field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.reward is not None and self.reward >= 1.0


def _copy_out(run: ContainerRun, paths: list[str], out_dir: Path) -> tuple[list[str], list[str]]:
    collected, missing = [], []
    for p in paths:
        pp = PurePosixPath(p)
        if not pp.is_absolute() or ".." in pp.parts:
            raise UnsafeArchiveError(f"declared output {p!r} must be an absolute path")
        target_parent = Path(out_dir) / str(pp.parent).lstrip("/")
        try:
            run.get_path(p, target_parent)
            collected.append(p)
        except FileNotFoundError:
            missing.append(p)
    return collected, missing


def run_agent(
    task_dir: Path,
    *,
    job_id,
    attempt: int = 1,
    command: str | list[str] | None,
    out_dir: Path,
    copy_in: dict[str, Path] | None = None,
    image: str | None = None,
    limits: Limits | None = None,
    outputs: list[str] | None = None,
    purpose: str = "agent",
    env: dict[str, str] | None = None,
    runtime: str | None = None,
    trace_path: str | None = None,
) -> AgentRun:
    """Run `command` (None: the nop agent) in a fresh task container; copy out declared outputs.

    copy_in maps container directories (e.g. "/solution") to host directories; each gets its own
    small tmpfs volume. Outputs land under out_dir at their container path
    (out_dir/workspace/submission.json).
    """
    task_dir = Path(task_dir)
    image = image or task_image_tag(task_dir)
    limits = limits or Limits.from_task(task_dir, "agent")
    outputs = outputs or declared_outputs(task_dir)
    copy_in = copy_in or {}
    volumes = {"/workspace": limits.storage_mb}
    for cpath, host in copy_in.items():
        size = max(16, int(sum(f.stat().st_size for f in _iter_files(Path(host))) * 2 / MiB) + 16)
        volumes[cpath] = size
    out_dir = Path(out_dir)
    with ContainerRun(
        image,
        purpose=purpose,
        job_id=job_id,
        attempt=attempt,
        limits=limits,
        user=task_user(task_dir, "agent"),
        volumes=volumes,
        env=env,
        runtime=runtime,
    ) as run:
        for cpath, host in copy_in.items():
            run.put_dir(Path(host), cpath, uid=AGENT_UID)
        written: list[str] = []
        if command is None:
            result = ExecResult(0, b"", 0, False, 0.0)
        else:
            epoch = _epoch(run)
            result = run.exec(command)
            if not result.timed_out and not result.container_died:
                written = _written_since(run, epoch, list(copy_in))
        trace = ""
        if trace_path and not result.container_died:
            # Read by exec: the trace is on the /tmp tmpfs, which the archive API does not see.
            res = run.exec(["tail", "-c", str(MAX_TRACE_BYTES), trace_path], timeout_s=60,
                           workdir="/")
            trace = res.text if res.exit_code == 0 else ""
        collected, missing, error = [], [], None
        if not result.timed_out and not result.container_died:
            try:
                collected, missing = _copy_out(run, outputs, out_dir)
            except (UnsafeArchiveError, OutputTooLargeError) as exc:
                error = str(exc)
        else:
            missing = list(outputs)
    (out_dir / "agent").mkdir(parents=True, exist_ok=True)
    (out_dir / "agent" / "output.txt").write_bytes(result.output)
    return AgentRun(result, out_dir, collected, missing, error, written, trace)


def _grader_report(raw: bytes | None) -> dict:
    """The grader's version report, if it is a small well-formed one (else empty)."""
    if not raw or len(raw) > 4096:
        return {}
    try:
        report = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(report, dict) or not isinstance(report.get("grader"), str):
        return {}
    return {k: report[k] for k in ("category", "version", "grader") if k in report}


def run_verifier(
    task_dir: Path,
    *,
    job_id,
    attempt: int = 1,
    artifacts_dir: Path,
    outputs: list[str] | None = None,
    image: str | None = None,
    limits: Limits | None = None,
    judge: JudgeGateway | None = None,
) -> VerifierRun:
    """Grade in a fresh container: declared outputs (as data) + tests/ in, reward.json out.

    The verifier reads submitted output, so it runs in the sandbox runtime (gVisor when it
    works here) and has no network. With `judge`, a gateway container answers the grader's judge
    requests on a Unix socket (the verifier's only way out) and `judge_log` lists them.
    """
    task_dir = Path(task_dir)
    image = image or task_image_tag(task_dir)
    limits = limits or Limits.from_task(task_dir, "verifier")
    outputs = outputs or declared_outputs(task_dir)
    tests_dir = task_dir / "tests"
    tests_mb = int(sum(f.stat().st_size for f in _iter_files(tests_dir)) * 2 / MiB) + 16
    env = {"PYTHONPATH": "/opt/hab"}
    verifier_user = task_user(task_dir, "verifier")
    judge_log: list = []
    with contextlib.ExitStack() as stack:
        shared = {}
        if judge is not None:
            vname, judge_env = stack.enter_context(
                judge_gateway(judge, job_id=job_id, attempt=attempt, log_out=judge_log))
            shared[SOCKET_DIR] = (vname, True)
            env.update(judge_env)
        with ContainerRun(
            image,
            purpose="verifier",
            job_id=job_id,
            attempt=attempt,
            limits=limits,
            user=verifier_user,
            volumes={
                "/workspace": limits.storage_mb,
                "/tests": tests_mb,
                "/logs/verifier": LOGS_TMPFS_MB,
            },
            env=env,
            shared_volumes=shared,
            runtime=sandbox_runtime(),
        ) as run:
            # The agent's declared outputs, as data (read-only for the grader: owned by root).
            for p in outputs:
                host = Path(artifacts_dir) / p.lstrip("/")
                if host.exists():
                    run.put_path(host, p, uid=0)
            run.put_dir(tests_dir, "/tests", uid=0)
            result = run.exec(["bash", "/tests/test.sh"], workdir="/tests")
            reward, rewards, error = None, {}, None
            if not result.container_died and not result.timed_out:
                raw = run.read_file("/logs/verifier/reward.json")
                if raw is not None:
                    try:
                        rewards = json.loads(raw)
                        reward = float(rewards["reward"])
                    except (ValueError, KeyError, TypeError) as exc:
                        error = f"unparsable reward.json: {exc}"
                else:
                    raw = run.read_file("/logs/verifier/reward.txt")
                    if raw is not None:
                        try:
                            reward = float(raw.decode().strip())
                            rewards = {"reward": reward}
                        except ValueError as exc:
                            error = f"unparsable reward.txt: {exc}"
                    elif result.exit_code == 0:
                        # The task's test.sh writes a reward in every case except a grader
                        # infrastructure error (exit 3: e.g. the X-ray judge is unreachable).
                        raise InfrastructureError(
                            "the verifier wrote no reward file: the grader reported an "
                            "infrastructure error (e.g. the LLM judge is unreachable); retry. "
                            + result.text[-500:]
                        )
                    else:
                        error = f"no reward file written ({result.reason})"
            else:
                error = result.reason
            grader = {}
            if not result.container_died and not result.timed_out:
                grader = _grader_report(run.read_file("/logs/verifier/grader.json"))
    return VerifierRun(result, reward, rewards, error, judge_log if judge is not None else None,
                       grader=grader)


def engine_control_run(*, job_id, attempt: int = 1) -> ExecResult:
    """A control run: `true` in a fresh container of the base image. Tells a task environment
    that fails apart from an engine that fails everything: InfrastructureError when the engine
    cannot run even this (the caller retries; nothing is decided on a broken engine)."""
    with ContainerRun(base_image_tag(), purpose="control", job_id=job_id,
                      attempt=attempt, limits=Limits(timeout_s=60.0, memory_mb=256),
                      volumes={}) as run:
        result = run.exec(["true"], timeout_s=60, workdir="/")
    if result.exit_code != 0:
        raise InfrastructureError(f"the engine's control run failed ({result.reason})")
    return result
