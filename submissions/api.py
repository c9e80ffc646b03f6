"""Submission API: upload (token auth, multipart), status, and the caller's list."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound, ParseError, UnsupportedMediaType
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from config.api import BIGINT_MAX, NO_NUL, ApiView, error
from submissions import selectors
from submissions.authentication import ApiTokenAuthentication
from submissions.harbor_intake import REFERENCE_MODEL_DISPLAY
from submissions.intake import submission_receive
from submissions.models import INTAKE_STATUSES, SubmissionStatus, coverage_badge
from submissions.services import IdempotencyConflict, QuotaExceeded, StorageUnavailable
from submissions.uploads import request_upload_too_large, uploaded_sha256
from submissions.verification import public_sample, verification_progress

MAX_METADATA_BYTES = 64 * 1024


def submission_status_payload(submission, *, include_private: bool) -> dict:
    """The status document shown by the API and polled by the live status page."""
    payload = {
        "id": submission.pk,
        "status": submission.status,
        "url": reverse("submission-status", args=[submission.pk]),
        # Unknown until the intake worker read the metadata (null while received/validating).
        "benchmark": submission.benchmark_version.slug if submission.benchmark_version else None,
        "agent": submission.agent.display_name if submission.agent else None,
        # A labelled reference run (the site's own agent on a try-out version, or a
        # maintainer's): never ranked, no model. "kind" says it in words.
        "reference": submission.is_reference,
        "kind": "reference run" if submission.is_reference else "submission",
        "model": (REFERENCE_MODEL_DISPLAY if submission.is_reference else
                  submission.agent.model.display_name if submission.agent else None),
        "intake": _intake(submission),
        "progress": {"done": submission.trials_done, "total": submission.trials_total},
        "queue_position": selectors.queue_position(submission=submission),
        "verified": submission.is_verified,
        "coverage": submission.coverage,
        "badge": coverage_badge(submission.coverage, reconstructed=submission.is_reconstructed),
        "created_at": submission.created_at.isoformat(),
        "verification": _verification(submission),
        # The re-run sample's commitment; its order and salt only once the verdict is recorded.
        "rerun_sample": public_sample(submission),
        "score_history": score_history_payload(submission),
        "infra_errors": infra_errors_payload(submission),
        "rerun_figures": rerun_figures_payload(submission),
    }
    if include_private:
        payload.update({
            "status_reason": submission.status_reason,
            "problems": [{"code": p.code, "path": p.path, "message": p.message}
                         for p in submission.problems.all()],
            "secret_findings": submission.secret_findings,
            "events": [{"from": e.from_status, "to": e.to_status, "note": e.note,
                        "at": e.created_at.isoformat()} for e in submission.event_list],
        })
    return payload


def score_history_payload(submission) -> list[dict]:
    """Earlier scores replaced by re-scores after grader updates (R11), newest first."""
    revisions = getattr(submission, "score_history", None)
    if revisions is None:
        revisions = submission.score_revisions.order_by("-created_at", "-pk")
    return [{"rescored_at": r.created_at.isoformat(), "job": r.job_id,
             "before": {"successes": r.successes_before, "attempts": r.attempts_before,
                        "graders": r.graders_before},
             "after": {"successes": r.successes_after, "attempts": r.attempts_after,
                       "graders": r.graders_after},
             "changed_trials": r.changes} for r in revisions]


def rerun_figures_payload(submission) -> dict:
    """Where the site re-ran a trial: its measured time, tokens and cost (the re-run's tokens at
    the dated price table) beside the submission's reported figures, and whether the reported
    cost is far below the re-run's (under min_ratio of it)."""
    trials = list(submission.trials.select_related("benchmark_task").order_by(
        "benchmark_task__position", "benchmark_task__name", "attempt"))
    figures = selectors.rerun_figures(submission=submission, trials=trials)
    rows = [{
        "trial_id": t.pk, "task": t.benchmark_task.name, "attempt": t.attempt,
        "reported_cost_usd": float(t.cost_usd) if t.cost_usd is not None else None,
        "reported_duration_s": t.duration_s, "reported_output_tokens": t.output_tokens,
        "reported_input_tokens": t.input_tokens, "reported_cached_tokens": t.cached_tokens,
        **figures[t.pk].payload()} for t in trials if t.pk in figures]
    return {"min_ratio": settings.VERIFICATION_REPORTED_COST_MIN_RATIO,
            "max_ratio": settings.VERIFICATION_REPORTED_COST_MAX_RATIO,
            "reported_cost_far_below_rerun": sum(r["reported_cost_far_below_rerun"]
                                                 for r in rows),
            "reported_cost_far_above_rerun": sum(r["reported_cost_far_above_rerun"]
                                                 for r in rows),
            "trials": rows}


def infra_errors_payload(submission) -> dict:
    """The trials the submission reports as infrastructure errors: claimed and confirmed
    counts, and per trial whether it is confirmed, by whom (site | maintainer) and why, and the
    site's latest re-attempt."""
    claims = selectors.infra_claims(submission=submission)
    return {
        "claimed": len(claims),
        "confirmed": sum(c["trial"].infra_confirmed for c in claims),
        "trials": [{
            "trial_id": c["trial"].pk, "task": c["trial"].benchmark_task.name,
            "attempt": c["trial"].attempt, "outcome": c["trial"].outcome,
            "infra_confirmed": c["trial"].infra_confirmed,
            "infra_confirmed_by": c["trial"].infra_confirmed_by,
            "infra_confirm_reason": c["trial"].infra_confirm_reason,
            "site_reattempt": None if c["check"] is None else {
                "status": c["check"].status, "reason": c["check"].reason,
                "duration_s": c["check"].duration_s}}
            for c in claims],
    }


def _intake(submission) -> dict:
    """Where the upload's validation is: waiting for an intake worker, running (since when,
    which attempt), or done (the status then says queued or refused, with the problems)."""
    if submission.status not in INTAKE_STATUSES:
        return {"state": "done"}
    started = submission.intake_started_at
    return {"state": "waiting" if started is None else "validating",
            "attempt": submission.intake_attempts,
            "started_at": started.isoformat() if started else None}


def _verification(submission) -> dict:
    progress = verification_progress(submission=submission)
    # JSON-safe: the heartbeat is a datetime.
    if progress.get("heartbeat_at") is not None:
        progress["heartbeat_at"] = progress["heartbeat_at"].isoformat()
    return progress


_UPLOAD_DESCRIPTION = """Upload a Harbor run: the job directories as one archive (`archive`) and the
metadata file (`metadata`, or a `metadata.yaml` at the archive root).

    tar czf run.tar.gz -C jobs .
    key=$(python3 -c 'import uuid; print(uuid.uuid4())')   # keep it: a retry, or the fixed upload after a refusal, reuses it
    curl -H "Authorization: Token $HAB_TOKEN" -H "Idempotency-Key: $key" \\
        -F archive=@run.tar.gz -F metadata=@metadata.yaml <site>/api/v1/submissions/

202: received (status `received`); the archive is validated by the intake worker (extraction,
Harbor layout, metadata, secret scan). Follow `url` (the status page) or poll
`GET /api/v1/submissions/{id}/` until `status` leaves `received`/`validating`: `queued` (then
verification) or `refused`, with `problems` listing every problem at once (each with `code`,
`path`, `message`). 401: no or a bad token. 400: no archive, or a bad metadata file field
(`code`, `problems`). 409: the Idempotency-Key belongs to another upload that was not refused
(the detail names it; make a new key). 413: too large. 429: daily quota used. A retry with the
same Idempotency-Key and the same archive and metadata returns the first answer (a refused
upload's included). After a refusal, fix the job directory, re-pack and send it with the same
key (or a new one): the corrected upload is a new submission and takes the key over."""


@extend_schema_serializer(component_name="UploadProblem")
class _ProblemSerializer(serializers.Serializer):
    code = serializers.CharField()
    path = serializers.CharField()
    message = serializers.CharField()


_Refused = inline_serializer("UploadRefused", {
    "code": serializers.CharField(),
    "problems": _ProblemSerializer(many=True)})
_Error = inline_serializer("UploadError", {
    "code": serializers.CharField(), "detail": serializers.CharField()})
_UNAUTHORIZED = error("no token, or a bad or revoked one (and no session)")
_BAD_TOKEN = error("a bad or revoked token (none: the public view)")


@extend_schema_field(OpenApiTypes.BINARY)
class _UploadedFile(serializers.FileField):
    """A multipart file part (with a filename), documented as one: format binary, not the
    uri drf-spectacular gives a FileField shared by requests and responses."""


@extend_schema_field({
    "type": "string", "pattern": NO_NUL,
    "description": "the metadata file's text, YAML or JSON (or a metadata.yaml in the archive): "
                   f"UTF-8, at most {MAX_METADATA_BYTES} bytes; a file part (curl -F "
                   "metadata=@metadata.yaml) or a text field"})
class _MetadataField(serializers.Field):
    """The metadata file's text: a file part or a plain text field (UTF-8, at most
    MAX_METADATA_BYTES). Documented as text, since that is what it must be."""

    def to_internal_value(self, data) -> str:
        if hasattr(data, "read"):
            if data.size > MAX_METADATA_BYTES:
                raise self._too_large()
            try:
                data = data.read(MAX_METADATA_BYTES + 1).decode("utf-8")
            except UnicodeDecodeError:
                raise self._encoding() from None
        if not isinstance(data, str):
            raise serializers.ValidationError("metadata must be a file or text",
                                              code="metadata_invalid")
        if len(data.encode("utf-8", errors="surrogatepass")) > MAX_METADATA_BYTES:
            raise self._too_large()
        if "\x00" in data:  # text, not binary (and no database stores a NUL in text)
            raise self._encoding()
        return data

    @staticmethod
    def _encoding() -> serializers.ValidationError:
        return serializers.ValidationError("metadata must be UTF-8 YAML or JSON",
                                           code="metadata_encoding")

    @staticmethod
    def _too_large() -> serializers.ValidationError:
        return serializers.ValidationError(f"metadata larger than {MAX_METADATA_BYTES} bytes",
                                           code="metadata_too_large")

    def to_representation(self, value):
        return value


@extend_schema_serializer(component_name="SubmissionSummary")
class SubmissionSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(SubmissionStatus.choices)
    agent = serializers.CharField(allow_null=True, help_text="null until intake read the metadata")
    benchmark = serializers.CharField(allow_null=True, help_text="name@version; null likewise")
    created_at = serializers.DateTimeField()
    url = serializers.CharField(help_text="the status page")


class _IntakeSerializer(serializers.Serializer):
    state = serializers.ChoiceField(["waiting", "validating", "done"])
    attempt = serializers.IntegerField(required=False)
    started_at = serializers.DateTimeField(required=False, allow_null=True)


class _InfraErrorsSerializer(serializers.Serializer):
    claimed = serializers.IntegerField()
    confirmed = serializers.IntegerField()
    trials = serializers.ListField(child=serializers.DictField())


class _EventSerializer(serializers.Serializer):
    # "from" is a Python keyword: the field is declared below.
    to = serializers.CharField()
    note = serializers.CharField()
    at = serializers.DateTimeField()


_EventSerializer._declared_fields["from"] = serializers.CharField()


@extend_schema_serializer(component_name="SubmissionStatusDocument")
class SubmissionStatusSerializer(serializers.Serializer):
    """submission_status_payload; the last four fields for its owner and maintainers only."""

    id = serializers.IntegerField()
    status = serializers.ChoiceField(SubmissionStatus.choices)
    url = serializers.CharField(help_text="the status page")
    benchmark = serializers.CharField(allow_null=True, help_text="null until intake read it")
    agent = serializers.CharField(allow_null=True, help_text="null until intake read it")
    intake = _IntakeSerializer()
    progress = inline_serializer("SubmissionProgress", {
        "done": serializers.IntegerField(), "total": serializers.IntegerField()})
    queue_position = serializers.IntegerField(allow_null=True, help_text="1-based; null unless "
                                                                         "queued")
    verified = serializers.BooleanField()
    coverage = serializers.DictField(help_text="what the site checked (empty: nothing yet)")
    badge = serializers.CharField()
    created_at = serializers.DateTimeField()
    verification = serializers.DictField(help_text="stage, checks and verdict")
    score_history = serializers.ListField(child=serializers.DictField(),
                                          help_text="earlier scores, newest first")
    infra_errors = _InfraErrorsSerializer()
    status_reason = serializers.CharField(required=False)
    problems = _ProblemSerializer(many=True, required=False)
    secret_findings = serializers.JSONField(required=False,
                                            help_text="the redacted-credential report")
    events = _EventSerializer(many=True, required=False, help_text="the audit trail")


class SubmissionCollectionApi(ApiView):
    """POST /api/v1/submissions/ uploads; GET lists the caller's own."""

    authentication_classes = [ApiTokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [MultiPartParser]

    @extend_schema_serializer(component_name="SubmissionUpload")
    class InputSerializer(serializers.Serializer):
        # Empty or malformed archives are refused by the extractor, with its own error codes.
        archive = _UploadedFile(allow_empty_file=True,
                                help_text=".tar.gz, .tgz or .zip of Harbor job dirs")
        metadata = _MetadataField(required=False)

    @extend_schema_serializer(component_name="SubmissionCreated")
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.CharField()
        url = serializers.CharField()

    @extend_schema(
        summary="Upload a Harbor run",
        description=_UPLOAD_DESCRIPTION,
        request={"multipart/form-data": InputSerializer},
        parameters=[OpenApiParameter(
            "Idempotency-Key", str, OpenApiParameter.HEADER,
            description="any unique string, such as a UUID: a retry with the same key "
                        "returns the first answer")],
        responses={
            202: OutputSerializer,
            400: error("the upload refused: every problem of its fields at once (a malformed "
                       "multipart body is one problem)", _Refused),
            401: _UNAUTHORIZED,
            403: error("signed in by the session cookie without the CSRF token"),
            409: error("the Idempotency-Key belongs to another upload", _Error),
            413: error("too large", _Error),
            415: error("not multipart/form-data", _Error),
            429: error("the daily quota is used", _Error),
            503: error("the upload store is unavailable: nothing was kept; send it again "
                       "after Retry-After seconds", _Error)},
        operation_id="submissions_create",
    )
    def post(self, request: Request) -> Response:
        if request_upload_too_large(request._request):
            return Response({"code": "too_large", "detail": "upload too large"}, status=413)
        try:
            data = request.data
        except UnsupportedMediaType as exc:
            return Response({"code": "unsupported_media_type", "detail": str(exc.detail)},
                            status=415)
        except ParseError as exc:
            return Response({"code": "invalid_submission", "problems": [
                {"code": "malformed_body", "path": "", "message": str(exc.detail)}]}, status=400)
        serializer = self.InputSerializer(data=data)
        if not serializer.is_valid():
            return Response({"code": "invalid_submission",
                             "problems": _input_problems(serializer.errors)}, status=400)
        archive = serializer.validated_data["archive"]
        metadata_text = serializer.validated_data.get("metadata", "")
        key = request.headers.get("Idempotency-Key", "")[:200]
        try:
            submission, _created = submission_receive(
                owner=request.user, archive_path=Path(archive.temporary_file_path()),
                metadata_text=metadata_text, idempotency_key=key, archive_name=archive.name,
                archive_sha256=uploaded_sha256(archive))
        except QuotaExceeded as exc:
            return Response({"code": exc.code, "detail": str(exc)}, status=429)
        except IdempotencyConflict as exc:
            return Response({"code": exc.code, "detail": str(exc)}, status=409)
        except StorageUnavailable as exc:  # retryable: nothing was kept (R16)
            return Response({"code": exc.code, "detail": str(exc)}, status=503,
                            headers={"Retry-After": "30"})
        body = {"id": submission.pk, "status": submission.status,
                "url": reverse("submission-status", args=[submission.pk])}
        # A replay answers like the original request did (with the submission's status now).
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(summary="Your submissions",
                   responses={200: SubmissionSummarySerializer(many=True), 401: _UNAUTHORIZED},
                   description="The caller's own submissions, newest first: id, status, agent, "
                               "benchmark, created_at, url (the status page).",
                   operation_id="submissions_list")
    def get(self, request: Request) -> Response:
        return Response([
            {"id": s.pk, "status": s.status,
             "agent": s.agent.display_name if s.agent else None,
             "benchmark": s.benchmark_version.slug if s.benchmark_version else None,
             "created_at": s.created_at.isoformat(),
             "url": reverse("submission-status", args=[s.pk])}
            for s in selectors.submission_list_for_user(user=request.user)
        ])


def _input_problems(errors: dict) -> list[dict]:
    """The serializer's errors as upload problems (the shape every rejection has)."""
    problems = []
    if "archive" in errors:
        problems.append({"code": "missing_archive", "path": "archive",
                         "message": "send the job directories as the multipart file field "
                                    "'archive'"})
    for field, details in errors.items():
        if field != "archive":
            problems += [{"code": d.code, "path": field, "message": str(d)} for d in details]
    return problems


class SubmissionDetailApi(ApiView):
    authentication_classes = [ApiTokenAuthentication, SessionAuthentication]
    permission_classes = [AllowAny]

    @extend_schema(summary="A submission's status",
                   parameters=[OpenApiParameter(
                       "id", {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
                       OpenApiParameter.PATH, description="the submission's id (any other "
                       "path segment is a 404 too)")],
                   responses={200: SubmissionStatusSerializer, 401: _BAD_TOKEN,
                              404: error("no such submission, or not yours and not published")},
                   description="What its status page shows: status, progress (done/total "
                               "trials), queue_position, verification (stage, checks, verdict) "
                               "and score_history; its owner and maintainers also get "
                               "status_reason, its validation problems, the redacted-credential "
                               "report and its audit trail. Public once published; 404 for "
                               "anyone else before that.",
                   operation_id="submissions_retrieve")
    def get(self, request: Request, pk: int) -> Response:
        user = request.user if request.user and request.user.is_authenticated else None
        submission = selectors.submission_get_for_user(user=user, pk=pk)
        if submission is None:
            raise NotFound("no such submission")
        private = user is not None and (user.is_staff or submission.owner_id == user.pk)
        return Response(submission_status_payload(submission, include_private=private))
