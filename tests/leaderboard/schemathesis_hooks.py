"""Schemathesis hooks for test_api_contract's fuzz run (SCHEMATHESIS_HOOKS=<this file>).

- About half the schema-valid generated uploads carry a real Harbor run (HAB_FUZZ_ARCHIVE, built with
  devtools.harbor_fixtures, and its metadata HAB_FUZZ_METADATA) instead of random bytes, so the
  stateful phase's upload -> status link starts from an upload that can actually succeed.
- Every call is logged to HAB_FUZZ_LOG (one JSON line: phase, method, path, status, the
  upload's id, whether it carried the fixture) so the test can tell which links were walked.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import schemathesis
from schemathesis.generation import GenerationMode
from schemathesis.transport.serialization import Binary

UPLOAD = "/api/v1/submissions/"
ARCHIVE = Path(os.environ["HAB_FUZZ_ARCHIVE"]).read_bytes()
METADATA = Path(os.environ["HAB_FUZZ_METADATA"]).read_text()
LOG = Path(os.environ["HAB_FUZZ_LOG"])


def _is_upload(context) -> bool:
    op = context.operation
    return op is not None and op.method.upper() == "POST" and op.path == UPLOAD


@schemathesis.hook
def map_case(context, case):
    """Every other schema-valid upload carries the fixture (a schema-violating one keeps its
    violation: the fuzzer checks that it is refused)."""
    if (not _is_upload(context) or not isinstance(case.body, dict) or case.meta is None
            or case.meta.generation.mode != GenerationMode.POSITIVE
            or zlib.crc32(repr(sorted(case.body.items())).encode()) % 2):
        return case
    # In place: the generated archive (a schemathesis Binary) takes the fixture's bytes. A
    # replaced body would be re-validated, and schemathesis judges any body holding bytes
    # invalid then, expecting the valid upload to be refused.
    archive = case.body.get("archive")
    if not isinstance(archive, Binary):
        return case
    archive.data = ARCHIVE
    case.body["metadata"] = METADATA
    return case


@schemathesis.hook
def after_call(context, case, response):
    body = None
    if response.status_code in (200, 202):
        try:
            body = response.json()
        except ValueError:
            pass
    record = {
        "phase": str(case.meta.phase.name) if case.meta else None,
        "method": case.operation.method.upper(), "path": case.operation.path,
        "path_parameters": {k: str(v) for k, v in (case.path_parameters or {}).items()},
        "status": response.status_code,
        "id": body.get("id") if isinstance(body, dict) else None,
        "submission_status": body.get("status") if isinstance(body, dict) else None,
        "fixture": isinstance(case.body, dict)
        and getattr(case.body.get("archive"), "data", None) == ARCHIVE,
    }
    with LOG.open("a") as log:
        log.write(json.dumps(record) + "\n")
