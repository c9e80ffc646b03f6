"""The evaluation runner: every Docker SDK call of the project lives in this package (HS21-HS24).

Design
------
* The client is created lazily (`client()`), from `settings.DOCKER_HOST` and
  `settings.DOCKER_CLIENT_TIMEOUT_S`, never at import; it is re-created after a fork (Celery
  prefork children must not share the parent's HTTP connection pool).
* `ContainerRun` is the one way to run anything. A run is one container whose PID 1 is a bounded
  `sleep` (so the container outlives the command and its outputs can be copied out of its tmpfs
  volumes); the command itself runs through `exec` under the run's limits:
  no network (`network_mode="none"`), all capabilities dropped, `no-new-privileges`, read-only
  root filesystem, tmpfs `/tmp`, writable places (`/workspace`, `/tests`, `/logs/verifier`, ...)
  as size-limited tmpfs *volumes* (the Docker archive API can read and write volumes of a
  read-only container, but not plain tmpfs mounts), a non-root user, `mem_limit` = memswap,
  `nano_cpus`, `pids_limit`, a bounded json-file log, and a wall-clock deadline enforced here
  (the container is killed on expiry).
* Outcomes are mapped to user-facing reasons: "memory limit exceeded" (an OOM event),
  "time limit exceeded", "process limit exceeded" (the pids limit was reached), "exited with
  code N" / "killed by signal N". Docker API and connection errors become `InfrastructureError`
  (retryable; never scored as a failure).
* Two-container grading: `run_agent()` runs a command in a fresh container from the task image and
  copies out only the declared outputs; `run_verifier()` starts a *fresh* container from the same
  image, copies in those outputs (as data) and the task's `tests/` (which hold the hidden answer,
  so answers never enter an agent container), runs `bash /tests/test.sh` and reads
  `/logs/verifier/reward.json` (or `reward.txt`).
* The X-ray judge: with `judge=JudgeGateway(...)`, a gateway container (judge/server.py, on the
  egress network) forwards the grader's requests to the one configured judge endpoint and
  serves cached replies; the verifier reaches it only through a Unix socket on a shared volume.
  The verifier (like every other container but the gateway) stays on `network none`.
* `reap_stale()` removes labelled containers, volumes and networks left behind by dead workers.

Modules (import the package, `from evaluation import runner`, and use the names below):
  engine     the lazily created client, engine errors (InfrastructureError), engine_status, labels,
             host_address (the host's address on a Docker network)
  limits     Limits from task.toml, the phase's user, declared outputs
  images     the base image check, task images built locally and cached by digest
  transfer   tars into containers, capped spooling and vetted extraction out of them
  results    ExecResult: exit status, bounded output, limit hits
  probes     OOM events and pids sampling of a running container
  container  ContainerRun
  phases     run_agent, run_verifier
  judge      the judge gateway: its container (judge/container.py, JudgeGateway) and the server
             that runs in it (judge/server.py)
  reaper     reap_stale, reap_job_prefix, reap_work_dirs (dead workers' work directories),
             work_tempdir_use (a worker process's own temporary folder)
  sandbox    the runtime of replays, re-grades and re-runs (gVisor's runsc when it works)
  harbor     the real Harbor CLI as a subprocess (re-run of Harbor harnesses): the only code
             that starts Harbor; task container on network none, the site's endpoint and key
             (host-side harnesses), or behind the model gateway (installed agents)
  harnesses  Harbor installed agents baked offline: the harness image (scripts/build-images
             --harness) and the task image with the harness layered on
  egress     the re-run's internal network and its model gateway (model_gateway.py runs in it):
             an in-container agent reaches the site's model endpoint and nothing else
  cli        `python -m evaluation.runner build-task-images [task_dir ...] | status | reap`
             (scripts/build-images runs it after building the base image)
Only the Docker SDK's public API is used (containers, images, volumes, networks, and the low-level
APIClient's exec/inspect/stats/events calls).
"""

from evaluation.runner.cli import bare_docker_run, discover_tasks
from evaluation.runner.container import POLL_S, ContainerRun
from evaluation.runner.engine import (
    APP_LABEL,
    LABEL_APP,
    LABEL_ATTEMPT,
    LABEL_EXPIRES,
    LABEL_JOB,
    LABEL_PURPOSE,
    ImageBuildError,
    InfrastructureError,
    OutputTooLargeError,
    RootUserRefused,
    TaskEnvironmentError,
    UnsafeArchiveError,
    client,
    UserMapping,
    engine_status,
    host_address,
    reset_client,
    user_mapping,
)
from evaluation.runner.harbor import (
    ENDPOINT_KWARGS,
    HarborJob,
    HarborTrial,
    harbor_command,
    harbor_problem,
    harbor_run,
    harbor_version,
    site_kwargs,
)
from evaluation.runner.harbor_envs import (
    HARBOR_ENVIRONMENTS,
    HarborBackend,
    harbor_backend,
    harbor_environment_problem,
)
from evaluation.runner.base import base_image_digest, base_image_files, base_image_tag
from evaluation.runner.images import (
    TASK_DIGEST_LABEL,
    TASK_IMAGE_REPO,
    build_task_image,
    ensure_base_image,
    image_build,
    image_exists,
    image_size,
    prune_task_images,
    task_image_repo,
    task_image_tag,
    tree_digest,
)
from evaluation.runner.limits import (
    AGENT_UID,
    DEFAULT_LOG_CAP_BYTES,
    DEFAULT_OUTPUT_CAP_BYTES,
    DEFAULT_PIDS_LIMIT,
    LOGS_TMPFS_MB,
    MAX_TMPFS_MB,
    TMP_TMPFS_MB,
    Limits,
    MiB,
    declared_outputs,
    load_task_toml,
    task_user,
)
from evaluation.runner.egress import EgressRoute, ModelGateway, model_egress
from evaluation.runner.judge.container import JudgeGateway, ca_bundle
from evaluation.runner.harnesses import (
    HOST_SIDE_AGENTS,
    INSTALLED_HARNESSES,
    KNOWN_INSTALLED_AGENTS,
    build_harness_image,
    harness_image_tag,
    harness_problem,
    harness_task_image,
    installed_harness,
    plain_version,
)
from evaluation.runner.phases import (
    AgentRun,
    VerifierRun,
    engine_control_run,
    run_agent,
    run_verifier,
)
from evaluation.runner.reaper import (
    reap_engine,
    reap_job_prefix,
    reap_stale,
    reap_work_dirs,
    temp_root,
    work_tempdir_done,
    work_tempdir_use,
)
from evaluation.runner.results import (
    REASON_OOM,
    REASON_PIDS,
    REASON_TIMEOUT,
    TRUNCATION_MARKER,
    ExecResult,
)
from evaluation.runner.sandbox import (
    GVISOR_HOSTINET_RUNTIME,
    GVISOR_RUNTIME,
    engine_runtimes,
    isolation,
    isolation_warnings,
    kernel_isolation_problem,
    networked_runtime,
    runtime_probe,
    sandbox_runtime,
)
from evaluation.runner.transfer import safe_extract, tar_from_dir, tar_from_files

__all__ = [
    "GVISOR_RUNTIME", "GVISOR_HOSTINET_RUNTIME", "kernel_isolation_problem", "networked_runtime",
    "RootUserRefused", "TaskEnvironmentError", "UserMapping", "engine_runtimes",
    "isolation", "isolation_warnings", "user_mapping", "runtime_probe", "sandbox_runtime",
    "AGENT_UID", "APP_LABEL", "DEFAULT_LOG_CAP_BYTES", "DEFAULT_OUTPUT_CAP_BYTES",
    "DEFAULT_PIDS_LIMIT", "LABEL_APP", "LABEL_ATTEMPT", "LABEL_EXPIRES", "LABEL_JOB",
    "LABEL_PURPOSE", "LOGS_TMPFS_MB", "MAX_TMPFS_MB", "POLL_S", "REASON_OOM", "REASON_PIDS",
    "REASON_TIMEOUT", "TASK_DIGEST_LABEL", "TASK_IMAGE_REPO", "TMP_TMPFS_MB", "TRUNCATION_MARKER",
    "AgentRun", "ContainerRun", "ExecResult", "ImageBuildError", "InfrastructureError",
    "ENDPOINT_KWARGS", "HarborJob", "HarborTrial", "harbor_problem", "harbor_run",
    "harbor_version", "site_kwargs", "harbor_command", "HARBOR_ENVIRONMENTS", "HarborBackend",
    "harbor_backend", "harbor_environment_problem",
    "EgressRoute", "ModelGateway", "model_egress", "HOST_SIDE_AGENTS", "INSTALLED_HARNESSES",
    "KNOWN_INSTALLED_AGENTS", "build_harness_image", "harness_image_tag", "harness_problem",
    "harness_task_image", "installed_harness", "plain_version",
    "JudgeGateway", "ca_bundle", "Limits", "MiB", "OutputTooLargeError", "UnsafeArchiveError", "VerifierRun",
    "bare_docker_run", "build_task_image", "engine_control_run", "client", "declared_outputs", "discover_tasks",
    "base_image_digest", "base_image_files", "base_image_tag",
    "engine_status", "ensure_base_image", "host_address", "image_build", "image_exists", "image_size",
    "prune_task_images",
    "load_task_toml", "reap_engine", "reap_job_prefix", "reap_stale", "reap_work_dirs",
    "reset_client", "run_agent", "temp_root", "work_tempdir_done", "work_tempdir_use",
    "run_verifier", "safe_extract", "tar_from_dir", "tar_from_files", "task_image_repo",
    "task_image_tag", "task_user", "tree_digest",
]
