"""Upload size limits: a 413 before the body is read when Content-Length is too big, and a
byte counter while streaming for bodies that do not announce (or understate) their size."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler
from django.http import HttpRequest, HttpResponse, JsonResponse


def _too_large() -> JsonResponse:
    limit = settings.SUBMISSION_MAX_UPLOAD_BYTES
    return JsonResponse(
        {"code": "too_large", "detail": f"upload larger than the {limit} byte limit"}, status=413
    )


class UploadSizeLimitMiddleware:
    """413 on a declared body size above the limit, without reading the body (U1)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"code": "bad_request", "detail": "invalid Content-Length"},
                                status=400)
        # The limit is for the archive; allow a little for the multipart envelope and metadata.
        if declared > settings.SUBMISSION_MAX_UPLOAD_BYTES + 1024 * 1024:
            return _too_large()
        response = self.get_response(request)
        if getattr(request, "upload_too_large", False) and response.status_code < 400:
            return _too_large()
        return response


class LimitedTemporaryFileUploadHandler(TemporaryFileUploadHandler):
    """Streams each uploaded file to a temporary file on disk, counting bytes (U2): bodies over
    the limit stop the upload and mark the request, whatever Content-Length claimed. Each file's
    SHA-256 is computed from the same chunks (``uploaded.sha256``), so the request never reads
    the stored file back to hash it (R14: one pass over 200 MB, not two)."""

    def __init__(self, request=None):
        super().__init__(request)
        self._received = 0
        self._sha256 = None
        os.makedirs(settings.FILE_UPLOAD_TEMP_DIR, mode=0o700, exist_ok=True)

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self._sha256 = hashlib.sha256()

    def receive_data_chunk(self, raw_data, start):
        self._received += len(raw_data)
        if self._received > settings.SUBMISSION_MAX_UPLOAD_BYTES:
            if self.request is not None:
                self.request.upload_too_large = True
            if self.file is not None:
                self.file.close()  # TemporaryUploadedFile deletes itself on close
            raise StopUpload(connection_reset=False)
        self._sha256.update(raw_data)
        return super().receive_data_chunk(raw_data, start)

    def file_complete(self, file_size):
        uploaded = super().file_complete(file_size)
        uploaded.sha256 = self._sha256.hexdigest()
        return uploaded


def uploaded_sha256(uploaded) -> str | None:
    """The SHA-256 the upload handler computed while streaming ``uploaded`` to disk (None for
    a file that did not come through it)."""
    return getattr(uploaded, "sha256", None)


def request_upload_too_large(request: HttpRequest) -> bool:
    return getattr(request, "upload_too_large", False)
