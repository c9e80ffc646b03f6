"""Streamed CSV responses with spreadsheet formula injection neutralised (OWASP CSV injection)."""

from __future__ import annotations

import csv
from collections.abc import Iterator

from django.http import HttpResponse, StreamingHttpResponse

from leaderboard.tables import PROVENANCE_NOTE, Table

# A cell starting with one of these is read as a formula by spreadsheet programs.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value) -> object:
    """Prefix text cells that a spreadsheet would evaluate with a single quote."""
    if isinstance(value, str) and value.startswith(_FORMULA_PREFIXES):
        return "'" + value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def _lines(table: Table) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(table.columns)
    for row in table.rows:
        yield writer.writerow([neutralise(v) for v in row])


def header_line(columns: tuple[str, ...]) -> str:
    return csv.writer(_Echo()).writerow(columns)


def csv_response(table: Table, filename: str) -> StreamingHttpResponse:
    return _headers(StreamingHttpResponse(_lines(table), content_type="text/csv; charset=utf-8"),
                    filename)


def csv_stream_response(chunks: Iterator[bytes], filename: str) -> StreamingHttpResponse:
    """Already-formatted CSV bytes (PostgreSQL COPY, leaderboard/csv_copy.py)."""
    return _headers(StreamingHttpResponse(chunks, content_type="text/csv; charset=utf-8"),
                    filename)


def csv_bytes_response(table: Table, filename: str) -> StreamingHttpResponse:
    """The same bytes as csv_response, built whole first (small tables, so the cache layer can
    keep them: ``cache_content``) and still served as a stream like every CSV."""
    body = "".join(_lines(table)).encode()
    response = _headers(
        StreamingHttpResponse(bytes_chunks(body), content_type="text/csv; charset=utf-8"),
        filename)
    response.cache_content = body
    return response


def bytes_chunks(body: bytes, size: int = 256 * 1024) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


def _headers(response: HttpResponse, filename: str) -> HttpResponse:
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["X-Data-Provenance"] = PROVENANCE_NOTE
    return response
