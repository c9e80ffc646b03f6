"""A stub of the X-ray LLM judge, for tests only: an OpenAI-compatible /v1/chat/completions
server started by the test. Nothing in the site imports or serves it (production settings
cannot reach it); tests point XRAY_JUDGE_URL at it, and the site's judge gateway
(evaluation/runner/judge_gateway.py) forwards to it like to any judge.

    with JudgeStandIn(replies=[0, 0, 1, "timeout", "http500", "garbage"]) as judge:
        judge.url          # "http://127.0.0.1:<port>"
        judge.requests     # parsed request bodies, in arrival order
        judge.headers      # their headers
        judge.peers        # the client address of each request

For the gateway (a container on Docker's bridge network) to reach it, serve it on the bridge's
host address: JudgeStandIn(host=docker_bridge_ip(), rule="injected-errors").

Replies are served in order from the queue; each is
    an int n        -> {"clinically_significant_errors": n, ...} as the message content
    "timeout"       -> sleep `delay_s` seconds before answering (longer than the client timeout)
    "http500"       -> HTTP 500
    "garbage"       -> a 200 reply whose message content is not the verdict JSON
    "bad-body"      -> a 200 reply whose body is not JSON at all
    a dict          -> sent as the whole response body
When the queue is empty the rule decides ("injected-errors": 0 clinically significant errors iff
the candidate findings contain none of the injected error phrases, else one per phrase found;
matching is case-insensitive on whitespace-normalised text; "always-zero": 0 whatever the
candidate), or HTTP 500 without a rule.

As a script (by hand, e.g. beside `make run`):
    python tests/evaluation/judge_standin.py --port 8765 --rule injected-errors
prints "listening on http://127.0.0.1:<port>" and serves until interrupted.
"""

import argparse
import json
import re
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_SECTION = re.compile(r"<{name}>\n(.*?)\n</{name}>", re.DOTALL)


def _section(text, name):
    match = re.search(_SECTION.pattern.format(name=name), text, re.DOTALL)
    if not match:
        return None
    return json.loads(match.group(1))


def _normalise(text):
    return " ".join(str(text).lower().split())


def injected_errors_rule(body):
    """Number of injected error phrases still present in the candidate findings."""
    user = next(
        (m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"), ""
    )
    candidate = _section(user, "candidate_findings")
    injected = _section(user, "injected_errors") or []
    if candidate is None:
        raise ValueError("no <candidate_findings> section in the prompt")
    haystack = _normalise(candidate)
    phrases = [e["phrase"] if isinstance(e, dict) else e for e in injected]
    return sum(1 for phrase in phrases if _normalise(phrase) and _normalise(phrase) in haystack)


RULES = {"injected-errors": injected_errors_rule, "always-zero": lambda body: 0}


def docker_bridge_ip(network="bridge"):
    """The host's address on a Docker network (where containers on it reach the host)."""
    import docker  # tests only; the script mode needs no Docker SDK

    import ipaddress

    client = docker.from_env()
    try:
        config = client.networks.get(network).attrs["IPAM"]["Config"][0]
    finally:
        client.close()
    # The default bridge lists no gateway: the engine gives the host the subnet's first address.
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def _completion(content, model="judge-standin"):
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }


class JudgeStandIn:
    def __init__(self, replies=(), rule=None, delay_s=5.0, host="127.0.0.1", port=0,
                 ssl_context=None):
        self._replies = deque(replies)
        self._lock = threading.Lock()
        self.rule = RULES[rule] if isinstance(rule, str) else rule
        self.delay_s = delay_s
        self.requests = []
        self.headers = []
        self.paths = []
        self.peers = []
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        # https: a server-side ssl.SSLContext (the test's own certificate and CA).
        self.scheme = "https" if ssl_context is not None else "http"
        if ssl_context is not None:
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
        self._thread = None

    @property
    def port(self):
        return self._server.server_address[1]

    @property
    def url(self):
        return f"{self.scheme}://{self._server.server_address[0]}:{self.port}"

    def push(self, *replies):
        with self._lock:
            self._replies.extend(replies)

    def start(self):
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _next(self, body):
        with self._lock:
            self.requests.append(body)
            if self._replies:
                return self._replies.popleft()
        if self.rule is not None:
            try:
                return self.rule(body)
            except (ValueError, KeyError, TypeError, AttributeError):
                return "http500"
        return "http500"

    def _handler_class(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def _send(self, status, payload):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with standin._lock:
                    standin.headers.append(dict(self.headers))
                    standin.paths.append(self.path)
                    standin.peers.append(self.client_address[0])
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                try:
                    body = json.loads(raw.decode("utf-8"))
                except ValueError:
                    self._send(400, {"error": {"message": "invalid JSON"}})
                    return
                reply = standin._next(body)
                model = body.get("model", "judge-standin")
                if reply == "timeout":
                    time.sleep(standin.delay_s)
                    reply = 0
                if reply == "http500":
                    self._send(500, {"error": {"message": "scripted failure"}})
                elif reply == "garbage":
                    self._send(200, _completion("I think the report looks fine!", model))
                elif reply == "bad-body":
                    self._send(200, b"<html>not json</html>")
                elif isinstance(reply, dict):
                    self._send(200, reply)
                else:
                    verdict = {
                        "clinically_significant_errors": int(reply),
                        "clinically_insignificant_errors": 0,
                    }
                    self._send(200, _completion(json.dumps(verdict), model))

        return Handler


def main(argv=None):
    parser = argparse.ArgumentParser(description="Local stand-in for the X-ray LLM judge.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rule", choices=sorted(RULES), default="injected-errors")
    args = parser.parse_args(argv)
    standin = JudgeStandIn(rule=args.rule, host=args.host, port=args.port)
    print(f"listening on {standin.url}", flush=True)
    try:
        standin._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        standin._server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
