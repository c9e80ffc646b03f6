"""What a killed worker leaves behind, taken back without waiting: its running job (the reaper
requeues a job whose local owner process is gone, not only after its heartbeat's stale bound) and
its work directories in the temporary folder (runner.reap_work_dirs, by owner and age)."""

import os
import subprocess
import sys
import tempfile
import time

import pytest
from django.utils import timezone

from evaluation import runner
from evaluation.runner import reaper
from tests.factories import SubmissionFactory


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])  # noqa: S603
    proc.wait()
    return proc.pid


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    """This process's temporary folder is tmp_path (nothing of the host's /tmp is touched)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(reaper, "_base_tempdir", None)
    return tmp_path


def test_a_dead_processes_work_folder_goes_at_once_a_live_ones_stays(temp_root):
    dead = temp_root / f"hab-work-{_dead_pid()}"
    (dead / "hab-regrade-abc" / "out").mkdir(parents=True)
    live = temp_root / f"hab-work-{os.getppid()}"  # the process that started pytest
    (live / "hab-rerun-xyz").mkdir(parents=True)
    assert runner.reap_work_dirs(3600) == [dead.name]
    assert not dead.exists() and (live / "hab-rerun-xyz").is_dir()


def test_loose_work_directories_go_by_age_and_only_the_work_prefixes(temp_root):
    old = time.time() - 7200
    for name in ("hab-regrade-old", "hab-harbor-old", "hab-replay-old", "hab-validate-old",
                 "hab-chaos-pg-old", "hab-regrade-young"):
        (temp_root / name).mkdir()
        if name.endswith("-old"):
            os.utime(temp_root / name, (old, old))
    removed = runner.reap_work_dirs(3600)
    assert removed == ["hab-harbor-old", "hab-regrade-old", "hab-replay-old"]
    # A command's folders (validate_task's, the soak's PostgreSQL) and a young one stay.
    assert sorted(p.name for p in temp_root.iterdir()) == [
        "hab-chaos-pg-old", "hab-regrade-young", "hab-validate-old"]


def test_another_users_folders_are_never_touched(temp_root, monkeypatch):
    dead = temp_root / f"hab-work-{_dead_pid()}"
    dead.mkdir()
    monkeypatch.setattr(os, "getuid", lambda: os.stat(dead).st_uid + 1)
    assert runner.reap_work_dirs(0) == [] and dead.is_dir()


def test_a_worker_process_works_in_its_own_folder_and_removes_it_on_a_clean_stop(temp_root):
    own = runner.work_tempdir_use()
    try:
        assert own == temp_root / f"hab-work-{os.getpid()}"
        with tempfile.TemporaryDirectory(prefix="hab-regrade-") as tmp:
            assert os.path.dirname(tmp) == str(own)
            # The reaper still looks in the host's folder, and spares this live process's own.
            assert runner.temp_root() == temp_root and runner.reap_work_dirs(0) == []
    finally:
        runner.work_tempdir_done()
    assert not own.exists()


@pytest.mark.django_db
def test_the_reaper_takes_back_at_once_a_job_whose_local_worker_is_gone(settings, temp_root):
    import socket

    from submissions.models import JobStatus, VerificationJob
    from submissions.verification import reap_stuck_submissions

    settings.VERIFICATION_QUEUE = "dead-workers-test"  # nothing consumes it
    sub = SubmissionFactory(status="verifying")
    fresh = timezone.now()
    gone = VerificationJob.objects.create(
        submission=sub, status=JobStatus.RUNNING, attempt=1, heartbeat_at=fresh,
        claimed_by=f"{socket.gethostname()}:{_dead_pid()}")
    report = reap_stuck_submissions()
    gone.refresh_from_db()
    assert report["requeued"] == [gone.pk] and gone.status == JobStatus.PENDING
    assert gone.last_error.endswith("ended; requeued")
    # A live owner with a fresh heartbeat (this process) keeps its job.
    VerificationJob.objects.filter(pk=gone.pk).update(
        status=JobStatus.RUNNING, attempt=2, claimed_by=f"{socket.gethostname()}:{os.getpid()}",
        heartbeat_at=timezone.now())
    assert reap_stuck_submissions()["requeued"] == []
