"""Build Harbor job directories shaped like real ``harbor run`` output (tests, bench_load).

Shapes follow ../shared/docs/harbor-formats.md: section 8 (a real job directory written by
Harbor 0.25.0: job config/lock/result/job.log; per trial config.json (a full dump, key for key
as Harbor 0.26's models dump it; ``exclude_defaults=True`` gives Harbor 0.20's sparse dump),
lock.json with the task's ``sha256:`` content digest, result.json, trial.log, agent/,
verifier/reward.* + test-stdout.txt, artifacts/manifest.json + mirrored output paths) and
section 2 for Harbor 0.1.18 (``orchestrator`` block, full config dumps, ``n_trials`` stats, no
lock.json; ATIF v1.3 with ``session_id``). Harbor 0.1.x collects no artifacts; the submitter
copies the output into the same mirrored place (``artifacts/workspace/...``), which is what the
site documents, so the 0.1.x fixture does that too (without a manifest).

No Django; pure stdlib. Everything is deterministic (ids derive from the inputs). The digests match Harbor's: the
lock digest is ``evaluation.task_specs.package_digest`` (= Harbor 0.26 ``Packager.
compute_content_hash``) and ``task_checksum`` is ``dirhash`` (= Harbor 0.26 ``Task.checksum``),
both checked against the real Harbor 0.26 code on this repository's task packages.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TASKS_DIR = REPO / "tasks"
BENCHMARK = "healthagentbench-synthetic"
DEFAULT_OUTPUT = "/workspace/submission.json"
_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_DEFAULT = object()

AGENT_IMPORT_PATHS = {
    "oracle": "harbor.agents.oracle:OracleAgent",
    "nop": "harbor.agents.nop:NopAgent",
    "terminus-2": "harbor.agents.terminus_2:Terminus2",
    "claude-code": "harbor.agents.installed.claude_code:ClaudeCode",
    "codex": "harbor.agents.installed.codex:Codex",
    "copilot-cli": "harbor.agents.installed.copilot_cli:CopilotCli",
}
AGENT_VERSIONS = {"oracle": "1.0.0", "nop": "1.0.0", "codex": "0.130.0",
                  "claude-code": "2.1.40", "copilot-cli": "1.2.0", "terminus-2": "2.0.0"}


@dataclass
class BuiltJob:
    job_dir: Path
    harbor_version: str
    trials: dict[str, list[Path]] = field(default_factory=dict)  # task name -> trial dirs

    def trial(self, task: str, attempt: int = 1) -> Path:
        return self.trials[task][attempt - 1]

    def all_trials(self) -> list[Path]:
        return [t for dirs in self.trials.values() for t in dirs]


def _uuid(*parts) -> str:
    return str(uuid.UUID(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32]))


def _suffix(*parts) -> str:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:7])


def default_output_path(name: str) -> str:
    """The category's declared output (``[metadata].submission_path``) for ``<category>/...``."""
    from evaluation.task_specs import CATEGORIES

    info = CATEGORIES.get(name.split("/", 1)[0])
    return info.submission_path if info else DEFAULT_OUTPUT


def default_checksum(name: str, digest: str, tasks_dir: Path | None = None) -> str:
    """What Harbor writes as ``task_checksum``: dirhash of the task directory when the package
    exists here, else the digest."""
    task_dir = (tasks_dir or TASKS_DIR) / name
    if ".." not in Path(name).parts and (task_dir / "task.toml").is_file():
        from dirhash import dirhash

        return dirhash(str(task_dir), "sha256")
    return digest


def harbor_task_name(name: str) -> str:
    """``<category>/<task_id>`` -> the package's ``[task].name`` (``<benchmark>/<cat>-<id>``)."""
    return f"{BENCHMARK}/{name.replace('/', '-')}"


def write_json(path: Path, data, *, indent: int = 4) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")
    return path


def edit_json(path: Path, change) -> dict:
    """Load ``path``, let ``change(doc)`` edit it in place (or return a new dict), write it back."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    new = change(doc)
    doc = new if isinstance(new, dict) else doc
    write_json(Path(path), doc)
    return doc


def set_dotted(doc: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        doc = doc.setdefault(part, {})
    doc[parts[-1]] = value


def _ts(moment: datetime, modern: bool) -> str:
    text = moment.isoformat(timespec="microseconds")
    return text + "Z" if modern else text


def atif_trajectory(*, agent: str, version: str, model: str | None, task: str, modern: bool,
                    session: str, secret_text: str = "") -> dict:
    """A small valid ATIF trajectory (v1.7 for Harbor 0.2x, v1.3 for 0.1.x)."""
    agent_step = {
        "step_id": 2, "source": "agent",
        "message": f"Reading the task data and writing the answer for {task}.",
        "tool_calls": [{"tool_call_id": "call_1", "function_name": "bash",
                        "arguments": {"command": "python3 /workspace/solve.py" + secret_text}}],
        "observation": {"results": [{"source_call_id": "call_1",
                                     "content": "wrote /workspace/submission.json"}]},
    }
    if model:
        agent_step["model_name"] = model.split("/", 1)[-1]
        agent_step["metrics"] = {"prompt_tokens": 1200, "completion_tokens": 80,
                                 "cached_tokens": 800}
    doc = {
        "schema_version": "ATIF-v1.7" if modern else "ATIF-v1.3",
        "session_id": session,
        "agent": {"name": agent, "version": version, **({"model_name": model} if model else {})},
        "steps": [
            {"step_id": 1, "source": "user", "message": f"Solve the task {task}.",
             "timestamp": "2026-12-02T09:18:41Z"},
            agent_step,
            {"step_id": 3, "source": "agent", "message": "Done."},
        ],
        "final_metrics": {"total_prompt_tokens": 1200 if model else 0,
                          "total_completion_tokens": 80 if model else 0, "total_steps": 3},
    }
    return doc


def _agent_config(agent: str, model: str | None, kwargs: dict, modern: bool,
                  full: bool) -> dict:
    """AgentConfig as Harbor dumps it (0.26 field order for 0.2x; 0.1.18's six fields)."""
    if not full:
        cfg = {k: v for k, v in {"name": agent, "model_name": model}.items() if v is not None}
        if kwargs:
            cfg["kwargs"] = dict(kwargs)
        return cfg
    if not modern:
        return {"name": agent, "import_path": None, "model_name": model,
                "override_timeout_sec": None, "max_timeout_sec": None, "kwargs": dict(kwargs)}
    return {"name": agent, "import_path": None, "model_name": model, "base_url": None,
            "model_api_key_name": None, "model_api_format": None, "skip_model_parsing": False,
            "n_concurrent": None, "concurrency_group": None, "skills": [],
            "override_timeout_sec": None, "override_setup_timeout_sec": None,
            "max_timeout_sec": None, "resume_trajectory": False, "load_trajectory": None,
            "extra_allowed_hosts": [], "kwargs": dict(kwargs), "mcp_servers": []}


def _environment_config(modern: bool, full: bool) -> dict:
    if modern and not full:
        return {"type": "docker"}
    if not modern:
        return {"type": "docker", "force_build": False, "delete": True, "override_cpus": None,
                "override_memory_mb": None, "override_storage_mb": None, "kwargs": {}}
    return {"type": "docker", "import_path": None, "force_build": False, "delete": True,
            "stream": False, "cpu_enforcement_policy": "auto",
            "memory_enforcement_policy": "auto", "override_cpus": None,
            "override_memory_mb": None, "override_storage_mb": None, "override_gpus": None,
            "override_tpu": None, "mounts": None, "extra_docker_compose": [], "kwargs": {},
            "extra_allowed_hosts": []}


def _verifier_config(modern: bool, full: bool) -> dict:
    if modern and not full:
        return {}
    return {"override_timeout_sec": None, "max_timeout_sec": None, "disable": False}


def _retry(modern: bool) -> dict:
    excluded = (["RewardFileEmptyError", "AgentTimeoutError", "VerifierOutputParseError",
                 "VerifierTimeoutError", "RewardFileNotFoundError"] if modern else
                ["AgentTimeoutError", "VerifierTimeoutError", "RewardFileNotFoundError"])
    return {"max_retries": 0, "include_exceptions": None, "exclude_exceptions": excluded,
            "wait_multiplier": 1.0, "min_wait_sec": 1.0, "max_wait_sec": 60.0}


def _apply_overrides(doc: dict, overrides: dict) -> dict:
    doc = copy.deepcopy(doc)
    for dotted, value in (overrides or {}).items():
        set_dotted(doc, dotted, value)
    return doc


@dataclass
class _Phases:
    """One trial's timestamps, as Harbor records them (start, the four phases, finish)."""

    start: datetime
    env_setup: tuple[datetime, datetime]
    agent_setup: tuple[datetime, datetime]
    agent_exec: tuple[datetime, datetime]
    verify: tuple[datetime, datetime]
    finish: datetime

    @classmethod
    def from_start(cls, t0: datetime) -> _Phases:
        s = timedelta(seconds=1)
        env = (t0 + 0.1 * s, t0 + 2.1 * s)
        agent_setup = (env[1] + 0.1 * s, env[1] + 0.4 * s)
        agent_exec = (agent_setup[1] + 0.1 * s, agent_setup[1] + 95.5 * s)
        verify = (agent_exec[1] + 0.2 * s, agent_exec[1] + 3.2 * s)
        return cls(t0, env, agent_setup, agent_exec, verify, verify[1] + 1.5 * s)


@dataclass
class HarborJobBuilder:
    """Writes ``root/<job_name>/`` like ``harbor run -p tasks -a <agent> -m <model> -k
    <attempts>``; every field has a default, so a test names only what it changes::

        HarborJobBuilder(spec.tasks, agent="codex", model="openai/gpt-5.5").build(tmp_path)

    ``tasks``: benchmark task name (``<category>/<task_id>``) -> content digest (written to each
    trial's lock.json as ``sha256:<digest>``; Harbor 0.1.x has no lock). ``checksums``: task ->
    ``result.json`` ``task_checksum`` (default: Harbor's dirhash of ``tasks/<name>`` when that
    package exists, else the digest). ``output_paths`` defaults to each category's declared
    ``submission_path`` (``/workspace/output/`` for ehr-format-conversion).
    ``overrides``: dotted keys set in every trial config (and the job config), e.g.
    ``{"environment.override_memory_mb": 8192, "timeout_multiplier": 2.0}``.
    ``outputs``: task -> bytes of the output file, or {relative name: bytes} for a directory
    output (``output_paths`` task -> container path, trailing ``/`` = directory).
    ``rewards``: task -> per-attempt rewards (default 1.0; None: no reward file). ``exceptions``: (task, attempt) ->
    Harbor exception type recorded in exception_info. ``exclude_defaults``: write 0.2x trial
    config.json as Harbor 0.20 did (only non-default keys); 0.25/0.26 write full dumps.
    ``trajectories``: task -> the ATIF document every attempt of it records.
    """

    tasks: dict[str, str]
    attempts: int = 3
    agent: str = "oracle"
    model: str | None = None
    agent_kwargs: dict = field(default_factory=dict)
    harbor_version: str = "0.25.0"
    overrides: dict = field(default_factory=dict)
    outputs: dict[str, bytes | dict[str, bytes]] = field(default_factory=dict)
    output_paths: dict[str, str] = field(default_factory=dict)
    checksums: dict[str, str] = field(default_factory=dict)
    rewards: dict[str, list[float]] = field(default_factory=dict)
    exceptions: dict[tuple[str, int], str] = field(default_factory=dict)
    tokens: tuple[int, int, int] | None | object = _DEFAULT
    cost_usd: float | None | object = _DEFAULT
    job_name: str = "2026-12-02__09-18-40"
    started: datetime | None = None
    tasks_dir: Path | None = None
    exclude_defaults: bool = False
    trajectories: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("agent_kwargs", "overrides", "outputs", "output_paths", "checksums",
                     "rewards", "exceptions", "trajectories"):
            if getattr(self, name) is None:  # callers may pass None for "the default"
                setattr(self, name, {})
        if self.tokens is _DEFAULT:
            self.tokens = (182_311, 150_400, 6_120) if self.model else None
        if self.cost_usd is _DEFAULT:
            self.cost_usd = 0.42 if self.model else None
        self.modern = not self.harbor_version.startswith("0.1.")
        self.version = AGENT_VERSIONS.get(self.agent, "unknown")
        self.start = self.started or datetime(2026, 12, 2, 9, 18, 40, 573803)
        self.job_id = _uuid("job", self.job_name, self.harbor_version)
        self.output_paths = {t: self.output_paths.get(t) or default_output_path(t)
                             for t in self.tasks}
        self.container_outputs = sorted(set(self.output_paths.values()))
        self.agent_full = _agent_config(self.agent, self.model, self.agent_kwargs, self.modern,
                                        full=True)

    # ------------------------------------------------------------------------------ the job
    def build(self, root: Path | str) -> BuiltJob:
        job_dir = Path(root) / self.job_name
        job_dir.mkdir(parents=True, exist_ok=False)
        write_json(job_dir / "config.json", _apply_overrides(self._job_config(), {
            k: v for k, v in self.overrides.items() if "." not in k or k.split(".")[0] in (
                "environment", "verifier")}))
        built = BuiltJob(job_dir=job_dir, harbor_version=self.harbor_version)
        self._locks, self._rewards, self._exceptions = [], {}, {}
        self._n_errors, self._totals = 0, [0, 0, 0]
        clock = self.start
        for name, digest in self.tasks.items():
            for attempt in range(1, self.attempts + 1):
                phases = _Phases.from_start(clock)
                built.trials.setdefault(name, []).append(
                    self._trial(job_dir, name, digest, attempt, phases))
                clock = phases.finish + timedelta(seconds=0.25)
        self._write_job_result(job_dir, end=clock)
        return built

    def _job_config(self) -> dict:
        if not self.modern:
            return {
                "job_name": self.job_name, "jobs_dir": "jobs", "n_attempts": self.attempts,
                "timeout_multiplier": 1.0,
                "orchestrator": {"type": "local", "n_concurrent_trials": 4, "quiet": False,
                                 "retry": _retry(False), "kwargs": {}},
                "metrics": [], "environment": _environment_config(False, full=True),
                "verifier": _verifier_config(False, full=True), "agents": [self.agent_full],
                "datasets": [{"path": "tasks", "task_names": None, "exclude_task_names": None}],
                "tasks": [],
            }
        return {
            "schema_version": 1, "job_name": self.job_name, "jobs_dir": "jobs",
            "n_attempts": self.attempts, "install_only": False, "skip_credential_checks": False,
            "timeout_multiplier": 1.0, "agent_timeout_multiplier": None,
            "verifier_timeout_multiplier": None, "agent_setup_timeout_multiplier": None,
            "environment_build_timeout_multiplier": None, "debug": False,
            "n_concurrent_trials": 4, "quiet": False, "retry": _retry(True),
            "override_error_policy": {},
            "environment": _environment_config(True, full=True),
            "verifier": _verifier_config(True, full=True),
            "metrics": [], "agents": [self.agent_full], "user_agent": None,
            "datasets": [{"path": "tasks", "name": None, "version": None, "ref": None,
                          "registry_url": None, "registry_path": None, "overwrite": False,
                          "download_dir": None, "task_names": None, "exclude_task_names": None,
                          "n_tasks": None}],
            "tasks": [], "artifacts": self.container_outputs, "extra_instruction_paths": [],
            "extra_instructions": [], "source_jobs": [],
        }

    def _write_job_result(self, job_dir: Path, end: datetime) -> None:
        n_trials = len(self.tasks) * self.attempts
        model = self.model
        evals_key = f"{self.agent}__{model.split('/', 1)[-1] if model else 'adhoc'}"
        mean = (sum(float(k) * len(v) for k, v in self._rewards.items()) / n_trials
                if n_trials else 0.0)
        n_errors, totals, tokens = self._n_errors, self._totals, self.tokens
        if self.modern:
            job_result = {
                "id": self.job_id, "started_at": _ts(self.start, True),
                "updated_at": _ts(end, True), "finished_at": _ts(end, True),
                "n_total_trials": n_trials,
                "stats": {"n_completed_trials": n_trials, "n_errored_trials": n_errors,
                          "n_running_trials": 0, "n_pending_trials": 0,
                          "n_cancelled_trials": 0, "n_retries": 0,
                          "evals": {evals_key: {"n_trials": n_trials, "n_errors": n_errors,
                                                "metrics": [{"mean": mean}], "pass_at_k": {},
                                                "reward_stats": {"reward": self._rewards},
                                                "exception_stats": self._exceptions}},
                          "n_input_tokens": totals[0] if tokens else None,
                          "n_cache_tokens": totals[1] if tokens else None,
                          "n_output_tokens": totals[2] if tokens else None,
                          "cost_usd": (self.cost_usd * n_trials)
                          if self.cost_usd is not None else None},
            }
            write_json(job_dir / "lock.json", {
                "schema_version": 3, "created_at": _ts(self.start, True),
                "harbor": {"version": self.harbor_version, "git_commit_hash": None,
                           "is_editable": False},
                "n_concurrent_trials": 4, "retry": _retry(True), "trials": self._locks})
        else:
            job_result = {
                "id": self.job_id, "started_at": _ts(self.start, False),
                "finished_at": _ts(end, False), "n_total_trials": n_trials,
                "stats": {"n_trials": n_trials, "n_errors": n_errors,
                          "evals": {evals_key.replace("/", "-"): {
                              "n_trials": n_trials, "n_errors": n_errors,
                              "metrics": [{"mean": mean}],
                              "reward_stats": {"reward": self._rewards},
                              "exception_stats": self._exceptions}}},
            }
        write_json(job_dir / "result.json", job_result)
        (job_dir / "job.log").write_text(
            f"{_ts(self.start, False)} INFO Starting job {self.job_name} with {n_trials} "
            f"trials\n{_ts(end, False)} INFO Job {self.job_name} finished: {n_trials} trials, "
            f"{n_errors} errors\n")

    # ---------------------------------------------------------------------------- a trial
    def _trial(self, job_dir: Path, name: str, digest: str, attempt: int,
               phases: _Phases) -> Path:
        short = harbor_task_name(name).split("/", 1)[1]
        trial_name = f"{short[:32]}__{_suffix(self.job_name, name, attempt)}"
        trial_dir = job_dir / trial_name
        config_full, config_file = self._trial_config(name, trial_name)
        write_json(trial_dir / "config.json", config_file)
        if self.modern:
            lock = _apply_overrides({
                "schema_version": 2,
                "task": {"name": harbor_task_name(name), "type": "local",
                         "digest": f"sha256:{digest}", "path": f"tasks/{name}"},
                "install_only": False, "timeout_multiplier": 1.0,
                "agent": _agent_config(self.agent, self.model, self.agent_kwargs, True,
                                       full=False),
                "skills": [], "environment": {"type": "docker"},
                "verifier": {"environment_mode": "shared"},
            }, self.overrides)
            write_json(trial_dir / "lock.json", lock)
            self._locks.append(lock)
        reward = (self.rewards.get(name) or [1.0] * self.attempts)[attempt - 1]
        exc_type = self.exceptions.get((name, attempt))
        write_json(trial_dir / "result.json", self._trial_result(
            name, attempt, trial_name, digest, config_full, reward, exc_type, phases))
        if exc_type:
            self._n_errors += 1
            self._exceptions.setdefault(exc_type, []).append(trial_name)
            (trial_dir / "exception.txt").write_text(
                f"Traceback (most recent call last):\n  ...\n{exc_type}: trial failed\n")
        if reward is not None:
            self._rewards.setdefault(str(float(reward)), []).append(trial_name)
        (trial_dir / "trial.log").write_text(
            f"{_ts(phases.start, False)} INFO Starting trial {trial_name}\n"
            f"{_ts(phases.agent_exec[0], False)} INFO Running agent {self.agent}\n"
            f"{_ts(phases.verify[0], False)} INFO Running verifier\n"
            f"{_ts(phases.finish, False)} INFO Trial {trial_name} finished (reward {reward})\n")
        self._write_agent_dir(trial_dir, name, attempt)
        (trial_dir / "verifier").mkdir(parents=True, exist_ok=True)
        if reward is not None:
            write_json(trial_dir / "verifier" / "reward.json", {"reward": reward}, indent=2)
        (trial_dir / "verifier" / "test-stdout.txt").write_text(
            '{"passed": false, "error": "no reward"}\n' if reward is None else
            f'{{"passed": {"true" if reward >= 1 else "false"}, "metrics": {{}}}}\n')
        self._write_artifacts(trial_dir, name)
        return trial_dir

    def _trial_config(self, name: str, trial_name: str) -> tuple[dict, dict]:
        """(the full dump result.json embeds, the trial's config.json)."""
        modern, task_path = self.modern, f"tasks/{name}"
        config_full = {
            **({"schema_version": 1} if modern else {}),
            "task": ({"path": task_path, "git_url": None, "git_commit_id": None,
                      "name": None, "ref": None, "overwrite": False, "download_dir": None,
                      "source": None} if modern else
                     {"path": task_path, "git_url": None, "git_commit_id": None,
                      "overwrite": False, "download_dir": None, "source": None}),
            "trial_name": trial_name, "trials_dir": f"jobs/{self.job_name}",
            **({"install_only": False} if modern else {}),
            "timeout_multiplier": 1.0,
            **({"agent_timeout_multiplier": None, "verifier_timeout_multiplier": None,
                "agent_setup_timeout_multiplier": None,
                "environment_build_timeout_multiplier": None} if modern else {}),
            "agent": self.agent_full,
            **({"user_agent": None} if modern else {}),
            "environment": _environment_config(modern, full=True),
            "verifier": _verifier_config(modern, full=True),
            **({"override_error_policy": {}, "artifacts": self.container_outputs,
                "extra_instruction_paths": [], "extra_instructions": []}
               if modern else {}),
            "job_id": self.job_id,
            **({"source_trial": None} if modern else {}),
        }
        config_full = _apply_overrides(config_full, self.overrides)
        if not (modern and self.exclude_defaults):
            return config_full, config_full
        # Harbor 0.20 wrote exclude_defaults dumps
        return config_full, _apply_overrides({
            "task": {"path": task_path}, "trial_name": trial_name,
            "trials_dir": f"jobs/{self.job_name}",
            "agent": _agent_config(self.agent, self.model, self.agent_kwargs, True, full=False),
            "environment": _environment_config(True, full=False),
            "artifacts": self.container_outputs, "job_id": self.job_id}, self.overrides)

    def _trial_result(self, name: str, attempt: int, trial_name: str, digest: str,
                      config_full: dict, reward: float, exc_type: str | None,
                      phases: _Phases) -> dict:
        modern, model, tokens = self.modern, self.model, self.tokens
        model_info = None
        if model:
            provider, _, mname = model.partition("/") if "/" in model else ("", "", model)
            model_info = {"name": mname, "provider": provider or None}
        in_tok, cache_tok, out_tok = tokens if tokens else (None, None, None)
        if tokens:
            self._totals = [self._totals[0] + in_tok, self._totals[1] + cache_tok,
                            self._totals[2] + out_tok]
        return {
            **({"schema_version": 1} if modern else {}),
            "id": _uuid("trial", self.job_name, name, attempt),
            "task_name": harbor_task_name(name), "trial_name": trial_name,
            "trial_uri": f"file:///home/submitter/jobs/{self.job_name}/{trial_name}",
            "task_id": {"path": f"tasks/{name}"},
            "source": None,
            "task_checksum": self.checksums.get(name) or default_checksum(name, digest,
                                                                          self.tasks_dir),
            "config": config_full,
            "agent_info": {"name": self.agent, "version": self.version,
                           "model_info": model_info},
            "agent_result": {"n_input_tokens": in_tok, "n_cache_tokens": cache_tok,
                             "n_output_tokens": out_tok, "cost_usd": self.cost_usd,
                             "rollout_details": None, "metadata": None,
                             **({"model_usage": None} if modern else {})},
            # No reward (None): the verifier wrote no reward file, as Harbor records it.
            "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
            **({"verifier_environment_mode": "shared"} if modern else {}),
            "exception_info": None if not exc_type else {
                "exception_type": exc_type,
                "exception_message": f"{exc_type} raised during the trial",
                "exception_traceback": "Traceback (most recent call last): ...",
                "occurred_at": _ts(phases.agent_exec[1], modern)},
            "started_at": _ts(phases.start, modern), "finished_at": _ts(phases.finish, modern),
            **{key: {"started_at": _ts(span[0], modern), "finished_at": _ts(span[1], modern)}
               for key, span in (("environment_setup", phases.env_setup),
                                 ("agent_setup", phases.agent_setup),
                                 ("agent_execution", phases.agent_exec),
                                 ("verifier", phases.verify))},
            **({"step_results": None} if modern else {}),
        }

    def _write_agent_dir(self, trial_dir: Path, name: str, attempt: int) -> None:
        agent_dir = trial_dir / "agent"
        agent_dir.mkdir()
        write_json(agent_dir / "trajectory.json", self.trajectories.get(name) or
                   atif_trajectory(agent=self.agent, version=self.version, model=self.model,
                                   task=harbor_task_name(name), modern=self.modern,
                                   session=_uuid("session", self.job_name, name, attempt)),
                   indent=2)
        log_name = "oracle.txt" if self.agent == "oracle" else f"{self.agent}.txt"
        (agent_dir / log_name).write_text(
            f"solving {harbor_task_name(name)}\nwrote {self.output_paths[name]}\n")

    def _write_artifacts(self, trial_dir: Path, name: str) -> None:
        container_out = self.output_paths[name]
        mirrored = trial_dir / "artifacts" / container_out.strip("/")
        data = self.outputs.get(name)
        if container_out.endswith("/"):
            files = data if isinstance(data, dict) else {
                "data/train/0.csv": data or b"subject_id,time,code,numeric_value\n"}
            for rel_name, content in files.items():
                (mirrored / rel_name).parent.mkdir(parents=True, exist_ok=True)
                (mirrored / rel_name).write_bytes(content)
            kind = "directory"
        else:
            mirrored.parent.mkdir(parents=True, exist_ok=True)
            mirrored.write_bytes(data if isinstance(data, bytes) else b'{"placeholder": true}\n')
            kind = "file"
        if self.modern:
            write_json(trial_dir / "artifacts" / "manifest.json", [
                {"source": "/logs/artifacts", "destination": "artifacts/logs/artifacts",
                 "type": "directory", "status": "ok", "service": None},
                {"source": container_out.rstrip("/"),
                 "destination": "artifacts/" + container_out.strip("/"), "type": kind,
                 "status": "ok", "service": None}], indent=2)
            (trial_dir / "artifacts" / "logs" / "artifacts").mkdir(parents=True)


def build_metadata(
    *,
    agent_display_name: str = "Codex (GPT 5.5)",
    agent_org_display_name: str = "OpenAI",
    agent_url: str = "https://github.com/openai/codex",
    models: list[dict] | None = None,
    harness: str = "codex",
    harness_version: str = "0.130.0",
    benchmark: str = "healthagentbench-synthetic@1.0",
    notes: str = "Run with harbor 0.25.0, -k 3.",
    fmt: str = "dict",
    **extra,
):
    """Submission metadata as a dict (``fmt="dict"``), YAML text or JSON text."""
    doc = {
        "agent_url": agent_url,
        "agent_display_name": agent_display_name,
        "agent_org_display_name": agent_org_display_name,
        "models": models if models is not None else [
            {"model_name": "gpt-5.5", "model_provider": "openai",
             "model_display_name": "GPT-5.5", "model_org_display_name": "OpenAI"}],
        "harness": harness,
        "harness_version": harness_version,
        "benchmark": benchmark,
        "notes": notes,
        **extra,
    }
    if fmt == "yaml":
        return yaml.safe_dump(doc, sort_keys=False)
    if fmt == "json":
        return json.dumps(doc, indent=2)
    return doc
