"""A scripted model server speaking three wire formats: the test's stand-in for a model.

* OpenAI Chat Completions (`POST .../chat/completions`; terminus-2, mini-swe-agent, Copilot CLI's
  bring-your-own-key provider), streamed as one chunk when asked;
* Anthropic Messages (`POST .../messages`; Claude Code), server-sent events when `stream`;
* OpenAI Responses (`POST .../responses`; Codex), server-sent events when `stream`.

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


# The shell tool of each harness, as the request's tool list names it, and its arguments.
SHELL_TOOLS = {
    "bash": lambda cmd: {"command": cmd},  # mini-swe-agent, Copilot CLI
    "Bash": lambda cmd: {"command": cmd, "description": "scripted step"},  # Claude Code
    "shell_command": lambda cmd: {"command": cmd},  # Codex
    # Codex (unified exec): it returns what a command printed within yield_time_ms (10 s by
    # default) and leaves the rest to later polls; the scripted plan waits for the end instead.
    "exec_command": lambda cmd: {"cmd": cmd, "yield_time_ms": 30000},
    "shell": lambda cmd: {"command": ["bash", "-lc", cmd]},  # Codex (older)
    # OpenHands' CodeActAgent: security_risk is required; the timeout turns its soft timeout
    # (a "still running?" question back to the model after 10 s) into a hard one.
    "execute_bash": lambda cmd: {"command": cmd, "security_risk": "LOW", "timeout": 300},
}


def finish_reply(message: str = "Done.") -> dict:
    """A tool-calling answer that ends the run: OpenHands' `finish` tool (a plain text answer
    makes its headless loop ask the model to go on)."""
    return {"content": "", "tool_calls": [{"name": "finish", "arguments": {"message": message}}]}


def _tool_names(req: dict) -> list[str]:
    names = []
    for tool in req.get("tools") or []:
        if isinstance(tool, dict):
            fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            names.append(str(fn.get("name") or ""))
    return names


def shell_call(reply: dict, req: dict) -> list[tuple[str, dict]]:
    """A bash_reply's calls as (tool name, arguments) in the shell tool the request offers."""
    offered = _tool_names(req)
    name = next((n for n in SHELL_TOOLS if n in offered), "bash")
    calls = []
    for c in reply.get("tool_calls") or []:
        args = c["arguments"]
        if c["name"] == "bash" and "command" in args:
            args = SHELL_TOOLS[name](args["command"])
            calls.append((name, args))
        else:
            calls.append((c["name"], args))
    return calls


def _sse(events: list[tuple[str | None, dict]]) -> bytes:
    out = []
    for event, data in events:
        out.append((f"event: {event}\n" if event else "") + f"data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


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
        """Each request's conversation as text (tool results included, whatever the format)."""
        with self._lock:
            return [json.dumps(r["messages"]) if r.get("raw") else
                    "\n".join(_text(m.get("content")) for m in r["messages"])
                    for r in self.requests if model is None or r["model"] == model]

    def paths(self) -> set:
        with self._lock:
            return {r.get("path") for r in self.requests}

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
        self._server = ThreadingHTTPServer(("0.0.0.0", 0), _Handler)  # noqa: S104 - see docstring
        self._server.stub = self
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    """The stub's request handler; the stub is the server's `stub` attribute."""

    @property
    def stub(self) -> StubModel:
        return self.server.stub

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):  # /v1/models
        body = {"object": "list", "data": [
            {"id": m, "object": "model", "owned_by": "stub"} for m in self.stub.scripts]}
        self._send(200, body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "bad json"}})
            return
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/messages"):
            self._anthropic(req)
            return
        if path.endswith("/responses"):
            self._responses(req)
            return
        model = str(req.get("model") or "").split("/")[-1]
        messages = req.get("messages") or []
        script = self.stub.scripts.get(model)
        if script is None:
            self._send(404, {"error": {"message": f"no model {model}"}})
            return
        self._record(model, messages, "/chat/completions")
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        reply = script[min(turn, len(script) - 1)]
        message = {"role": "assistant", "content": reply}
        finish = "stop"
        if isinstance(reply, dict):  # a tool-calling answer (bash_reply)
            message = {"role": "assistant", "content": reply.get("content") or "",
                       "tool_calls": [
                           {"id": f"call_{turn}_{i}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}
                           for i, (name, args) in enumerate(shell_call(reply, req))]}
            finish = "tool_calls" if message["tool_calls"] else "stop"
        content = message["content"]
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4
        completion = {
            "id": f"chatcmpl-stub-{len(self.stub.requests)}",
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

    def _record(self, model, messages, path, raw=False):
        with self.stub._lock:
            self.stub.requests.append({
                "model": model, "messages": messages, "path": path, "raw": raw,
                "authorization": self.headers.get("Authorization")
                or self.headers.get("x-api-key")})

    def _script(self, req) -> tuple[str, list | None]:
        model = str(req.get("model") or "").split("/")[-1]
        script = self.stub.scripts.get(model)
        if script is None:
            self._send(404, {"error": {"type": "not_found_error",
                                       "message": f"no model {model}"}})
        return model, script

    def _anthropic(self, req):
        """Anthropic Messages: the n-th reply answers a conversation with n assistant
        turns; streamed as Anthropic's server-sent events when asked."""
        model, script = self._script(req)
        if script is None:
            return
        messages = req.get("messages") or []
        self._record(model, messages, "/messages", raw=True)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        reply = script[min(turn, len(script) - 1)]
        blocks, stop = [], "end_turn"
        if isinstance(reply, dict):
            if reply.get("content"):
                blocks.append({"type": "text", "text": reply["content"]})
            for i, (name, args) in enumerate(shell_call(reply, req)):
                blocks.append({"type": "tool_use", "id": f"toolu_{turn}_{i}",
                               "name": name, "input": args})
                stop = "tool_use"
        else:
            blocks.append({"type": "text", "text": reply})
        usage = {"input_tokens": len(json.dumps(messages)) // 4,
                 "output_tokens": len(json.dumps(blocks)) // 4}
        msg = {"id": f"msg_stub_{len(self.stub.requests)}", "type": "message",
               "role": "assistant", "model": model, "content": blocks,
               "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not req.get("stream"):
            self._send(200, msg)
            return
        start = {**msg, "content": [], "stop_reason": None,
                 "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}
        events = [("message_start", {"type": "message_start", "message": start})]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                first = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": b["text"]}
            else:
                first = {**b, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
            events += [("content_block_start", {"type": "content_block_start",
                                                "index": i, "content_block": first}),
                       ("content_block_delta", {"type": "content_block_delta",
                                                "index": i, "delta": delta}),
                       ("content_block_stop", {"type": "content_block_stop", "index": i})]
        events += [("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": usage["output_tokens"]}}),
                   ("message_stop", {"type": "message_stop"})]
        self._events(_sse(events))

    def _responses(self, req):
        """OpenAI Responses: the n-th reply answers an input with n function calls or
        assistant messages; streamed as the Responses API's events when asked."""
        model, script = self._script(req)
        if script is None:
            return
        items = req.get("input") or []
        items = items if isinstance(items, list) else [{"role": "user", "content": items}]
        self._record(model, items, "/responses", raw=True)
        turn = sum(1 for m in items if isinstance(m, dict) and (
            m.get("type") == "function_call" or m.get("role") == "assistant"))
        reply = script[min(turn, len(script) - 1)]
        rid = f"resp_stub_{len(self.stub.requests)}"
        output = []
        text = reply if isinstance(reply, str) else (reply.get("content") or "")
        if text:
            output.append({"type": "message", "id": f"msg_{rid}", "role": "assistant",
                           "status": "completed", "content": [
                               {"type": "output_text", "text": text, "annotations": []}]})
        if isinstance(reply, dict):
            for i, (name, args) in enumerate(shell_call(reply, req)):
                output.append({"type": "function_call", "id": f"fc_{rid}_{i}",
                               "call_id": f"call_{turn}_{i}", "name": name,
                               "arguments": json.dumps(args), "status": "completed"})
        n_in, n_out = len(json.dumps(items)) // 4, len(json.dumps(output)) // 4
        response = {"id": rid, "object": "response", "created_at": int(time.time()),
                    "status": "completed", "model": model, "output": output,
                    "usage": {"input_tokens": n_in,
                              "input_tokens_details": {"cached_tokens": 0},
                              "output_tokens": n_out,
                              "output_tokens_details": {"reasoning_tokens": 0},
                              "total_tokens": n_in + n_out}}
        if not req.get("stream"):
            self._send(200, response)
            return
        events = [("response.created", {"type": "response.created", "response": {
            **response, "status": "in_progress", "output": [], "usage": None}})]
        for i, item in enumerate(output):
            events += [("response.output_item.added", {
                "type": "response.output_item.added", "output_index": i, "item": item}),
                       ("response.output_item.done", {
                "type": "response.output_item.done", "output_index": i, "item": item})]
        events.append(("response.completed", {"type": "response.completed",
                                              "response": response}))
        self._events(_sse(events))

    def _events(self, data: bytes):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

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
        self._events(data)
