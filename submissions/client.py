r"""Submitter client (standard library only, so it runs anywhere Python 3.10+ does):

    python -m submissions.client --url https://leaderboard.example.org --token hab_... \
        --metadata metadata.yaml jobs/2026-12-02__09-18-40 [more job dirs]

packs the job directories into a .tar.gz (regular files only), uploads it with a progress bar
and an Idempotency-Key (so a retry after a dropped connection cannot submit twice), then polls
the submission's status until verification reaches a verdict (or --until queued) and prints
it. The upload is validated after it is received (status received, validating): a refused one
prints every problem found. Exit status: 0 verified, checked or published; 1 refused, discrepancy, failed or rejected.
Run it from the repository as `.venv/bin/python -m submissions.client ...`, or copy this one
file anywhere and run `python3 client.py ...`. Equivalent curl:

    key=$(python3 -c 'import uuid; print(uuid.uuid4())')
    curl -H "Authorization: Token $TOKEN" -H "Idempotency-Key: $key" \
         -F archive=@run.tar.gz -F metadata=@metadata.yaml $URL/api/v1/submissions/
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tarfile
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path

CHUNK = 1 << 20
# Terminal states of a submission (a verdict, or the end of its life); "queued" with --until.
DONE = {"verified", "consistent", "discrepancy", "failed", "published", "rejected", "refused",
        "withdrawn"}
GOOD = {"verified", "consistent", "published"}


def pack(job_dirs: list[Path], out: Path) -> Path:
    """A .tar.gz of the job directories (each under its own name), regular files only."""
    with tarfile.open(out, "w:gz") as tar:
        for job in job_dirs:
            for path in sorted(job.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    tar.add(path, arcname=f"{job.name}/{path.relative_to(job).as_posix()}",
                            recursive=False)
    return out


def _multipart(files: dict[str, Path], boundary: str):
    parts = []
    for field, path in files.items():
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; "
                f"filename=\"{path.name}\"\r\nContent-Type: application/octet-stream\r\n\r\n")
        parts.append((head.encode(), path))
    tail = f"--{boundary}--\r\n".encode()
    length = sum(len(h) + p.stat().st_size + 2 for h, p in parts) + len(tail)
    return parts, tail, length


def upload(url: str, token: str, archive: Path, metadata: Path | None, key: str,
           out=sys.stderr) -> dict:
    target = urllib.parse.urlsplit(url.rstrip("/") + "/api/v1/submissions/")
    conn_cls = http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(target.netloc, timeout=600)
    boundary = uuid.uuid4().hex
    files = {"archive": archive, **({"metadata": metadata} if metadata else {})}
    parts, tail, length = _multipart(files, boundary)
    conn.putrequest("POST", target.path)
    for name, value in (("Authorization", f"Token {token}"), ("Idempotency-Key", key),
                        ("Content-Type", f"multipart/form-data; boundary={boundary}"),
                        ("Content-Length", str(length))):
        conn.putheader(name, value)
    conn.endheaders()
    sent = 0
    for head, path in parts:
        conn.send(head)
        sent += len(head)
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                conn.send(chunk)
                sent += len(chunk)
                out.write(f"\ruploading {sent * 100 // length:3d}% ({sent >> 20} MiB)")
        conn.send(b"\r\n")
    conn.send(tail)
    out.write(f"\ruploading 100% ({length >> 20} MiB)\n")
    resp = conn.getresponse()
    body = json.loads(resp.read() or b"{}")
    if resp.status not in (200, 201, 202):
        problems = body.get("problems") or []
        lines = [f"  {p.get('code')}  {p.get('path')}: {p.get('message')}" for p in problems]
        raise SystemExit(f"upload refused ({resp.status}):\n" + ("\n".join(lines) if lines
                                                                else json.dumps(body, indent=1)))
    return body


def poll(url: str, token: str, status_path: str, interval: float = 5.0, out=sys.stderr,
         until: frozenset[str] | set[str] = DONE) -> dict:
    sub_id = status_path.rstrip("/").rsplit("/", 1)[-1]
    target = urllib.parse.urlsplit(url.rstrip("/") + f"/api/v1/submissions/{sub_id}/")
    while True:
        conn_cls = (http.client.HTTPSConnection if target.scheme == "https"
                    else http.client.HTTPConnection)
        conn = conn_cls(target.netloc, timeout=60)
        try:
            conn.request("GET", target.path, headers={"Authorization": f"Token {token}"})
            resp = conn.getresponse()
            status, raw = resp.status, resp.read()
        except (OSError, http.client.HTTPException) as exc:  # a restart or a dropped link
            out.write(f"status unknown ({exc.__class__.__name__}: {exc}); polling again\n")
            time.sleep(interval)
            continue
        finally:
            conn.close()
        if status >= 500 or status == 429:  # transient: the site is busy or restarting
            out.write(f"status unknown (HTTP {status}); polling again\n")
            time.sleep(interval)
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if status != 200 or not isinstance(doc, dict) or "status" not in doc:
            detail = doc.get("detail") if isinstance(doc, dict) else raw[:200].decode(errors="replace")
            raise SystemExit(f"polling {target.geturl()} failed (HTTP {status}): {detail}")
        out.write(progress_line(doc) + "\n")
        if doc["status"] in until:
            return doc
        time.sleep(interval)


def progress_line(doc: dict) -> str:
    """One line per poll: the state, trials done, the queue position while queued and the
    verification job's checks while it runs."""
    line = f"status {doc['status']}, {doc['progress']['done']}/{doc['progress']['total']} trials"
    if doc.get("queue_position") is not None:
        line += f", queue position {doc['queue_position']}"
    job = doc.get("verification") or {}
    if job.get("job") and job.get("status") in ("pending", "running"):
        line += (f"; job {job['status']}: re-graded {job['regrade']['done']}/"
                 f"{job['regrade']['total']}, replays tried {job['replay']['done']}, "
                 f"re-run trials {job['rerun']['done']}")
    return line


def verdict_lines(url: str, doc: dict) -> list[str]:
    """What a submitter needs to read at the end: the state, the verdict in one sentence, where
    to look for the rest (the status page)."""
    # A refused upload has no benchmark version recorded: no "on (not read)" for it.
    on = f" on {doc['benchmark']}" if doc.get("benchmark") else ""
    lines = [f"submission {doc['id']}{on}: {doc['status']}"]
    if doc.get("status_reason"):
        lines.append(f"  reason: {doc['status_reason']}")
    if doc["status"] == "refused":  # every problem the intake found, each naming its file
        lines += [f"  {p.get('code')}  {p.get('path')}: {p.get('message')}"
                  for p in doc.get("problems") or []]
    verification = doc.get("verification") or {}
    if verification.get("verdict"):
        headline = (verification.get("summary") or {}).get("headline", "")
        lines.append(f"  verdict: {headline or verification['verdict']}")
    lines.append(f"  status page: {url.rstrip('/')}{doc['url']}")
    return lines


def main(argv: list[str] | None = None, *, out=None, err=None) -> int:
    """The command line; ``out`` gets the answer and the verdict, ``err`` the progress."""
    out, err = out or sys.stdout, err or sys.stderr
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("job_dirs", nargs="+", type=Path)
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", default=os.environ.get("HAB_TOKEN", ""))
    ap.add_argument("--metadata", type=Path)
    ap.add_argument("--idempotency-key", default=str(uuid.uuid4()))
    ap.add_argument("--no-wait", action="store_true", help="upload, print the answer, stop")
    ap.add_argument("--until", choices=["verdict", "queued"], default="verdict",
                    help="poll until a verdict (default) or only until the upload is queued")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between polls")
    args = ap.parse_args(argv)
    if not args.token:
        ap.error("--token or HAB_TOKEN is required")
    with tempfile.TemporaryDirectory() as tmp:
        archive = pack(args.job_dirs, Path(tmp) / "run.tar.gz")
        result = upload(args.url, args.token, archive, args.metadata, args.idempotency_key,
                        out=err)
    print(json.dumps(result), file=out, flush=True)
    if args.no_wait:
        return 0
    until = {"queued", *DONE} if args.until == "queued" else DONE
    doc = poll(args.url, args.token, result["url"], interval=args.interval, until=until, out=err)
    print("\n".join(verdict_lines(args.url, doc)), file=out, flush=True)
    return 0 if doc["status"] in GOOD or doc["status"] == "queued" else 1


if __name__ == "__main__":
    raise SystemExit(main())
