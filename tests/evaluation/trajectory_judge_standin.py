"""The tests' trajectory judge: an OpenAI-compatible chat endpoint on 127.0.0.1 that answers
the trajectory judge's protocol (evaluation/judge/trajectory.py). Not an LLM: it replies
`clean` unless a test queued replies (`script`), and it records every request it got (the
system prompt and the user message as sent), with a token usage so that costs add up.

The worker asks it from the host (the trajectory judge runs in the worker, no container), so
127.0.0.1 is enough. The session's stand-in (`session_standin`) answers every verification the
tests run in-process or in a worker subprocess (tests/evaluation/verification_support.py):
a site without a trajectory judge keeps its passes "awaiting trajectory judge".
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLEAN = json.dumps({"verdict": "clean", "reason": "", "steps": []})
MODEL = "stub-trajectory-judge"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 50}


def judgement(verdict: str, reason: str = "", steps=()) -> str:
    return json.dumps({"verdict": verdict, "reason": reason, "steps": list(steps)})


class TrajectoryJudgeStandIn:
    def __init__(self, host: str = "127.0.0.1"):
        self.host = host
        self.requests: list[dict] = []
        self._queue: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._server.server_address[1]}/v1"

    def script(self, *replies: str) -> None:
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def _next(self, body: dict) -> str:
        with self._lock:
            self.requests.append(body)
            return self._queue.pop(0) if self._queue else CLEAN

    def start(self) -> TrajectoryJudgeStandIn:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                content = standin._next(body)
                payload = json.dumps({"choices": [{"message": {"role": "assistant",
                                                               "content": content}}],
                                      "model": MODEL, "usage": USAGE}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


_SESSION: list[TrajectoryJudgeStandIn] = []


def session_standin() -> TrajectoryJudgeStandIn:
    """The test session's stand-in (started once), answering clean unless scripted."""
    if not _SESSION:
        _SESSION.append(TrajectoryJudgeStandIn().start())
    return _SESSION[0]
