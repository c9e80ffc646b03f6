"""The Harbor job/trial files a submission holds, as data: lenient pydantic views of Harbor's
JSON (unknown keys ignored, so newer Harbor versions parse) and the records parse_tree builds.
Parsing itself is submissions/harbor.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from submissions.problems import Problem

MAX_TOKENS = 10**15  # per trial; far above any real run, well inside a bigint
MAX_COST_USD = 1e7

TIMEOUT = "timeout"
AGENT_ERROR = "agent_error"
INFRA_ERROR = "infra_error"
PASSED = "passed"
FAILED = "failed"
OUTCOMES = (PASSED, FAILED, TIMEOUT, AGENT_ERROR, INFRA_ERROR)


# ------------------------------------------------------------------ pydantic views (lenient)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class HarborAgentConfig(_Lenient):
    name: str | None = None
    import_path: str | None = None
    model_name: str | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("kwargs", mode="before")
    @classmethod
    def _none_is_empty(cls, value):
        return {} if value is None else value


class HarborVerifierConfig(_Lenient):
    disable: bool = False

    @field_validator("disable", mode="before")
    @classmethod
    def _none_false(cls, value):
        return False if value is None else value


class HarborTaskConfig(_Lenient):
    path: str | None = None
    name: str | None = None
    ref: str | None = None
    git_url: str | None = None
    git_commit_id: str | None = None


class HarborTrialConfig(_Lenient):
    trial_name: str | None = None
    task: HarborTaskConfig = Field(default_factory=HarborTaskConfig)
    timeout_multiplier: float | None = None
    agent: HarborAgentConfig = Field(default_factory=HarborAgentConfig)
    verifier: HarborVerifierConfig = Field(default_factory=HarborVerifierConfig)
    artifacts: list[Any] = Field(default_factory=list)


class HarborModelInfo(_Lenient):
    name: str | None = None
    provider: str | None = None


class HarborAgentInfo(_Lenient):
    name: str | None = None
    version: str | None = None
    model_info: HarborModelInfo | None = None


class HarborAgentResult(_Lenient):
    n_input_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    n_cache_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    n_output_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    cost_usd: float | None = Field(default=None, ge=0, le=MAX_COST_USD)


class HarborVerifierResult(_Lenient):
    rewards: dict[str, float | int | None] | None = None


class HarborExceptionInfo(_Lenient):
    exception_type: str | None = None
    exception_message: str | None = None


class HarborTiming(_Lenient):
    started_at: str | None = None
    finished_at: str | None = None


class HarborTrialResult(_Lenient):
    id: str | None = None
    task_name: str | None = None
    trial_name: str | None = None
    task_id: dict[str, Any] | None = None
    source: str | None = None
    task_checksum: str | None = None
    agent_info: HarborAgentInfo | None = None
    agent_result: HarborAgentResult | None = None
    verifier_result: HarborVerifierResult | None = None
    exception_info: HarborExceptionInfo | None = None
    started_at: str | None = None
    finished_at: str | None = None
    agent_setup: HarborTiming | None = None
    agent_execution: HarborTiming | None = None
    verifier: HarborTiming | None = None

    @field_validator("task_id", mode="before")
    @classmethod
    def _task_id_object(cls, value):
        # H01 wrote {"path": ...}; some dumps are a bare string.
        return {"path": value} if isinstance(value, str) else value


def agent_class_path(cfg: HarborAgentConfig) -> str | None:
    """The agent class a config names by import path: ``--agent-import-path``, or ``-a
    module:Class``, which Harbor records as the agent's name."""
    if cfg.import_path:
        return cfg.import_path
    return cfg.name if cfg.name and ":" in cfg.name else None


# ------------------------------------------------------------------ parsed records


@dataclass(frozen=True)
class AgentSpec:
    """The agent configuration that must be identical across a submission's trials (hashable:
    the kwargs are kept as canonical JSON; ``kwargs`` gives them back as a dict)."""

    name: str | None
    import_path: str | None
    model_name: str | None
    kwargs_json: str = "{}"

    @classmethod
    def from_config(cls, cfg: HarborAgentConfig) -> AgentSpec:
        return cls(cfg.name, agent_class_path(cfg), cfg.model_name,
                   json.dumps(cfg.kwargs, sort_keys=True, default=str))

    @property
    def kwargs(self) -> dict:
        return json.loads(self.kwargs_json)

    @property
    def model_provider(self) -> str | None:
        if self.model_name and "/" in self.model_name:
            return self.model_name.split("/", 1)[0]
        return None

    @property
    def model_short_name(self) -> str | None:
        if self.model_name and "/" in self.model_name:
            return self.model_name.split("/", 1)[1]
        return self.model_name

    def describe(self) -> str:
        who = self.name or self.import_path or "?"
        kw = self.kwargs_json if self.kwargs_json != "{}" else ""
        suffix = f" / kwargs {kw[:200]}" if kw else ""
        return f"{who} / model {self.model_name or 'none'}{suffix}"

    def as_dict(self) -> dict:
        return {"name": self.name, "import_path": self.import_path,
                "model_name": self.model_name, "kwargs": self.kwargs}


@dataclass
class ParsedTrial:
    job_dir: str
    trial_dir: str  # tree-relative POSIX path
    trial_name: str
    harbor_version: str | None = None  # from job lock.json (0.2x) when present
    trial_id: str | None = None  # result.json id (a UUID)
    has_result: bool = False
    has_config: bool = False
    task_name: str | None = None  # as Harbor recorded it (result.json task_name)
    task_path: str | None = None  # task_id.path / config task.path
    task_digest: str | None = None  # lock.json task.digest, hex without "sha256:" (0.2x)
    task_checksum: str | None = None  # result.json task_checksum (dirhash of the task dir)
    attempt: int = 0
    reward: float | None = None
    rewards: dict[str, float] = field(default_factory=dict)
    reward_source: str | None = None
    reward_file_values: dict[str, float] = field(default_factory=dict)  # file -> reward
    outcome: str = INFRA_ERROR
    exception_type: str | None = None
    exception_message: str | None = None
    cost_usd: float | None = None
    cost_computed: bool = False
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    duration_s: float | None = None
    started_at: str | None = None
    finished_at: str | None = None
    agent: AgentSpec | None = None
    # tree-relative file (config.json, result.json's and lock.json's dumps) -> the model it names
    recorded_models: dict[str, str] = field(default_factory=dict)
    agent_info_name: str | None = None
    agent_version: str | None = None
    timeout_multiplier: float = 1.0
    overrides: dict[str, Any] = field(default_factory=dict)  # dotted key -> value
    verifier_disabled: bool = False
    agent_ran: bool = False
    trajectory_path: str | None = None
    artifacts_dir: str | None = None
    manifest: list[dict] = field(default_factory=list)
    artifact_paths: list[str] = field(default_factory=list)  # filled by validation
    spec_task: str | None = None  # benchmark task name, filled by validation

    @property
    def success(self) -> bool:
        return self.outcome == PASSED

    def model_fields(self) -> dict:
        """The values a ``submissions.Trial`` row takes from this trial (besides FKs)."""
        return {
            "attempt": self.attempt, "outcome": self.outcome, "reward": self.reward,
            "success": self.success, "cost_usd": self.cost_usd,
            "input_tokens": self.input_tokens, "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens, "duration_s": self.duration_s,
            "trial_dir": self.trial_dir, "trajectory_path": self.trajectory_path or "",
            "artifact_paths": list(self.artifact_paths), "cost_computed": self.cost_computed,
        }


@dataclass
class ParsedJob:
    job_dir: str
    config: dict
    harbor_version: str | None
    agents: list[AgentSpec]
    problems_at: list[str] = field(default_factory=list)
    # The job's lock.json (Harbor 0.2x) ``trials``: one TrialLock per trial the job ran, each
    # with its task's name, path and ``sha256:`` content digest and the trial's settings.
    lock_trials: list[dict] = field(default_factory=list)


@dataclass
class ParsedTree:
    jobs: list[ParsedJob]
    trials: list[ParsedTrial]
    problems: list[Problem]
