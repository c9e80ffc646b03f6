"""The synthetic judge: a deterministic rule standing in for the X-ray LLM judge, for the
synthetic benchmark only. It is not an LLM and grades nothing but the synthetic X-ray tasks
(their answer lists the error phrases injected into the draft report).

Rule "injected-errors": the number of clinically significant errors is the number of injected
error phrases still present in the candidate FINDINGS (case-insensitive, on
whitespace-normalised text); 0 when the candidate removed them all. The oracle's reference
report therefore passes, an unchanged draft fails.

It speaks the judge's protocol (OpenAI-compatible POST .../chat/completions, the user message
built by evaluation.judge.client.build_user_prompt) and answers as the model
SYNTHETIC_JUDGE_MODEL, whatever model a request names. That name is what the site records with
every verdict it gave (Trial.judge_model), so the pages label those grades "synthetic judge".

`make run` (scripts/run-dev) serves it beside the site: `manage.py serve_synthetic_judge`
binds the host's address on the judge's Docker network (where Harbor's verifier containers and
the site's judge gateway reach it) and writes XRAY_JUDGE_URL/XRAY_JUDGE_MODEL for the site's
processes. Production refuses it: the command needs DEBUG, and `check --deploy` fails when
XRAY_JUDGE_MODEL names it (evaluation/checks.py). The tests' scriptable stand-in
(tests/evaluation/judge_standin.py) is this server with queued replies in front of the rule.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from evaluation.runner.judge.server import ChatHandler, sections

SYNTHETIC_JUDGE_MODEL = "hab-synthetic-judge"
RULE = "injected-errors"
# make run's synthetic trajectory judge (evaluation/judge/trajectory.py, try-out versions only):
# the screen's reward-hacking rules read over the trajectory's own steps, not an LLM.
SYNTHETIC_TRAJECTORY_JUDGE_MODEL = "hab-synthetic-trajectory-judge"
TRAJECTORY_RULE = "screen-rules"


def is_synthetic(model: str | None) -> bool:
    """True when a recorded judge model is this synthetic judge."""
    return (model or "").strip() == SYNTHETIC_JUDGE_MODEL


def is_synthetic_trajectory_judge(model: str | None) -> bool:
    """True when a recorded trajectory judge model is make run's synthetic trajectory judge."""
    return (model or "").strip() == SYNTHETIC_TRAJECTORY_JUDGE_MODEL


def _normalise(text) -> str:
    return " ".join(str(text).lower().split())


def injected_errors_left(body: dict) -> int:
    """The rule: how many injected error phrases the candidate FINDINGS still contain.
    ValueError when the request is not a judge request (no user message with the sections)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    user = next((m.get("content", "") for m in messages or []
                 if isinstance(m, dict) and m.get("role") == "user"), None)
    if not isinstance(user, str):
        raise ValueError("no user message")
    candidate, answer = sections(user)
    haystack = _normalise(candidate)
    phrases = [e.get("phrase", "") if isinstance(e, dict) else e
               for e in answer["injected_errors"] or []]
    return sum(1 for p in phrases if _normalise(p) and _normalise(p) in haystack)


def completion(content: str, model: str = SYNTHETIC_JUDGE_MODEL) -> dict:
    """An OpenAI chat-completion response carrying `content`."""
    return {
        "id": "chatcmpl-synthetic", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
    }


def verdict_completion(significant: int, model: str = SYNTHETIC_JUDGE_MODEL) -> dict:
    return completion(json.dumps({"clinically_significant_errors": int(significant),
                                  "clinically_insignificant_errors": 0}), model)


class SyntheticJudge:
    """The rule behind an HTTP server on (host, port); port 0 picks a free one.

        with SyntheticJudge(host="172.17.0.1") as judge:
            judge.url   # "http://172.17.0.1:<port>"

    Subclasses change `reply` (tests/evaluation/judge_standin.py queues scripted replies) and
    `observe` (called with every request's handler before it is answered)."""

    model = SYNTHETIC_JUDGE_MODEL

    def __init__(self, host: str = "127.0.0.1", port: int = 0, ssl_context=None):
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self.scheme = "https" if ssl_context is not None else "http"
        if ssl_context is not None:
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self._server.server_address[0]}:{self.port}"

    def observe(self, handler: BaseHTTPRequestHandler) -> None:
        """Hook: every request, before its body is read."""

    def reply(self, body: dict) -> tuple[int, dict | bytes]:
        """(HTTP status, response body) for one parsed chat-completions request."""
        try:
            significant = injected_errors_left(body)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return 400, {"error": {"message": f"not a judge request: {exc}"}}
        return 200, verdict_completion(significant, self.model)

    def serve_forever(self) -> None:
        try:
            self._server.serve_forever(poll_interval=0.05)
        finally:
            self._server.server_close()

    def start(self):
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _handler_for(judge: SyntheticJudge):
    class Handler(ChatHandler):
        def do_GET(self):  # noqa: N802 - a browser pointed at it learns what it is
            self.send_json(200, {"synthetic_judge": {
                "model": judge.model, "rule": RULE,
                "serves": "POST /v1/chat/completions (the X-ray judge's protocol)"}})

        def do_POST(self):  # noqa: N802
            judge.observe(self)
            body = self.read_chat_request()
            if body is not None:
                self.send_json(*judge.reply(body))

    return Handler
