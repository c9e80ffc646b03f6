"""A scripted OpenAI-compatible chat-completions server: the test's stand-in for a model.

The harness (Harbor's terminus-2) and Harbor are real; only the model is scripted. Each model
name has a script: a list of assistant replies, the n-th reply answering the n-th turn of a
conversation (the number of assistant messages already in the request); past the end the last
reply repeats. A reply is a string (the assistant's text) or a tool-calling answer
(`bash_reply`, for harnesses that act through tool calls: mini-swe-agent). Every request is recorded (model, the text of the messages) so a test can read
what the harness sent back, e.g. the terminal output of an egress probe.

    stub = StubModel({"stub-solves": [reply1, reply2]}).start()
    stub.base_url  # http://127.0.0.1:<port>/v1 (listens on 0.0.0.0: reachable from a bridged
                   # container at the Docker gateway, so "unreachable" means the network is cut)
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def bash_reply(command: str, thought: str = "scripted") -> dict:
    """An OpenAI tool-calling answer: one call of the `bash` tool (mini-swe-agent's action)."""
    return {"content": thought, "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def terminus_reply(commands: list[str], *, complete: bool, duration: float = 0.5) -> str:
    """A terminus-2 JSON answer that types `commands` (each followed by Enter)."""
    return json.dumps({
        "analysis": "scripted",
        "plan": "scripted",
        "commands": [{"keystrokes": c + "\n", "duration": duration} for c in commands],
        "task_complete": complete,
    })


def _text(content) -> str:
    if isinstance(content, list):  # content parts
        return "\n".join(str(p.get("text") or "") if isinstance(p, dict) else str(p)
                         for p in content)
    return str(content or "")


class StubModel:
    def __init__(self, scripts: dict[str, list]):
        self.scripts = scripts
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- what the harness sent
    def texts(self, model: str | None = None) -> list[str]:
        with self._lock:
            return ["\n".join(_text(m.get("content")) for m in r["messages"])
                    for r in self.requests if model is None or r["model"] == model]

    def authorizations(self) -> set:
        with self._lock:
            return {r["authorization"] for r in self.requests}

    def count(self, model: str | None = None) -> int:
        return len(self.texts(model))

    # -- server
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubModel:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # /v1/models
                body = {"object": "list", "data": [
                    {"id": m, "object": "model", "owned_by": "stub"} for m in stub.scripts]}
                self._send(200, body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    req = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "bad json"}})
                    return
                model = str(req.get("model") or "").split("/")[-1]
                messages = req.get("messages") or []
                script = stub.scripts.get(model)
                if script is None:
                    self._send(404, {"error": {"message": f"no model {model}"}})
                    return
                with stub._lock:
                    stub.requests.append({"model": model, "messages": messages,
                                          "authorization": self.headers.get("Authorization")})
                turn = sum(1 for m in messages if m.get("role") == "assistant")
                reply = script[min(turn, len(script) - 1)]
                message = {"role": "assistant", "content": reply}
                finish = "stop"
                if isinstance(reply, dict):  # a tool-calling answer (bash_reply)
                    message = {"role": "assistant", "content": reply.get("content") or "",
                               "tool_calls": [
                                   {"id": f"call_{turn}_{i}", "type": "function",
                                    "function": {"name": c["name"],
                                                 "arguments": json.dumps(c["arguments"])}}
                                   for i, c in enumerate(reply.get("tool_calls") or [])]}
                    finish = "tool_calls" if message["tool_calls"] else "stop"
                content = message["content"]
                prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4
                completion = {
                    "id": f"chatcmpl-stub-{len(stub.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                    "usage": {"prompt_tokens": prompt_tokens,
                              "completion_tokens": len(content) // 4,
                              "total_tokens": prompt_tokens + len(content) // 4},
                }
                if req.get("stream"):
                    self._stream(completion)
                else:
                    self._send(200, completion)

            def _send(self, status: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, completion: dict):
                choice = completion["choices"][0]
                delta = dict(choice["message"])
                if delta.get("tool_calls"):
                    delta["tool_calls"] = [{"index": i, **c}
                                           for i, c in enumerate(delta["tool_calls"])]
                chunk = {**completion, "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": delta,
                                      "finish_reason": choice["finish_reason"]}]}
                data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)  # noqa: S104 - see docstring
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
