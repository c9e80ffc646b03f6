"""The tests' scriptable X-ray judge: the project's synthetic judge (evaluation/judge/synthetic.py,
the server `make run` serves) with a queue of scripted replies in front of its rule. Tests point
XRAY_JUDGE_URL at it, and the site's judge gateway (evaluation/runner/judge/server.py) forwards
to it like to any judge.

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
When the queue is empty the rule decides ("injected-errors": the synthetic judge's rule,
evaluation.judge.synthetic.injected_errors_left; "always-zero": 0 whatever the candidate), or
HTTP 500 without a rule (or when the rule cannot read the request).

By hand, beside `make run`: `manage.py serve_synthetic_judge` (which `make run` starts itself).
"""

import threading
import time
from collections import deque

from evaluation import runner
from evaluation.judge.synthetic import RULE, SyntheticJudge, completion, injected_errors_left
from evaluation.judge.synthetic import verdict_completion

RULES = {RULE: injected_errors_left, "always-zero": lambda body: 0}


def docker_bridge_ip(network="bridge"):
    """The host's address on a Docker network (where containers on it reach the host)."""
    return runner.host_address(network)


class JudgeStandIn(SyntheticJudge):
    model = "judge-standin"

    def __init__(self, replies=(), rule=None, delay_s=5.0, host="127.0.0.1", port=0,
                 ssl_context=None):
        super().__init__(host=host, port=port, ssl_context=ssl_context)
        self._replies = deque(replies)
        self._lock = threading.Lock()
        self.rule = RULES[rule] if isinstance(rule, str) else rule
        self.delay_s = delay_s
        self.requests = []
        self.headers = []
        self.paths = []
        self.peers = []

    def push(self, *replies):
        with self._lock:
            self._replies.extend(replies)

    def observe(self, handler):
        with self._lock:
            self.headers.append(dict(handler.headers))
            self.paths.append(handler.path)
            self.peers.append(handler.client_address[0])

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

    def reply(self, body):
        reply = self._next(body)
        model = body.get("model", self.model) if isinstance(body, dict) else self.model
        if reply == "timeout":
            time.sleep(self.delay_s)
            reply = 0
        if reply == "http500":
            return 500, {"error": {"message": "scripted failure"}}
        if reply == "garbage":
            return 200, completion("I think the report looks fine!", model)
        if reply == "bad-body":
            return 200, b"<html>not json</html>"
        if isinstance(reply, dict):
            return 200, reply
        return 200, verdict_completion(reply, model)
