"""Checks of a task package, with and without Docker (used by `manage.py validate_task`).

    structural_checks(task_dir) -> list[Check]      # no Docker, no Django settings needed
    docker_checks(task_dir, ...) -> list[Check]     # builds the image, oracle, nop, leak probe

A Check is (name, ok, detail). Structural checks follow the Harbor task layout
(../shared/docs/harbor-formats.md §1) plus HealthAgentBench's metadata rules.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import shutil
import tempfile
import time
import tomllib
import uuid
from pathlib import Path

from evaluation import runner, task_specs
from evaluation.categories import CATEGORIES
from evaluation.digests import sha256_file
from evaluation.task_specs import declared_outputs

ANSWER_NAME_PATTERNS = (
    "answer*",
    "*answers*",
    "expected*",
    "gold*",
    "*ground_truth*",
    "*groundtruth*",
    "reward*",
    "solution*",
    "solve.sh",
    "*labels_hidden*",
)
MIN_HASHED_BYTES = 32  # tiny files ("{}", "0\n") are too common to mean a leak
JUDGE_CATEGORIES = frozenset(slug for slug, c in CATEGORIES.items() if c.needs_judge)


@dataclasses.dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name}" + (
            f": {self.detail}" if self.detail else ""
        )


def load_toml(task_dir: Path) -> dict:
    with open(Path(task_dir) / "task.toml", "rb") as fh:
        return tomllib.load(fh)


def _files(root: Path):
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            yield Path(dirpath) / name


def answer_fingerprints(task_dir: Path) -> dict[str, tuple[int, str]]:
    """{relative path under tests/: (size, sha256)} for the hidden files worth searching for."""
    tests = Path(task_dir) / "tests"
    out = {}
    for f in _files(tests):
        if f.is_symlink() or not f.is_file():
            continue
        size = f.stat().st_size
        if size < MIN_HASHED_BYTES:
            continue
        out[f.relative_to(tests).as_posix()] = (size, sha256_file(f))
    return out


def _looks_like_answer(name: str) -> bool:
    low = name.lower()
    return any(fnmatch.fnmatch(low, pat) for pat in ANSWER_NAME_PATTERNS)


def structural_checks(task_dir: Path, *, base_image: str | None = None) -> list[Check]:
    """Checks that need neither Docker nor a database.

    The package schema and layout rules live in `evaluation.task_specs.check_task_package`
    (shared with `sync_tasks` and `new_task`); this adds the runner's own requirements
    (synthetic = true, outputs under /workspace, no symlinks, no tests/ file copied into the
    build context).
    """
    task_dir = Path(task_dir)
    problems = task_specs.check_task_package(task_dir)
    checks = [
        Check(
            "Harbor package structure and metadata (task_specs)",
            not problems,
            "; ".join(problems),
        )
    ]
    try:
        spec = load_toml(task_dir)
    except (OSError, tomllib.TOMLDecodeError):
        return checks
    meta = spec.get("metadata") or {}
    checks.append(
        Check(
            "[metadata] synthetic = true",
            meta.get("synthetic") is True,
            "" if meta.get("synthetic") is True else f"synthetic = {meta.get('synthetic')!r}",
        )
    )
    outputs = declared_outputs(spec)
    bad_out = [p for p in outputs if not p.startswith("/workspace/") or ".." in p.split("/")]
    checks.append(
        Check(
            "declared outputs are under /workspace",
            not bad_out,
            ", ".join(bad_out) if bad_out else ", ".join(outputs),
        )
    )
    links = [f.relative_to(task_dir).as_posix() for f in _files(task_dir) if f.is_symlink()]
    checks.append(Check("no symlinks in the package", not links, ", ".join(links[:10])))
    env_dir = task_dir / "environment"
    fps = {h: rel for rel, (_s, h) in answer_fingerprints(task_dir).items()}
    copies = []
    for f in _files(env_dir):
        if f.is_file() and not f.is_symlink() and f.stat().st_size >= MIN_HASHED_BYTES:
            digest = sha256_file(f)
            if digest in fps:
                copies.append(f"{f.relative_to(env_dir).as_posix()} == tests/{fps[digest]}")
    checks.append(
        Check("no copy of a tests/ file under environment/", not copies, "; ".join(copies[:10]))
    )
    return checks


LEAK_PROBE = r"""
import fnmatch, hashlib, json, os, socket, sys
want = json.loads(sys.argv[1])            # {sha256: size}
patterns = json.loads(sys.argv[2])
sizes = set(want.values())
hits, named, unreadable = [], [], 0
SKIP = {"/proc", "/sys", "/dev"}
NAME_ROOTS = ("/workspace", "/logs", "/tmp", "/opt", "/home", "/root", "/srv", "/mnt", "/data",
              "/tests", "/solution")
for dirpath, dirnames, filenames in os.walk("/", onerror=lambda e: None):
    dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in SKIP]
    for name in filenames:
        p = os.path.join(dirpath, name)
        low = name.lower()
        if any(fnmatch.fnmatch(low, pat) for pat in patterns) and p.startswith(NAME_ROOTS):
            named.append(p)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if not os.path.isfile(p) or os.path.islink(p) or st.st_size not in sizes:
            continue
        try:
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        except OSError:
            unreadable += 1
            continue
        if h.hexdigest() in want:
            hits.append(p)
env_hits = [k for k, v in os.environ.items() if any(x in v for x in ("answer", "/tests"))]
net = {}
for host, port in (("1.1.1.1", 53), ("169.254.169.254", 80), ("deb.debian.org", 80),
                   ("172.17.0.1", 2375)):
    try:
        socket.create_connection((host, port), timeout=2).close()
        net[f"{host}:{port}"] = "REACHABLE"
    except OSError as exc:
        net[f"{host}:{port}"] = type(exc).__name__
print(json.dumps({"hash_hits": hits, "named": named, "env": env_hits, "net": net,
                  "unreadable_candidates": unreadable, "uid": os.getuid()}))
"""


def _judge_spec(task_dir: Path, category: str | None):
    # Lazily: the structural checks run without Django settings (and this without a database:
    # the gateway is not given the judge cache).
    from evaluation.judge import cache as judging

    test_sh = (Path(task_dir) / "tests" / "test.sh").read_text(errors="replace")
    if category not in JUDGE_CATEGORIES and "XRAY_JUDGE_URL" not in test_sh:
        return None, None
    try:
        return judging.judge_for(task_dir, cached=False), None
    except judging.JudgeNotConfigured:
        return None, ("no X-ray judge is configured (XRAY_JUDGE_URL, XRAY_JUDGE_MODEL, "
                      "XRAY_JUDGE_API_KEY): the oracle and nop gradings need one")


@dataclasses.dataclass(frozen=True)
class _TaskRun:
    """What every container of one validation shares: the task, its image, the job id, the
    working directory and the X-ray judge (None for other categories)."""

    task_dir: Path
    tag: str
    job: str
    work: Path
    judge: object


def docker_checks(task_dir: Path, *, keep_dir: Path | None = None, log=print) -> list[Check]:
    """Build the task image, run the oracle (must pass) and nop (must fail), probe for leaks."""
    task_dir = Path(task_dir).resolve()
    checks: list[Check] = []

    def add(name, ok, detail=""):
        checks.append(Check(name, bool(ok), detail))
        log(checks[-1].line())

    spec = load_toml(task_dir)
    category = (spec.get("metadata") or {}).get("category")
    job = f"validate-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    work = Path(keep_dir) if keep_dir else Path(tempfile.mkdtemp(prefix="hab-validate-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.time()
        try:
            tag, built = runner.build_task_image(task_dir)
        except runner.ImageBuildError as exc:
            add("task image builds (network none)", False, f"{exc}\n{exc.log_tail[-1500:]}")
            return checks
        add(
            "task image builds (network none)",
            True,
            f"{tag} ({'built' if built else 'cached'} in {time.time() - t0:.1f} s, "
            f"{runner.image_size(tag) / 1e6:.0f} MB)",
        )
        judge, judge_err = _judge_spec(task_dir, category)
        if judge_err:
            add("X-ray judge configured", False, judge_err)
            return checks
        run = _TaskRun(task_dir, tag, job, work, judge)
        _oracle_and_nop_checks(run, add)
        _leak_probe_checks(run, add)
    except runner.InfrastructureError as exc:
        add("Docker engine", False, f"infrastructure error: {exc}")
    finally:
        if not keep_dir:
            shutil.rmtree(work, ignore_errors=True)
    return checks


def _oracle_and_nop_checks(run: _TaskRun, add) -> None:
    """The oracle (solution/ copied in, solve.sh run as the agent) passes a fresh verifier;
    nop (nothing runs) fails it with reward 0, not an error."""
    t0 = time.time()
    oracle = runner.run_agent(
        run.task_dir, job_id=run.job, attempt=1, purpose="oracle", image=run.tag,
        command="bash /solution/solve.sh", copy_in={"/solution": run.task_dir / "solution"},
        out_dir=run.work / "oracle",
    )
    detail = (
        f"{oracle.result.reason or 'exit 0'}; collected {oracle.collected or 'nothing'}"
        + (f"; missing {oracle.missing}" if oracle.missing else "")
        + (f"; {oracle.output_error}" if oracle.output_error else "")
    )
    ok = oracle.result.ok and not oracle.missing and not oracle.output_error
    if not ok:
        detail += "\n" + oracle.result.text[-1500:]
    add(f"oracle agent runs ({time.time() - t0:.1f} s)", ok, detail)
    t0 = time.time()
    v = runner.run_verifier(run.task_dir, job_id=run.job, attempt=1, image=run.tag,
                            artifacts_dir=run.work / "oracle", judge=run.judge)
    add(
        f"oracle passes the verifier ({time.time() - t0:.1f} s)",
        v.passed,
        f"reward={v.reward} {json.dumps(v.rewards)[:300]}"
        + (f"; {v.error}" if v.error else "")
        + ("" if v.passed else "\n" + v.result.text[-1500:]),
    )
    nop = runner.run_agent(run.task_dir, job_id=run.job, attempt=2, purpose="nop",
                           image=run.tag, command=None, out_dir=run.work / "nop")
    v = runner.run_verifier(run.task_dir, job_id=run.job, attempt=2, image=run.tag,
                            artifacts_dir=run.work / "nop", judge=run.judge)
    add(
        "nop agent fails the verifier",
        v.reward is not None and v.reward < 1.0,
        f"reward={v.reward}"
        + (f"; {v.error}" if v.error else "")
        + (f"; nop outputs present: {nop.collected}" if nop.collected else ""),
    )


def _leak_probe_checks(run: _TaskRun, add) -> None:
    """From inside an agent container: no hidden answer file (by content hash or name) or
    answer-carrying environment variable is reachable, no network, and the agent is not root."""
    fps = answer_fingerprints(run.task_dir)
    want = {h: size for (size, h) in fps.values()}
    probe = runner.run_agent(
        run.task_dir, job_id=run.job, attempt=3, purpose="probe", image=run.tag,
        command=["python3", "-c", LEAK_PROBE, json.dumps(want),
                 json.dumps(ANSWER_NAME_PATTERNS)],
        out_dir=run.work / "probe", outputs=["/workspace/.hab-none"],
    )
    try:
        report = json.loads(probe.result.text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        add("leak probe ran in the agent container", False, probe.result.text[-1500:])
        return
    findings = (
        f"hash matches: {report['hash_hits'][:10]}" if report["hash_hits"] else "",
        f"answer-like names: {report['named'][:10]}" if report["named"] else "",
        f"env vars: {report['env']}" if report["env"] else "",
    )
    add(
        f"no answer file reachable from the agent ({len(want)} hidden file hashes searched)",
        not report["hash_hits"] and not report["named"] and not report["env"],
        "; ".join(x for x in findings if x),
    )
    reachable = [k for k, v in report["net"].items() if v == "REACHABLE"]
    add(
        "network unreachable from the agent",
        not reachable,
        ", ".join(f"{k} {v}" for k, v in report["net"].items()),
    )
    add("agent runs as non-root", report["uid"] != 0, f"uid={report['uid']}")
