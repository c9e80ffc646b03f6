"""Agents the site itself can run (re-run check): oracle, nop, replay, command and Harbor agents.

    oracle   copies the task's solution/ to /solution and runs solve.sh (Harbor's oracle)
    nop      runs nothing (Harbor's nop): the task's initial state is graded
    replay   replays a recorded trajectory of the submission for that task (evaluation.replay)
    command  an install script plus a run-command template, from settings
             VERIFICATION_COMMAND_AGENTS[<harness slug>] = {"install": "...", "run": "...",
             "env": ["OPENAI_API_KEY", ...]}; the template may use {instruction_file} and
             {workdir}; keys named in "env" come from settings VERIFICATION_AGENT_SECRETS.
             This is how harness agents (codex, claude-code, copilot-cli) are described.
    harbor   a Harbor harness run by the real Harbor CLI (evaluation/runner/harbor.py) with the
             submission's harness, model and agent kwargs, for harnesses in settings
             VERIFICATION_HARBOR_AGENTS at an accepted version, and a model with an entry in
             VERIFICATION_RERUN_MODEL_ENDPOINTS (the site's endpoint and key, never the
             submission's). A harness that drives the task container from the worker
             (terminus-2) gets a task container with no network at all; a Harbor installed
             agent (mini-swe-agent: it runs inside the task container) is run only when the
             site has baked it (runner.INSTALLED_HARNESSES, scripts/build-images --harness),
             behind the site's model gateway (runner.model_egress): it reaches the model
             endpoint and nothing else. Other installed agents (claude-code, codex, ...) install
             themselves from the internet at run time: not re-runnable, and the page says why.
             A baked harness runs only at the version of its layer ("harness version X not
             built") and only for a site endpoint speaking its API ("<harness> cannot use the
             site's endpoint").

A submission whose agent class is its own (Harbor's import path: ``--agent-import-path`` or
``-a module:Class``) is never re-run as the stock harness its class may call itself: not
runnable, "custom agent class (<import path>)". Every reason not to run is a NotRunnable, a str
whose ``by`` says whether the site or the submission lacks something.

Every agent runs through runner.run_agent: a fresh task container with the task's limits, no
network, no capabilities, a non-root user, in the sandbox runtime (gVisor when it works here);
the hidden answers never enter it. A Harbor re-run's task container runs under gVisor too
(runsc, or runsc-hostinet behind the model gateway), except for the harnesses of RUNC_HARNESSES,
which cannot run under it: they stay on runc, and the trial's evidence names the runtime. A command agent
that needs a model API therefore needs an egress path the runner does not open today (see the
README); the install script must work offline against the task image.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from evaluation import replay as replay_mod
from evaluation import runner
from evaluation.harness_versions import same_version

BUILTIN = ("oracle", "nop", "replay")
# The site's own agents: the site runs them itself (as references, or to replay a submission);
# they are never a submitter's harness. An upload naming one is refused,
# unless it is accepted as a labelled reference run (submissions.harbor_intake).
SITE_AGENTS = frozenset(BUILTIN)

# Harnesses whose re-run cannot run under gVisor, each with the reason: their task container
# stays on runc (the host's kernel), and each trial's evidence says which runtime ran it.
RUNC_HARNESSES: dict[str, str] = {
    "openhands": "its agent's action server on the container's loopback answers httpx with "
                 "ConnectError under runsc-hostinet, so no action ever runs",
    "terminus-2": "its terminal recording (asciinema rec in tmux, on by default) relays nothing "
                  "of the shell it starts under gVisor, so the model never sees a command's "
                  "output",
}


def rerun_runtime(harness: str, *, networked: bool) -> str | None:
    """The OCI runtime of a Harbor re-run's task container: the sandbox runtime (its networked
    variant for an agent behind the model gateway), or runc for a harness of RUNC_HARNESSES."""
    if harness in RUNC_HARNESSES:
        return None
    runtime = runner.sandbox_runtime()
    return runner.networked_runtime(runtime) if networked else runtime


def is_site_agent(name: str | None) -> bool:
    """Whether a harness or Harbor agent name is one of the site's own agents (``Oracle``,
    `` nop ``, ``harbor-oracle``... after case folding and with Harbor's ``harbor`` prefix
    removed)."""
    text = re.sub(r"[^a-z0-9]+", "-", (name or "").strip().lower()).strip("-")
    return text in SITE_AGENTS or text.removeprefix("harbor-") in SITE_AGENTS


@dataclasses.dataclass(frozen=True)
class SiteAgent:
    kind: str  # oracle | nop | replay | command | harbor
    name: str
    install: str = ""
    run: str = ""
    env_keys: tuple[str, ...] = ()
    # harbor: the submission's model and agent kwargs (endpoint kwargs dropped when run)
    model: str = ""
    kwargs: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)
    version: str = ""


@dataclasses.dataclass(frozen=True)
class ModelEndpoint:
    """The site's endpoint for a model (settings), with the key from the secret settings."""

    model: str  # the name Harbor is given
    base_url: str
    env: dict = dataclasses.field(default_factory=dict, hash=False, compare=False, repr=False)

    api_format: str = "openai"  # openai | anthropic: the API paths the gateway serves
    auth_header: str = "Authorization"  # how the gateway sends the key (x-api-key: Anthropic)

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc

    def gateway(self) -> runner.ModelGateway:
        """The model gateway of an in-container agent: this endpoint, with the site's key."""
        key = next(iter(self.env.values()), "")
        value = f"Bearer {key}" if key and self.auth_header.lower() == "authorization" else key
        return runner.ModelGateway(upstream=self.base_url, api_format=self.api_format,
                                   auth_header=self.auth_header, auth_value=value,
                                   network=settings.VERIFICATION_RERUN_EGRESS_NETWORK)


def model_endpoint(model: str) -> tuple[ModelEndpoint | None, str]:
    """The site's endpoint for `model`, or None and why not."""
    spec = (settings.VERIFICATION_RERUN_MODEL_ENDPOINTS or {}).get(model or "")
    if not spec or not spec.get("base_url"):
        return None, (f"the site has no endpoint for model {model!r} "
                      "(VERIFICATION_RERUN_MODEL_ENDPOINTS)")
    env = {}
    key_env = str(spec.get("key_env") or "")
    if key_env:
        secret_name = str(spec.get("key_secret") or key_env)
        secrets = settings.VERIFICATION_AGENT_SECRETS or {}
        if secret_name not in secrets:
            return None, (f"the key {secret_name!r} for model {model!r} is not in the secret "
                          "settings (VERIFICATION_AGENT_SECRETS)")
        env[key_env] = str(secrets[secret_name])
    return ModelEndpoint(model=str(spec.get("model") or model),
                         base_url=str(spec["base_url"]), env=env,
                         api_format=str(spec.get("api_format") or "openai"),
                         auth_header=str(spec.get("auth_header") or "Authorization")), ""


# Who lacks what when the site does not re-run a submission (NotRunnable.by).
SITE = "site"
SUBMISSION = "submission"


class NotRunnable(str):
    """Why the site does not re-run a submission: the text callers show, with ``by`` saying
    whose side it is on. "site": the site lacks something (an endpoint or key for the model, a
    harness layer, its configuration, an accepted environment); "submission": the run is not one
    the site can repeat (a custom agent class, a harness version it does not offer, an unknown
    harness)."""

    by: str

    def __new__(cls, text: str, by: str = SITE) -> NotRunnable:
        if by not in (SITE, SUBMISSION):
            raise ValueError(f"NotRunnable.by is {SITE!r} or {SUBMISSION!r}, not {by!r}")
        self = super().__new__(cls, text)
        self.by = by
        return self


def custom_agent_class(agent_settings: dict | None) -> str:
    """The agent class a submission named by import path ("" for a stock Harbor agent): Harbor's
    ``--agent-import-path``, or ``-a module:Class``, which Harbor records as the agent's name."""
    agent_settings = agent_settings or {}
    import_path = str(agent_settings.get("import_path") or "").strip()
    name = str(agent_settings.get("harbor_agent") or "").strip()
    return import_path or (name if ":" in name else "")


def _harness_problem(name: str, version: str, *, image: bool = True) -> NotRunnable | None:
    """runner.harness_problem, on the submission's side when it is the version the site lacks."""
    problem = runner.harness_problem(name, version, image=image)
    if not problem:
        return None
    harness = runner.installed_harness(name)
    offered = harness is None or not version or same_version(version, harness.version)
    return NotRunnable(problem, SITE if offered else SUBMISSION)


def resolve_site_agent(
    harness_slug: str, *, harness_version: str = "", agent_settings: dict | None = None
) -> tuple[SiteAgent | None, str]:
    """The agent the site runs for a submission of this harness, or None and why not (a
    NotRunnable)."""
    slug = (harness_slug or "").strip().lower()
    harness_version = runner.plain_version(harness_version)
    agent_settings = agent_settings or {}
    custom = custom_agent_class(agent_settings)
    if custom:  # a subclass may call itself terminus-2: the stock harness is not what ran
        return None, NotRunnable(f"custom agent class ({custom})", SUBMISSION)
    if slug in ("oracle", "nop"):
        return SiteAgent(kind=slug, name=slug), ""
    spec = (settings.VERIFICATION_COMMAND_AGENTS or {}).get(slug)
    if spec:
        return SiteAgent(
            kind="command",
            name=slug,
            install=str(spec.get("install") or ""),
            run=str(spec.get("run") or ""),
            env_keys=tuple(spec.get("env") or ()),
        ), ""
    harbor_agents = settings.VERIFICATION_HARBOR_AGENTS or {}
    name = str(agent_settings.get("harbor_agent") or slug).strip().lower()
    if name in harbor_agents or slug in harbor_agents:
        name = name if name in harbor_agents else slug
        accepted = [str(v) for v in harbor_agents[name] or []]
        return _resolve_harbor_agent(name, harness_version, accepted, agent_settings)
    if name in runner.KNOWN_INSTALLED_AGENTS or slug in runner.KNOWN_INSTALLED_AGENTS:
        known = name if name in runner.KNOWN_INSTALLED_AGENTS else slug
        # Not configured here: the reason is the site's configuration, whatever this worker has
        # built (a harness the site cannot bake, or a version it has no layer for, says so).
        return None, (_harness_problem(known, harness_version, image=False)
                      or NotRunnable(f"the site does not re-run {known} "
                                     "(VERIFICATION_HARBOR_AGENTS)", SITE))
    return None, NotRunnable(f"the site cannot run harness {slug!r} (configure "
                             "VERIFICATION_COMMAND_AGENTS or VERIFICATION_HARBOR_AGENTS)",
                             SUBMISSION)


def _resolve_harbor_agent(name: str, harness_version: str, accepted: list[str],
                          agent_settings: dict) -> tuple[SiteAgent | None, str]:
    """A Harbor agent the site is configured for, at exactly the version the trials ran."""
    harness = runner.installed_harness(name)
    if harness is not None and not harness_version:
        return None, NotRunnable(f"the submission does not say which {name} version it ran; "
                                 f"the site runs {name} {harness.version}", SUBMISSION)
    if name not in runner.HOST_SIDE_AGENTS:
        problem = _harness_problem(name, harness_version)
        if problem:
            return None, problem
    if accepted and not any(same_version(harness_version, v) for v in accepted):
        return None, NotRunnable(
            f"the site runs {name} at {', '.join(accepted)} (Harbor "
            f"{runner.harbor_version() or '?'}); the submission used "
            f"{harness_version or 'an unstated version'}", SUBMISSION)
    model = str(agent_settings.get("model_name") or "")
    endpoint, why = model_endpoint(model)
    if endpoint is None:
        return None, NotRunnable(why, SITE)
    refused = runner.harbor_environment_problem(in_container=harness is not None)
    if refused:  # not re-run, as a model with no endpoint (docs/deploy.md)
        return None, NotRunnable(refused, SITE)
    if harness is not None and endpoint.api_format not in harness.api_formats:
        return None, NotRunnable(
            f"{name} cannot use the site's endpoint (the site's endpoint for {model} speaks "
            f"{endpoint.api_format}; {name} speaks {', '.join(harness.api_formats)})", SITE)
    return SiteAgent(kind="harbor", name=name, model=model,
                     kwargs=dict(agent_settings.get("kwargs") or {}),
                     version=harness_version), ""


def site_agent_for(harness_slug: str, **kw) -> SiteAgent | None:
    """The agent the site runs for a submission of this harness, or None (not runnable here)."""
    return resolve_site_agent(harness_slug, **kw)[0]


def run_harbor_agent(agent: SiteAgent, task_dir: Path, *, job_id: str, attempt: int,
                     attempts: int, work_dir: Path) -> runner.HarborJob:
    """`attempts` trials of a Harbor agent on one task, by the real Harbor CLI, against the
    site's endpoint for the submission's model; outputs under each trial's artifacts_dir."""
    endpoint, why = model_endpoint(agent.model)
    if endpoint is None:
        raise ValueError(why)
    image, _built = runner.build_task_image(task_dir)  # cached by content digest
    in_container = runner.installed_harness(agent.name) is not None
    return runner.harbor_run(
        task_dir, agent=agent.name, model=endpoint.model, base_url=endpoint.base_url,
        agent_kwargs=agent.kwargs, secret_env=endpoint.env, image=image, attempts=attempts,
        work_dir=work_dir, job_label=job_id, attempt=attempt,
        gateway=endpoint.gateway() if in_container else None,
        runtime=rerun_runtime(agent.name, networked=in_container))


def _run_oracle(agent: SiteAgent, task_dir: Path, tmp: Path, trajectory, **run) -> runner.AgentRun:
    return runner.run_agent(task_dir, command="bash /solution/solve.sh",
                            copy_in={"/solution": task_dir / "solution"}, **run)


def _run_nop(agent: SiteAgent, task_dir: Path, tmp: Path, trajectory, **run) -> runner.AgentRun:
    return runner.run_agent(task_dir, command=None, **run)


def _run_replay(agent: SiteAgent, task_dir: Path, tmp: Path, trajectory, **run) -> runner.AgentRun:
    plan = replay_mod.plan_from_trajectory(trajectory or {})
    files = replay_mod.render_replay(plan)
    replay_dir = tmp / "replay"
    replay_dir.mkdir()
    for name, data in files.items():
        (replay_dir / name).write_bytes(data)
    return runner.run_agent(task_dir, command="bash /replay/run.sh",
                            copy_in={"/replay": replay_dir},
                            trace_path=replay_mod.TRACE_PATH, **run)


def _run_command(agent: SiteAgent, task_dir: Path, tmp: Path, trajectory, **run) -> runner.AgentRun:
    agent_dir = tmp / "agent"
    agent_dir.mkdir()
    (agent_dir / "instruction.md").write_bytes((task_dir / "instruction.md").read_bytes())
    (agent_dir / "install.sh").write_text("#!/bin/bash\nset -e\n" + agent.install + "\n")
    run_cmd = agent.run.replace("{instruction_file}", "/agent/instruction.md").replace(
        "{workdir}", "/workspace"
    )
    (agent_dir / "run.sh").write_text("#!/bin/bash\n" + run_cmd + "\n")
    secrets = settings.VERIFICATION_AGENT_SECRETS or {}
    env = {k: str(secrets[k]) for k in agent.env_keys if k in secrets}
    return runner.run_agent(task_dir, command="bash /agent/install.sh && bash /agent/run.sh",
                            copy_in={"/agent": agent_dir}, env=env, **run)


# One registry of site agent kinds: a new kind is one function and one entry here.
AGENT_RUNNERS = {"oracle": _run_oracle, "nop": _run_nop, "replay": _run_replay,
                 "command": _run_command}


def run_site_agent(
    agent: SiteAgent,
    task_dir: Path,
    *,
    job_id: str,
    attempt: int,
    out_dir: Path,
    trajectory: dict | None = None,
) -> runner.AgentRun:
    """Run one agent on one task in a fresh container; declared outputs land under out_dir."""
    run_kind = AGENT_RUNNERS.get(agent.kind)
    if run_kind is None:
        raise ValueError(f"unknown agent kind {agent.kind!r}")
    task_dir = Path(task_dir)
    image, _built = runner.build_task_image(task_dir)  # cached by content digest
    with tempfile.TemporaryDirectory(prefix="hab-agent-") as tmp:
        # Submitter-written commands or a model's: gVisor when the engine has a working runsc.
        return run_kind(agent, task_dir, Path(tmp), trajectory, job_id=job_id, attempt=attempt,
                        out_dir=out_dir, image=image, runtime=runner.sandbox_runtime())
