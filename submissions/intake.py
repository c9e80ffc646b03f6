"""Upload intake, in two halves (R14: readers are never queued behind upload processing).

The web request (``submission_receive``) only keeps what it was sent: the archive, already
streamed to disk by the upload handler, is moved into storage, and the submission row commits in
state `received` with its idempotency key and a day's quota; the intake message is published on
commit. Everything that reads the archive runs on the `intake` queue (``submission_intake``,
the Celery task ``submissions.intake_upload``): safe extraction in a private staging folder,
metadata and Harbor validation, the secret scan, then one transaction that writes the catalogue
rows, the trials and the move to `queued` (with its verification job), or the problems and the
move to `refused` (the quota is given back and the archive deleted). Staging is removed either
way, so nothing half-stored remains; a lost message or a killed worker is picked up again by the
intake reaper (``intake_reap``), so no accepted upload is lost.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from datetime import timedelta
from functools import partial
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import cache
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from config.celery import app as celery_app
from evaluation import archive as archive_mod
from evaluation.digests import sha256_file
from evaluation.models import AIModel, Harness
from evaluation.services import agent_get_or_create
from submissions import harbor_intake
from submissions.metadata import MetadataError, parse_metadata
from submissions.models import (
    Submission,
    SubmissionEvent,
    SubmissionStatus,
    Trial,
    ValidationProblem,
)
from submissions.problems import Problem
from submissions.services import (
    IdempotencyConflict,
    InvalidTransition,
    StorageUnavailable,
    quota_consume,
    quota_refund,
    submission_transition,
)
from submissions.linking import submission_link
from submissions.verification import rerun_commit, verification_enqueue
from submissions.verification.lease import worker_identity

logger = logging.getLogger(__name__)

# Published by name (submissions/tasks.py defines it; its body imports this module, HS14).
INTAKE_TASK = "submissions.intake_upload"
INTAKE_REAPER_LOCK = "submissions:reap-stuck-intake"


def request_digest(*, archive_sha256: str, metadata_text: str) -> str:
    """What an idempotent retry must repeat exactly: the archive bytes and the metadata."""
    return hashlib.sha256(
        (archive_sha256 + "\0" + hashlib.sha256(metadata_text.encode()).hexdigest()).encode()
    ).hexdigest()


NEW_KEY_HINT = "key=$(python3 -c 'import uuid; print(uuid.uuid4())')"


def _replay(*, owner, idempotency_key: str, digest: str) -> Submission | None:
    """The submission a retry repeats: the same key and the same body. A key whose upload was
    refused may carry a new body (the corrected job directory): no replay, and
    _release_refused_key frees the key. Any other new body under a used key is a conflict."""
    if not idempotency_key:
        return None
    existing = Submission.objects.filter(owner=owner, idempotency_key=idempotency_key).first()
    if existing is None:
        return None
    if existing.request_digest == digest:
        return existing
    if existing.status == SubmissionStatus.REFUSED:
        return None
    raise IdempotencyConflict(
        f"this Idempotency-Key belongs to submission {existing.pk} ({existing.status}), "
        "uploaded with a different archive or metadata; a key names one upload. For a new "
        f"upload, make a new key ({NEW_KEY_HINT}) and send it again")


def _release_refused_key(*, owner, idempotency_key: str, digest: str) -> list[Submission]:
    """A corrected upload takes over the key of its refused predecessor (which keeps its
    problems and history, without the key): the predecessors released. Inside the caller's
    transaction, before the new row; two corrected uploads with one key then race on the unique
    key (the loser replays or conflicts)."""
    if not idempotency_key:
        return []
    released = list(Submission.objects.select_for_update()
                    .filter(owner=owner, idempotency_key=idempotency_key,
                            status=SubmissionStatus.REFUSED)
                    .exclude(request_digest=digest))
    Submission.objects.filter(pk__in=[s.pk for s in released]).update(idempotency_key="")
    return released


def metadata_text_problems(metadata_text: str) -> list[Problem]:
    """Problems of a metadata file sent beside the archive (none when it was not sent)."""
    if not metadata_text.strip():
        return []
    try:
        parse_metadata(metadata_text, label="metadata")
    except MetadataError as exc:
        return [Problem(p.code, p.path, p.message) for p in exc.problems]
    return []


class _StagedFile(File):
    """The upload handler's temporary file: the filesystem storage moves it into place (a
    rename on the same disk) instead of copying 200 MB inside the request; other storages
    read it as any file."""

    def __init__(self, path: Path):
        super().__init__(open(path, "rb"), name=path.name)
        self._path = path

    def temporary_file_path(self) -> str:
        return str(self._path)


def _prefix(submission: Submission) -> str:
    return (f"submissions/{submission.created_at:%Y/%m/%d}/{submission.pk}-"
            f"{submission.archive_sha256[:12]}")


# --- the web half ------------------------------------------------------------------------------


def submission_receive(
    *, owner, archive_path: Path, metadata_text: str = "", idempotency_key: str = "",
    archive_name: str | None = None, archive_sha256: str | None = None,
) -> tuple[Submission, bool]:
    """Keep one upload for the intake worker. Returns (submission, created); a retry with the
    same Idempotency-Key and body returns the original submission with created=False. The key
    of a refused upload may be sent again with a corrected body: a new submission takes it.

    The archive is not read here (beyond its hash): its problems are found by the intake worker
    and shown on the status page and API. ``archive_sha256``: the hash the upload handler
    computed while writing the file (``submissions.uploads.uploaded_sha256``); without it the
    file is read to hash it. Raises QuotaExceeded, IdempotencyConflict.
    """
    archive_sha = archive_sha256 or sha256_file(archive_path)
    digest = request_digest(archive_sha256=archive_sha, metadata_text=metadata_text)
    replay = _replay(owner=owner, idempotency_key=idempotency_key, digest=digest)
    if replay is not None:
        return replay, False
    stored = ""
    try:
        with transaction.atomic():
            quota_consume(user=owner)
            released = _release_refused_key(owner=owner, idempotency_key=idempotency_key,
                                             digest=digest)
            submission = Submission.objects.create(
                owner=owner, status=SubmissionStatus.RECEIVED, source="upload",
                submitted_on=timezone.now().date(), archive_sha256=archive_sha,
                archive_bytes=archive_path.stat().st_size, idempotency_key=idempotency_key,
                request_digest=digest, upload_name=(archive_name or "")[:300],
                upload_metadata=metadata_text)
            submission.events.create(to_status=SubmissionStatus.RECEIVED, actor=owner,
                                      note="uploaded; waiting for validation")
            for old in released:
                old.events.create(from_status=old.status, to_status=old.status, actor=owner,
                                  note="its Idempotency-Key was reused by the corrected upload "
                                       f"{submission.pk}")
            stored = _store_archive(submission, archive_path)
            Submission.objects.filter(pk=submission.pk).update(archive=stored)
            submission.archive = stored
            transaction.on_commit(partial(intake_publish, submission_id=submission.pk),
                                  robust=True)
    except IntegrityError:
        _delete_quietly(stored)
        # A concurrent retry with the same Idempotency-Key won the race: replay it.
        replay = _replay(owner=owner, idempotency_key=idempotency_key, digest=digest)
        if replay is None:
            raise
        return replay, False
    except BaseException:
        _delete_quietly(stored)
        raise
    return submission, True


def _store_archive(submission: Submission, archive_path: Path) -> str:
    """Save the archive under the submission's prefix. A store that is down or hung raises
    StorageUnavailable (the caller's transaction then keeps nothing: no row, no quota used);
    S3 makes an object visible only once it is complete, so no half-stored archive is left."""
    try:
        with _StagedFile(archive_path) as fh:
            return default_storage.save(f"{_prefix(submission)}/archive", fh)
    except (BotoCoreError, ClientError, OSError) as exc:
        logger.warning("could not store the archive of submission %s: %s", submission.pk, exc)
        raise StorageUnavailable("the upload store is unavailable; send the upload again "
                                 "in a minute (nothing was kept)") from exc


def intake_publish(*, submission_id: int) -> bool:
    """Send the submission id to the intake queue. Never raises: False when the broker is down
    (the intake reaper publishes it again)."""
    try:
        celery_app.send_task(INTAKE_TASK, args=[submission_id], queue=settings.INTAKE_QUEUE)
    except Exception as exc:  # noqa: BLE001 - the broker's errors vary by transport
        logger.warning("could not publish the intake of submission %s: %s", submission_id, exc)
        return False
    Submission.objects.filter(
        pk=submission_id, status__in=[SubmissionStatus.RECEIVED, SubmissionStatus.VALIDATING]
    ).update(intake_published_at=timezone.now())
    return True


# --- the worker half ---------------------------------------------------------------------------


class _ClaimLost(Exception):
    """Another worker took this intake over (ours outlived INTAKE_STALE_AFTER_S)."""


def submission_intake(*, submission_id: int) -> str:
    """Validate one received upload and move it to `queued` or `refused`. Idempotent: a
    duplicate message, or one for an upload another worker is validating, does nothing.
    Returns what happened (for logs and tests)."""
    submission = _intake_claim(submission_id)
    if submission is None:
        return "not claimed"
    claimed_at = submission.intake_started_at
    if submission.intake_attempts > settings.INTAKE_MAX_ATTEMPTS:
        _refuse(submission, claimed_at, [Problem(
            "intake_failed", "archive",
            f"the site could not process this upload in {settings.INTAKE_MAX_ATTEMPTS} "
            "attempts (its worker stopped each time); please upload it again or report it")])
        return "refused"
    staging_root = Path(settings.SUBMISSION_STAGING_DIR)
    staging_root.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        with archive_mod.staging_dir(staging_root) as stage:
            return _validate_and_store(submission, claimed_at, stage)
    except SoftTimeLimitExceeded:
        _refuse(submission, claimed_at, [Problem(
            "intake_timeout", "archive",
            f"validating this upload took longer than {settings.INTAKE_TIME_LIMIT_S} s")])
        return "refused"
    except _ClaimLost:
        logger.warning("intake of submission %s: taken over by another worker", submission_id)
        return "claim lost"
    except Exception:
        # Storage or database trouble (the task retries it), or a bug: give the claim back so
        # the retry (or the reaper's next publish) can take it at once.
        Submission.objects.filter(pk=submission_id, status=SubmissionStatus.VALIDATING,
                                  intake_started_at=claimed_at).update(intake_started_at=None)
        raise


def _intake_claim(submission_id: int) -> Submission | None:
    """Take the upload: received -> validating (compare-and-swap), or a validating one whose
    claim is stale or was given back. None if there is nothing to do."""
    now = timezone.now()
    current = Submission.objects.filter(pk=submission_id).first()
    if current is None:
        return None
    if current.status == SubmissionStatus.RECEIVED:
        try:
            return submission_transition(
                submission=current, to_status=SubmissionStatus.VALIDATING,
                note=f"validation started by {worker_identity()}", intake_started_at=now,
                intake_attempts=F("intake_attempts") + 1)
        except InvalidTransition:
            return None  # another worker claimed it first
    stale_before = now - timedelta(seconds=settings.INTAKE_STALE_AFTER_S)
    if current.status != SubmissionStatus.VALIDATING or (
            current.intake_started_at is not None and current.intake_started_at >= stale_before):
        return None
    with transaction.atomic():
        taken = Submission.objects.filter(
            pk=submission_id, status=SubmissionStatus.VALIDATING,
            intake_started_at=current.intake_started_at,
        ).update(intake_started_at=now, intake_attempts=F("intake_attempts") + 1, updated_at=now)
        if taken != 1:
            return None
        SubmissionEvent.objects.create(
            submission_id=submission_id, from_status=SubmissionStatus.VALIDATING,
            to_status=SubmissionStatus.VALIDATING,
            note=f"validation taken over by {worker_identity()}")
    current.refresh_from_db()
    return current


def _local_archive(submission: Submission, stage: Path) -> Path:
    """The stored archive as a local file: in place on the filesystem storage, else a copy."""
    try:
        return Path(default_storage.path(submission.archive))
    except NotImplementedError:  # object storage: stream it into the staging folder
        local = stage / "archive"
        with default_storage.open(submission.archive, "rb") as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        return local


def _validate_and_store(submission: Submission, claimed_at, stage: Path) -> str:
    archive_path = _local_archive(submission, stage)
    tree = stage / "tree"
    metadata_text = submission.upload_metadata
    try:
        archive_mod.safe_extract(archive_path, tree, claimed_name=submission.upload_name or None)
    except archive_mod.ArchiveError as exc:
        # Nothing inside an unsafe archive is read; the metadata sent beside it still is.
        problems = [Problem(exc.code, exc.member or "archive", str(exc))]
        _refuse(submission, claimed_at, problems + metadata_text_problems(metadata_text))
        return "refused"
    checked = harbor_intake.check_upload(
        tree=tree, metadata_text=metadata_text,
        uploader_is_staff=submission.owner is not None and submission.owner.is_staff)
    if checked.problems:
        _refuse(submission, claimed_at, checked.problems)
        return "refused"
    _accept(submission, claimed_at, tree=tree, checked=checked)
    return "queued"


def _hold_claim(submission: Submission, claimed_at) -> None:
    """Inside the final transaction: lock the row and check the claim is still ours."""
    held = Submission.objects.select_for_update().filter(
        pk=submission.pk, status=SubmissionStatus.VALIDATING, intake_started_at=claimed_at)
    if not held.exists():
        raise _ClaimLost()


def _refuse(submission: Submission, claimed_at, problems: list[Problem]) -> None:
    """One transaction: every problem stored for the status page, the move to `refused`, the
    day's quota given back. The archive is deleted once that commits (nothing kept of it)."""
    with transaction.atomic():
        _hold_claim(submission, claimed_at)
        ValidationProblem.objects.filter(submission=submission).delete()  # an earlier attempt
        ValidationProblem.objects.bulk_create(
            [ValidationProblem(submission=submission, code=p.code, path=p.path[:500],
                               message=p.message) for p in problems])
        archive = submission.archive
        submission_transition(
            submission=submission, to_status=SubmissionStatus.REFUSED,
            note=f"refused: {len(problems)} problem(s)", archive="",
            status_reason=f"{len(problems)} problem(s) in the upload; see the list below")
        if submission.owner is not None:
            quota_refund(user=submission.owner, day=submission.created_at.date())
        transaction.on_commit(partial(_delete_quietly, archive), robust=True)


def _accept(submission: Submission, claimed_at, *, tree: Path, checked) -> None:
    prefix = _prefix(submission)
    stored: list[str] = []
    try:
        stored = _store_tree(tree=tree, prefix=prefix)
        with transaction.atomic():
            _hold_claim(submission, claimed_at)
            _create_rows(submission=submission, checked=checked, prefix=prefix)
            submission_transition(
                submission=submission, to_status=SubmissionStatus.QUEUED,
                note=(f"validated: {len(checked.trials)} trials"
                      + ("; a reference run (never ranked, no model)"
                         if checked.is_reference else "")),
                queued_at=timezone.now())
            # Re-uploads of the same runs are linked first: the chain's first upload keys the
            # re-run order, which is fixed and committed now, before any check runs.
            submission_link(submission_id=submission.pk, tree=tree)
            rerun_commit(submission_id=submission.pk)
            # The job row commits with the submission; it is published to the broker on commit,
            # and the reconciler re-publishes it if the broker is down (R5).
            verification_enqueue(submission=submission)
    except BaseException:
        for name in stored:
            _delete_quietly(name)
        raise


def _create_rows(*, submission: Submission, checked, prefix: str) -> None:
    meta = checked.metadata
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
    Submission.objects.filter(pk=submission.pk).update(
        agent=agent, benchmark_version=checked.benchmark_version,
        notes=(meta.get("notes") or "")[:5000], metadata=meta, files_prefix=f"{prefix}/tree",
        is_reference=checked.is_reference,
        on_tryout_version=checked.benchmark_version.allows_reference_runs,
        secret_findings=checked.secret_findings, trials_total=len(checked.trials),
        updated_at=timezone.now())
    # Rows of an earlier attempt that died before its commit do not exist (one transaction).
    ValidationProblem.objects.filter(submission=submission).delete()
    ValidationProblem.objects.bulk_create(
        [ValidationProblem(submission=submission, code=w.code, path=w.path, message=w.message)
         for w in checked.warnings])
    Trial.objects.bulk_create([Trial(submission=submission, **t) for t in checked.trials])


def _store_tree(*, tree: Path, prefix: str) -> list[str]:
    """Copy the (redacted) tree into storage under the submission's own prefix. Files an
    earlier attempt left there (killed mid-copy) are replaced. Returns stored names."""
    stored: list[str] = []
    for path in sorted(tree.rglob("*")):
        if path.is_file() and not path.is_symlink():
            name = f"{prefix}/tree/{path.relative_to(tree).as_posix()}"
            if default_storage.exists(name):
                default_storage.delete(name)
            with open(path, "rb") as fh:
                saved = default_storage.save(name, File(fh))
            stored.append(saved)
            if saved != name:
                raise RuntimeError(f"storage renamed {name} to {saved}")
    return stored


def _delete_quietly(name: str) -> None:
    if not name:
        return
    try:
        default_storage.delete(name)
    except OSError as exc:
        logger.warning("could not delete %s: %s", name, exc)


# --- reaper and sweeper ------------------------------------------------------------------------


def intake_reap(*, batch: int | None = None) -> dict:
    """Publish again the intake of uploads whose message was lost (never published, or long
    ago) and of those whose worker died mid-validation (claim older than
    INTAKE_STALE_AFTER_S). Under a cache.add lock, bounded batches."""
    batch = batch or settings.VERIFICATION_REAPER_BATCH
    report = {"locked": False, "published": [], "stale": []}
    if not cache.add(INTAKE_REAPER_LOCK, worker_identity(), timeout=300):
        report["locked"] = True
        return report
    try:
        now = timezone.now()
        unsent = Q(intake_published_at__isnull=True) | Q(
            intake_published_at__lt=now - timedelta(seconds=settings.INTAKE_REPUBLISH_AFTER_S))
        received = (Submission.objects.filter(status=SubmissionStatus.RECEIVED).filter(unsent)
                    .order_by("created_at").values_list("pk", flat=True)[:batch])
        stale = (Submission.objects.filter(status=SubmissionStatus.VALIDATING)
                 .filter(Q(intake_started_at__isnull=True) | Q(
                     intake_started_at__lt=now - timedelta(
                         seconds=settings.INTAKE_STALE_AFTER_S))).filter(unsent)
                 .order_by("created_at").values_list("pk", flat=True)[:batch])
        for key, ids in (("published", received), ("stale", stale)):
            for pk in ids:
                if intake_publish(submission_id=pk):
                    report[key].append(pk)
    finally:
        cache.delete(INTAKE_REAPER_LOCK)
    return report


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
