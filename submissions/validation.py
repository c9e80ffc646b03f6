"""Validate an extracted upload (Harbor job directories + metadata) against a benchmark version.

    report = validate_submission(tree_root, metadata, spec)
    report.ok / report.problems / report.trials / report.agent_config

Every problem is reported at once, each naming the file or trial directory (tree-relative).
Pure Python: no Django. ``spec`` is a plain ``BenchmarkSpec`` (the caller builds it from the
database; ``spec_from_packages`` builds one from task package directories).

Problem codes (``Problem.code``):

reading the tree (submissions.harbor): ``no_job_directories``, ``job_config_invalid``,
``job_result_missing``, ``job_result_invalid``, ``job_trials_missing`` (the job's result.json
lists trials, or counts more trials, than were uploaded: no picking the best attempts), ``config_missing``, ``config_invalid``,
``result_missing``, ``result_invalid``, ``lock_invalid``, ``manifest_invalid``,
``reward_invalid``, ``too_many_trials``;
Harbor release: ``harbor_release_unsupported`` (no lock.json, or one naming a release before
``submissions.harbor.OLDEST_ACCEPTED_HARBOR``; the message names the accepted releases);
metadata: ``metadata_missing``, ``metadata_syntax``, ``metadata_encoding``,
``metadata_too_large``, ``metadata_too_complex``, ``metadata_yaml_alias``, ``metadata_invalid``,
``benchmark_mismatch``, ``metadata_model_mismatch`` (models[0], the row's model, is not the
model the trials ran, as Harbor recorded it), ``metadata_model_role`` (a second model without
``role: helper``), ``metadata_harness_mismatch``, ``metadata_harness_version_mismatch`` (not
the exact release the trials recorded);
task identity: ``task_unknown``, ``task_digest_mismatch``, ``task_digest_missing`` (each trial's
lock.json ``task.digest`` or result.json ``task_checksum``, and every per-task digest of the
job's own lock.json, Harbor 0.2x);
coverage: ``attempts_missing``, ``attempts_extra``, ``trial_duplicate`` (the same Harbor
trial id twice);
agent: ``agent_config_missing``, ``agent_config_mixed``, ``agent_model_mixed`` (trials, or one
trial's config.json, result.json and lock.json, or the job's records, name different models),
``agent_version_mixed``, ``job_agents_mixed``;
integrity: ``timeout_multiplier``, ``override`` (incl. a non-empty ``override_error_policy``;
in the job's config.json, each trial's config.json and lock.json, and the job's lock.json),
``verifier_disabled``, ``retry_policy`` (the job config retries AgentTimeoutError or
NonZeroAgentExitCodeError trials, i.e. best-of-n);
evidence: ``trajectory_missing`` (not for Harbor's own ``oracle`` and ``nop`` agents, which
record none), ``trajectory_invalid``, ``artifact_missing``;
claims: ``reward_mismatch``, ``cost_missing``, ``cost_missing_no_price``;
infrastructure: ``infra_errors_too_many`` (more than ``max_infra_share`` of the trials claim an
infrastructure error: the job is to be resumed, not uploaded with holes). A trial of a judged task
(X-ray) whose verifier recorded no grade and nothing else went wrong is no such error: the
submitter needs no judge of their own, and the site's re-grade alone decides it
(``submissions.harbor.site_grades_alone``, flag ``no_claimed_grade``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from evaluation.harness_versions import same_version
from evaluation.task_specs import load_task_package
from submissions import pricing
from submissions.atif_check import validate_trajectory
from submissions.harbor import (
    find_output,
    find_overrides,
    harbor_release_problem,
    number_attempts,
    parse_tree,
    site_grades_alone,
)
from submissions.harbor_models import (
    INFRA_ERROR,
    PASSED,
    AgentSpec,
    HarborAgentConfig,
    ParsedTrial,
    ParsedTree,
)
from submissions.metadata import (
    MetadataError,
    ModelEntry,
    SubmissionMetadata,
    find_metadata_file,
    read_metadata_file,
)
from submissions.problems import Problem

__all__ = ["BenchmarkSpec", "Problem", "ValidationReport", "spec_from_packages",
           "validate_submission", "validate_trajectory"]

DEFAULT_OUTPUT = "/workspace/submission.json"


@dataclass
class BenchmarkSpec:
    """One benchmark version as validation needs it.

    ``tasks``: benchmark task name (``<category>/<task_id>``) -> content digest (sha256 hex of
    the package, ``evaluation.task_specs.package_digest``; Harbor 0.2x records it in the trial's
    lock.json as ``sha256:<hex>``). ``checksums``: optional extra accepted values of Harbor's
    ``result.json`` ``task_checksum`` (a dirhash of the task directory; the only identity
    Harbor 0.1.x records; see ``harbor_task_checksum``). ``outputs``: task -> the agent's output
    path in the container (``[metadata].submission_path``; a trailing ``/`` = a directory);
    tasks not listed use ``/workspace/submission.json``. ``served``: task -> content digests
    of the packages the site serves for it besides the committed one (the same package naming
    its published image: evaluation/published.py), accepted as the task's.
    """

    slug: str  # "name@version"
    attempts_per_task: int
    tasks: dict[str, str]
    checksums: dict[str, frozenset[str]] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    served: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.slug.split("@", 1)[0]

    def resolve(self, task_name: str | None, task_path: str | None) -> str | None:
        """The benchmark task a trial ran, from Harbor's recorded ``task_name``
        (``<org>/<category>-<task_id>`` as ``[task].name`` says, or the catalogue name
        itself) or the local task path (``.../<category>/<task_id>``)."""
        aliases = self._aliases()
        if task_name and task_name in aliases:
            return aliases[task_name]
        if task_name and "/" in task_name:
            short = task_name.split("/", 1)[1]
            if short in aliases:
                return aliases[short]
        if task_path:
            parts = PurePosixPath(task_path.replace("\\", "/")).parts
            if ".." not in parts and len(parts) >= 2:
                candidate = f"{parts[-2]}/{parts[-1]}"
                if candidate in self.tasks:
                    return candidate
        return None

    def _aliases(self) -> dict[str, str]:
        out = {}
        for name in self.tasks:
            out[name] = name
            out[name.replace("/", "-")] = name
            out[f"{self.name}/{name.replace('/', '-')}"] = name
        return out

    def digest_accepted(self, task: str, digest: str) -> bool:
        """``digest`` is the content of ``task`` in this version (committed or served)."""
        return digest == self.tasks[task] or digest in self.served.get(task, ())

    def output_for(self, task: str) -> str:
        return self.outputs.get(task) or DEFAULT_OUTPUT


@dataclass
class ValidationReport:
    problems: list[Problem]
    trials: list[ParsedTrial]
    agent_config: AgentSpec | None
    metadata: SubmissionMetadata | None
    jobs: list[str]
    harbor_versions: list[str]
    price_table_date: str = pricing.PRICE_TABLE_DATE

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def agent_version(self) -> str | None:
        versions = {t.agent_version for t in self.trials if t.agent_version}
        return versions.pop() if len(versions) == 1 else None

    def claimed_summary(self) -> dict:
        """Claimed (not yet re-graded) totals over the trials read."""
        n = len(self.trials)
        costs = [t.cost_usd for t in self.trials if t.cost_usd is not None]
        return {
            "trials": n,
            "passed": sum(t.success for t in self.trials),
            "success_rate": (sum(t.success for t in self.trials) / n) if n else None,
            "cost_usd_total": round(sum(costs), 6) if costs else None,
            "cost_computed_trials": sum(t.cost_computed for t in self.trials),
            "outcomes": dict(Counter(t.outcome for t in self.trials)),
            "price_table_date": self.price_table_date,
        }

    def problems_as_dicts(self) -> list[dict]:
        return [p.as_dict() for p in self.problems]


# ------------------------------------------------------------------ spec helpers


def harbor_task_checksum(task_dir: Path | str) -> str:
    """``TrialResult.task_checksum`` as Harbor computes it: ``dirhash(task_dir, "sha256")``."""
    from dirhash import dirhash

    return dirhash(str(task_dir), "sha256")


def spec_from_packages(paths, *, slug: str, attempts_per_task: int,
                       with_checksums: bool = True) -> BenchmarkSpec:
    """A spec from task package directories (``evaluation.task_specs.load_task_package``)."""
    tasks, checksums, outputs = {}, {}, {}
    for path in paths:
        package = load_task_package(path)
        tasks[package.name] = package.content_digest
        outputs[package.name] = package.manifest.metadata.submission_path
        if with_checksums:
            checksums[package.name] = frozenset({harbor_task_checksum(package.root)})
    return BenchmarkSpec(slug=slug, attempts_per_task=attempts_per_task, tasks=tasks,
                         checksums=checksums, outputs=outputs)


# ------------------------------------------------------------------ the validation


# The share of claimed infrastructure errors an upload may have (settings override it).
DEFAULT_MAX_INFRA_SHARE = 0.05


def validate_submission(tree_root: Path | str, metadata: SubmissionMetadata | None,
                        spec: BenchmarkSpec, *,
                        max_infra_share: float = DEFAULT_MAX_INFRA_SHARE) -> ValidationReport:
    """Validate everything and report every problem (see the module docstring for codes).

    ``metadata`` may be None: then ``metadata.yaml``/``.yml``/``.json`` at the tree root is
    read. Parsed trials get ``spec_task``, ``attempt`` (1..k per benchmark task, ordered by
    start time then trial name), ``artifact_paths`` and, when Harbor recorded no cost, a cost
    computed from the tokens with the dated price table (``cost_computed=True``).
    """
    root = Path(tree_root)
    parsed: ParsedTree = parse_tree(root)
    problems: list[Problem] = list(parsed.problems)
    trials = parsed.trials

    if metadata is None:
        metadata = _metadata_from_tree(root, problems)
    if metadata is not None and metadata.benchmark != spec.slug:
        problems.append(Problem("benchmark_mismatch", "metadata:benchmark",
                                f"metadata names {metadata.benchmark!r}; this upload is "
                                f"validated against {spec.slug!r}"))

    _check_tasks(spec, trials, problems)
    number_attempts([t for t in trials if t.spec_task], key=lambda t: t.spec_task)
    _check_coverage(spec, trials, problems)
    agent = _check_agent(parsed, trials, problems)
    if metadata is not None and agent is not None:
        _check_metadata_agreement(metadata, agent, trials, problems)
    for job in parsed.jobs:
        _check_job(job, problems)
        _check_job_lock_tasks(spec, job, problems)
    for trial in trials:
        _check_trial_integrity(trial, problems)
        _check_trajectory(root, trial, problems)
        _check_artifact(root, spec, trial, problems)
        _check_claims(trial, problems)
    _check_infra_share(trials, max_infra_share, problems)
    trials.sort(key=lambda t: (t.spec_task is None, t.spec_task or "", t.attempt, t.trial_dir))
    return ValidationReport(
        problems=problems, trials=trials, agent_config=agent, metadata=metadata,
        jobs=[j.job_dir for j in parsed.jobs],
        harbor_versions=sorted({j.harbor_version for j in parsed.jobs if j.harbor_version}))


def _check_infra_share(trials: list[ParsedTrial], max_share: float,
                       problems: list[Problem]) -> None:
    """A claimed infrastructure error is a hole in the run, which the site counts as a failure
    unless it confirms it; more than ``max_share`` of them means the run should be resumed."""
    infra = [t for t in trials if t.outcome == INFRA_ERROR and not site_grades_alone(
        _category(t), t.exception_type, t.reward)]
    if not trials or len(infra) <= max_share * len(trials):
        return
    kinds = Counter(t.exception_type or "no reward recorded" for t in infra)
    by_job: dict[str, list[str]] = defaultdict(list)
    for t in infra:
        if t.exception_type and t.exception_type not in by_job[t.job_dir]:
            by_job[t.job_dir].append(t.exception_type)
    # The archive holds each job under its own name; the submitter's copy is where `harbor run
    # -o jobs` (the Submit page) wrote it, so the command names it there: typed as shown from
    # the folder they ran Harbor in, it resumes that job.
    commands = "; ".join(
        f"harbor job resume -p {_local_job_path(job)}" + "".join(f" -f {e}"
                                                                 for e in sorted(errors))
        for job, errors in sorted(by_job.items())) or "harbor job resume -p jobs/<job name>"
    problems.append(Problem(
        "infra_errors_too_many", sorted(by_job)[0] if by_job else infra[0].job_dir,
        f"{len(infra)} of {len(trials)} trials ({len(infra) / len(trials):.0%}) ended in an "
        f"infrastructure error ({', '.join(f'{k} x{n}' for k, n in sorted(kinds.items()))}); "
        f"at most {max_share:.0%} are accepted. Resume the job so those trials run again "
        f"(Harbor 0.2x, from the folder you ran harbor in: `{commands}`; -f removes the trials "
        f"that ended with that error before resuming), then upload the job directory again."))


def _category(trial: ParsedTrial) -> str | None:
    return trial.spec_task.split("/", 1)[0] if trial.spec_task else None


def _local_job_path(job_dir: str) -> str:
    """Where the submitter has an uploaded job: the Submit page runs `harbor run -o jobs` and
    uploads `jobs/*/` (client) or `-C jobs .` (tar), which leave the `jobs/` out."""
    job = job_dir.removeprefix("./")
    return job if job.startswith("jobs/") else f"jobs/{job}"


def validate_jobs(tree_root: Path | str) -> list[Problem]:
    """Problems of the job directories that need no benchmark version: layout, Terminal-Bench's
    integrity rules, trial files and trajectories. For an upload whose metadata (and so its
    benchmark version) is unusable, so that one response still names every problem."""
    root = Path(tree_root)
    parsed: ParsedTree = parse_tree(root)
    problems: list[Problem] = list(parsed.problems)
    for job in parsed.jobs:
        _check_job(job, problems)
    for trial in parsed.trials:
        _check_trial_integrity(trial, problems)
        _check_trajectory(root, trial, problems)
    return problems


def _metadata_from_tree(root: Path, problems: list[Problem]) -> SubmissionMetadata | None:
    path = find_metadata_file(root)
    if path is None:
        problems.append(Problem("metadata_missing", "metadata.yaml",
                                "no metadata given and no metadata.yaml at the archive root"))
        return None
    try:
        return read_metadata_file(path)
    except MetadataError as exc:
        problems.extend(exc.problems)
        return None


def _check_tasks(spec: BenchmarkSpec, trials: list[ParsedTrial], problems: list[Problem]) -> None:
    for trial in trials:
        if not trial.has_result and not trial.has_config:
            continue  # already reported as missing files
        task = spec.resolve(trial.task_name, trial.task_path)
        if task is None:
            shown = trial.task_name or trial.task_path or "(none recorded)"
            problems.append(Problem("task_unknown", trial.trial_dir,
                                    f"task {shown[:200]!r} is not a task of {spec.slug}"))
            continue
        trial.spec_task = task
        expected = spec.tasks[task]
        accepted = set(spec.checksums.get(task, ()))
        compared, ok = False, True
        if trial.task_digest:
            compared, ok = True, spec.digest_accepted(task, trial.task_digest)
        if trial.task_checksum and accepted:
            compared, ok = True, ok and trial.task_checksum in accepted
        elif trial.task_checksum and not compared:
            compared, ok = True, trial.task_checksum == expected
        if not compared:
            problems.append(Problem("task_digest_missing", trial.trial_dir,
                                    f"no task digest recorded (lock.json task.digest or "
                                    f"result.json task_checksum) for {task}"))
        elif not ok:
            problems.append(Problem(
                "task_digest_mismatch", trial.trial_dir,
                f"task {task} was run from different content than {spec.slug} (recorded "
                f"{(trial.task_digest or trial.task_checksum or '')[:16]}..., expected "
                f"{expected[:16]}...)"))


def _check_coverage(spec: BenchmarkSpec, trials: list[ParsedTrial],
                    problems: list[Problem]) -> None:
    seen: dict[str, ParsedTrial] = {}
    for trial in trials:
        if trial.trial_id and trial.trial_id in seen:
            problems.append(Problem("trial_duplicate", trial.trial_dir,
                                    f"the same trial (id {trial.trial_id}) as "
                                    f"{seen[trial.trial_id].trial_dir}"))
        elif trial.trial_id:
            seen[trial.trial_id] = trial
    k = spec.attempts_per_task
    by_task: dict[str, list[ParsedTrial]] = defaultdict(list)
    for trial in trials:
        if trial.spec_task and trial.has_result:
            by_task[trial.spec_task].append(trial)
    for task in spec.tasks:
        found = sorted(by_task.get(task, []), key=lambda t: t.attempt)
        if len(found) < k:
            problems.append(Problem("attempts_missing", task,
                                    f"{task}: {len(found)} complete attempt(s), {k} required"))
        elif len(found) > k:
            extra = ", ".join(t.trial_dir for t in found[k:])
            problems.append(Problem("attempts_extra", task,
                                    f"{task}: {len(found)} attempts, exactly {k} required "
                                    f"(extra: {extra})"))


def _check_agent(parsed: ParsedTree, trials: list[ParsedTrial],
                 problems: list[Problem]) -> AgentSpec | None:
    for job in parsed.jobs:
        if len(set(job.agents)) > 1:
            problems.append(Problem("job_agents_mixed", f"{job.job_dir}/config.json",
                                    f"the job ran {len(set(job.agents))} agent configurations; "
                                    "a submission is one agent configuration"))
    configs: dict[AgentSpec, list[ParsedTrial]] = defaultdict(list)
    for trial in trials:
        if trial.agent is None:
            if trial.has_result or trial.has_config:
                problems.append(Problem("agent_config_missing", trial.trial_dir,
                                        "no agent configuration recorded"))
            continue
        configs[trial.agent].append(trial)
    versions: dict[str, list[ParsedTrial]] = defaultdict(list)
    for trial in trials:
        if trial.agent_version:
            versions[trial.agent_version].append(trial)
    if len(versions) > 1:
        ranked_versions = sorted(versions.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        for version, members in ranked_versions[1:]:
            problems.append(Problem(
                "agent_version_mixed", members[0].trial_dir,
                f"{len(members)} trial(s) ran agent version {version[:40]!r}, the others "
                f"{ranked_versions[0][0][:40]!r}; one agent version per submission"))
    _check_recorded_models(trials, problems)
    if not configs:
        return None
    ranked = sorted(configs.items(), key=lambda kv: (-len(kv[1]), kv[0].describe()))
    main = ranked[0][0]
    for other, members in ranked[1:]:
        listed = ", ".join(t.trial_dir for t in members[:10])
        if other.model_name != main.model_name:
            problems.append(Problem(
                "agent_model_mixed", members[0].trial_dir,
                f"{len(members)} trial(s) ran model {other.model_name or 'none'!r}, the others "
                f"{main.model_name or 'none'!r}; one model per submission ({listed})"))
            continue
        problems.append(Problem(
            "agent_config_mixed", members[0].trial_dir,
            f"{len(members)} trial(s) ran {other.describe()}, the others ran {main.describe()}; "
            f"one agent configuration per submission ({listed})"))
    return _check_job_agents(parsed, main, problems)


def _check_recorded_models(trials: list[ParsedTrial], problems: list[Problem]) -> None:
    """One trial's files (config.json, result.json's and lock.json's dumps) name one model: an
    edited config.json does not make the row show a model the trial did not run."""
    for trial in trials:
        if len(set(trial.recorded_models.values())) > 1:
            named = "; ".join(f"{path.rsplit('/', 1)[-1]}: {model or 'none'!r}"
                              for path, model in trial.recorded_models.items())
            problems.append(Problem(
                "agent_model_mixed", trial.trial_dir,
                f"the trial's files name different models ({named}); one model per submission"))


def _check_job_agents(parsed: ParsedTree, main: AgentSpec, problems: list[Problem]) -> AgentSpec:
    """The jobs' own records of the agent (config.json ``agents``, lock.json ``trials``) name
    the trials' model; a custom agent class any of them names is the submission's."""
    for job in parsed.jobs:
        records = [(f"{job.job_dir}/config.json", a) for a in job.agents]
        for entry in job.lock_trials:
            try:
                records.append((f"{job.job_dir}/lock.json", AgentSpec.from_config(
                    HarborAgentConfig.model_validate(entry.get("agent")))))
            except ValidationError:
                continue
        reported = set()
        for path, agent in records:
            if agent.import_path and not main.import_path:
                main = replace(main, import_path=agent.import_path)
            if agent.model_name != main.model_name and path not in reported:
                reported.add(path)
                problems.append(Problem(
                    "agent_model_mixed", path,
                    f"the job names model {agent.model_name or 'none'!r}; its trials ran "
                    f"{main.model_name or 'none'!r}; one model per submission"))
    return main


def _norm(text: str | None) -> str:
    return re.sub(r"[\s_.]+", "-", (text or "").strip().lower())


def _check_metadata_agreement(metadata: SubmissionMetadata, agent: AgentSpec,
                              trials: list[ParsedTrial], problems: list[Problem]) -> None:
    _check_model_roles(metadata, problems)
    if agent.model_name:
        row = metadata.models[0]
        if not _model_matches(agent.model_name, row):
            problems.append(Problem(
                "metadata_model_mismatch", "metadata:models",
                f"the trials ran model {agent.model_name!r}; the leaderboard row shows the first "
                f"model listed, {row.model_name!r} (metadata lists "
                f"{[m.model_name for m in metadata.models]}). List the model the trials ran "
                f"first, as Harbor recorded it (model_name: {agent.model_name!r}); a model the "
                "agent also calls comes after it with `role: helper`"))
    elif agent.name in REFERENCE_AGENTS and not agent.import_path:
        # Harbor's oracle and nop call no model: the leaderboard shows the model the trials ran,
        # so metadata naming one (a claim the trials contradict) is refused, not shown as fact.
        claimed = [m.model_name for m in metadata.models if _norm(m.model_name) != "none"]
        if claimed:
            problems.append(Problem(
                "metadata_model_mismatch", "metadata:models",
                f"the trials ran Harbor's {agent.name!r} agent, which calls no model; metadata "
                f"lists {claimed}. List `models: [{{model_name: none, model_provider: none, "
                f"model_display_name: no model, model_org_display_name: none}}]`"))
    names = {_norm(agent.name), _norm(trials[0].agent_info_name if trials else None)}
    if agent.import_path:
        module, _, cls = agent.import_path.partition(":")
        names |= {_norm(module.rsplit(".", 1)[-1]), _norm(cls), _norm(agent.import_path)}
    names.discard("")
    if _norm(metadata.harness) not in names and _norm(metadata.harness).replace("-", "") not in {
            n.replace("-", "") for n in names}:
        problems.append(Problem(
            "metadata_harness_mismatch", "metadata:harness",
            f"metadata says harness {metadata.harness!r}; the trials ran agent "
            f"{agent.name or agent.import_path!r}"))
    # Compared as exact releases: Harbor records what the version command printed, e.g.
    # "OpenHands version: 1.6.0" for OpenHands, where the metadata says 1.6.0 (but not 1.6).
    versions = {t.agent_version for t in trials if t.agent_version and t.agent_version != "unknown"}
    if (metadata.harness_version and versions
            and not any(same_version(metadata.harness_version, v) for v in versions)):
        problems.append(Problem(
            "metadata_harness_version_mismatch", "metadata:harness_version",
            f"metadata says {metadata.harness_version!r}; the trials recorded "
            f"{sorted(versions)[:5]}"))


def _model_matches(recorded: str, entry: ModelEntry) -> bool:
    """Whether a metadata model entry names the model Harbor recorded (``-m provider/model``):
    ``model_name`` as recorded, or ``model_provider/model_name`` (case aside; no aliases, no
    dropped date suffix: the row's model is the one that ran)."""
    ran = recorded.strip().casefold()
    name, provider = entry.model_name.strip().casefold(), entry.model_provider.strip().casefold()
    return ran in (name, f"{provider}/{name}") or ("/" not in ran and name == f"{provider}/{ran}")


def _check_model_roles(metadata: SubmissionMetadata, problems: list[Problem]) -> None:
    """One model per submission: models[0] is the row's model; any other is a helper the agent
    also calls, and says so (``role: helper``), so no second model reads as the row's."""
    if metadata.models[0].role == "helper":
        problems.append(Problem(
            "metadata_model_role", "metadata:models[0].role",
            "models[0] is the model every trial ran, which the leaderboard row shows; it cannot "
            "be a helper (list helpers after it)"))
    for i, entry in enumerate(metadata.models[1:], start=1):
        if entry.role != "helper":
            problems.append(Problem(
                "metadata_model_role", f"metadata:models[{i}].role",
                f"models[{i}] ({entry.model_name!r}) has no `role: helper`: a submission is one "
                "model, models[0], the model every trial ran; a model the agent also calls is "
                "listed after it with `role: helper` and shown as a helper"))


def _check_integrity_config(config: dict, path: str, problems: list[Problem]) -> None:
    for key, value in find_overrides(config).items():
        if key.endswith("timeout_multiplier"):
            problems.append(Problem("timeout_multiplier", path,
                                    f"{key} is {value!r}; it must be 1.0"))
        else:
            problems.append(Problem("override", path,
                                    f"{key} is set ({str(value)[:80]}); timeout and resource "
                                    "overrides are not allowed"))
    verifier = config.get("verifier") if isinstance(config, dict) else None
    if isinstance(verifier, dict) and verifier.get("disable") is True:
        problems.append(Problem("verifier_disabled", path, "verifier.disable is true"))
    retried = _retried_agent_failures(config)
    if retried:
        problems.append(Problem(
            "retry_policy", path,
            f"the job retries trials that failed with {', '.join(retried)}: a failed attempt "
            "must count, not be run again (exclude these from retry or set max_retries: 0)"))


def _check_job(job, problems: list[Problem]) -> None:
    """What a job needs whatever the benchmark version: a Harbor release the site accepts, and
    Terminal-Bench's integrity rules in its config.json and lock.json."""
    release = harbor_release_problem(job.job_dir, job.harbor_version)
    if release is not None:
        problems.append(release)
    _check_integrity_config(job.config, f"{job.job_dir}/config.json", problems)
    _check_job_lock(job, problems)


def _check_job_lock(job, problems: list[Problem]) -> None:
    """Timeout and resource overrides the job's lock.json records for its trials (one problem
    per setting and value, saying how many trial locks carry it), and disabled verifiers."""
    path = f"{job.job_dir}/lock.json"
    found: dict[tuple[str, str], int] = defaultdict(int)
    disabled = 0
    for entry in job.lock_trials:
        for key, value in find_overrides(entry).items():
            found[(key, str(value)[:80])] += 1
        verifier = entry.get("verifier")
        disabled += isinstance(verifier, dict) and verifier.get("disable") is True
    n = len(job.lock_trials)
    for (key, value), count in sorted(found.items()):
        if key.endswith("timeout_multiplier"):
            problems.append(Problem("timeout_multiplier", path,
                                    f"{key} is {value} in {count} of its {n} trial locks; it "
                                    "must be 1.0"))
        else:
            problems.append(Problem("override", path,
                                    f"{key} is set ({value}) in {count} of its {n} trial locks; "
                                    "timeout and resource overrides are not allowed"))
    if disabled:
        problems.append(Problem("verifier_disabled", path,
                                f"verifier.disable is true in {disabled} of its {n} trial locks"))


def _check_job_lock_tasks(spec: BenchmarkSpec, job, problems: list[Problem]) -> None:
    """Every task the job's lock.json locked is a task of the version, at its content digest
    (Harbor 0.2x records ``sha256:<digest>`` per trial; one problem per task)."""
    path = f"{job.job_dir}/lock.json"
    unknown, missing, wrong = set(), set(), {}
    for entry in job.lock_trials:
        task = entry.get("task") if isinstance(entry.get("task"), dict) else {}
        name = task.get("name") if isinstance(task.get("name"), str) else None
        task_path = task.get("path") if isinstance(task.get("path"), str) else None
        resolved = spec.resolve(name, task_path)
        if resolved is None:
            unknown.add((name or task_path or "(none recorded)")[:200])
            continue
        digest = task.get("digest")
        if not isinstance(digest, str) or not digest.strip():
            missing.add(resolved)
            continue
        digest = digest.strip().removeprefix("sha256:")
        if not spec.digest_accepted(resolved, digest):
            wrong.setdefault(resolved, digest)
    for name in sorted(unknown):
        problems.append(Problem("task_unknown", path,
                                f"the job's lock.json locks task {name!r}, which is not a task "
                                f"of {spec.slug}"))
    for task in sorted(missing):
        problems.append(Problem("task_digest_missing", path,
                                f"the job's lock.json records no digest for {task}"))
    for task, digest in sorted(wrong.items()):
        problems.append(Problem(
            "task_digest_mismatch", path,
            f"the job's lock.json locks {task} at sha256:{digest[:16]}..., but {spec.slug} has "
            f"{spec.tasks[task][:16]}...: the job ran other task content than this version"))


# A retry of these is a second chance for the agent (best of n), not an infrastructure retry.
_AGENT_FAILURES = ("AgentTimeoutError", "NonZeroAgentExitCodeError")


def _retried_agent_failures(config) -> list[str]:
    if not isinstance(config, dict):
        return []
    retry = config.get("retry")
    if not isinstance(retry, dict) and isinstance(config.get("orchestrator"), dict):
        retry = config["orchestrator"].get("retry")  # Harbor 0.1.x
    if not isinstance(retry, dict):
        return []
    max_retries = retry.get("max_retries")
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries <= 0:
        return []
    include, exclude = retry.get("include_exceptions"), retry.get("exclude_exceptions") or []
    exclude = set(exclude) if isinstance(exclude, list) else set()
    if isinstance(include, list):
        return [e for e in _AGENT_FAILURES if e in include and e not in exclude]
    return [e for e in _AGENT_FAILURES if e not in exclude]


def _check_trial_integrity(trial: ParsedTrial, problems: list[Problem]) -> None:
    if trial.timeout_multiplier != 1.0:
        problems.append(Problem("timeout_multiplier", trial.trial_dir,
                                f"timeout_multiplier is {trial.timeout_multiplier}; it must be "
                                "1.0"))
    for key, value in sorted(trial.overrides.items()):
        if key == "timeout_multiplier":
            continue  # reported above
        code = "timeout_multiplier" if key.endswith("timeout_multiplier") else "override"
        problems.append(Problem(code, trial.trial_dir,
                                f"{key} is set ({str(value)[:80]}); timeout and resource "
                                "overrides are not allowed"))
    if trial.verifier_disabled:
        problems.append(Problem("verifier_disabled", trial.trial_dir,
                                "the verifier was disabled for this trial"))


def _agent_worked(trial: ParsedTrial) -> bool:
    """The agent ran (timing recorded), or the trial claims a pass or used tokens: then its
    trajectory and output are required whatever the timing fields say."""
    return trial.agent_ran or trial.outcome == PASSED or bool(
        trial.input_tokens or trial.output_tokens)


# Harbor's built-in reference agents write no ATIF trajectory: `oracle` runs the task's own
# solution/solve.sh (it leaves agent/oracle.txt), `nop` runs nothing. The site runs both itself
# (evaluation/agents.py), so a re-run, not a replay, is their evidence (verification's verdict
# says which passes it covered).
REFERENCE_AGENTS = frozenset({"oracle", "nop"})


def _reference_agent(trial: ParsedTrial) -> bool:
    agent = trial.agent
    return (agent is not None and agent.name in REFERENCE_AGENTS and agent.import_path is None
            and not agent.model_name)


def _check_trajectory(root: Path, trial: ParsedTrial, problems: list[Problem]) -> None:
    if not _agent_worked(trial):
        return
    if trial.trajectory_path is None and _reference_agent(trial):
        return
    path = f"{trial.trial_dir}/agent/trajectory.json"
    if trial.trajectory_path is None:
        problems.append(Problem("trajectory_missing", path,
                                "the agent ran but wrote no ATIF trajectory"))
        return
    errors = validate_trajectory(root / trial.trajectory_path, label=trial.trajectory_path)
    if errors:
        problems.append(Problem("trajectory_invalid", trial.trajectory_path,
                                "not a valid ATIF trajectory: " + "; ".join(errors)[:1000]))


def _check_artifact(root: Path, spec: BenchmarkSpec, trial: ParsedTrial,
                    problems: list[Problem]) -> None:
    if not trial.spec_task or not _agent_worked(trial):
        return
    wanted = spec.output_for(trial.spec_task)
    found = find_output(root, trial, wanted)
    if found is None and not _no_output_excused(trial, wanted):
        problems.append(Problem(
            "artifact_missing", f"{trial.trial_dir}/artifacts{wanted.rstrip('/')}",
            f"the agent's output {wanted} was not collected (list it in the job's `artifacts`); "
            "the site re-grades from it"))
    elif found is not None:
        trial.artifact_paths = [found]


def _no_output_excused(trial: ParsedTrial, wanted: str) -> bool:
    """An agent that wrote no output simply failed: accepted for a trial that does not claim a
    pass when Harbor tried to collect the path and recorded it as not there (a manifest entry
    with status failed/skipped/empty), or, for Harbor 0.1.x (no artifact collection, no manifest),
    when the trial has no artifacts/ folder at all. A claimed pass always needs its output."""
    if trial.outcome == PASSED:
        return False
    source = "/" + wanted.strip().strip("/")
    if trial.manifest:
        return any(str(m.get("source") or "").rstrip("/") == source
                   and m.get("status") in ("failed", "skipped", "empty")
                   for m in trial.manifest)
    return trial.harbor_version is None and trial.artifacts_dir is None


def _check_claims(trial: ParsedTrial, problems: list[Problem]) -> None:
    if trial.reward_source == "result.json":
        for path, value in trial.reward_file_values.items():
            if abs(value - trial.reward) > 1e-9:
                problems.append(Problem("reward_mismatch", path,
                                        f"{path} says reward {value}; result.json says "
                                        f"{trial.reward}"))
    if not trial.has_result or trial.cost_usd is not None:
        return
    model = trial.agent.model_name if trial.agent else None
    if not model:
        return  # no language model (oracle, nop, scripted agents): no cost to report
    if trial.input_tokens is None and trial.output_tokens is None:
        if trial.agent_ran:
            problems.append(Problem("cost_missing", f"{trial.trial_dir}/result.json",
                                    "agent_result has neither cost_usd nor token counts"))
        return
    cost = pricing.compute_cost(model, trial.input_tokens, trial.cached_tokens,
                                trial.output_tokens)
    if cost is None:
        problems.append(Problem("cost_missing_no_price", f"{trial.trial_dir}/result.json",
                                f"cost missing and no price for model {model!r} in the price "
                                f"table of {pricing.PRICE_TABLE_DATE}"))
        return
    trial.cost_usd, trial.cost_computed = cost, True
