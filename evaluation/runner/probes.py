"""Probes of a running container's limit hits: OOM events, pids count and pids.events."""

from __future__ import annotations

import re
import threading
import time

from evaluation.runner.results import close_exec_socket, exec_frames


def is_running(api, container_id: str) -> bool:
    try:
        return bool(api.inspect_container(container_id)["State"]["Running"])
    except Exception:  # noqa: BLE001
        return False


def state_oom(api, container_id: str) -> bool:
    try:
        return bool(api.inspect_container(container_id)["State"].get("OOMKilled"))
    except Exception:  # noqa: BLE001
        return False


def pids_current(api, container_id: str) -> int:
    try:
        stats = api.stats(container_id, stream=False, one_shot=True)
        return int((stats.get("pids_stats") or {}).get("current") or 0)
    except Exception:  # noqa: BLE001 - a sampling miss is not an error
        return 0


def pids_events(api, container_id: str, user: str) -> bool:
    """cgroup pids.events 'max' counter > 0 (best effort; fails when pids are exhausted)."""
    if not is_running(api, container_id):
        return False
    try:
        exec_id = api.exec_create(
            container_id,
            [
                "sh",
                "-c",
                "cat /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events 2>/dev/null",
            ],
            user=user,
        )["Id"]
        sock = api.exec_start(exec_id, socket=True)
        try:
            out = b"".join(exec_frames(sock)).decode("utf-8", "replace")
        finally:
            close_exec_socket(sock)
    except Exception:  # noqa: BLE001
        return False
    m = re.search(r"^max (\d+)", out, re.M)
    return bool(m and int(m.group(1)) > 0)


def oom_event_count(api, container_id: str, started_at: float | None) -> int:
    """OOM events of this container so far (any process of it killed by the OOM killer)."""
    since = int(started_at or time.time()) - 1
    try:
        events = api.events(
            since=since,
            # Fractional "now": an integer in the future would make the engine wait for it.
            until=f"{time.time():.9f}",
            filters={"container": container_id, "event": "oom"},
            decode=True,
        )
        try:
            return sum(1 for _ in events)
        finally:
            events.close()
    except Exception:  # noqa: BLE001
        return 0


class PidsSampler(threading.Thread):
    """Samples the container's pids count about once a second (stats calls can take ~1 s)."""

    def __init__(self, api, container_id: str):
        super().__init__(daemon=True)
        self.api, self.container_id = api, container_id
        self.max_pids = 0
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            self.max_pids = max(self.max_pids, pids_current(self.api, self.container_id))
            self._halt.wait(1.0)

    def stop(self):
        self._halt.set()
        self.join(timeout=5)
