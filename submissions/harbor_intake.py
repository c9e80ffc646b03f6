"""Bridge between the Django-free upload checks (metadata, Harbor validation, secret scanning)
and the database: resolve the benchmark version, build its spec, turn parsed trials into Trial
rows. No writes happen here."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from django.conf import settings

from evaluation.models import BenchmarkVersion
from evaluation.task_specs import load_task_package
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
    tasks, checksums, outputs = {}, {}, {}
    for t in bv.tasks.all():
        tasks[t.name] = t.content_digest
        package_dir = Path(settings.BASE_DIR) / t.package_path
        if t.package_path and package_dir.is_dir():
            package = load_task_package(package_dir)
            outputs[t.name] = package.manifest.metadata.submission_path
            checksums[t.name] = frozenset({harbor_task_checksum(package_dir)})
    return BenchmarkSpec(slug=bv.slug, attempts_per_task=bv.attempts_per_task, tasks=tasks,
                         checksums=checksums, outputs=outputs)


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


def check_upload(*, tree: Path, metadata_text: str) -> CheckedUpload:
    """Every problem of an extracted upload, or the rows to create. Redacts secrets in place."""
    out = CheckedUpload()
    meta = _metadata(tree, metadata_text, out)
    bv = _benchmark(meta.benchmark, out) if meta is not None else None
    if meta is None or bv is None:
        # No benchmark version to check against: still report everything wrong with the job
        # directories in the same response (README: every problem at once).
        out.problems.extend(Problem(p.code, p.path, p.message) for p in validate_jobs(tree))
        return out
    report = validate_submission(tree, meta, _spec(bv),
                                 max_infra_share=settings.SUBMISSION_MAX_INFRA_ERROR_SHARE)
    out.problems.extend(Problem(p.code, p.path, p.message) for p in report.problems)
    if out.problems:
        return out
    out.secret_findings = [dataclasses.asdict(f) for f in scan_and_redact(tree)]
    out.warnings.extend(
        Problem("secret_redacted", f["file"], f"line {f['line']}: a {f['kind']} was redacted")
        for f in out.secret_findings)
    _fill_agent(out, meta, report, bv)
    tasks = {t.name: t for t in bv.tasks.all()}
    for t in report.trials:
        out.trials.append(_trial_row(t, tasks[t.spec_task]))
        if t.cost_computed:
            out.warnings.append(Problem(
                "cost_computed", t.trial_dir,
                f"no cost recorded; computed from tokens with the price table of "
                f"{report.price_table_date}"))
    return out


def _fill_agent(out: CheckedUpload, meta, report, bv) -> None:
    model = meta.models[0]
    out.metadata = meta.model_dump(mode="json")
    out.benchmark_version = bv
    out.harness_slug = _slug(meta.harness)
    out.harness_display = meta.harness
    out.harness_version = meta.harness_version
    out.model_slug = _slug(model.model_name)
    out.model_display = model.model_display_name
    out.model_provider = model.model_provider
    out.agent_display = meta.agent_display_name
    agent = report.agent_config
    out.agent_settings = {
        "harbor_agent": agent.name if agent else None,
        "import_path": agent.import_path if agent else None,
        "model_name": agent.model_name if agent else None,
        "kwargs": dict(agent.kwargs) if agent else {},
    }


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
        "flags": [FLAG_INFRA_UNCONFIRMED] if t.outcome == Outcome.INFRA_ERROR else [],
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
