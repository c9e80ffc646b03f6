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
* replies (streamed or not) are passed back as they arrive.

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
# Request headers passed on to the upstream (everything else, credentials included, is dropped).
FORWARD_HEADERS = ("content-type", "accept", "accept-encoding", "user-agent",
                   "anthropic-version", "anthropic-beta", "openai-beta")
# Reply headers passed back to the agent.
REPLY_HEADERS = ("content-type", "content-encoding", "cache-control", "x-request-id",
                 "retry-after")


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
            sent = 0
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
            except OSError:
                pass
            finally:
                upstream.close()
                gateway.write({"method": "POST", "path": api_path, "status": reply.status,
                               "request_bytes": len(body), "reply_bytes": sent,
                               "seconds": round(time.time() - t0, 3)})

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
