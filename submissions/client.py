r"""Submitter client (standard library only, so it runs anywhere Python 3.10+ does). The site
serves this file at /client/hab-submit.py (the Submit page shows its version and sha256):

    curl -O https://leaderboard.example.org/client/hab-submit.py
    python3 hab-submit.py metadata jobs/<job> [more job dirs] > metadata.yaml   # then review it
    python3 hab-submit.py --url https://leaderboard.example.org --token hab_... \
        --metadata metadata.yaml jobs/<job> [more job dirs]

`metadata` writes metadata.yaml from what Harbor recorded (each job's config.json and lock.json,
and its trials' result.json: the harness and its version, the model, the benchmark version);
what Harbor does not know (the agent's display name, URL, organisation, the model's display
names) is a "TODO: ..." placeholder, which the site refuses until it is replaced.
The upload (the default command)

packs the job directories into a .tar.gz (regular files only), uploads it with a progress bar
and an Idempotency-Key (so a retry after a dropped connection cannot submit twice; a 429 with
Retry-After, the site's rate limit, or a 503 is sent again after the wait), then polls
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

__version__ = "1.2.0"
CHUNK = 1 << 20
# Terminal states of a submission (a verdict, or the end of its life); "queued" with --until.
DONE = {"verified", "consistent", "discrepancy", "failed", "published", "rejected", "refused",
        "withdrawn"}
GOOD = {"verified", "consistent", "published"}
# A busy site answers 429 with Retry-After (its rate limits) or 503 (its store is down): the
# upload is sent again, under the same Idempotency-Key, after the wait it names or, without
# one, after a doubling backoff; at most RETRIES times, never waiting longer than MAX_WAIT_S.
RETRIES = 6
MAX_WAIT_S = 900.0


def retry_wait(status: int, retry_after: str | None, attempt: int) -> float | None:
    """Seconds to wait before asking again, or None when the answer is final. A 429 without
    Retry-After is the daily quota, which no wait within the run would change."""
    if status not in (429, 503):
        return None
    try:
        seconds = float(retry_after) if retry_after else None
    except ValueError:
        seconds = None
    if seconds is None:
        if status == 429:
            return None
        seconds = min(60.0, 2.0 ** attempt)
    return seconds if 0 <= seconds <= MAX_WAIT_S else None


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
           out=sys.stderr, sleep=time.sleep) -> dict:
    """Send the upload; a 429 with Retry-After or a 503 is sent again after its wait (the
    Idempotency-Key makes a repeat the same upload)."""
    for attempt in range(RETRIES + 1):
        status, retry_after, body = _send_upload(url, token, archive, metadata, key, out)
        wait = retry_wait(status, retry_after, attempt) if attempt < RETRIES else None
        if wait is None:
            break
        out.write(f"the site answered HTTP {status} ({body.get('detail') or 'busy'}); "
                  f"sending again in {wait:.0f} s\n")
        sleep(wait)
    if status not in (200, 201, 202):
        problems = body.get("problems") or []
        lines = [f"  {p.get('code')}  {p.get('path')}: {p.get('message')}" for p in problems]
        raise SystemExit(f"upload refused ({status}):\n" + ("\n".join(lines) if lines
                                                            else json.dumps(body, indent=1)))
    return body


def _send_upload(url: str, token: str, archive: Path, metadata: Path | None, key: str,
                 out) -> tuple[int, str | None, dict]:
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
    raw = resp.read()
    conn.close()
    try:
        body = json.loads(raw or b"{}")
    except ValueError:  # a proxy's HTML error page
        body = {"detail": raw[:200].decode(errors="replace")}
    return resp.status, resp.getheader("Retry-After"), body if isinstance(body, dict) else {}


def poll(url: str, token: str, status_path: str, interval: float = 5.0, out=sys.stderr,
         until: frozenset[str] | set[str] = DONE, sleep=time.sleep) -> dict:
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
            retry_after = resp.getheader("Retry-After")
        except (OSError, http.client.HTTPException) as exc:  # a restart or a dropped link
            out.write(f"status unknown ({exc.__class__.__name__}: {exc}); polling again\n")
            sleep(interval)
            continue
        finally:
            conn.close()
        if status >= 500 or status == 429:  # transient: the site is busy or restarting
            wait = retry_wait(status, retry_after, 0) or interval
            out.write(f"status unknown (HTTP {status}); polling again in {wait:.0f} s\n")
            sleep(max(wait, interval))
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
        sleep(interval)


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
    # A reference run (the site's own agent, no model) is labelled wherever its state is said.
    reference = "reference run (never ranked, no model): " if doc.get("reference") else ""
    lines = [f"{'reference run' if reference else 'submission'} {doc['id']}{on}: "
             f"{doc['status']}"]
    if doc.get("status_reason"):
        lines.append(f"  reason: {doc['status_reason']}")
    if doc["status"] == "refused":  # every problem the intake found, each naming its file
        lines += [f"  {p.get('code')}  {p.get('path')}: {p.get('message')}"
                  for p in doc.get("problems") or []]
    verification = doc.get("verification") or {}
    if verification.get("verdict"):
        headline = (verification.get("summary") or {}).get("headline", "")
        lines.append(f"  verdict: {reference}{headline or verification['verdict']}")
    lines.append(f"  status page: {url.rstrip('/')}{doc['url']}")
    return lines


TODO = "TODO"


def _json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: not readable as Harbor's JSON ({exc})") from None
    return doc if isinstance(doc, dict) else {}


def _job_facts(job: Path) -> dict:
    """What one Harbor job directory says about its agent, model and benchmark version."""
    if not (job / "config.json").is_file():
        raise SystemExit(f"{job}: no config.json: not a Harbor job directory (harbor run -o "
                         "jobs writes one per job under jobs/)")
    config = _json(job / "config.json")
    agents = config.get("agents") or ([config["agent"]] if config.get("agent") else [])
    agent = agents[0] if agents and isinstance(agents[0], dict) else {}
    if not agent:  # Harbor 0.20 to 0.25 leave a default (the oracle) out of config.json
        agent = _recorded_agent(job)
    harness = agent.get("name") or (agent.get("import_path") or "").rpartition(":")[2]
    versions, providers = set(), set()
    for result in sorted(job.glob("*/result.json")):
        info = _json(result).get("agent_info") or {}
        if info.get("version") and info["version"] != "unknown":
            versions.add(str(info["version"]))
        model = info.get("model_info") or {}
        if model.get("provider"):
            providers.add(str(model["provider"]))
    benchmarks = set()
    for dataset in config.get("datasets") or []:
        name, version = dataset.get("name"), dataset.get("version")
        if name and version:
            benchmarks.add(f"{name.rpartition('/')[2]}@{version}")
    lock = _json(job / "lock.json") if (job / "lock.json").is_file() else {}
    return {"harness": harness, "model": agent.get("model_name") or "", "versions": versions,
            "providers": providers, "benchmarks": benchmarks,
            "harbor": (lock.get("harbor") or {}).get("version", "")}


def _recorded_agent(job: Path) -> dict:
    """The agent as the job's lock.json or a trial's result.json (full dumps) record it."""
    lock = _json(job / "lock.json") if (job / "lock.json").is_file() else {}
    for entry in lock.get("trials") or []:
        if isinstance(entry, dict) and isinstance(entry.get("agent"), dict):
            return entry["agent"]
    for result in sorted(job.glob("*/result.json")):
        agent = (_json(result).get("config") or {}).get("agent")
        if isinstance(agent, dict):
            return agent
    return {}


def _yaml(value) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML scalar


def metadata_text(job_dirs: list[Path], benchmark: str = "") -> str:
    """metadata.yaml for these Harbor jobs: what they recorded, placeholders for the rest."""
    facts = [_job_facts(job) for job in job_dirs]
    harnesses = sorted({f["harness"] for f in facts if f["harness"]})
    models = sorted({f["model"] for f in facts if f["model"]})
    if len(harnesses) > 1 or len(models) > 1:
        raise SystemExit(f"these jobs ran different agents or models ({harnesses}, {models}): "
                         "one submission is one agent; upload them separately")
    versions = sorted(set().union(*(f["versions"] for f in facts)))
    benchmarks = sorted(set().union(*(f["benchmarks"] for f in facts)))
    benchmark = benchmark or (benchmarks[0] if len(benchmarks) == 1 else
                              f"{TODO}: the benchmark version, e.g. healthagentbench-synthetic@1.0")
    harness = harnesses[0] if harnesses else f"{TODO}: the Harbor agent name"
    lines = ["# Written by hab-submit.py from the Harbor job(s): " + ", ".join(
                 str(j) for j in job_dirs) + ".",
             "# Review it, replace every TODO (the site refuses an upload that still has one).",
             f"agent_display_name: {_yaml(f'{TODO}: your agent as the leaderboard shows it')}",
             f"agent_url: {_yaml(f'{TODO}: https://... (code or paper)')}",
             f"agent_org_display_name: {_yaml(f'{TODO}: your organisation')}",
             "models:"]
    if models:
        provider, _, name = models[0].partition("/")
        provider = provider if name else (sorted(set().union(*(f["providers"] for f in facts)))
                                          or [f"{TODO}: provider"])[0]
        lines += [f"  - model_name: {_yaml(models[0])}",
                  f"    model_provider: {_yaml(provider)}",
                  f"    model_display_name: {_yaml(f'{TODO}: e.g. GPT 5.5')}",
                  f"    model_org_display_name: {_yaml(f'{TODO}: e.g. OpenAI')}"]
    else:  # Harbor's oracle and nop call no model
        lines += ['  - {model_name: none, model_provider: none, model_display_name: "no model", '
                  "model_org_display_name: none}"]
    lines += [f"harness: {_yaml(harness)}"]
    if len(versions) == 1:
        lines += [f"harness_version: {_yaml(versions[0])}"]
    elif versions:
        lines += [f"# the trials recorded several harness versions: {', '.join(versions)}"]
    lines += [f"benchmark: {_yaml(benchmark)}"]
    harbor = sorted({f["harbor"] for f in facts if f["harbor"]})
    lines += [f"notes: {_yaml('run with Harbor ' + ', '.join(harbor) if harbor else '')}"]
    return "\n".join(lines) + "\n"


def metadata_main(argv: list[str], out) -> int:
    ap = argparse.ArgumentParser(
        prog="hab-submit.py metadata",
        description="Write metadata.yaml (to standard output) from Harbor job directories.")
    ap.add_argument("job_dirs", nargs="+", type=Path)
    ap.add_argument("--benchmark", default="",
                    help="name@version, when the jobs do not say (harbor run -p)")
    args = ap.parse_args(argv)
    out.write(metadata_text(args.job_dirs, args.benchmark))
    return 0


def release() -> tuple[str, bytes, str]:
    """(version, this file's bytes, their sha256): what the site serves at /client/hab-submit.py
    and what its Submit page says it is."""
    import hashlib

    data = Path(__file__).read_bytes()
    return __version__, data, hashlib.sha256(data).hexdigest()


def main(argv: list[str] | None = None, *, out=None, err=None) -> int:
    """The command line; ``out`` gets the answer and the verdict, ``err`` the progress."""
    out, err = out or sys.stdout, err or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["metadata"]:
        return metadata_main(argv[1:], out)
    if argv[:1] == ["upload"]:
        argv = argv[1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--version", action="version", version=f"hab-submit {__version__}")
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
