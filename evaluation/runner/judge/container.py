"""The X-ray judge gateway's container: started beside a verifier that needs the LLM judge.

The verifier has no network; the gateway (server.py, copied as judge_gateway.py into a base-image container
on the egress network) listens on a Unix socket in a volume both containers mount (the
verifier read-only). What the gateway knows (upstream URL, model, API key, the versioned
prompt, cached replies) is put in its private volume; the API key never enters the verifier.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import ssl
from pathlib import Path

from evaluation.runner.base import base_image_tag
from evaluation.runner.container import ContainerRun
from evaluation.runner.engine import (
    APP_LABEL,
    LABEL_APP,
    LABEL_JOB,
    InfrastructureError,
    _infra,
    _safe_name,
    client,
    user_mapping,
)
from evaluation.runner.limits import AGENT_UID, Limits

log = logging.getLogger(__name__)

GATEWAY_SCRIPT = Path(__file__).with_name("server.py")  # copied in as judge_gateway.py
SOCKET_DIR = "/judge-socket"
SOCKET_PATH = f"{SOCKET_DIR}/judge.sock"
LOG_PATH = "/judge/log.jsonl"
CA_PATH = "/judge/ca.pem"
MAX_LOG_BYTES = 16 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class JudgeGateway:
    """What the gateway of one verifier run serves: the configured judge and cached replies."""

    upstream_url: str  # the full .../chat/completions URL
    model: str
    api_key: str
    prompt_version: str
    system_prompt: str
    cache: dict = dataclasses.field(default_factory=dict)  # key -> [reply content, ...]
    timeout_s: float = 60.0
    network: str = "bridge"  # the egress network the gateway (only) joins
    ca_pem: bytes = dataclasses.field(default=b"", repr=False)  # trusted for an https upstream

    def verifier_env(self) -> dict[str, str]:
        # The client waits for the gateway's upstream call (and its one retry) to finish.
        return {"XRAY_JUDGE_URL": f"unix://{SOCKET_PATH}", "XRAY_JUDGE_MODEL": self.model,
                "XRAY_JUDGE_TIMEOUT_S": str(self.timeout_s + 15)}

    def config(self) -> dict:
        return {"upstream_url": self.upstream_url, "model": self.model, "api_key": self.api_key,
                "prompt_version": self.prompt_version, "system_prompt": self.system_prompt,
                "cache": self.cache, "timeout_s": self.timeout_s,
                "cafile": CA_PATH if self.ca_pem else None}


def ca_bundle(extra_file: str = "") -> bytes:
    """The CA certificates a gateway trusts for an https upstream (the base image has none):
    the worker's own bundle (Debian's ca-certificates: OpenSSL's default CA file) plus
    `extra_file`, a PEM file of further CAs (a private endpoint's, from the settings). Empty
    when neither."""
    parts: list[bytes] = []
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            parts.append(Path(candidate).read_bytes())
            break
    if extra_file:
        try:
            parts.append(Path(extra_file).read_bytes())
        except OSError as exc:
            raise InfrastructureError(f"the CA file {extra_file} cannot be read: {exc}") from exc
    return b"\n".join(p.rstrip(b"\n") for p in parts) + b"\n" if parts else b""


def read_log(raw: bytes | None) -> list[dict]:
    entries = []
    for line in (raw or b"").decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


@contextlib.contextmanager
def judge_gateway(spec: JudgeGateway, *, job_id, attempt: int, log_out: list):
    """Run the gateway for one verifier; yields (socket volume name, verifier env). On exit
    the gateway's log entries are appended to log_out, then the container and volume go."""
    c = client()
    job = _safe_name(job_id)
    vname = f"hab-judgesock-{job}-{int(attempt)}"
    mapping = user_mapping()
    with _infra("creating the judge socket volume"):
        with contextlib.suppress(Exception):
            c.volumes.get(vname).remove(force=True)
        volume = c.volumes.create(
            name=vname, driver="local",
            driver_opts={"type": "tmpfs", "device": "tmpfs",
                         "o": f"size=1m,uid={mapping.host_uid(AGENT_UID)},"
                              f"gid={mapping.host_gid(AGENT_UID)},mode=0755"},
            labels={LABEL_APP: APP_LABEL, LABEL_JOB: job},
        )
    run = ContainerRun(
        base_image_tag(), purpose="judge", job_id=job_id, attempt=attempt,
        limits=Limits(cpus=1, memory_mb=256, timeout_s=3600), volumes={"/judge": 16},
        seed_workspace=False, network=spec.network,
        shared_volumes={SOCKET_DIR: (vname, False)},
    )
    try:
        run.__enter__()
        files = {"judge_gateway.py": GATEWAY_SCRIPT.read_bytes(),
                 "config.json": json.dumps(spec.config()).encode("utf-8")}
        if spec.ca_pem:
            files["ca.pem"] = spec.ca_pem
        run.put_files("/judge", files, uid=AGENT_UID)
        api = c.api
        exec_id = api.exec_create(
            run.container.id,
            ["python3", "-s", "/judge/judge_gateway.py", "--config", "/judge/config.json",
             "--socket", SOCKET_PATH, "--log", LOG_PATH],
            user=run.user, workdir="/judge",
        )["Id"]
        api.exec_start(exec_id, detach=True)
        probe = (
            "import socket,sys,time\n"
            "for _ in range(100):\n"
            "    s=socket.socket(socket.AF_UNIX)\n"
            "    try:\n"
            f"        s.connect({SOCKET_PATH!r}); sys.exit(0)\n"
            "    except OSError: time.sleep(0.1)\n"
            "    finally: s.close()\n"
            "sys.exit(1)\n"
        )
        res = run.exec(["python3", "-c", probe], timeout_s=30, workdir="/judge")
        if res.exit_code != 0:
            raise InfrastructureError("the judge gateway did not start listening")
        try:
            yield vname, spec.verifier_env()
        finally:  # the replies are paid for: keep them even if the verifier failed
            with contextlib.suppress(Exception):
                log_out.extend(read_log(run.read_file(LOG_PATH, max_bytes=MAX_LOG_BYTES)))
    finally:
        run.__exit__(None, None, None)
        try:
            volume.remove(force=True)
        except Exception as exc:  # noqa: BLE001 - reap_stale() will get it
            log.warning("could not remove volume %s: %s", vname, exc)
