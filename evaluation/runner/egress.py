"""Egress for agents that run inside the task container: an internal network and a gateway.

The re-run of a Harbor installed agent (mini-swe-agent, ...) runs the agent's own process in the
task container, which therefore needs a way to its model, and nothing else. For each trial
(one `harbor run` per trial, harbor.py, so that two trials of a job never share a network):

1. an internal Docker network (`internal`: no route out of it; the host's bridge address is
   not given to it either, see INTERNAL_NETWORK_OPTIONS) is created, labelled for the reaper;
2. the model gateway (model_gateway.py, copied into a base-image container like the X-ray
   judge gateway) joins the egress network (settings VERIFICATION_RERUN_EGRESS_NETWORK) and
   the internal one, and listens on its internal address only;
3. Harbor's overlay (harbor.py) puts the task container on the internal network alone, and the
   agent is given `http://<gateway address>:8080/v1` as its model endpoint and a placeholder key.

The gateway forwards only POSTs to the model API paths, to the one configured upstream, with the
site's key (never the submission's, never in the agent's container). On exit its log is read
and the container and the network go.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from pathlib import Path

from evaluation.runner.base import base_image_tag
from evaluation.runner.container import ContainerRun
from evaluation.runner.engine import (
    APP_LABEL,
    LABEL_APP,
    LABEL_JOB,
    InfrastructureError,
    _docker,
    _infra,
    _safe_name,
    client,
)
from evaluation.runner.judge.container import ca_bundle, read_log
from evaluation.runner.limits import AGENT_UID, Limits

log = logging.getLogger(__name__)

GATEWAY_SCRIPT = Path(__file__).with_name("model_gateway.py")
GATEWAY_PORT = 8080
LOG_PATH = "/gw/log.jsonl"
MAX_LOG_BYTES = 16 * 1024 * 1024
# The model API paths the gateway serves, by the endpoint's API format.
API_PATHS = {
    "openai": ("/chat/completions", "/responses"),
    "anthropic": ("/messages",),
}
# No address of the host on the internal network: its bridge gets no IPv4 address, so a
# container on it cannot reach services listening on the host (the gateway is reached directly).
INTERNAL_NETWORK_OPTIONS = {"com.docker.network.bridge.inhibit_ipv4": "true"}


@dataclasses.dataclass(frozen=True)
class ModelGateway:
    """What the gateway of one re-run forwards to: the site's endpoint and key."""

    upstream: str  # the site's base URL, e.g. https://api.openai.com/v1
    api_format: str = "openai"  # openai | anthropic: which API paths are served
    auth_header: str = "Authorization"
    auth_value: str = dataclasses.field(default="", repr=False)  # "Bearer <site key>"
    network: str = "bridge"  # the egress network the gateway (only) joins
    timeout_s: float = 600.0
    lifetime_s: float = 4 * 3600.0

    def config(self, cafile: str | None) -> dict:
        if self.api_format not in API_PATHS:
            raise ValueError(f"unknown model API format {self.api_format!r}")
        return {"upstream": self.upstream, "prefix": "v1", "paths": list(API_PATHS[self.api_format]),
                "auth_header": self.auth_header, "auth_value": self.auth_value,
                "timeout_s": self.timeout_s, "cafile": cafile}


@dataclasses.dataclass(frozen=True)
class EgressRoute:
    network: str  # the internal network the task container joins
    address: str  # the gateway's address on it

    @property
    def base_url(self) -> str:
        return f"http://{self.address}:{GATEWAY_PORT}/v1"


def gateway_tokens(entries: list[dict]) -> tuple[int, int, int] | None:
    """(input, cached, output) tokens the provider's replies reported through the gateway (the
    site's own figure for the re-run's cost), or None when no reply reported any."""
    counted = [e for e in entries if isinstance(e.get("input_tokens"), int)]
    if not counted:
        return None
    return (sum(e["input_tokens"] for e in counted),
            sum(int(e.get("cached_tokens") or 0) for e in counted),
            sum(int(e.get("output_tokens") or 0) for e in counted))


def _remove_network(c, name: str) -> None:
    docker = _docker()
    try:
        net = c.networks.get(name)
    except docker.errors.NotFound:
        return
    net.reload()
    for container in net.containers:  # what a killed run left attached
        with contextlib.suppress(Exception):
            net.disconnect(container, force=True)
    try:
        net.remove()
    except docker.errors.APIError as exc:  # reap_stale() will get it
        log.warning("could not remove network %s: %s", name, exc)


@contextlib.contextmanager
def model_egress(spec: ModelGateway, *, job_id, attempt: int, log_out: list):
    """The internal network and its gateway for one re-run; yields an EgressRoute. On exit the
    gateway's log entries are appended to log_out, then the gateway and the network go."""
    c = client()
    job = _safe_name(job_id)
    name = f"hab-egress-{job}-{int(attempt)}"
    with _infra("creating the re-run's internal network"):
        _remove_network(c, name)
        net = c.networks.create(name, driver="bridge", internal=True, check_duplicate=True,
                                options=INTERNAL_NETWORK_OPTIONS,
                                labels={LABEL_APP: APP_LABEL, LABEL_JOB: job})
    run = ContainerRun(
        base_image_tag(), purpose="modelgw", job_id=job_id, attempt=attempt,
        limits=Limits(cpus=1, memory_mb=256, timeout_s=spec.lifetime_s), volumes={"/gw": 16},
        seed_workspace=False, network=spec.network,
    )
    try:
        run.__enter__()
        with _infra("connecting the model gateway"):
            net.connect(run.container)
            run.container.reload()
            networks = run.container.attrs["NetworkSettings"]["Networks"]
            address = (networks.get(name) or {}).get("IPAddress")
        if not address:
            raise InfrastructureError(f"the model gateway has no address on {name}")
        ca = ca_bundle() or None
        files = {"model_gateway.py": GATEWAY_SCRIPT.read_bytes(),
                 "config.json": json.dumps(spec.config("/gw/ca.pem" if ca else None)).encode()}
        if ca:
            files["ca.pem"] = ca
        run.put_files("/gw", files, uid=AGENT_UID)
        api = c.api
        exec_id = api.exec_create(
            run.container.id,
            ["python3", "-s", "/gw/model_gateway.py", "--config", "/gw/config.json",
             "--bind", address, "--port", str(GATEWAY_PORT), "--log", LOG_PATH],
            user=run.user, workdir="/gw",
        )["Id"]
        api.exec_start(exec_id, detach=True)
        probe = (
            "import socket,sys,time\n"
            "for _ in range(100):\n"
            "    try:\n"
            f"        socket.create_connection(({address!r}, {GATEWAY_PORT}), 1).close(); sys.exit(0)\n"
            "    except OSError: time.sleep(0.1)\n"
            "sys.exit(1)\n"
        )
        res = run.exec(["python3", "-c", probe], timeout_s=30, workdir="/gw")
        if res.exit_code != 0:
            raise InfrastructureError("the model gateway did not start listening")
        try:
            yield EgressRoute(network=name, address=address)
        finally:
            with contextlib.suppress(Exception):
                log_out.extend(read_log(run.read_file(LOG_PATH, max_bytes=MAX_LOG_BYTES)))
    finally:
        run.__exit__(None, None, None)
        _remove_network(c, name)
