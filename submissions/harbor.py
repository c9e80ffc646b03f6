"""Read an extracted upload tree of Harbor job directories into plain ``ParsedTrial`` records.

Pure Python (pydantic + the graders' defensive JSON loader); no Django, so it is testable with
``-p no:django`` and usable from a worker.

What ``harbor run`` writes (../shared/docs/harbor-formats.md sections 2 and 8)::

    <job>/config.json result.json job.log [lock.json]          (job level)
    <job>/<task short name>__<7 chars>/                          (one per trial)
        config.json result.json trial.log [lock.json] [exception.txt]
        agent/  (trajectory.json = ATIF, oracle.txt, ...)
        verifier/ (reward.json | reward.txt, test-stdout.txt, ...)
        artifacts/ (0.2x: manifest.json + mirrored absolute paths, e.g. workspace/submission.json)

Both generations are accepted: Harbor 0.1.x (``orchestrator`` block, ``n_trials`` stats, no
lock.json/artifacts) and 0.2x (top-level ``retry``, lock.json with the task's content digest,
``exclude_defaults`` dumps in which absent keys mean the defaults). Unknown keys are ignored.
Harbor 0.1.x does not collect artifacts; submitters copy the agent's output into the 0.2x
mirrored place, ``<trial>/artifacts/<absolute path without the leading />``.

Outcome of a trial (from ``exception_info.exception_type``; see ``outcome_for``). The split
follows Harbor's own table (0.26 ``harbor/models/trial/error_policy.py``: which exception types
leave a *valid reward*, i.e. are a genuine attempt of the agent) and Terminal-Bench's scoring
(section 4.3):

* no exception: ``passed`` if reward >= 1, ``failed`` if a reward < 1 was recorded, and
  ``infra_error`` when no reward exists at all (the verifier produced no grade);
* ``AgentTimeoutError`` -> ``timeout`` (even when the verifier still ran and wrote a reward);
* the agent's own failures (Harbor: valid reward) -> ``agent_error``:
  ``NonZeroAgentExitCodeError``, ``ContextWindowExceededError``, ``ContextLengthExceededError``,
  ``OutputTokenExceededError``, ``OutputLengthExceededError``, ``AgentSafetyRefusalError``,
  ``ContentPolicyViolationError``, ``PermissionError`` (TB counts it); also any exception type
  Harbor does not know (Harbor's default policy treats unknown types as a valid reward, and an
  agent must not be able to hide a failure behind a made-up exception), unless its name says
  it is infrastructure (Docker/Environment/Sandbox/Build/Healthcheck/Verifier/Reward/Container);
* everything else -> ``infra_error`` (not a valid attempt; to be re-run): environment start/
  build/health-check/OOM-sandbox errors, ``AgentSetupTimeoutError`` (the agent never got the
  task), transient model-API errors (``ApiError``, ``ApiRateLimitError``, ...) and agent
  misconfiguration (``AgentAuthenticationError``, ``ModelNotFoundError``, ``BadRequestError``,
  ...), which Harbor marks as retryable or as having no valid reward, ``CancelledError``, and
  the verifier's own failures (``RewardFileNotFoundError``, ``RewardFileEmptyError``,
  ``VerifierOutputParseError``, ``VerifierTimeoutError``, ``AddTestsDirError``,
  ``DownloadVerifierDirError``). Terminal-Bench's scoring counts ``RewardFileNotFoundError`` and
  ``VerifierTimeoutError`` as failures; here the verifier is this site's own grader (its tests
  write no reward file exactly when grading was impossible, e.g. the X-ray judge is down),
  Harbor 0.26 itself marks them "no valid reward", and the site re-grades every trial from the
  collected output, so a verifier failure is never charged to the agent.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import stat
from collections import defaultdict
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ValidationError

from evaluation.graders import JUDGE_CATEGORIES
from evaluation.grading import GradingInputError, load_json
from submissions.harbor_models import (
    AGENT_ERROR,
    FAILED,
    INFRA_ERROR,
    PASSED,
    TIMEOUT,
    AgentSpec,
    HarborAgentConfig,
    HarborTrialConfig,
    HarborTrialResult,
    ParsedJob,
    ParsedTrial,
    ParsedTree,
    agent_class_path,
)
from submissions.problems import Problem

# Caps for the files read here (the archive itself is capped before extraction).
MAX_CONFIG_BYTES = 2 * 1024 * 1024  # config.json / lock.json / reward.json / manifest.json
MAX_RESULT_BYTES = 32 * 1024 * 1024  # result.json (rollout_details with logprobs can be large)
MAX_REWARD_TXT_BYTES = 1024
MAX_SCAN_DEPTH = 6  # directories below the tree root searched for job directories
MAX_TRIALS = 5000
MAX_MESSAGE_CHARS = 2000
MAX_NAME_CHARS = 1000

# The Harbor releases whose job directories the site accepts. Every release
# in TESTED_HARBOR_RELEASES ran the oracle and a failing scripted agent over the synthetic tasks
# and its jobs were uploaded and verified (tests/submissions/test_harbor_releases.py, marker
# harbor_releases); the figures are in docs/submitting.md#harbor-releases. Older releases are
# refused with `harbor_release_unsupported`; a newer release than the newest tested is accepted
# (its jobs pass every other check or are refused by them).
OLDEST_ACCEPTED_HARBOR = "0.13.0"
TESTED_HARBOR_RELEASES = ("0.13.0", "0.17.0", "0.20.0", "0.25.0", "0.26.0")
# Why the last 0.1.x cannot run these tasks (found by the matrix; its message to the submitter).
HARBOR_0_1_REASON = (
    "Harbor 0.1.45, the last 0.1.x, cannot run these tasks: its mean metric takes a reward.json "
    "of exactly one key, the tasks' verifiers write the reward with its sub-scores, and the job "
    "stops without its result.json")


def harbor_release_key(version: str) -> tuple[int, ...] | None:
    """(major, minor, patch) of a Harbor version string ("0.20.1.dev2026..." -> (0, 20, 1));
    None when it does not start with numbers."""
    parts = []
    for piece in version.strip().split(".")[:3]:
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts) if parts else None


def harbor_release_problem(job_dir: str, version: str | None) -> Problem | None:
    """``harbor_release_unsupported`` for a job written by a release the site does not accept:
    one with no lock.json (Harbor writes one from 0.7 on; 0.1.x wrote none) or a lock.json
    naming a release before OLDEST_ACCEPTED_HARBOR. The message names the accepted releases."""
    accepted = (f"The site accepts jobs written by Harbor {OLDEST_ACCEPTED_HARBOR} or later "
                f"(tested: {', '.join(TESTED_HARBOR_RELEASES)}); upgrade with "
                "`pip install -U harbor` and run the job again.")
    if version is None:
        return Problem("harbor_release_unsupported", f"{job_dir}/lock.json",
                       "no lock.json: this job was written by a Harbor release older than 0.7 "
                       f"(the 0.1.x line). {HARBOR_0_1_REASON}. {accepted}")
    key = harbor_release_key(version)
    if key is not None and key >= harbor_release_key(OLDEST_ACCEPTED_HARBOR):
        return None
    return Problem("harbor_release_unsupported", f"{job_dir}/lock.json",
                   f"lock.json says Harbor {version[:40]!r} wrote this job, a release the site "
                   f"does not accept. {accepted}")


# Directories directly under a job directory that are never trials.
NON_TRIAL_DIRS = frozenset({"__MACOSX", ".git"})


TIMEOUT_EXCEPTIONS = frozenset({"AgentTimeoutError"})
# Harbor 0.26 error_policy: should_grade and has_valid_reward (plus TB's PermissionError).
AGENT_EXCEPTIONS = frozenset({
    "NonZeroAgentExitCodeError", "ContextWindowExceededError", "OutputTokenExceededError",
    "ContextLengthExceededError", "OutputLengthExceededError", "AgentSafetyRefusalError",
    "ContentPolicyViolationError", "PermissionError",
})
# Harbor 0.26 error_policy: has_valid_reward = False.
INFRA_EXCEPTIONS = frozenset({
    # environment / sandbox (retried, not graded)
    "EnvironmentStartTimeoutError", "SandboxBuildFailedError", "AgentSetupTimeoutError",
    "HealthcheckError", "SandboxLikelyOutOfMemoryError", "MemoryLimitExceededError",
    "SSHAccessError", "GKEExecStreamClosedError", "GKEPodNotFoundError", "RuntimeRequestError",
    "AddTestsDirError", "DownloadVerifierDirError",
    # transient model-API errors (retried)
    "ApiError", "ApiRateLimitError", "ApiInternalServerError", "ApiOverloadedError",
    "ApiConnectionClosedError", "ApiResponseStalledError", "UnknownApiError",
    "NetworkConnectionError", "ApiConnectionError", "ApiUsageLimitError", "RateLimitError",
    "InternalServerError", "ServiceUnavailableError", "APIConnectionError", "APIError",
    "Timeout",
    # graded but no valid reward: request/verifier errors
    "UnsupportedModelParametersError", "BadRequestError", "UnprocessableEntityError",
    "UnsupportedParamsError", "APIResponseValidationError", "BudgetExceededError",
    "VerifierTimeoutError", "RewardFileNotFoundError", "RewardFileEmptyError",
    "VerifierOutputParseError",
    # misconfiguration / cancelled (neither retried nor graded)
    "AgentAuthenticationError", "ModelNotFoundError", "ApiProviderResourceNotFoundError",
    "AuthenticationError", "PermissionDeniedError", "NotFoundError",
    "ServiceOperationsUnsupportedError", "VercelScopeError", "DspyImportError",
    "MissingExtraError", "RegradeError", "CancelledError",
})
_INFRA_NAME_RE = re.compile(r"Docker|Environment|Sandbox|Build|Healthcheck|Verifier|Reward|"
                            r"Container|Compose")

# Integrity (Terminal-Bench 4.2 / our section 7.4): these must be absent/null ...
MULTIPLIER_KEYS = ("timeout_multiplier", "agent_timeout_multiplier", "verifier_timeout_multiplier",
                   "agent_setup_timeout_multiplier", "environment_build_timeout_multiplier")
_OVERRIDE_KEY_RE = re.compile(r"^(override_.+|max_timeout_sec|.*timeout_sec)$")


# ------------------------------------------------------------------ helpers


def rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def read_json(root: Path, path: Path, problems: list[Problem], *, code: str,
              max_bytes: int = MAX_CONFIG_BYTES):
    """Load a JSON file with the graders' strict loader; a problem (and None) on failure."""
    label = rel(root, path)
    try:
        return load_json(path, label=label, max_bytes=max_bytes)
    except GradingInputError as exc:
        problems.append(Problem(code, label, str(exc)))
        return None


def _validate(model: type[BaseModel], data, root: Path, path: Path, problems: list[Problem],
              code: str):
    if not isinstance(data, dict):
        problems.append(Problem(code, rel(root, path), "must be a JSON object"))
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                           for e in exc.errors()[:5])
        problems.append(Problem(code, rel(root, path), f"not a Harbor file of this kind: {detail}"))
        return None


def parse_timestamp(value: str | None) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds(start: str | None, end: str | None) -> float | None:
    a, b = parse_timestamp(start), parse_timestamp(end)
    if a is None or b is None:
        return None
    if (a.tzinfo is None) != (b.tzinfo is None):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    seconds = (b - a).total_seconds()
    return seconds if seconds >= 0 else None


def outcome_for(exception_type: str | None, reward: float | None) -> str:
    """Map Harbor's exception type (+ reward) to an outcome class (module docstring)."""
    if exception_type:
        if exception_type in TIMEOUT_EXCEPTIONS:
            return TIMEOUT
        if exception_type in AGENT_EXCEPTIONS:
            return AGENT_ERROR
        if exception_type in INFRA_EXCEPTIONS or _INFRA_NAME_RE.search(exception_type):
            return INFRA_ERROR
        return AGENT_ERROR  # unknown: Harbor's default policy counts it as a valid reward
    if reward is None:
        return INFRA_ERROR
    return PASSED if reward >= 1 else FAILED


# The verifier ran and wrote no reward file (the site's test.sh writes none exactly when its
# grader could not grade: for a judged task, when no judge answered).
NO_REWARD_FILE_EXCEPTIONS = frozenset({"RewardFileNotFoundError", "RewardFileEmptyError"})


def site_grades_alone(category: str | None, exception_type: str | None,
                      reward: float | None) -> bool:
    """A trial of a judged category (the X-ray LLM judge) whose verifier recorded no grade and
    nothing else went wrong: the submitter's machine had no judge to ask, which it does not
    need. Not an infrastructure error: the site's re-grade, with the site's judge, decides it
    (flag ``no_claimed_grade``)."""
    return (category in JUDGE_CATEGORIES and reward is None
            and (exception_type is None or exception_type in NO_REWARD_FILE_EXCEPTIONS))


def find_overrides(config: dict, *, prefix: str = "") -> dict[str, Any]:
    """Timeout multipliers other than 1.0 and every non-null timeout/resource override in a
    (job or trial) config dump: top level, ``agent``/``agents[i]``, ``verifier``,
    ``environment`` (never inside ``kwargs``/``env``, which hold the agent's own settings)."""
    found: dict[str, Any] = {}
    if not isinstance(config, dict):
        return found
    for key in MULTIPLIER_KEYS:
        value = config.get(key)
        if value is not None and value != 1.0 and value != 1:
            found[f"{prefix}{key}"] = value
    for key, value in config.items():
        if key not in MULTIPLIER_KEYS and _OVERRIDE_KEY_RE.match(str(key)) and value not in (
                None, [], {}):
            found[f"{prefix}{key}"] = value
    sections: list[tuple[str, Any]] = [(s, config.get(s)) for s in ("agent", "verifier",
                                                                   "environment")]
    for i, agent in enumerate(config.get("agents") or []):
        sections.append((f"agents[{i}]", agent))
    for name, section in sections:
        if isinstance(section, dict):
            for key, value in section.items():
                if _OVERRIDE_KEY_RE.match(str(key)) and value not in (None, [], {}):
                    found[f"{prefix}{name}.{key}"] = value
    return found


def _float_or_none(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------ discovery


def _looks_like_job_config(data) -> bool:
    return isinstance(data, dict) and "trial_name" not in data and (
        "agents" in data or "job_name" in data or "jobs_dir" in data or "orchestrator" in data
        or "n_attempts" in data or "datasets" in data)


def find_job_dirs(root: Path, problems: list[Problem]) -> list[tuple[Path, dict]]:
    """Directories holding a job-level config.json (trial directories never count)."""
    jobs: list[tuple[Path, dict]] = []
    root = Path(root)

    def walk(directory: Path, depth: int) -> None:
        config = directory / "config.json"
        if _is_regular(config):
            data = read_json(root, config, problems, code="job_config_invalid")
            if _looks_like_job_config(data):
                jobs.append((directory, data))
                return
        if depth >= MAX_SCAN_DEPTH:
            return
        try:
            children = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in children:
            if entry.is_dir(follow_symlinks=False) and entry.name not in NON_TRIAL_DIRS:
                walk(Path(entry.path), depth + 1)

    walk(root, 0)
    return jobs


def _job_lock(root: Path, job_dir: Path, problems: list[Problem]) -> tuple[str | None,
                                                                           list[dict]]:
    """The job's lock.json (Harbor 0.2x): the Harbor version that wrote it and its ``trials``
    (one TrialLock per trial: task name, path and digest, and the trial's settings)."""
    lock = job_dir / "lock.json"
    if not _is_regular(lock):
        return None, []
    data = read_json(root, lock, problems, code="lock_invalid")
    if not isinstance(data, dict):
        return None, []
    harbor = data.get("harbor")
    version = (harbor["version"][:40] if isinstance(harbor, dict)
               and isinstance(harbor.get("version"), str) else None)
    trials = data.get("trials")
    if trials is not None and not isinstance(trials, list):
        problems.append(Problem("lock_invalid", rel(root, lock), "trials must be a list"))
        trials = []
    return version, [t for t in (trials or [])[:MAX_TRIALS] if isinstance(t, dict)]


def parse_tree(root: Path | str) -> ParsedTree:
    """Every job directory and trial under ``root`` (an extracted upload), with the problems met
    while reading them. Attempts are numbered per recorded task name (see ``number_attempts``)."""
    root = Path(root)
    problems: list[Problem] = []
    jobs: list[ParsedJob] = []
    trials: list[ParsedTrial] = []
    job_dirs = find_job_dirs(root, problems)
    if not job_dirs:
        problems.append(Problem("no_job_directories", ".",
                                "no Harbor job directory found (a folder with the job's "
                                "config.json and result.json, as `harbor run` writes it)"))
    for job_dir, job_config in job_dirs:
        job_rel = rel(root, job_dir) or "."
        if not _is_regular(job_dir / "result.json"):
            problems.append(Problem("job_result_missing", f"{job_rel}/result.json",
                                    "the job's result.json is missing (did the job finish?)"))
            job_result = None
        else:
            job_result = read_json(root, job_dir / "result.json", problems,
                                   code="job_result_invalid", max_bytes=MAX_RESULT_BYTES)
        version, lock_trials = _job_lock(root, job_dir, problems)
        agents = []
        for item in job_config.get("agents") or []:
            if isinstance(item, dict):
                try:
                    agents.append(AgentSpec.from_config(HarborAgentConfig.model_validate(item)))
                except ValidationError:
                    problems.append(Problem("job_config_invalid", f"{job_rel}/config.json",
                                            "agents[] entry is not a Harbor AgentConfig"))
        jobs.append(ParsedJob(job_rel, job_config, version, agents, lock_trials=lock_trials))
        for entry in sorted(os.scandir(job_dir), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False) or entry.name in NON_TRIAL_DIRS:
                continue
            if len(trials) >= MAX_TRIALS:
                problems.append(Problem("too_many_trials", job_rel,
                                        f"more than {MAX_TRIALS} trial directories"))
                break
            trials.append(parse_trial(root, Path(entry.path), job_rel, version, problems))
        _check_job_completeness(job_rel, job_result, [t for t in trials if t.job_dir == job_rel],
                                problems)
    number_attempts(trials)
    return ParsedTree(jobs, trials, problems)


def _listed_trial_names(job_result: dict) -> set[str]:
    """Trial names the job's result.json lists in its per-eval reward/exception stats."""
    names: set[str] = set()
    stats = job_result.get("stats") if isinstance(job_result, dict) else None
    evals = stats.get("evals") if isinstance(stats, dict) else None
    for agg in (evals or {}).values() if isinstance(evals, dict) else ():
        if not isinstance(agg, dict):
            continue
        groups = []
        for per_key in (agg.get("reward_stats") or {}).values():
            if isinstance(per_key, dict):
                groups.extend(per_key.values())
        exception_stats = agg.get("exception_stats") or {}
        if isinstance(exception_stats, dict):
            groups.extend(exception_stats.values())
        for group in groups:
            if isinstance(group, list):
                names.update(str(n)[:200] for n in group if isinstance(n, str))
    return names


def _check_job_completeness(job_rel: str, job_result, job_trials: list[ParsedTrial],
                            problems: list[Problem]) -> None:
    """Every trial the job ran must be uploaded (no picking the best attempts): the trials
    named in result.json's stats and its ``n_total_trials`` must all be present."""
    if not isinstance(job_result, dict):
        return
    present = {t.trial_name for t in job_trials} | {PurePosixPath(t.trial_dir).name
                                                    for t in job_trials}
    missing = sorted(_listed_trial_names(job_result) - present)
    path = f"{job_rel}/result.json"
    if missing:
        shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        problems.append(Problem("job_trials_missing", path,
                                f"{len(missing)} trial(s) of this job are not in the upload: "
                                f"{shown}; upload the complete job directory"))
    total = job_result.get("n_total_trials")
    if isinstance(total, int) and not isinstance(total, bool) and not missing and (
            total > len(job_trials)):
        problems.append(Problem("job_trials_missing", path,
                                f"the job ran {total} trials; {len(job_trials)} are in the "
                                "upload"))


def number_attempts(trials: list[ParsedTrial], key=lambda t: t.task_name or t.task_path) -> None:
    """Attempt numbers 1..k per task, ordered by (started_at, trial name, trial dir)."""
    groups: dict[Any, list[ParsedTrial]] = defaultdict(list)
    for trial in trials:
        groups[key(trial)].append(trial)
    for group in groups.values():
        group.sort(key=lambda t: (parse_timestamp(t.started_at) is None,
                                  _sort_time(t.started_at), t.trial_name, t.trial_dir))
        for i, trial in enumerate(group, start=1):
            trial.attempt = i


def _sort_time(value: str | None) -> str:
    ts = parse_timestamp(value)
    if ts is None:
        return ""
    return ts.replace(tzinfo=None).isoformat()


# ------------------------------------------------------------------ one trial


def parse_trial(root: Path, trial_dir: Path, job_rel: str, harbor_version: str | None,
                problems: list[Problem]) -> ParsedTrial:
    trial_rel = rel(root, trial_dir)
    trial = ParsedTrial(job_dir=job_rel, trial_dir=trial_rel, trial_name=trial_dir.name,
                        harbor_version=harbor_version)
    config_path, result_path = trial_dir / "config.json", trial_dir / "result.json"
    config: HarborTrialConfig | None = None
    raw_config: dict = {}
    file_config: dict = {}  # config.json itself (raw_config may be result.json's dump)
    if _is_regular(config_path):
        trial.has_config = True
        data = read_json(root, config_path, problems, code="config_invalid")
        config = _validate(HarborTrialConfig, data, root, config_path, problems,
                           "config_invalid")
        raw_config = file_config = data if isinstance(data, dict) else {}
    else:
        problems.append(Problem("config_missing", f"{trial_rel}/config.json",
                                "trial has no config.json"))
    result: HarborTrialResult | None = None
    raw_result: dict = {}
    if _is_regular(result_path):
        trial.has_result = True
        data = read_json(root, result_path, problems, code="result_invalid",
                         max_bytes=MAX_RESULT_BYTES)
        result = _validate(HarborTrialResult, data, root, result_path, problems,
                           "result_invalid")
        raw_result = data if isinstance(data, dict) else {}
    else:
        problems.append(Problem("result_missing", f"{trial_rel}/result.json",
                                "trial has no result.json"))
    # The config dump inside result.json stands in for a missing/unreadable config.json.
    if config is None and isinstance(raw_result.get("config"), dict):
        try:
            config = HarborTrialConfig.model_validate(raw_result["config"])
            raw_config = raw_result["config"]
        except ValidationError:
            pass

    # Harbor 0.20 to 0.25 write config.json without the fields left at their defaults (the
    # oracle agent is no "agent" at all); result.json's full dump of the same config names it.
    # Overrides are looked for in both (an edited config.json cannot hide one).
    full = raw_result.get("config") if isinstance(raw_result.get("config"), dict) else {}
    if config is not None and "agent" not in raw_config and isinstance(full.get("agent"), dict):
        try:
            config.agent = HarborTrialConfig.model_validate({"agent": full["agent"]}).agent
        except ValidationError:
            pass

    if config is not None:
        trial.agent = AgentSpec.from_config(config.agent)
        trial.timeout_multiplier = (config.timeout_multiplier
                                    if config.timeout_multiplier is not None else 1.0)
        trial.verifier_disabled = bool(config.verifier.disable)
        trial.overrides = {**find_overrides(full), **find_overrides(raw_config)}
        trial.task_path = (config.task.path or config.task.name or "")[:MAX_NAME_CHARS] or None
        if config.trial_name:
            trial.trial_name = config.trial_name[:200]

    lock_agent = _read_lock(root, trial_dir, trial, problems)
    _agent_records(trial, {f"{trial_rel}/config.json": file_config.get("agent"),
                           f"{trial_rel}/result.json": full.get("agent"),
                           f"{trial_rel}/lock.json": lock_agent})

    if result is not None:
        trial.trial_id = (result.id or "")[:100] or None
        trial.task_name = result.task_name[:MAX_NAME_CHARS] if result.task_name else None
        if result.task_id and isinstance(result.task_id.get("path"), str):
            trial.task_path = result.task_id["path"][:MAX_NAME_CHARS]
        trial.task_checksum = result.task_checksum
        if result.trial_name:
            trial.trial_name = result.trial_name[:200]
        if result.agent_info:
            trial.agent_info_name = (result.agent_info.name or "")[:200] or None
            trial.agent_version = (result.agent_info.version or "")[:100] or None
        ar = result.agent_result
        if ar is not None:
            trial.input_tokens = ar.n_input_tokens
            trial.cached_tokens = ar.n_cache_tokens
            trial.output_tokens = ar.n_output_tokens
            trial.cost_usd = ar.cost_usd
        if result.verifier_result and result.verifier_result.rewards:
            trial.rewards = {str(k): float(v) for k, v in result.verifier_result.rewards.items()
                             if _float_or_none(v) is not None}
            if "reward" in trial.rewards:
                trial.reward = trial.rewards["reward"]
                trial.reward_source = "result.json"
        if result.exception_info and result.exception_info.exception_type:
            trial.exception_type = result.exception_info.exception_type[:200]
            trial.exception_message = (result.exception_info.exception_message or "")[
                :MAX_MESSAGE_CHARS]
        trial.started_at, trial.finished_at = result.started_at, result.finished_at
        execution = result.agent_execution
        if execution is not None and execution.started_at:
            trial.agent_ran = True
            trial.duration_s = _seconds(execution.started_at, execution.finished_at)
        elif execution is None and "agent_execution" not in raw_result:
            trial.agent_ran = ar is not None  # no timing recorded: infer from agent_result
        if trial.duration_s is None:
            trial.duration_s = _seconds(result.started_at, result.finished_at)

    _read_reward_files(root, trial_dir, trial, problems)
    trajectory = trial_dir / "agent" / "trajectory.json"
    if _is_regular(trajectory):
        trial.trajectory_path = rel(root, trajectory)
        trial.agent_ran = True if result is None else trial.agent_ran
    artifacts = trial_dir / "artifacts"
    if _is_dir(artifacts):
        trial.artifacts_dir = rel(root, artifacts)
        manifest = artifacts / "manifest.json"
        if _is_regular(manifest):
            data = read_json(root, manifest, problems, code="manifest_invalid")
            if isinstance(data, dict):  # tolerate {"entries": [...]} (ArtifactManifest)
                data = data.get("entries")
            if isinstance(data, list):
                trial.manifest = [m for m in data if isinstance(m, dict)][:10000]
    trial.outcome = outcome_for(trial.exception_type, trial.reward)
    return trial


def _agent_records(trial: ParsedTrial, dumps: dict[str, Any]) -> None:
    """What each file's dump of the trial's agent says: the model it names (compared by
    validation), and a custom agent class named in any of them, which becomes the trial's (an
    edited config.json cannot hide one)."""
    for path, raw in dumps.items():
        if not isinstance(raw, dict):
            continue
        try:
            cfg = HarborAgentConfig.model_validate(raw)
        except ValidationError:
            continue
        trial.recorded_models[path] = cfg.model_name or ""
        custom = agent_class_path(cfg)
        if custom and trial.agent is not None and not trial.agent.import_path:
            trial.agent = dataclasses.replace(trial.agent, import_path=custom)


def _read_lock(root: Path, trial_dir: Path, trial: ParsedTrial,
               problems: list[Problem]) -> Any:
    """Read the trial's lock.json into ``trial``; return its dump of the agent (or None)."""
    lock_path = trial_dir / "lock.json"
    if not _is_regular(lock_path):
        return None
    data = read_json(root, lock_path, problems, code="lock_invalid")
    if not isinstance(data, dict):
        return None
    task = data.get("task")
    if isinstance(task, dict) and isinstance(task.get("digest"), str):
        digest = task["digest"].strip()
        trial.task_digest = digest.split(":", 1)[1] if digest.startswith("sha256:") else digest
    # The lock repeats the trial's effective settings: overrides there count too.
    for key, value in find_overrides(data).items():
        trial.overrides.setdefault(key, value)
    if isinstance(data.get("verifier"), dict) and data["verifier"].get("disable") is True:
        trial.verifier_disabled = True
    return data.get("agent")


def _read_reward_files(root: Path, trial_dir: Path, trial: ParsedTrial,
                       problems: list[Problem]) -> None:
    verifier = trial_dir / "verifier"
    rj, rt = verifier / "reward.json", verifier / "reward.txt"
    if _is_regular(rj):
        data = read_json(root, rj, problems, code="reward_invalid")
        if isinstance(data, dict):
            value = _float_or_none(data.get("reward"))
            if value is not None:
                trial.reward_file_values[rel(root, rj)] = value
            elif data:
                problems.append(Problem("reward_invalid", rel(root, rj),
                                        'reward.json has no numeric "reward"'))
        elif data is not None:
            problems.append(Problem("reward_invalid", rel(root, rj), "must be a JSON object"))
    if _is_regular(rt):
        try:
            size = os.lstat(rt).st_size
            text = rt.read_text(encoding="utf-8") if size <= MAX_REWARD_TXT_BYTES else ""
            value = float(text.strip())
            if not math.isfinite(value):
                raise ValueError
            trial.reward_file_values[rel(root, rt)] = value
        except (OSError, UnicodeDecodeError, ValueError):
            problems.append(Problem("reward_invalid", rel(root, rt),
                                    "reward.txt must hold a single number"))
    if trial.reward is None and trial.reward_file_values:
        # Harbor 0.2x reads reward.json first (0.1.x reward.txt; both written = must agree).
        source, value = next(iter(trial.reward_file_values.items()))
        trial.reward, trial.reward_source = value, source
        trial.rewards.setdefault("reward", value)


# ------------------------------------------------------------------ outputs


def expected_output_locations(trial: ParsedTrial, container_path: str) -> list[str]:
    """Tree-relative places where the collected copy of ``container_path`` may be."""
    return output_locations(trial.trial_dir, trial.manifest, container_path)


def output_locations(trial_dir: str, manifest: list, container_path: str) -> list[str]:
    """Places (under ``trial_dir``) where Harbor collected ``container_path``: the artifacts
    manifest's ``ok`` destination first, then the mirrored path ``artifacts/<path>``. Releases
    differ: 0.1.x and 0.13 keep only the base name (``/workspace/output`` at
    ``artifacts/output``), 0.2x mirror the whole path (``artifacts/workspace/output``); the
    manifest says which. Used by the intake (which output was collected) and by verification
    (which stored files it grades), so both read the same place."""
    clean = PurePosixPath("/" + container_path.strip().lstrip("/"))
    if ".." in clean.parts:
        return []
    wanted = clean.as_posix().rstrip("/") or "/"
    places = []
    for entry in manifest if isinstance(manifest, list) else []:
        if not isinstance(entry, dict):
            continue
        source = str(entry.get("source") or "").rstrip("/")
        dest = entry.get("destination")
        if source == wanted and entry.get("status", "ok") == "ok" and isinstance(dest, str):
            dest_path = PurePosixPath(dest)
            if not dest_path.is_absolute() and ".." not in dest_path.parts:
                places.append(f"{trial_dir}/{dest_path.as_posix()}")
    places.append(f"{trial_dir}/artifacts{wanted}")
    return list(dict.fromkeys(places))


def find_output(root: Path, trial: ParsedTrial, container_path: str) -> str | None:
    """The tree-relative collected output (a file, or a non-empty directory given with a
    trailing ``/``) for ``container_path``; None when it was not collected."""
    is_dir = container_path.endswith("/")
    for place in expected_output_locations(trial, container_path):
        path = Path(root) / place
        if is_dir and _is_dir(path) and any(
                _is_regular(p) for p in _limited_walk(path, 10000)):
            return place.rstrip("/") + "/"
        if not is_dir and _is_regular(path):
            return place
        if not is_dir and _is_dir(path) and any(_is_regular(p) for p in _limited_walk(path, 10000)):
            return place.rstrip("/") + "/"
    return None


def _limited_walk(directory: Path, limit: int):
    count = 0
    for base, dirs, files in os.walk(directory, followlinks=False):
        for name in files:
            count += 1
            if count > limit:
                return
            yield Path(base) / name
