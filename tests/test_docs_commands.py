"""Every command README.md, the docs/*.md pages, CONTRIBUTING.md and the contribute page show
works as typed.

The commands are extracted from the documents (fenced ``sh``/``bash`` blocks, the contribute
page's <pre> blocks, inline ``.venv/bin/python manage.py ...`` in the Markdown pages other than
CONTRIBUTING.md), then run in order in a fresh
``git clone`` of this repository, with a bare environment (no DEBUG, no DATABASE_URL: what a
newcomer has). The clone reuses this checkout's .venv through a symlink. Commands that need
Docker or a remote site are listed as such and skipped; a command in neither list fails the
test, so a new command in the documents is either run here or consciously skipped.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.clone_support import fresh_clone

REPO = Path(__file__).resolve().parents[1]
# README first (its `make run` sets the clone up), then docs/*.md (what moved out of the README,
# in name order), then CONTRIBUTING.md and the contribute page.
DOCS = ("README.md",
        *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
        "CONTRIBUTING.md", "templates/leaderboard/contribute.html")
# Inline `.venv/bin/python manage.py ...` commands are collected from these too (CONTRIBUTING.md
# names its commands inline again in its checklist, after its fenced steps).
INLINE_DOCS = tuple(d for d in DOCS if d.endswith(".md") and d != "CONTRIBUTING.md")

# Run in the clone (after placeholder substitution).
RUNNABLE = [
    r"^make run$",
    r"^\.venv/bin/python manage\.py (new_task|sync_tasks|issue_token|load_demo|screen_trials|rebuild_leaderboard)\b",
    r"^\.venv/bin/python -m pytest tests/tasks -q -p no:django -m \"not docker\"$",
]
# Not run: they need Docker, a network, a remote site, or they are this test's own setup.
SKIPPED = {
    r"^git clone ": "the test clones the repository itself",
    r"^cd healthagentbench$": "the test runs in the clone",
    r"^make (test|images)$": "Docker (builds the images)",
    r"^make test-fast$": "runs this test among the others (it would run itself)",
    r"^make images && ": "Docker (builds the images)",
    r"^eval \"\$\(scripts/harbor-venv --env\)\"$": "installs Harbor from PyPI (network)",
    r"^harbor run ": "Docker",
    r"^harbor hub ": "Harbor's hub (network and an account; the files are validated by "
                     "tests/leaderboard/test_hub_export.py)",
    r"^for dir in ": "Docker (harbor run)",
    r"^\.venv/bin/python manage\.py (validate_task|grade|bench_\w+|run_worker)\b": "Docker or a broker",
    r"^\.venv/bin/python manage\.py rescore\b": "a worker and Docker (tests/evaluation/"
                                                "test_rescore.py runs it)",
    r"^\.venv/bin/python manage\.py cluster (up|batch)$": "root, dockerd and minutes (tests/"
                                                           "evaluation/test_cluster.py runs batch)",
    r"^\.venv/bin/python manage\.py chaos_soak$": "Docker, a worker and minutes (a short run is "
                                                   "tests/evaluation/test_chaos_soak.py)",
    r"^\.venv/bin/python -m submissions\.client --url https://leaderboard\.example\.org": "a remote site",
    r"^curl -O https://leaderboard\.example\.org/client/hab-submit\.py$": "a remote site (tests/"
        "evaluation/test_newcomer_journey.py runs the Submit page's download and metadata lines "
        "against a live site)",
    r"^python3 hab-submit\.py metadata --benchmark \S+ jobs/\*/ > metadata\.yaml$": "needs "
        "Harbor's jobs/ (the newcomer journey runs it on real ones)",
    r"^python3 hab-submit\.py --url https://leaderboard\.example\.org": "a remote site",
    r"^\.venv/bin/python manage\.py simulate_stats( --only \w+)?$": "minutes of CPU and rewrites "
                                                                   "the committed tables (a "
                                                                   "short run is tests/"
                                                                   "leaderboard/"
                                                                   "test_simulation.py)",
    r"^\.venv/bin/python manage\.py reconstruction_spread$": "rewrites the committed "
                                                           "leaderboard/data/"
                                                           "reconstruction_spread.csv (tests/"
                                                           "leaderboard/test_reconstruction_"
                                                           "spread.py runs its code path)",
    r"^IMAGE_REGISTRY=\S+ make images$": "Docker and a registry (tests/evaluation/"
                                           "test_registry_journey.py runs it)",
    r"^\.venv/bin/python manage\.py publish_packages\b": "the record a push writes (tests/"
                                                       "evaluation/test_registry_journey.py)",
    r"^python3 hab-submit\.py metadata jobs/\*/ > metadata\.yaml$": "needs Harbor's jobs/ (the "
        "registry journey runs it on real ones)",
    r"^docker compose ": "Docker",
    r"^PORT=\d+ INTAKE_REPUBLISH_AFTER_S=\S+ .*make run$": "the site bench_broker measures "
                                                         "(Docker and minutes; "
                                                         "tests/evaluation/test_make_run.py "
                                                         "runs make run with a PORT)",
    r"^cp \.env\.example \.env$": "compose set-up (make run writes .env itself)",
    r"^\.venv/bin/python manage\.py \.\.\.$": "prose: any management command",
    r"^\.venv/bin/python manage\.py confirm_infra <trial_id>": "a placeholder trial id "
                                                            "(tests/leaderboard/"
                                                            "test_infra_confirm.py runs it)",
    r"^\.venv/bin/python manage\.py judge_pending$": "a judge (X-ray or trajectory) and a worker "
                                                      "(tests/evaluation/test_xray_judge_site.py "
                                                      "runs it)",
}
PLACEHOLDERS = {"<username>": "newcomer"}


def _fenced_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:sh|bash)\n(.*?)```", text, flags=re.S)


def _pre_blocks(text: str) -> list[str]:
    blocks = re.findall(r"<pre data-testid=\"contribute-[a-z]+\">(.*?)</pre>", text, flags=re.S)
    return [html.unescape(re.sub(r"\{\{[^}]*\}\}", "<repository URL>", b)) for b in blocks]


def _commands(block: str) -> list[str]:
    """Logical command lines: continuations joined, comments and blank lines dropped."""
    out, current = [], ""
    for raw in block.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        current = f"{current} {line}" if current else line
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        command = re.sub(r"\s+#\s.*$", "", current).strip()  # trailing "# comment"
        out.append(command)
        current = ""
    return out


def documented_commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = (REPO / doc).read_text(encoding="utf-8")
        blocks = _pre_blocks(text) if doc.endswith(".html") else _fenced_blocks(text)
        for block in blocks:
            if block.lstrip().startswith(("make images && ", "for ")):
                found.append((doc, block.strip().splitlines()[0]))
                continue
            found += [(doc, c) for c in _commands(block)]
        if doc in INLINE_DOCS:
            found += [(doc, c) for c in re.findall(r"`(\.venv/bin/python manage\.py [^`]+)`", text)]
    return found


def _classify(command: str) -> str | None:
    if any(re.search(p, command) for p in RUNNABLE):
        return "run"
    for pattern, reason in SKIPPED.items():
        if re.search(pattern, command):
            return reason
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bare_env(clone: Path) -> dict[str, str]:
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    return keep


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    root = fresh_clone(tmp_path_factory.mktemp("fresh") / "healthagentbench")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_every_documented_command_is_run_or_consciously_skipped():
    commands = documented_commands()
    assert any(c == "make run" for _d, c in commands)
    unknown = [f"{doc}: {c}" for doc, c in commands if _classify(c) is None]
    assert not unknown, "classify these documented commands:\n" + "\n".join(unknown)


def _make_run(clone: Path, env: dict) -> str:
    """`make run` until the site answers, then Ctrl-C (SIGINT to its process group)."""
    port = _free_port()
    log = (clone / "make-run.log").open("w+")
    proc = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=clone, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, (clone / "make-run.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("make run did not answer: " + (clone / "make-run.log").read_text()[-3000:])
        with urllib.request.urlopen(base + "/?benchmark=healthagentbench-synthetic@1.0") as r:
            page = r.read().decode()
        assert "be the first" in page  # registered at start-up, empty leaderboard says how
        with urllib.request.urlopen(base + "/submit/") as r:
            assert "harbor run -p" in r.read().decode()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    return (clone / "make-run.log").read_text()


def test_the_documents_commands_work_as_typed_in_a_fresh_clone(clone):
    """Each distinct runnable command once, in document order (README, docs/*.md, CONTRIBUTING,
    the contribute page): a later document repeating a command that already ran is not rerun."""
    env = _bare_env(clone)
    done: set[str] = set()
    for doc, command in documented_commands():
        if _classify(command) != "run":
            continue
        for placeholder, value in PLACEHOLDERS.items():
            command = command.replace(placeholder, value)
        if command in done:
            continue
        done.add(command)
        started = time.monotonic()
        print(f"$ {command}", flush=True)
        if command == "make run":
            output = _make_run(clone, env)
            assert "ImproperlyConfigured" not in output, output[-3000:]
            assert (clone / ".env").is_file()
            continue
        proc = subprocess.run(command, shell=True, cwd=clone, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, (f"{doc}: `{command}` failed:\n{proc.stdout[-3000:]}\n"
                                      f"{proc.stderr[-3000:]}")
        assert "Traceback" not in proc.stderr, f"{doc}: `{command}`:\n{proc.stderr[-3000:]}"
        print(f"  {time.monotonic() - started:.1f} s", flush=True)
        if "new_task" in command:
            # CONTRIBUTING's step 2, by hand: write the text the scaffold leaves as TODO.
            package = clone / "tasks" / command.split()[3] / command.split()[4]
            for rel in ("instruction.md", "README.md"):
                path = package / rel
                path.write_text(path.read_text().replace("TODO", "Written by the contributor"))
    assert {"make run", ".venv/bin/python manage.py issue_token newcomer"} <= done, done
    assert any("sync_tasks --new-version" in c for c in done), done
    # The checklist's "nothing else changed": only the new package and the new manifest.
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=clone, capture_output=True, text=True, check=True).stdout
    own = {"make-run.log", ".venv"}  # this test's log and its symlink to the shared venv
    changed = [line[3:] for line in status.splitlines() if line[3:] not in own]
    assert changed and all(path.startswith(("tasks/pathology-tumor-region/case_02/",
                                            "tasks/benchmarks/")) for path in changed), status


def test_what_the_documents_have_you_create_is_ignored_by_git():
    """Harbor's jobs/ (the Submit page's loop, CONTRIBUTING's step 5), the upload archive and
    metadata.yaml at the repository root never show up as changes of a task pull request."""
    for path in ("jobs/clinical-trial-matching/result.json", "jobs/2026-12-03__15-28-13/x",
                 "run.tar.gz", "metadata.yaml"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0, path
    assert subprocess.run(["git", "check-ignore", "-q", "tasks/benchmarks/x@1.1.toml"],
                          cwd=REPO).returncode == 1
