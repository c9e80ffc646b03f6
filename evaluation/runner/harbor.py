"""The real Harbor CLI, driven as a subprocess: the only code of the project that starts Harbor.

The re-run check (submissions/verification/checks/rerun.py, through evaluation/agents.py) asks for
`harbor run` of one of the site's task packages with a submission's harness, model and agent
kwargs. This module builds that command line, runs the pinned CLI (`scripts/harbor-venv`,
settings.HARBOR_VENV) in a private environment and reads what Harbor wrote.

What the site controls, whatever the submission says:

* The model endpoint and its key. `api_base` and every other endpoint or credential kwarg of the
  submission are dropped (ENDPOINT_KWARGS); the base URL comes from settings
  VERIFICATION_RERUN_MODEL_ENDPOINTS and the key from the secret settings, passed to Harbor in
  its environment (never on the command line, never written to the job directory by us).
* Egress. A harness that runs on the worker and drives the task container from outside
  (terminus-2: it talks to the model itself and types into tmux in the container) gets a task
  container on `network_mode: none`: the commands the model chooses run with no network at all,
  and the model endpoint is reached by Harbor's own process on the worker. A Harbor installed
  agent (mini-swe-agent: its process runs in the task container; harnesses.py) gets the task
  image with the harness baked in, Harbor's `skip_install`, and a task container on an internal
  network whose only other member is the site's model gateway (egress.py): the agent's endpoint
  is the gateway, its key a placeholder; the gateway forwards only model API calls, to the
  site's endpoint, with the site's key.
* The environment of the Harbor process: PATH, a private HOME, DOCKER_CONFIG (Compose v2 from the
  venv), DOCKER_HOST, no telemetry, LiteLLM's local price map, and the endpoint's key. Nothing
  else of the worker's environment (database URL, secret key) reaches it.
* The image. Harbor does not build: the overlay gives the task container the site's own task
  image (built offline from the same package by runner.build_task_image, checked by the worker's
  health check), the image re-grades and replays use.
* Cleanup. The task container carries the runner's labels (app, job, attempt, expires), so
  `reap_job_prefix` / `reap_stale` remove what a killed Harbor left behind.
* The outputs: Harbor's own verifier is disabled and the declared outputs are collected with
  `--artifact`; the caller grades them with run_verifier like every other output (same grader,
  same judge, hidden answers never in the agent's container).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

from django.conf import settings

from evaluation.runner.engine import (
    APP_LABEL,
    LABEL_APP,
    LABEL_ATTEMPT,
    LABEL_EXPIRES,
    LABEL_JOB,
    LABEL_PURPOSE,
    InfrastructureError,
    _safe_name,
)
from evaluation.runner.egress import ModelGateway, gateway_tokens, model_egress
from evaluation.runner.harbor_envs import (
    environment_args,
    environment_credentials,
    harbor_backend,
    harbor_environment_problem,
    offline_task_copy,
)
from evaluation.runner.harnesses import harness_task_image, installed_harness
from evaluation.runner.limits import declared_outputs, load_task_toml

# Agent kwargs that choose where the model is or how it authenticates: never from a submission.
ENDPOINT_KWARGS = frozenset({
    "api_base", "base_url", "api_key", "llm_kwargs", "llm_call_kwargs", "extra_env",
    "llm_backend", "session_id_headers", "use_responses_api",
})
LOG_TAIL_BYTES = 8000
# The key an installed agent is given: the gateway drops it and sends the site's own.
GATEWAY_PLACEHOLDER_KEY = "hab-site-gateway-holds-the-key"


@dataclasses.dataclass
class HarborTrial:
    name: str
    trial_dir: Path
    exception_type: str | None
    exception_message: str
    agent_name: str
    agent_version: str
    model_name: str
    seconds: float | None  # the trial, start to end (environment, agent, teardown)
    agent_seconds: float | None  # the agent's run alone
    # The re-run's token usage as Harbor's agent recorded it in result.json (agent_result);
    # None where the harness records none. Harbor's input tokens include the cached ones.
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None  # the harness' own figure, when it computes one

    @property
    def artifacts_dir(self) -> Path:
        """Where Harbor mirrors the collected container paths (artifacts/workspace/...)."""
        return self.trial_dir / "artifacts"


@dataclasses.dataclass
class HarborJob:
    cmd: list[str]
    returncode: int | None
    seconds: float
    job_dir: Path
    trials: list[HarborTrial]
    log_tail: str
    timed_out: bool = False
    gateway_log: list[dict] | None = None  # the model gateway's requests (installed agents)
    # Every `harbor run`'s job directory: an installed agent's trials run one per `harbor run`
    # (each behind its own network and gateway); job_dir is the first.
    job_dirs: list[Path] = dataclasses.field(default_factory=list)
    # The OCI runtime of the task container (None: the engine's default, runc).
    runtime: str | None = None


def harbor_bin() -> Path:
    return Path(settings.HARBOR_VENV) / "bin" / "harbor"


def harbor_problem() -> str:
    """Why Harbor cannot run on this worker ("" when it can)."""
    exe = harbor_bin()
    if not exe.is_file() or not os.access(exe, os.X_OK):
        return f"the Harbor CLI is not installed at {exe} (run scripts/harbor-venv)"
    plugin = Path(settings.HARBOR_VENV) / "docker-config" / "cli-plugins" / "docker-compose"
    if not plugin.exists():
        return f"Docker Compose v2 is missing at {plugin} (run scripts/harbor-venv)"
    return ""


def harbor_version() -> str:
    """The pinned Harbor's version (from its venv's metadata, without starting the CLI)."""
    venv = Path(settings.HARBOR_VENV)
    for meta in sorted(venv.glob("lib/python*/site-packages/harbor-*.dist-info/METADATA")):
        for line in meta.read_text(errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return ""


def site_kwargs(kwargs: dict | None) -> tuple[dict, list[str]]:
    """The submission's agent kwargs without endpoint/credential ones; and the dropped names."""
    kwargs = dict(kwargs or {})
    dropped = sorted(k for k in kwargs if k in ENDPOINT_KWARGS)
    return {k: v for k, v in kwargs.items() if k not in ENDPOINT_KWARGS}, dropped


def _overlay(image: str, job_label: str, attempt: int, lifetime_s: float,
             network: str | None = None, runtime: str | None = None) -> str:
    """Compose overlay for the task container: the site's task image instead of Harbor's build,
    no network (or only the re-run's internal network, `network`), the OCI runtime (`runtime`,
    gVisor when it works here) and the runner's labels (YAML: `!reset` removes Harbor's build
    section)."""
    labels = {
        LABEL_APP: APP_LABEL,
        LABEL_PURPOSE: "harbor",
        LABEL_JOB: job_label,
        LABEL_ATTEMPT: str(attempt),
        LABEL_EXPIRES: str(int(time.time() + lifetime_s)),
    }
    net = ["    networks: [hab_site_egress]"] if network else ["    network_mode: none"]
    lines = ["services:", "  main:", "    build: !reset null", f"    image: {json.dumps(image)}",
             "    pull_policy: never", *net,
             *([f"    runtime: {json.dumps(runtime)}"] if runtime else []), "    labels:"]
    lines += [f"      {json.dumps(k)}: {json.dumps(v)}" for k, v in labels.items()]
    if network:
        lines += ["networks:", "  hab_site_egress:", "    external: true",
                  f"    name: {json.dumps(network)}"]
    return "\n".join(lines) + "\n"


def _process_env(home: Path, secret_env: dict[str, str]) -> dict[str, str]:
    venv = Path(settings.HARBOR_VENV)
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "DOCKER_CONFIG": str(venv / "docker-config"),
        "HARBOR_TELEMETRY": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_COLOR": "1",
        "COLUMNS": "160",
        "PYTHONWARNINGS": "ignore",
        "LANG": "C.UTF-8",
    }
    if settings.DOCKER_HOST:
        env["DOCKER_HOST"] = settings.DOCKER_HOST
    env.update({k: str(v) for k, v in secret_env.items()})
    return env


def _stop(proc: subprocess.Popen) -> None:
    """Interrupt Harbor (it tears its containers down on SIGINT), then kill its process group."""
    for sig, grace in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_trials(job_dir: Path) -> list[HarborTrial]:
    trials = []
    if not job_dir.is_dir():
        return trials
    for d in sorted(p for p in job_dir.iterdir() if (p / "result.json").is_file()):
        try:
            r = json.loads((d / "result.json").read_text())
        except ValueError:
            continue
        exc = r.get("exception_info") or {}
        info = r.get("agent_info") or {}
        model = (info.get("model_info") or {}) if isinstance(info, dict) else {}
        agent_exec = r.get("agent_execution") or {}
        usage = r.get("agent_result") or {}
        usage = usage if isinstance(usage, dict) else {}
        trials.append(HarborTrial(
            name=d.name, trial_dir=d,
            exception_type=exc.get("exception_type") or None,
            exception_message=str(exc.get("exception_message") or "")[:2000],
            agent_name=str(info.get("name") or ""), agent_version=str(info.get("version") or ""),
            model_name=str(model.get("name") or ""),
            seconds=_span(r.get("started_at"), r.get("finished_at")),
            agent_seconds=_span(agent_exec.get("started_at"), agent_exec.get("finished_at")),
            input_tokens=_count(usage.get("n_input_tokens")),
            cached_tokens=_count(usage.get("n_cache_tokens")),
            output_tokens=_count(usage.get("n_output_tokens")),
            cost_usd=_amount(usage.get("cost_usd"))))
    return trials


def _count(value) -> int | None:
    """A token count from result.json: a non-negative integer, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def _amount(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def _span(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return None


def harbor_run(
    task_dir: Path,
    *,
    agent: str,
    model: str,
    base_url: str,
    agent_kwargs: dict | None,
    secret_env: dict[str, str],
    image: str,
    attempts: int,
    work_dir: Path,
    job_label: str,
    attempt: int = 1,
    timeout_s: float | None = None,
    gateway: ModelGateway | None = None,
    runtime: str | None = None,
) -> HarborJob:
    """`harbor run` of one task package with `attempts` trials of `agent` on `model`, in
    containers of `image` (the site's task image, runner.build_task_image).

    `runtime` is the task container's OCI runtime on the worker's engine (None: runc); the
    caller picks it (evaluation.agents: gVisor unless the harness cannot run under it).

    With `gateway` (a Harbor installed agent, harnesses.INSTALLED_HARNESSES), the agent runs in
    the task image with the harness baked in, behind the site's model gateway (egress.py):
    `base_url` and `secret_env` are then the gateway's upstream and key, never given to Harbor.

    Raises InfrastructureError when Harbor cannot start or ends without any trial result (the
    verification job retries); per-trial agent errors are reported in HarborJob.trials.
    """
    problem = harbor_problem()
    if problem:
        raise InfrastructureError(problem)
    refused = harbor_environment_problem(in_container=gateway is not None)
    if refused:
        raise ValueError(refused)  # resolve_site_agent refuses these before a job asks
    task_dir = Path(task_dir).resolve()
    work_dir = Path(work_dir)
    (work_dir / "home").mkdir(parents=True, exist_ok=True)
    kwargs, _dropped = site_kwargs(agent_kwargs)
    spec = load_task_toml(task_dir)
    agent_timeout = float((spec.get("agent") or {}).get("timeout_sec") or 3600)
    timeout_s = float(timeout_s or settings.VERIFICATION_HARBOR_TIMEOUT_S or agent_timeout + 900)
    run = {"task_dir": task_dir, "agent": agent, "model": model, "attempts": attempts,
           "work_dir": work_dir, "job_label": job_label, "attempt": attempt,
           "timeout_s": timeout_s, "runtime": runtime}
    if gateway is None:
        kwargs["api_base"] = base_url
        return _invoke(**run, kwargs=kwargs, env=secret_env, image=image, network=None)
    harness = installed_harness(agent)
    if harness is None:
        raise ValueError(f"{agent} is not an installed agent the site bakes")
    image = harness_task_image(image, agent)
    gateway = dataclasses.replace(gateway, lifetime_s=timeout_s + 900)
    kwargs["skip_install"] = True  # Harbor's own switch: the image provides the agent

    def one_trial(index: int) -> HarborJob:
        # Its own internal network and gateway: Harbor's overlay is one per `harbor run`, so one
        # trial per run keeps two trials of a job from reaching each other. The network and the
        # gateway go when the trial ends, whatever happened (model_egress).
        label = f"{job_label}-t{index}"
        trial_dir = work_dir / f"trial-{index}"
        (trial_dir / "home").mkdir(parents=True, exist_ok=True)
        log: list[dict] = []
        with model_egress(gateway, job_id=label, attempt=attempt, log_out=log) as route:
            job = _invoke(**{**run, "attempts": 1, "job_label": label,
                             "work_dir": trial_dir},
                          kwargs={**kwargs, harness.endpoint_kwarg: route.base_url.removesuffix(
                              "/v1") + harness.endpoint_suffix},
                          image=image, network=route.network,
                          env={harness.key_env: GATEWAY_PLACEHOLDER_KEY})
        job.gateway_log = log
        tokens = gateway_tokens(log)
        if tokens is not None:  # the provider's own counts, through the site's gateway
            for trial in job.trials:
                trial.input_tokens, trial.cached_tokens, trial.output_tokens = tokens
        return job

    t0 = time.monotonic()
    count = max(1, attempts)
    workers = max(1, min(count, settings.VERIFICATION_PARALLEL_TRIALS))
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="harbor-trial") as pool:
        futures = [pool.submit(one_trial, i) for i in range(count)]
        concurrent.futures.wait(futures)
    jobs = [f.result() for f in futures]  # the first trial's error, once every trial ended
    return HarborJob(
        cmd=jobs[0].cmd, returncode=max((j.returncode or 0) for j in jobs),
        seconds=time.monotonic() - t0, job_dir=jobs[0].job_dir,
        job_dirs=[j.job_dir for j in jobs],
        trials=[t for j in jobs for t in j.trials],
        log_tail="\n".join(j.log_tail for j in jobs)[-LOG_TAIL_BYTES:],
        timed_out=any(j.timed_out for j in jobs),
        gateway_log=[entry for j in jobs for entry in (j.gateway_log or [])], runtime=runtime)


def harbor_command(*, task_dir: Path, agent: str, model: str, attempts: int, work_dir: Path,
                   job_label: str, attempt: int, timeout_s: float, kwargs: dict,
                   env: dict[str, str], image: str, network: str | None,
                   runtime: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The `harbor run` command line and the secret environment it is given, for the backend
    VERIFICATION_HARBOR_ENVIRONMENT (harbor_envs.py). On the worker's engine (`docker`) the
    site's compose overlay sets the image, the labels and the network; elsewhere Harbor builds
    the task's image in the backend from a copy of the package whose network is `no-network`,
    and the backend's credentials come from VERIFICATION_AGENT_SECRETS."""
    backend = harbor_backend()
    jobs = max(1, min(attempts, settings.VERIFICATION_PARALLEL_TRIALS))
    if backend.local:
        overlay = work_dir / "site-overlay.compose.yaml"
        overlay.write_text(_overlay(image, _safe_name(job_label), attempt, timeout_s + 600,
                                    network=network, runtime=runtime))
        placement = ["--extra-docker-compose", str(overlay)]
        task_path = task_dir
    else:
        if network is not None:
            raise ValueError(f"{backend.name}: the model gateway exists only on the worker's "
                             "engine")
        placement = []
        task_path = offline_task_copy(task_dir, work_dir / "task")
        env = {**environment_credentials(backend), **env}
    cmd = [
        str(harbor_bin()), "run", "-p", str(task_path), "-a", agent, "-m", model,
        *environment_args(backend), "-o", str(work_dir / "jobs"), "--job-name", "rerun",
        "-k", str(max(1, attempts)), "-n", str(jobs),
        *placement, "--disable-verification", "-q", "-y",
    ]  # fmt: skip
    for path in declared_outputs(task_dir):
        cmd += ["--artifact", path]
    for key, value in sorted(kwargs.items()):
        cmd += ["--ak", f"{key}={json.dumps(value)}"]
    return cmd, env


def _invoke(*, task_dir: Path, agent: str, model: str, attempts: int, work_dir: Path,
            job_label: str, attempt: int, timeout_s: float, kwargs: dict, env: dict[str, str],
            image: str, network: str | None, runtime: str | None = None) -> HarborJob:
    jobs_dir = work_dir / "jobs"
    job_name = "rerun"
    cmd, env = harbor_command(task_dir=task_dir, agent=agent, model=model, attempts=attempts,
                              work_dir=work_dir, job_label=job_label, attempt=attempt,
                              timeout_s=timeout_s, kwargs=kwargs, env=env, image=image,
                              network=network, runtime=runtime)
    log_path = work_dir / "harbor.log"
    t0 = time.monotonic()
    timed_out = False
    with log_path.open("w+b") as log:
        try:
            proc = subprocess.Popen(  # noqa: S603 - the pinned harbor, argument list, no shell
                cmd, cwd=work_dir, env=_process_env(work_dir / "home", env),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise InfrastructureError(f"starting harbor: {exc}") from exc
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop(proc)
        except BaseException:
            _stop(proc)  # the job was cancelled (lease lost, worker shutting down)
            raise
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(0, size - LOG_TAIL_BYTES))
        tail = log.read().decode("utf-8", "replace")
    job = HarborJob(cmd=cmd, returncode=proc.returncode, seconds=time.monotonic() - t0,
                    job_dir=jobs_dir / job_name, trials=_read_trials(jobs_dir / job_name),
                    log_tail=tail, timed_out=timed_out, runtime=runtime)
    if not job.trials:
        why = "timed out" if timed_out else f"exited with {proc.returncode}"
        raise InfrastructureError(f"harbor run {why} without a trial result: {tail[-1500:]}")
    return job
