"""VERIFICATION_HARBOR_ENVIRONMENT: the `harbor run` command line and configuration the re-run
builds for each of Harbor's environment backends the site vetted (evaluation/runner/harbor_envs.py),
and the re-runs the site refuses where a backend cannot keep its guarantees (docs/deploy.md,
"Re-runs in Harbor's environments"). No Docker and no Harbor process: the command is built, not
run (tests/evaluation/test_harbor_rerun.py runs the real CLI with --env docker)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from evaluation import runner
from evaluation.agents import resolve_site_agent

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tasks" / "clinical-trial-matching" / "synthetic_01"
SECRETS = {"DAYTONA_API_KEY": "dtn-key", "MODAL_TOKEN_ID": "ak-1", "MODAL_TOKEN_SECRET": "as-1",
           "E2B_API_KEY": "e2b-key", "RUNLOOP_API_KEY": "rl-key", "GCP_PROJECT": "hab-proj",
           "OPENAI_API_KEY": "sk-site"}
# Harbor 0.26.0's own names (harbor.models.environment_type.EnvironmentType).
HARBOR_NAMES = {"docker", "daytona", "modal", "e2b", "runloop", "gke"}


def _build(settings, tmp_path: Path, name: str, network: str | None = None):
    settings.VERIFICATION_HARBOR_ENVIRONMENT = name
    settings.VERIFICATION_HARBOR_ENVIRONMENT_KWARGS = {"region": "eu", "cpu_count": 2}
    settings.VERIFICATION_AGENT_SECRETS = SECRETS
    work = tmp_path / name
    work.mkdir()
    return runner.harbor_command(
        task_dir=TASK, agent="terminus-2", model="openai/gpt-5.5", attempts=3, work_dir=work,
        job_label="v12", attempt=1, timeout_s=600, kwargs={"api_base": "https://m.example/v1"},
        env={"OPENAI_API_KEY": "sk-site"}, image="hab-task:abc", network=network), work


def _opt(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, c in enumerate(cmd[:-1]) if c == flag]


def test_the_vetted_backends_are_named_as_harbor_names_them():
    assert set(runner.HARBOR_ENVIRONMENTS) == HARBOR_NAMES
    assert [b.name for b in runner.HARBOR_ENVIRONMENTS.values() if b.local] == ["docker"]


def test_docker_keeps_the_site_overlay_and_the_package(settings, tmp_path):
    (cmd, env), _work = _build(settings, tmp_path, "docker")
    assert env == {"OPENAI_API_KEY": "sk-site"}  # no cloud credentials for the local engine
    assert _opt(cmd, "--env") == ["docker"] and "-e" not in cmd
    assert _opt(cmd, "-p") == [str(TASK)]
    (overlay,) = _opt(cmd, "--extra-docker-compose")
    text = Path(overlay).read_text()
    assert '"hab-task:abc"' in text and "network_mode: none" in text
    assert _opt(cmd, "--ek") == ["cpu_count=2", "region=eu"]
    assert "--disable-verification" in cmd and _opt(cmd, "-k") == ["3"]


@pytest.mark.parametrize("name", sorted(HARBOR_NAMES - {"docker", "gke"}))
def test_a_cloud_backend_gets_an_offline_package_its_kwargs_and_only_its_credentials(
        settings, tmp_path, name):
    (cmd, env), work = _build(settings, tmp_path, name)
    backend = runner.HARBOR_ENVIRONMENTS[name]
    assert _opt(cmd, "--env") == [name]
    assert _opt(cmd, "--ek") == ["cpu_count=2", "region=eu"]
    assert "--extra-docker-compose" not in cmd  # the overlay is the worker engine's only
    (task,) = _opt(cmd, "-p")
    assert Path(task) == work / "task" and Path(task) != TASK
    spec = tomllib.loads((Path(task) / "task.toml").read_text())
    assert spec["environment"]["network_mode"] == "no-network"
    assert spec["environment"]["cpus"] == tomllib.loads(
        (TASK / "task.toml").read_text())["environment"]["cpus"]
    assert "network_mode" not in (TASK / "task.toml").read_text()  # the package is untouched
    wanted = {k: SECRETS[k] for k in backend.credentials if k in SECRETS}
    assert wanted and env == {**wanted, "OPENAI_API_KEY": "sk-site"}
    assert not any(v in " ".join(cmd) for v in SECRETS.values())  # never on the command line
    assert runner.harbor_environment_problem(in_container=False) == ""


def test_what_each_backend_refuses(settings):
    settings.VERIFICATION_HARBOR_ENVIRONMENT = "docker"
    assert runner.harbor_environment_problem(in_container=True) == ""
    for name in HARBOR_NAMES - {"docker"}:
        settings.VERIFICATION_HARBOR_ENVIRONMENT = name
        # An installed agent needs the site's model gateway, which lives on the worker's engine.
        assert "gateway" in runner.harbor_environment_problem(in_container=True)
    settings.VERIFICATION_HARBOR_ENVIRONMENT = "gke"  # no network isolation for our tasks
    assert "with no network" in runner.harbor_environment_problem(in_container=False)
    settings.VERIFICATION_HARBOR_ENVIRONMENT = "apple-container"  # Harbor has it; not vetted
    assert "not one of the backends" in runner.harbor_environment_problem(in_container=False)


def test_a_refused_backend_means_no_rerun_with_the_reason(settings):
    settings.VERIFICATION_HARBOR_AGENTS = {"terminus-2": [], "mini-swe-agent": []}
    settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {"openai/gpt-5.5": {
        "base_url": "https://m.example/v1", "key_env": "OPENAI_API_KEY",
        "key_secret": "OPENAI_API_KEY"}}
    settings.VERIFICATION_AGENT_SECRETS = SECRETS
    agent_settings = {"model_name": "openai/gpt-5.5"}
    settings.VERIFICATION_HARBOR_ENVIRONMENT = "modal"
    agent, why = resolve_site_agent("terminus-2", harness_version="2.0.0",
                                    agent_settings=agent_settings)
    assert agent is not None and agent.kind == "harbor" and why == ""
    settings.VERIFICATION_HARBOR_ENVIRONMENT = "gke"
    agent, why = resolve_site_agent("terminus-2", harness_version="2.0.0",
                                    agent_settings=agent_settings)
    assert agent is None and "gke" in why


def test_the_gateway_network_never_leaves_the_worker_engine(settings, tmp_path):
    with pytest.raises(ValueError, match="gateway"):
        _build(settings, tmp_path, "modal", network="hab-egress-1")
