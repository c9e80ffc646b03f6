"""Upload intake: stream -> extract safely -> validate everything -> store -> one transaction.

Nothing is stored and no row is created for a rejected upload (and no quota is taken); an
accepted upload is stored completely before its row commits, and its files are removed if the
transaction fails, so nothing half-stored remains either way.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils import timezone

from evaluation import archive as archive_mod
from evaluation.digests import sha256_file
from evaluation.models import AIModel, BenchmarkVersion, Harness
from evaluation.services import agent_get_or_create
from submissions import harbor_intake
from submissions.metadata import MetadataError, parse_metadata
from submissions.models import Submission, SubmissionStatus, Trial, ValidationProblem
from submissions.problems import Problem
from submissions.services import (
    IdempotencyConflict,
    SubmissionError,
    quota_consume,
    submission_transition,
)
from submissions.verification import verification_enqueue

logger = logging.getLogger(__name__)


class SubmissionRejected(SubmissionError):
    """The upload is invalid; ``problems`` lists every problem found, each naming its file."""

    code = "invalid_submission"

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{len(problems)} problem(s) in the submission")
        self.problems = problems


def request_digest(*, archive_path: Path, metadata_text: str) -> str:
    """What an idempotent retry must repeat exactly: the archive bytes and the metadata."""
    return hashlib.sha256(
        (sha256_file(archive_path) + "\0" + hashlib.sha256(metadata_text.encode()).hexdigest())
        .encode()
    ).hexdigest()


def _replay(*, owner, idempotency_key: str, digest: str) -> Submission | None:
    if not idempotency_key:
        return None
    existing = Submission.objects.filter(owner=owner, idempotency_key=idempotency_key).first()
    if existing is None:
        return None
    if existing.request_digest != digest:
        raise IdempotencyConflict("this Idempotency-Key was already used with a different body")
    return existing


def metadata_text_problems(metadata_text: str) -> list[Problem]:
    """Problems of a metadata file sent beside the archive (none when it was not sent)."""
    if not metadata_text.strip():
        return []
    try:
        parse_metadata(metadata_text, label="metadata")
    except MetadataError as exc:
        return [Problem(p.code, p.path, p.message) for p in exc.problems]
    return []


def submission_receive(
    *, owner, archive_path: Path, metadata_text: str = "", idempotency_key: str = "",
    archive_name: str | None = None,
) -> tuple[Submission, bool]:
    """Validate and store one upload. Returns (submission, created); a retry with the same
    Idempotency-Key and body returns the original submission with created=False.

    Raises SubmissionRejected (every problem at once), QuotaExceeded, IdempotencyConflict.
    """
    digest = request_digest(archive_path=archive_path, metadata_text=metadata_text)
    replay = _replay(owner=owner, idempotency_key=idempotency_key, digest=digest)
    if replay is not None:
        return replay, False
    staging_root = Path(settings.SUBMISSION_STAGING_DIR)
    staging_root.mkdir(mode=0o700, parents=True, exist_ok=True)
    with archive_mod.staging_dir(staging_root) as stage:
        tree = stage / "tree"
        try:
            archive_mod.safe_extract(archive_path, tree, claimed_name=archive_name)
        except archive_mod.ArchiveError as exc:
            # Nothing inside an unsafe archive is read; the metadata sent beside it still is.
            problems = [Problem(exc.code, exc.member or "archive", str(exc))]
            problems += metadata_text_problems(metadata_text)
            raise SubmissionRejected(problems) from exc
        checked = harbor_intake.check_upload(tree=tree, metadata_text=metadata_text)
        if checked.problems:
            raise SubmissionRejected(checked.problems)
        try:
            submission = _store(owner=owner, tree=tree, archive_path=archive_path,
                                checked=checked, digest=digest, idempotency_key=idempotency_key)
        except IntegrityError:
            # A concurrent retry with the same Idempotency-Key won the race: replay it.
            replay = _replay(owner=owner, idempotency_key=idempotency_key, digest=digest)
            if replay is None:
                raise
            return replay, False
    return submission, True


def _store(*, owner, tree: Path, archive_path: Path, checked, digest: str,
           idempotency_key: str) -> Submission:
    prefix = f"submissions/{timezone.now():%Y/%m/%d}/{digest[:16]}-{sha256_file(archive_path)[:8]}"
    stored: list[str] = []
    try:
        with transaction.atomic():
            quota_consume(user=owner)
            submission = _create_rows(owner=owner, checked=checked, digest=digest,
                                      idempotency_key=idempotency_key, prefix=prefix,
                                      archive_path=archive_path)
            stored = _store_files(tree=tree, archive_path=archive_path, prefix=prefix)
            submission_transition(submission=submission, to_status=SubmissionStatus.VALIDATING,
                                  actor=owner, note="archive extracted safely")
            submission_transition(
                submission=submission, to_status=SubmissionStatus.QUEUED, actor=owner,
                note=f"validated: {submission.trials_total} trials", queued_at=timezone.now())
            # The job row commits with the submission; it is published to the broker on commit,
            # and the reconciler re-publishes it if the broker is down (R5).
            verification_enqueue(submission=submission)
    except BaseException:
        for name in stored:
            default_storage.delete(name)
        raise
    return submission


def _create_rows(*, owner, checked, digest, idempotency_key, prefix, archive_path) -> Submission:
    meta = checked.metadata
    bv: BenchmarkVersion = checked.benchmark_version
    harness, _ = Harness.objects.get_or_create(
        slug=checked.harness_slug,
        defaults={"display_name": checked.harness_display, "family": checked.harness_slug},
    )
    model, _ = AIModel.objects.get_or_create(
        slug=checked.model_slug,
        defaults={"display_name": checked.model_display, "provider": checked.model_provider},
    )
    agent = agent_get_or_create(harness=harness, model=model,
                                harness_version=checked.harness_version,
                                agent_settings=checked.agent_settings,
                                display_name=checked.agent_display)
    submission = Submission.objects.create(
        agent=agent, benchmark_version=bv, owner=owner, status=SubmissionStatus.RECEIVED,
        source="upload", notes=(meta.get("notes") or "")[:5000], metadata=meta,
        submitted_on=timezone.now().date(), archive=f"{prefix}/archive",
        archive_sha256=sha256_file(archive_path), archive_bytes=archive_path.stat().st_size,
        files_prefix=f"{prefix}/tree", idempotency_key=idempotency_key, request_digest=digest,
        secret_findings=checked.secret_findings, trials_total=len(checked.trials),
    )
    submission.events.create(to_status=SubmissionStatus.RECEIVED, actor=owner, note="uploaded")
    ValidationProblem.objects.bulk_create(
        [ValidationProblem(submission=submission, code=w.code, path=w.path, message=w.message)
         for w in checked.warnings])
    Trial.objects.bulk_create([Trial(submission=submission, **t) for t in checked.trials])
    return submission


def _store_files(*, tree: Path, archive_path: Path, prefix: str) -> list[str]:
    """Copy the (redacted) tree and the original archive into storage. Returns stored names."""
    stored: list[str] = []
    with open(archive_path, "rb") as fh:
        stored.append(default_storage.save(f"{prefix}/archive", File(fh)))
    for path in sorted(tree.rglob("*")):
        if path.is_file() and not path.is_symlink():
            rel = path.relative_to(tree).as_posix()
            with open(path, "rb") as fh:
                stored.append(default_storage.save(f"{prefix}/tree/{rel}", File(fh)))
    return stored


def staging_cleanup() -> int:
    """Remove staging folders left by interrupted uploads (run periodically)."""
    root = Path(settings.SUBMISSION_STAGING_DIR)
    if not root.exists():
        return 0
    removed = archive_mod.sweep_stale_staging(root, older_than=timedelta(hours=6))
    incoming = Path(settings.FILE_UPLOAD_TEMP_DIR)
    for stale in incoming.glob("*.upload*") if incoming.exists() else []:
        if timezone.now().timestamp() - stale.stat().st_mtime > 6 * 3600:
            stale.unlink(missing_ok=True)
            removed += 1
    return removed



