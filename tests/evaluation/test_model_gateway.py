"""The model gateway script (evaluation/runner/model_gateway.py) as a real process on loopback,
forwarding to the scripted model server: what it serves, what it refuses, whose key it sends.
The same script in its container, on the re-run's internal network, is tested end to end in
test_harbor_installed_rerun.py."""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.evaluation.stub_model import StubModel

SCRIPT = Path(__file__).resolve().parents[2] / "evaluation" / "runner" / "model_gateway.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gateway(tmp_path):
    stub = StubModel({"m": ["pong"]}).start()
    port = _free_port()
    config = {"upstream": stub.base_url, "prefix": "v1",
              "paths": ["/chat/completions", "/responses"],
              "auth_header": "Authorization", "auth_value": "Bearer site-key"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, str(SCRIPT), "--config", str(tmp_path / "config.json"),
         "--bind", "127.0.0.1", "--port", str(port), "--log", str(tmp_path / "log.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield stub, port, tmp_path / "log.jsonl"
    proc.terminate()
    proc.wait(timeout=10)
    stub.stop()


def _call(port, method, path, body=None, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _raw(port, request: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), 5) as s:
        s.sendall(request)
        return s.recv(200).split(b"\r\n")[0].decode()


def test_gateway_forwards_model_calls_with_the_site_key_only(gateway):
    stub, port, log_path = gateway
    chat = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    status, body = _call(port, "POST", "/v1/chat/completions", chat,
                         {"Authorization": "Bearer agent-placeholder", "x-api-key": "other"})
    assert status == 200 and body["choices"][0]["message"]["content"] == "pong"
    assert stub.authorizations() == {"Bearer site-key"}

    # Not model API calls: refused by the gateway, never forwarded.
    assert _call(port, "GET", "/v1/models")[0] == 405
    assert _call(port, "POST", "/v1/embeddings", b"{}")[0] == 404
    assert _call(port, "POST", "/v1/chat/completions/../../admin", b"{}")[0] == 404
    assert _call(port, "POST", "/chat/completions", b"{}")[0] == 404  # outside the prefix
    assert " 405 " in _raw(port, b"CONNECT 1.1.1.1:443 HTTP/1.1\r\nHost: 1.1.1.1\r\n\r\n") + " "
    proxied = _raw(port, b"POST http://1.1.1.1/v1/chat/completions HTTP/1.1\r\n"
                         b"Host: 1.1.1.1\r\nContent-Length: 2\r\n\r\n{}")
    assert proxied.split(" ")[1] == "404", proxied
    assert stub.count() == 1

    entries = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [e["status"] for e in entries] == [200, 405, 404, 404, 404, 405, 404]
    assert sum(1 for e in entries if e.get("refused")) == 6


def test_gateway_reports_an_unreachable_upstream(tmp_path):
    port, dead = _free_port(), _free_port()
    (tmp_path / "c.json").write_text(json.dumps({
        "upstream": f"http://127.0.0.1:{dead}/v1", "paths": ["/chat/completions"],
        "auth_value": "Bearer k", "timeout_s": 5}))
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, str(SCRIPT), "--config", str(tmp_path / "c.json"), "--bind",
         "127.0.0.1", "--port", str(port), "--log", str(tmp_path / "log.jsonl")])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        status, body = _call(port, "POST", "/v1/chat/completions", b"{}")
        assert status == 502 and "model endpoint failed" in body["error"]["message"]
        entry = json.loads((tmp_path / "log.jsonl").read_text().splitlines()[0])
        assert entry["status"] == 502 and entry["error"].startswith("upstream:")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _gateway_for(tmp_path, stub, paths, auth_header="Authorization", auth_value="Bearer k"):
    port = _free_port()
    (tmp_path / "g.json").write_text(json.dumps({
        "upstream": stub.base_url, "paths": paths, "auth_header": auth_header,
        "auth_value": auth_value}))
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, str(SCRIPT), "--config", str(tmp_path / "g.json"), "--bind",
         "127.0.0.1", "--port", str(port), "--log", str(tmp_path / "g.jsonl")])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, port


@pytest.mark.parametrize("stream", [False, True])
def test_gateway_speaks_each_api_and_counts_the_providers_tokens(tmp_path, stream):
    """Chat Completions, Responses (Codex) and Anthropic Messages (Claude
    Code), streamed or not, pass through the gateway unchanged, and the gateway logs the tokens
    the provider's reply reported (the re-run's cost is the site's own figure)."""
    from evaluation.runner.egress import gateway_tokens
    from tests.evaluation.stub_model import bash_reply

    stub = StubModel({"m": [bash_reply("ls"), "done"]}).start()
    (tmp_path / "o").mkdir()
    (tmp_path / "a").mkdir()
    openai, port = _gateway_for(tmp_path / "o", stub, ["/chat/completions", "/responses"])
    anthropic, aport = _gateway_for(tmp_path / "a", stub, ["/messages"], "x-api-key", "site")
    tools = [{"type": "function", "name": "exec_command"}]
    calls = [
        (port, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user",
                                                                    "content": "hi"}]}),
        (port, "/v1/responses", {"model": "m", "input": [{"role": "user", "content": "hi"}],
                                 "tools": tools}),
        (aport, "/v1/messages", {"model": "m", "max_tokens": 50, "tools": [{"name": "Bash"}],
                                 "messages": [{"role": "user", "content": "hi"}]}),
    ]
    try:
        replies = []
        for p, path, body in calls:
            req = urllib.request.Request(
                f"http://127.0.0.1:{p}{path}", data=json.dumps({**body, "stream": stream}).encode(),
                method="POST", headers={"Content-Type": "application/json",
                                        "x-api-key": "agent-own"})
            with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310
                replies.append((r.headers.get("Content-Type"), r.read().decode()))
    finally:
        for proc in (openai, anthropic):
            proc.terminate()
            proc.wait(timeout=10)
        stub.stop()
    assert stub.paths() == {"/chat/completions", "/responses", "/messages"}
    assert stub.authorizations() == {"Bearer k", "site"}
    kinds = {ct.split(";")[0] for ct, _ in replies}
    assert kinds == ({"text/event-stream"} if stream else {"application/json"})
    # The shell call arrives in each API's own shape.
    assert '"exec_command"' in replies[1][1] and 'yield_time_ms' in replies[1][1]
    assert '"tool_use"' in replies[2][1] and '"Bash"' in replies[2][1]
    if stream:
        assert "event: message_start" in replies[2][1] and "input_json_delta" in replies[2][1]
        assert "event: response.completed" in replies[1][1]
    for sub in ("o", "a"):
        entries = [json.loads(x) for x in (tmp_path / sub / "g.jsonl").read_text().splitlines()]
        assert all(e["status"] == 200 and e["output_tokens"] > 0 for e in entries), entries
        n_in, _cached, n_out = gateway_tokens(entries)
        assert n_in > 0 and n_out > 0
