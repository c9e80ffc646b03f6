"""What one command in a container produced: exit status, bounded output, limit hits."""

from __future__ import annotations

import dataclasses
import threading

TRUNCATION_MARKER = (
    "\n[... output truncated by the HealthAgentBench runner: {omitted} bytes omitted ...]\n"
)

REASON_OOM = "memory limit exceeded"
REASON_TIMEOUT = "time limit exceeded"
REASON_PIDS = "process limit exceeded"


@dataclasses.dataclass
class ExecResult:
    exit_code: int | None
    output: bytes
    output_bytes: int  # total bytes the command wrote (stdout + stderr), kept or not
    truncated: bool
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    pids_exhausted: bool = False
    container_died: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.oom_killed)

    @property
    def status(self) -> str:
        """ok | memory_limit | process_limit | time_limit | error_exit."""
        if self.oom_killed:
            return "memory_limit"
        if self.pids_exhausted and (self.timed_out or self.exit_code != 0):
            return "process_limit"
        if self.timed_out:
            return "time_limit"
        return "ok" if self.exit_code == 0 else "error_exit"

    @property
    def reasons(self) -> list[str]:
        out = []
        if self.oom_killed:
            out.append(REASON_OOM)
        if self.pids_exhausted:
            out.append(REASON_PIDS)
        if self.timed_out:
            out.append(REASON_TIMEOUT)
        if self.exit_code not in (None, 0) and not self.timed_out:
            if self.exit_code > 128:
                out.append(f"killed by signal {self.exit_code - 128}")
            else:
                out.append(f"exited with code {self.exit_code}")
        if self.container_died and not self.timed_out:
            out.append("container stopped unexpectedly")
        return out

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


def exec_frames(sock):
    """The output bytes of a started exec's hijacked socket (stdout and stderr interleaved)."""
    # Imported here: importing the runner must not need the SDK (see engine._docker).
    from docker.utils.socket import frames_iter

    for _stream_id, data in frames_iter(sock, False):
        yield data


def close_exec_socket(sock) -> None:
    """Close a hijacked exec socket and its HTTP response, response first.

    docker-py keeps the 101 response on the socket (``sock._response``), a reference cycle. Left
    to the garbage collector, the socket may be finalised first and the response's close then
    prints "Exception ignored ... ValueError: I/O operation on closed file" at interpreter exit.
    """
    response = sock.__dict__.pop("_response", None) if hasattr(sock, "__dict__") else None
    for closeable in (response, sock):
        try:
            if closeable is not None:
                closeable.close()
        except Exception:  # noqa: BLE001, S110 - already closed by the engine or a kill
            pass


class _OutputCollector(threading.Thread):
    """Drains an exec's socket; keeps the first `cap` bytes and counts the rest (bounded memory)."""

    def __init__(self, sock, cap: int):
        super().__init__(daemon=True)
        self.sock = sock
        self.stream = exec_frames(sock)
        self.cap = cap
        self.buf = bytearray()
        self.total = 0
        self.truncated = False
        self.error: BaseException | None = None

    def run(self):
        try:
            for chunk in self.stream:
                if not chunk:
                    continue
                self.total += len(chunk)
                room = self.cap - len(self.buf)
                if room > 0:
                    self.buf += chunk[:room]
                if len(chunk) > room:
                    self.truncated = True
        except Exception as exc:  # noqa: BLE001 - a closed stream ends the collection
            self.error = exc

    def close(self):
        close_exec_socket(self.sock)

    def output(self) -> bytes:
        out = bytes(self.buf)
        if self.truncated:
            out += TRUNCATION_MARKER.format(omitted=self.total - len(self.buf)).encode()
        return out
