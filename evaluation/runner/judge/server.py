"""The site's X-ray judge gateway: the verifier's only way out, and the judgement cache's door.

Started by `run_verifier` in its own container (the base image; standard library only) with
two mounts: a private one holding its configuration (the upstream URL, model and API key, the
versioned prompt, the cached replies the site loaded from its database) and a shared one
holding the Unix socket it listens on. The verifier container has no network at all
(network_mode none); the only thing it can reach is this socket. The gateway itself sits on the
egress network (XRAY_JUDGE_EGRESS_NETWORK) and forwards to exactly one address: the configured
OpenAI-compatible chat-completions URL. It is not a proxy for anything else: only
`POST .../chat/completions` is served, whatever the request line or Host header say.

Each request must carry the site's versioned system prompt, byte for byte, and a user message
built by `build_user_prompt` (the <reference_findings>, <injected_errors> and
<candidate_findings> sections). Its cache key is

    sha256(canonical JSON {prompt_version, model, report, answer})

where report is the candidate FINDINGS and answer the reference FINDINGS and injected errors.
The grader asks 5 independent times per grading: the i-th identical request of one verifier run
gets the i-th cached reply when there is one (a hit) and otherwise asks the upstream (a miss),
so a re-grade of the same output gets the same 5 votes without a single upstream call.
Only a reply that parses as a verdict is cached. Every request is written to log.jsonl (key,
index, hit, and for a miss the reply content); the runner reads it after the verifier, and the
site (evaluation/judge/cache.py) stores the new replies in its database.

    python3 judge_gateway.py --config /judge/config.json --socket /judge-socket/judge.sock \
        --log /judge/log.jsonl
"""

import argparse
import hashlib
import json
import os
import re
import socketserver
import ssl
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler

MAX_BODY = 1024 * 1024
SECTIONS = ("reference_findings", "injected_errors", "candidate_findings")
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def cache_key(prompt_version, model, report, answer):
    """The digest a judgement is cached under (the site computes nothing else)."""
    canonical = json.dumps(
        {"prompt_version": prompt_version, "model": model, "report": report, "answer": answer},
        sort_keys=True, ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def sections(user_content):
    """The report and the answer of a user message built by build_user_prompt."""
    found = {}
    for name in SECTIONS:
        match = re.search(f"<{name}>\n(.*?)\n</{name}>", user_content, re.DOTALL)
        if match is None:
            raise ValueError(f"the user message has no <{name}> section")
        found[name] = json.loads(match.group(1))
    answer = {"reference_findings": found["reference_findings"],
              "injected_errors": found["injected_errors"]}
    return found["candidate_findings"], answer


def is_verdict(content):
    """True when a reply's content is the verdict JSON the grader accepts."""
    if not isinstance(content, str):
        return False
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        verdict = json.loads(text)
    except ValueError:
        return False
    count = verdict.get("clinically_significant_errors") if isinstance(verdict, dict) else None
    return isinstance(count, int) and not isinstance(count, bool) and count >= 0


class Gateway:
    def __init__(self, config, log_path):
        self.upstream = config["upstream_url"]
        self.model = config["model"]
        self.api_key = config.get("api_key") or ""
        self.prompt_version = config["prompt_version"]
        self.system_prompt = config["system_prompt"]
        self.timeout_s = float(config.get("timeout_s") or 60)
        # The base image has no CA certificates: an https upstream is verified against the
        # bundle the site puts beside the config (gateway.py ca_bundle), never unverified.
        self.cafile = config.get("cafile") or None
        self.cache = {k: list(v) for k, v in (config.get("cache") or {}).items()}
        self.seen = {}
        self.lock = threading.Lock()
        self.log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - open for the run

    def _write(self, entry):
        with self.lock:
            self.log.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self.log.flush()

    def _key(self, body):
        messages = body.get("messages") if isinstance(body, dict) else None
        if (not isinstance(messages, list) or len(messages) != 2
                or not all(isinstance(m, dict) for m in messages)
                or [m.get("role") for m in messages] != ["system", "user"]):
            raise ValueError("expected exactly a system and a user message")
        if messages[0].get("content") != self.system_prompt:
            raise ValueError(f"the system message is not prompt {self.prompt_version}")
        report, answer = sections(str(messages[1].get("content")))
        return cache_key(self.prompt_version, self.model, report, answer), messages

    def _upstream(self, messages):
        body = {"model": self.model, "messages": messages,
                "response_format": {"type": "json_object"}}
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.upstream, data=json.dumps(body).encode("utf-8"),
                                         headers=headers, method="POST")
        context = ssl.create_default_context(cafile=self.cafile) if self.cafile else None
        with urllib.request.urlopen(request, timeout=self.timeout_s,  # noqa: S310
                                    context=context) as response:
            payload = json.loads(response.read(MAX_BODY + 1).decode("utf-8"))
        return payload["choices"][0]["message"]["content"]

    def answer(self, body):
        """(status, content or error) for one request."""
        try:
            key, messages = self._key(body)
        except (ValueError, TypeError, AttributeError) as exc:
            self._write({"error": f"refused: {exc}"})
            return 400, f"refused: {exc}"
        with self.lock:
            index = self.seen.get(key, 0)
            self.seen[key] = index + 1
            cached = self.cache.get(key, [])
            hit = cached[index] if index < len(cached) else None
        if hit is not None:
            self._write({"key": key, "index": index, "hit": True})
            return 200, hit
        try:
            content = self._upstream(messages)
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError,
                TypeError) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "code", None) or exc
            self._write({"key": key, "index": index, "hit": False,
                         "error": f"upstream: {reason}"[:500]})
            return 502, f"the judge upstream failed: {reason}"
        if not is_verdict(content):
            self._write({"key": key, "index": index, "hit": False,
                         "error": "upstream reply is not a verdict"})
            return 502, "the judge upstream replied something that is not a verdict"
        self._write({"key": key, "index": index, "hit": False, "content": content})
        return 200, content


class ChatHandler(BaseHTTPRequestHandler):
    """The one base of the stdlib chat-completions servers that answer a JSON request (this
    gateway and evaluation/judge/synthetic.py): quiet, HTTP/1.1, JSON replies, and the
    preamble of every POST. Standard library only: this file runs alone in the base image."""

    protocol_version = "HTTP/1.1"
    not_found = "not found"  # the 404 message for a path that is not .../chat/completions

    def log_message(self, *args):  # one line per request would drown the caller's output
        pass

    def send_json(self, status, payload):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def read_chat_request(self):
        """The POSTed JSON body, or None once the refusal is sent: 413 over MAX_BODY, 404 for
        a path other than .../chat/completions (the body is read first), 400 for invalid JSON."""
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_json(413, {"error": {"message": "request too large"}})
            return None
        raw = self.rfile.read(length)
        if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            self.send_json(404, {"error": {"message": self.not_found}})
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError:
            self.send_json(400, {"error": {"message": "invalid JSON"}})
            return None


def handler_for(gateway):
    class Handler(ChatHandler):
        not_found = "only POST .../chat/completions"

        def address_string(self):  # a Unix socket has no peer address
            return "verifier"

        def _refuse(self):
            self.send_json(405, {"error": {"message": "only POST .../chat/completions is served"}})

        do_GET = do_PUT = do_DELETE = do_HEAD = do_CONNECT = do_PATCH = _refuse  # noqa: N815

        def do_POST(self):  # noqa: N802
            body = self.read_chat_request()
            if body is None:
                return
            status, content = gateway.answer(body)
            if status != 200:
                self.send_json(status, {"error": {"message": content}})
                return
            self.send_json(200, {
                "id": "chatcmpl-gateway", "object": "chat.completion", "model": gateway.model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
            })

    return Handler


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


def main(argv=None):
    parser = argparse.ArgumentParser(description="The site's X-ray judge gateway.")
    parser.add_argument("--config", required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as fh:
        gateway = Gateway(json.load(fh), args.log)
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    server = _Server(args.socket, handler_for(gateway))
    os.chmod(args.socket, 0o666)  # noqa: S103 - the verifier runs as another user
    print(f"listening on {args.socket}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
