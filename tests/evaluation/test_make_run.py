"""`make run` never dies: the embedded default started exactly as the README says (`make run`
with a PORT, in a fresh clone, a bare environment), its evaluation worker SIGKILLed during a
verification. The web server answers throughout, the supervisor (scripts/run-dev) has the worker
back within 30 s, and the submission ends with the verdict an identical upload reached without
the kill (its job taken back from the dead worker by the reaper at once: jobs_of_dead_workers).
Then Ctrl-C stops everything. And a newcomer who starts Docker after `make run` gets the
synthetic X-ray judge then, without a restart: the X-ray trials of an upload made before are
graded by it.

Marked `makerun` (about 5 minutes: the site's start-up, two verifications in Docker): `make test`
deselects it, .ci/run runs it (-m makerun). Needs Docker (the verification and the synthetic
X-ray judge) and the local images.
"""

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from devtools.harbor_fixtures import HarborJobBuilder, build_metadata
from evaluation.task_specs import package_digest
from submissions.client import upload
from tests.clone_support import fresh_clone
from tests.evaluation import verification_support as vs

pytestmark = [pytest.mark.docker, pytest.mark.makerun]

REPO = Path(__file__).resolve().parents[2]
SLUG = "healthagentbench-synthetic@1.0"
FINAL = ("verified", "consistent", "discrepancy", "failed", "published")
VERDICT_TIMEOUT_S = 900


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def clone(tmp_path):
    root = fresh_clone(tmp_path / "healthagentbench")
    yield root
    shutil.rmtree(root, ignore_errors=True)


class Site:
    """`make run PORT=<port>` in its own process group, its console in make-run.log."""

    def __init__(self, clone: Path, **env: str):
        self.clone, self.port = clone, _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = clone / "make-run.log"
        self.env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR", "DOCKER_HOST")
                    if k in os.environ}
        self.env.update(env)
        self.log = self.log_path.open("w+")
        self.proc = subprocess.Popen(["make", "run", f"PORT={self.port}"], cwd=clone,
                                     env=self.env,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def console(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str, timeout: float = 10) -> int:
        with urllib.request.urlopen(self.base + path, timeout=timeout) as r:  # noqa: S310
            return r.status

    def wait_up(self) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.console()[-4000:]
            try:
                if self.get("/healthz", timeout=2) == 200 and self.state().get("worker", {}).get(
                        "pid") and self.console().count("main@") and " ready." in self.console():
                    return
            except OSError:
                pass
            time.sleep(1)
        pytest.fail("make run did not come up: " + self.console()[-4000:])

    def state(self) -> dict:
        try:
            return json.loads((self.clone / "var" / "run-dev.json").read_text())
        except (OSError, ValueError):
            return {}

    def manage(self, *args: str) -> str:
        """A command typed by hand beside the site (its .env: DEBUG, SQLite)."""
        done = subprocess.run([str(self.clone / ".venv" / "bin" / "python"), "manage.py", *args],
                              cwd=self.clone, env=self.env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done.stdout

    def db(self, sql: str, *params):
        with sqlite3.connect(self.clone / "db.sqlite3", timeout=30) as conn:
            return conn.execute(sql, params).fetchall()

    def stop(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl-C in make run's terminal
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return -9
        finally:
            self.log.close()


NO_MODEL = [{"model_name": "none", "model_provider": "none", "model_display_name": "no model",
             "model_org_display_name": "none"}]


def _upload(site: Site, token: str, work: Path, n: int, agent: str = "codex",
            outputs: dict | None = None) -> int:
    """A Harbor run of every synthetic task (one attempt each), as the upload client sends it;
    ``agent="oracle"``: the Submit page's try-out (Harbor's oracle, no model, no trajectory),
    with ``outputs`` the oracle's real outputs."""
    tasks = {}
    for toml in sorted((site.clone / "tasks").glob("*/*/task.toml")):
        name = f"{toml.parent.parent.name}/{toml.parent.name}"
        if name.endswith("/synthetic_01"):
            tasks[name] = package_digest(toml.parent)
    root = work / f"run-{n}"
    oracle = agent == "oracle"
    job = HarborJobBuilder(tasks, attempts=1, agent=agent,
                           model=None if oracle else "openai/gpt-5.5",
                           job_name=f"2026-12-07__10-00-{n:02d}", outputs=outputs).build(root)
    if oracle:  # Harbor's oracle writes agent/oracle.txt, no trajectory
        for trial in job.all_trials():
            (trial / "agent" / "trajectory.json").unlink()
    archive = work / f"run-{n}.tar.gz"
    subprocess.run(["tar", "czf", str(archive), "-C", str(root), "."], check=True)
    meta = work / "metadata.yaml"
    meta.write_text(yaml.safe_dump(build_metadata(benchmark=SLUG) if not oracle else build_metadata(
        benchmark=SLUG, agent_display_name="Oracle (try-out)", agent_org_display_name="Harbor",
        agent_url="https://github.com/harbor-framework/harbor", harness="oracle",
        harness_version="1.0.0", models=NO_MODEL)))
    with open(os.devnull, "w") as devnull:
        return upload(site.base, token, archive, meta, uuid.uuid4().hex, out=devnull)["id"]


def _status(site: Site, pk: int) -> str:
    return site.db("SELECT status FROM submissions_submission WHERE id = ?", pk)[0][0]


def _wait_final(site: Site, pk: int) -> str:
    deadline = time.monotonic() + VERDICT_TIMEOUT_S
    while (status := _status(site, pk)) not in FINAL:
        assert time.monotonic() < deadline, (status, site.console()[-6000:])
        time.sleep(2)
    return status


class Prober(threading.Thread):
    """GET / every half second while the worker is killed and restarted: every answer counted."""

    def __init__(self, site: Site):
        super().__init__(daemon=True)
        self.site, self.halt = site, threading.Event()
        self.ok, self.failed = 0, []

    def run(self):
        while not self.halt.is_set():
            try:
                self.ok += self.site.get("/healthz", timeout=10) == 200
            except OSError as exc:
                self.failed.append(str(exc))
            time.sleep(0.5)


def _one_attempt_per_task(site: Site) -> None:
    """One attempt per task on the try-out version, as the newcomer journey test asks."""
    site.manage("shell", "-c", "from evaluation.models import BenchmarkVersion as B; "
                "B.objects.filter(name='healthagentbench-synthetic', version='1.0')"
                ".update(attempts_per_task=1)")


def _stopped_cleanly(site: Site, code: int) -> None:
    console = site.console()
    assert "make run: stopped" in console, console[-3000:]
    assert code in (0, 2, -2, 130), (code, console[-3000:])  # make's exit on Ctrl-C
    leftover = subprocess.run(["pgrep", "-f", str(site.clone)], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout


def test_make_run_survives_its_worker_killed_mid_verification(clone, tmp_path, docker_engine):
    site = Site(clone)
    try:
        site.wait_up()
        console = site.console()
        assert "synthetic judge up at" in console, console[-3000:]
        _one_attempt_per_task(site)
        token = site.manage("issue_token", "survivor").strip().splitlines()[-1]
        work = tmp_path / "work"
        work.mkdir()

        # Without a kill: the verdict the site reaches for this run.
        reference = _wait_final(site, _upload(site, token, work, 1))

        # The same run again, its worker SIGKILLed once a check has been written.
        pk = _upload(site, token, work, 2)
        deadline = time.monotonic() + VERDICT_TIMEOUT_S
        while not site.db("SELECT 1 FROM submissions_trialcheck c JOIN "
                          "submissions_verificationjob j ON c.job_id = j.id "
                          "WHERE j.submission_id = ? AND j.status = 'running'", pk):
            assert time.monotonic() < deadline and _status(site, pk) not in FINAL, \
                site.console()[-4000:]
            time.sleep(0.2)
        before = site.state()["worker"]
        prober = Prober(site)
        prober.start()
        readies = site.console().count(" ready.")
        killed_at = time.monotonic()
        os.kill(before["pid"], signal.SIGKILL)
        while not (site.state().get("worker", {}).get("pid") not in (None, before["pid"])
                   and site.console().count(" ready.") > readies):
            assert time.monotonic() - killed_at < 30, site.console()[-4000:]
            time.sleep(0.2)
        back_s = time.monotonic() - killed_at
        verdict = _wait_final(site, pk)
        prober.halt.set()
        prober.join()
        console = site.console()
        assert "make run: worker killed by SIGKILL; restarting it in 1 s" in console, \
            console[-4000:]
        assert "make run: worker restarted, pid" in console
        assert prober.failed == [] and prober.ok > 0, prober.failed[:5]
        assert verdict == reference, (verdict, reference, console[-6000:])
        attempts = site.db("SELECT attempt FROM submissions_verificationjob "
                           "WHERE submission_id = ? AND status = 'done'", pk)
        assert attempts == [(2,)], attempts  # the killed attempt, then the one that finished
        print(f"worker back {back_s:.1f} s after the SIGKILL; verdict {verdict} (without the "
              f"kill: {reference}); web answered {prober.ok} probes, none failed")
    finally:
        code = site.stop()
    _stopped_cleanly(site, code)


def test_the_synthetic_judge_comes_up_when_docker_does_and_judges_what_waited(
        clone, tmp_path, docker_engine):
    """The engine's socket appears only after make run started (DOCKER_HOST names a link made
    later): the judge starts then, the site's processes get its address, `judge_pending` runs,
    and the X-ray trial of the Submit page's try-out (Harbor's oracle) uploaded before it is
    graded by the synthetic judge; the try-out then ends in a published row, no restart."""
    engine = docker_engine["docker_host"].removeprefix("unix://")
    link = tmp_path / "docker.sock"
    site = Site(clone, DOCKER_HOST=f"unix://{link}")
    try:
        site.wait_up()
        assert "no Docker engine answers" in site.console()
        assert "synthetic judge up" not in site.console()
        _one_attempt_per_task(site)
        token = site.manage("issue_token", "late-docker").strip().splitlines()[-1]
        work = tmp_path / "work"
        work.mkdir()
        oracle = vs.oracle_outputs(tmp_path / "oracle", only=[
            f"{p.parent.parent.name}/{p.parent.name}"
            for p in sorted((vs.REPO / "tasks").glob("*/synthetic_01/task.toml"))])
        outputs = {t: vs.oracle_output(oracle, t) for t in oracle}
        pk = _upload(site, token, work, 1, agent="oracle", outputs=outputs)
        time.sleep(5)
        link.symlink_to(engine)  # the newcomer starts Docker
        deadline = time.monotonic() + VERDICT_TIMEOUT_S
        judged = []
        while not judged:
            assert time.monotonic() < deadline, site.console()[-6000:]
            time.sleep(2)
            if _status(site, pk) in FINAL:
                judged = site.db(
                    "SELECT t.judge_model FROM submissions_trial t JOIN evaluation_benchmarktask b"
                    " ON t.benchmark_task_id = b.id WHERE t.submission_id = ? AND b.name LIKE "
                    "'xray-report-correction/%' AND t.judge_model != ''", pk)
        assert judged == [("hab-synthetic-judge",)], judged
        # The try-out ends in a row: published by the site, unranked, labelled reference.
        assert _status(site, pk) == "published", site.console()[-4000:]
        entry = site.db("SELECT e.verification_level, e.success_rate FROM "
                        "leaderboard_leaderboardentry e WHERE e.submission_id = ?", pk)
        assert entry == [("reference", 1.0)], entry
        with urllib.request.urlopen(f"{site.base}/?benchmark={SLUG}", timeout=30) as r:  # noqa: S310
            page = r.read().decode()
        apart = page.split('data-testid="unranked-table"')[1].split("</table>")[0]
        assert ">Oracle (try-out)<" in apart and "reference run (not ranked)" in apart
        console = site.console()
        assert "make run: synthetic judge up at" in console, console[-4000:]
        assert "restarting web and workers with its address" in console, console[-4000:]
        assert "make run: re-verifying what awaited a judge (manage.py judge_pending)" in console
    finally:
        code = site.stop()
    _stopped_cleanly(site, code)
