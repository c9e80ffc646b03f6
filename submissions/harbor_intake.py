"""Bridge between the Django-free upload checks (metadata, Harbor validation, secret scanning)
and the database: resolve the benchmark version, build its spec, turn parsed trials into Trial
rows. No writes happen here."""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from django.conf import settings

from evaluation.agents import SITE_AGENTS, is_site_agent
from evaluation.harness_versions import plain_version
from evaluation.models import BenchmarkVersion
from evaluation.published import PublishedImagesError, published_image, served_digests
from evaluation.task_specs import load_task_package
from submissions.flags import FLAG_NO_CLAIMED_GRADE
from submissions.harbor import site_grades_alone
from submissions.metadata import MetadataError, find_metadata_file, parse_metadata
from submissions.models import FLAG_INFRA_UNCONFIRMED, Outcome, site_outcome
from submissions.problems import Problem
from submissions.secrets import scan_and_redact
from submissions.validation import (
    BenchmarkSpec,
    harbor_task_checksum,
    validate_jobs,
    validate_submission,
)

logger = logging.getLogger(__name__)


@dataclass
class CheckedUpload:
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    benchmark_version: BenchmarkVersion | None = None
    harness_slug: str = ""
    harness_display: str = ""
    harness_version: str = ""
    model_slug: str = ""
    model_display: str = ""
    model_provider: str = ""
    agent_display: str = ""
    agent_settings: dict = field(default_factory=dict)
    trials: list[dict] = field(default_factory=list)
    secret_findings: list[dict] = field(default_factory=list)
    is_reference: bool = False


# What a reference run shows where a submission shows its model (it carries none).
REFERENCE_MODEL_SLUG = "reference-run-no-model"
REFERENCE_MODEL_DISPLAY = "reference run, no model"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "unknown"


def _metadata(tree: Path, metadata_text: str, out: CheckedUpload):
    try:
        if metadata_text.strip():
            return parse_metadata(metadata_text, label="metadata")
        path = find_metadata_file(tree)
        if path is None:
            out.problems.append(Problem(
                "missing_metadata", "metadata",
                "send a metadata file (form field 'metadata') or put metadata.yaml at the "
                "archive root"))
            return None
        return parse_metadata(path.read_bytes(), label=path.name)
    except MetadataError as exc:
        # One problem per bad field, each naming it.
        out.problems.extend(Problem(p.code, p.path, p.message) for p in exc.problems)
        return None


def _spec(bv: BenchmarkVersion):
    tasks, checksums, outputs, served = {}, {}, {}, {}
    for t in bv.tasks.all():
        tasks[t.name] = t.content_digest
        package_dir = Path(settings.BASE_DIR) / t.package_path
        if t.package_path and package_dir.is_dir():
            package = load_task_package(package_dir)
            outputs[t.name] = package.manifest.metadata.submission_path
            # The packages served to `harbor run -d` (task.toml naming the published image)
            # are this package too: their Harbor digests are accepted beside its own.
            also = (served_digests(package_dir, t.content_digest)
                    if package.content_digest == t.content_digest else set())
            served[t.name] = frozenset(digest for digest, _ in also)
            checksums[t.name] = frozenset({harbor_task_checksum(package_dir)}
                                          | {checksum for _, checksum in also})
    return BenchmarkSpec(slug=bv.slug, attempts_per_task=bv.attempts_per_task, tasks=tasks,
                         checksums=checksums, outputs=outputs, served=served)


def served_run(bv: BenchmarkVersion) -> dict | None:
    """What the Submit page needs to show `harbor run -d` for ``bv``: every task's package has
    a published image (evaluation.published) and /registry.json points Harbor at the served
    packages (REGISTRY_GIT_URL or REPOSITORY_URL, at REGISTRY_GIT_COMMIT). Returns the output
    paths to collect (one --artifact each), or None: then the page shows the clone path."""
    if not ((settings.REGISTRY_GIT_URL or settings.REPOSITORY_URL) and settings.REGISTRY_GIT_COMMIT):
        return None
    outputs: set[str] = set()
    for t in bv.tasks.all():
        package_dir = Path(settings.BASE_DIR) / (t.package_path or "")
        try:
            image = published_image(t.content_digest)
        except PublishedImagesError:  # a broken record: `manage.py check` names it (E003)
            logger.exception("the Submit page shows the clone path: broken published-images record")
            return None
        if not (t.package_path and image and (package_dir / "task.toml").is_file()):
            return None
        path = load_task_package(package_dir).manifest.metadata.submission_path
        outputs.add(path.rstrip("/") or path)
    return {"artifacts": sorted(outputs, key=lambda p: (p != "/workspace/submission.json", p))}


def submittable_benchmark_versions() -> list[BenchmarkVersion]:
    """Versions this site can re-grade (so accepts uploads for): not reconstructed, with tasks,
    every one of them runnable here. Two queries."""
    versions = list(BenchmarkVersion.objects.filter(is_reconstructed=False)
                    .prefetch_related("tasks").order_by("name", "version"))
    return [bv for bv in versions
            if bv.tasks.all() and all(t.runnable_here for t in bv.tasks.all())]


def _benchmark(slug: str, out: CheckedUpload) -> BenchmarkVersion | None:
    name, _, version = slug.partition("@")
    bv = BenchmarkVersion.objects.filter(name=name, version=version).first()
    if bv is None:
        out.problems.append(Problem("unknown_benchmark", "metadata:benchmark",
                                    f"no benchmark version {slug!r} on this site"))
        return None
    if bv.is_reconstructed or not bv.tasks.exists() or bv.tasks.filter(
            runnable_here=False).exists():
        out.problems.append(Problem(
            "benchmark_not_verifiable", "metadata:benchmark",
            f"{slug} cannot be re-graded on this site (its data is licensed); submit to a "
            "version whose tasks run here, e.g. healthagentbench-synthetic@1.0"))
        return None
    return bv


def check_upload(*, tree: Path, metadata_text: str, uploader_is_staff: bool = False
                 ) -> CheckedUpload:
    """Every problem of an extracted upload, or the rows to create. Redacts secrets in place.
    ``uploader_is_staff``: a maintainer's upload may register a reference run (metadata
    ``reference: true``)."""
    out = CheckedUpload()
    meta = _metadata(tree, metadata_text, out)
    bv = _benchmark(meta.benchmark, out) if meta is not None else None
    if meta is None or bv is None:
        # No benchmark version to check against: still report everything wrong with the job
        # directories in the same response (docs/submitting.md: every problem at once).
        out.problems.extend(Problem(p.code, p.path, p.message) for p in validate_jobs(tree))
        return out
    report = validate_submission(tree, meta, _spec(bv),
                                 max_infra_share=settings.SUBMISSION_MAX_INFRA_ERROR_SHARE)
    out.problems.extend(Problem(p.code, p.path, p.message) for p in report.problems)
    out.is_reference = _reference_run(meta, report, bv, uploader_is_staff, out.problems)
    if out.problems:
        return out
    out.secret_findings = [dataclasses.asdict(f) for f in scan_and_redact(tree)]
    out.warnings.extend(
        Problem("secret_redacted", f["file"], f"line {f['line']}: a {f['kind']} was redacted")
        for f in out.secret_findings)
    _fill_agent(out, meta, report, bv)
    tasks = {t.name: t for t in bv.tasks.select_related("category")}
    for t in report.trials:
        out.trials.append(_trial_row(t, tasks[t.spec_task]))
        if t.cost_computed:
            out.warnings.append(Problem(
                "cost_computed", t.trial_dir,
                f"no cost recorded; computed from tokens with the price table of "
                f"{report.price_table_date}"))
    return out


def _site_agent_names(meta, report) -> list[str]:
    """The site's own agents this upload names: its metadata's harness, the trials' Harbor
    agent (config and result.json) and an import path's module or class."""
    names = [meta.harness]
    agent = report.agent_config
    if agent is not None:
        names.append(agent.name or "")
        if agent.import_path:
            module, _, cls = agent.import_path.partition(":")
            names += [module.rsplit(".", 1)[-1], cls.removesuffix("Agent")]
    names += [t.agent_info_name or "" for t in report.trials[:1]]
    return sorted({n.strip() for n in names if is_site_agent(n)})


def _reference_run(meta, report, bv: BenchmarkVersion, staff: bool,
                   problems: list[Problem]) -> bool:
    """Whether the upload is a labelled reference run (never ranked, no model), adding the
    problem when it may not be one. The site's own agents (evaluation.agents.SITE_AGENTS) are
    never a submitter's harness: such an upload is accepted only as a reference run, on a
    try-out version (``allows_reference_runs``) or from a maintainer whose metadata says
    ``reference: true``. Decided from what the site knows (the version, the uploader), never
    from a name the submitter chose alone."""
    site_agents = _site_agent_names(meta, report)
    if not site_agents and not meta.reference:
        return False
    if bv.allows_reference_runs or (staff and meta.reference):
        return True
    tryouts = ", ".join(v.slug for v in BenchmarkVersion.objects.filter(
        allows_reference_runs=True).order_by("name", "version")) or "none on this site"
    if site_agents:
        problems.append(Problem(
            "site_agent_harness", "metadata:harness",
            f"the harness {site_agents[0]!r} is one of the site's own agents "
            f"({', '.join(sorted(SITE_AGENTS))}), which the site runs itself; it is never a "
            f"submitter's harness, and {bv.slug} ranks submitted agents only. Submit your own "
            f"agent's run, or try the path out on a try-out version ({tryouts}), where it is "
            "accepted as a labelled reference run (never ranked); a maintainer may register a "
            "reference run with `reference: true` in the metadata"))
    else:
        problems.append(Problem(
            "reference_not_allowed", "metadata:reference",
            f"`reference: true` is for maintainers: a reference run of {bv.slug} is registered "
            f"by a maintainer (on the try-out versions, {tryouts}, anyone's reference run is "
            "accepted); remove it to submit this run for ranking"))
    return False


def _fill_agent(out: CheckedUpload, meta, report, bv) -> None:
    model = meta.models[0]
    out.metadata = meta.model_dump(mode="json")
    out.benchmark_version = bv
    out.harness_slug = _slug(meta.harness)
    out.harness_display = meta.harness
    # Unstated in the metadata: the version the trials recorded, so the re-run compares it.
    recorded = report.agent_version if report.agent_version != "unknown" else None
    out.harness_version = meta.harness_version or plain_version(recorded or "")
    out.model_slug = _slug(model.model_name)
    out.model_display = model.model_display_name
    out.model_provider = model.model_provider
    if out.is_reference:  # a reference run carries no model, whatever the metadata lists
        out.model_slug, out.model_display, out.model_provider = (
            REFERENCE_MODEL_SLUG, REFERENCE_MODEL_DISPLAY, "none")
    out.agent_display = meta.agent_display_name
    agent = report.agent_config
    out.agent_settings = {
        "harbor_agent": agent.name if agent else None,
        "import_path": agent.import_path if agent else None,
        "model_name": agent.model_name if agent else None,
        "kwargs": dict(agent.kwargs) if agent else {},
    }
    helpers = [m.model_name for m in meta.models[1:] if m.role == "helper"]
    if helpers:  # only then: the settings (and so the agent) of other uploads are unchanged
        out.agent_settings["helper_models"] = helpers


def _claim_flags(t, benchmark_task) -> list[str]:
    """A claimed infrastructure error waits for the site's confirmation; a judged trial whose
    verifier had no judge claims no grade at all (the site's re-grade decides it)."""
    if t.outcome != Outcome.INFRA_ERROR:
        return []
    if site_grades_alone(benchmark_task.category.slug, t.exception_type, t.reward):
        return [FLAG_NO_CLAIMED_GRADE]
    return [FLAG_INFRA_UNCONFIRMED]


def _trial_row(t, benchmark_task) -> dict:
    soft = {k: v for k, v in (t.rewards or {}).items() if k != "reward"}
    return {
        "benchmark_task": benchmark_task,
        "attempt": t.attempt,
        # Until the site checks it, the site's outcome is the claim (verification level
        # "claimed"), except that a claimed infrastructure error is a failure until the site
        # confirms it; verification updates it (submissions.services.trial_check_record).
        "outcome": site_outcome(claimed=t.outcome, verified_reward=None),
        "success": site_outcome(claimed=t.outcome, verified_reward=None) == Outcome.PASSED,
        "flags": _claim_flags(t, benchmark_task),
        "claimed_outcome": t.outcome,
        "claimed_success": t.outcome == Outcome.PASSED,
        "reward": t.reward,
        "soft_metrics": soft,
        "cost_usd": Decimal(str(round(t.cost_usd, 4))) if t.cost_usd is not None else None,
        "input_tokens": t.input_tokens,
        "cached_tokens": t.cached_tokens,
        "output_tokens": t.output_tokens,
        "duration_s": t.duration_s,
        "trial_dir": t.trial_dir,
        "trajectory_path": t.trajectory_path or "",
        "artifact_paths": list(t.artifact_paths),
        "cost_computed": t.cost_computed,
    }
