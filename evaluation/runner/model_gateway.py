"""The site's model gateway: the only way out of a re-run's task container.

Harbor's installed agents (mini-swe-agent, ...) run inside the task container, so the container
itself must reach the model. It joins an internal Docker network (no route out, no address of
the host: evaluation/runner/egress.py) on which this gateway is the only other member; the
gateway also sits on the egress network and forwards to exactly one upstream, the site's model
endpoint (settings VERIFICATION_RERUN_MODEL_ENDPOINTS), with the site's key (from the secret
settings). It is not a general proxy:

* only `POST <prefix>/<api path>` is served, for the API paths of the model formats in its
  configuration (OpenAI chat completions and responses, Anthropic messages); any other method
  (CONNECT included), path or absolute-form request line is refused;
* the request goes to the configured upstream URL + the API path, whatever the Host header says;
* whatever credential the agent sends (Authorization, x-api-key, api-key) is dropped and the
  site's key is set: the agent's own key is a placeholder, the real one never enters its
  container;
* replies (streamed or not) are passed back as they arrive, and the tokens the provider's reply
  reports (Chat Completions `usage`, Responses `response.usage`, Anthropic Messages
  `message_start`/`message_delta` usage) are counted into the log: the re-run's token figures are
  the site's own, not the harness's.

Every request is written to log.jsonl (method, path, status, bytes, why refused); the runner
reads it after the run. Standard library only: it runs in the base image.

    python3 model_gateway.py --config /gw/config.json --bind 10.0.0.2 --port 8080 \
        --log /gw/log.jsonl
"""

import argparse
import http.client
import json
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

MAX_BODY = 8 * 1024 * 1024
CHUNK = 16 * 1024
# Request headers passed on to the upstream (everything else, credentials included, is dropped;
# accept-encoding too: an uncompressed reply is one whose usage the gateway can read).
FORWARD_HEADERS = ("content-type", "accept", "user-agent",
                   "anthropic-version", "anthropic-beta", "openai-beta")
# Reply headers passed back to the agent.
REPLY_HEADERS = ("content-type", "content-encoding", "cache-control", "x-request-id",
                 "retry-after")


MAX_USAGE_SCAN = 8 * 1024 * 1024  # reply bytes kept to read the usage from


def _usage_of(obj):
    """The usage object an API reply or stream event carries, if any."""
    if not isinstance(obj, dict):
        return None
    for holder in (obj, obj.get("message"), obj.get("response")):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            return holder["usage"]
    return None


def reply_tokens(body, content_type=""):
    """(input, cached, output) tokens the provider reported in a reply (JSON or server-sent
    events), or None. Input includes cached tokens, as Harbor counts them."""
    objects = []
    if "event-stream" in (content_type or "") or body.lstrip().startswith((b"data:", b"event:")):
        for line in body.splitlines():
            if line.startswith(b"data:"):
                try:
                    objects.append(json.loads(line[5:].strip()))
                except ValueError:
                    continue
    else:
        try:
            objects.append(json.loads(body))
        except ValueError:
            return None
    found, n_in, cached, n_out = False, 0, 0, 0
    for obj in objects:
        usage = _usage_of(obj)
        if not usage:
            continue
        found = True
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        anth_cache = int(usage.get("cache_read_input_tokens") or 0) + int(
            usage.get("cache_creation_input_tokens") or 0)
        if "prompt_tokens" in usage or "input_tokens" in usage:
            n_in = max(n_in, int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
                       + anth_cache)
        cached = max(cached, int(details.get("cached_tokens") or 0)
                     + int(usage.get("cache_read_input_tokens") or 0))
        n_out = max(n_out, int(usage.get("completion_tokens") or usage.get("output_tokens") or 0))
    return (n_in, cached, n_out) if found else None


class Gateway:
    def __init__(self, config, log_path):
        upstream = urllib.parse.urlsplit(config["upstream"].rstrip("/"))
        if upstream.scheme not in ("http", "https") or not upstream.hostname:
            raise ValueError(f"bad upstream {config['upstream']!r}")
        self.scheme = upstream.scheme
        self.host = upstream.hostname
        self.port = upstream.port or (443 if upstream.scheme == "https" else 80)
        self.base_path = upstream.path  # e.g. /v1
        self.prefix = "/" + config.get("prefix", "v1").strip("/")
        self.paths = tuple("/" + p.strip("/") for p in config["paths"])
        self.auth_header = config.get("auth_header") or "Authorization"
        self.auth_value = config.get("auth_value") or ""
        self.timeout_s = float(config.get("timeout_s") or 600)
        self.cafile = config.get("cafile") or None
        self.lock = threading.Lock()
        self.log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - open for the run

    def write(self, entry):
        entry["t"] = round(time.time(), 3)
        with self.lock:
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()

    def api_path(self, raw_path):
        """The API path of an allowed request line (e.g. /chat/completions), or None."""
        if not raw_path.startswith("/"):  # absolute-form (a proxy request) or garbage
            return None
        path = urllib.parse.urlsplit(raw_path).path
        if "/../" in path + "/" or "//" in path:
            return None
        if not path.startswith(self.prefix + "/"):
            return None
        rest = path[len(self.prefix):].rstrip("/")
        return rest if rest in self.paths else None

    def connection(self):
        if self.scheme == "https":
            context = ssl.create_default_context(cafile=self.cafile)
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout_s,
                                               context=context)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)


def handler_for(gateway):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _error(self, status, message):
            data = json.dumps({"error": {"message": message, "type": "gateway"}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(data)
            except OSError:
                pass

        def _refuse(self):
            gateway.write({"method": self.command, "path": self.path[:300], "status": 405,
                           "refused": "method"})
            self._error(405, "the site's model gateway serves only POST to the model API")

        do_GET = do_PUT = do_DELETE = do_HEAD = do_CONNECT = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

        def do_POST(self):  # noqa: N802
            api_path = gateway.api_path(self.path)
            if api_path is None:
                gateway.write({"method": "POST", "path": self.path[:300], "status": 404,
                               "refused": "path"})
                self._error(404, "not a model API path of the site's endpoint")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY or self.headers.get("Transfer-Encoding"):
                gateway.write({"method": "POST", "path": api_path, "status": 413,
                               "refused": "body"})
                self._error(413, "request body missing a length or too large")
                return
            body = self.rfile.read(length)
            headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARD_HEADERS}
            if gateway.auth_value:
                headers[gateway.auth_header] = gateway.auth_value
            headers["Content-Length"] = str(len(body))
            t0 = time.time()
            upstream = gateway.connection()
            try:
                upstream.request("POST", gateway.base_path + api_path, body=body,
                                 headers=headers)
                reply = upstream.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                upstream.close()
                gateway.write({"method": "POST", "path": api_path, "status": 502,
                               "error": f"upstream: {exc}"[:300]})
                self._error(502, f"the site's model endpoint failed: {exc}")
                return
            sent, kept, kept_bytes = 0, [], 0
            try:
                self.send_response(reply.status)
                for name, value in reply.getheaders():
                    if name.lower() in REPLY_HEADERS:
                        self.send_header(name, value)
                self.send_header("Connection", "close")  # the body ends when we close
                self.end_headers()
                self.close_connection = True
                while True:
                    chunk = reply.read1(CHUNK) if hasattr(reply, "read1") else reply.read(CHUNK)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    sent += len(chunk)
                    if kept_bytes < MAX_USAGE_SCAN:
                        kept.append(chunk)
                        kept_bytes += len(chunk)
            except OSError:
                pass
            finally:
                upstream.close()
                entry = {"method": "POST", "path": api_path, "status": reply.status,
                         "request_bytes": len(body), "reply_bytes": sent,
                         "seconds": round(time.time() - t0, 3)}
                tokens = None
                if reply.status == 200 and reply.getheader("content-encoding") in (None, "identity"):
                    try:
                        tokens = reply_tokens(b"".join(kept), reply.getheader("content-type") or "")
                    except (TypeError, ValueError):
                        tokens = None
                if tokens:
                    entry.update(input_tokens=tokens[0], cached_tokens=tokens[1],
                                 output_tokens=tokens[2])
                gateway.write(entry)

    return Handler


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main(argv=None):
    parser = argparse.ArgumentParser(description="The site's model gateway.")
    parser.add_argument("--config", required=True)
    parser.add_argument("--bind", required=True)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as fh:
        gateway = Gateway(json.load(fh), args.log)
    server = _Server((args.bind, args.port), handler_for(gateway))
    print(f"listening on {args.bind}:{args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
