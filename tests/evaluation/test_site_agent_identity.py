"""Why the site does not re-run a submission, and on whose side that is (no Docker): every reason
of resolve_site_agent is a NotRunnable, a str whose ``by`` is "site" (the site lacks an endpoint,
a key, a harness layer, a configuration, an accepted environment) or "submission" (a custom agent
class, a harness version the site does not offer, an unknown harness). A custom agent class is
never re-run as the stock harness it may call itself."""

from __future__ import annotations

import pickle

import pytest

from evaluation import agents, runner
from evaluation.agents import NotRunnable, resolve_site_agent


@pytest.fixture
def site(harbor_settings):
    harbor_settings.VERIFICATION_HARBOR_ENVIRONMENT = "docker"
    return harbor_settings


def _resolve(harness="terminus-2", version="2.0.0", model="openai/m", **agent):
    return resolve_site_agent(harness, harness_version=version, agent_settings={
        "harbor_agent": harness, "model_name": model, "kwargs": {}, **agent})


def _why(**kw) -> NotRunnable:
    agent, why = _resolve(**kw)
    assert agent is None and isinstance(why, NotRunnable) and isinstance(why, str), (agent, why)
    return why


def test_the_stock_harness_is_runnable(site):
    agent, why = _resolve()
    assert (agent.kind, agent.name, agent.model, agent.version, why) == (
        "harbor", "terminus-2", "openai/m", "2.0.0", "")


@pytest.mark.parametrize("recorded", [
    {"import_path": "my_agents.sneaky:SneakyTerminus"},
    {"harbor_agent": "my_agents.sneaky:SneakyTerminus"},  # `-a module:Class`
])
def test_a_custom_agent_class_is_not_runnable_on_the_submissions_side(site, recorded):
    why = _why(**recorded)
    assert why == "custom agent class (my_agents.sneaky:SneakyTerminus)"
    assert why.by == "submission"
    # Even where the site has its own command for the harness's name, or it is a site agent.
    site.VERIFICATION_COMMAND_AGENTS = {"terminus-2": {"install": "true", "run": "true"}}
    assert _why(**recorded).by == "submission"
    assert _why(harness="oracle", **recorded).by == "submission"


def test_what_the_site_lacks_is_on_the_sites_side(site):
    no_endpoint = _why(model="openai/other")
    assert "no endpoint for model 'openai/other'" in no_endpoint and no_endpoint.by == "site"
    no_key = _why(model="openai/nokey")
    assert "'ABSENT'" in no_key and no_key.by == "site"
    site.VERIFICATION_HARBOR_ENVIRONMENT = "gke"
    assert _why().by == "site"  # an environment the site refuses
    site.VERIFICATION_HARBOR_ENVIRONMENT = "docker"
    # A harness the site does not configure, or cannot bake.
    assert _why(harness="codex", version="0.171.0").by == "site"
    site.VERIFICATION_HARBOR_AGENTS = {"aider": []}
    unbaked = _why(harness="aider", version="0.50.0")
    assert unbaked.startswith("aider runs inside the task container") and unbaked.by == "site"


@pytest.mark.parametrize("version", ["2.0", "2.0.0rc1", "2.0.1", "", "1.9.0"])
def test_a_version_the_site_does_not_run_is_on_the_submissions_side(site, version):
    why = _why(version=version)
    assert why.by == "submission"
    assert why.endswith(f"the submission used {version or 'an unstated version'}")


def test_the_recorded_version_text_is_the_release_it_names(site):
    assert _resolve(version="terminus-2 2.0.0")[1] == ""
    assert _resolve(version="v2.0.0")[1] == ""


def test_a_baked_harness_runs_only_at_its_layers_exact_version(site):
    site.VERIFICATION_HARBOR_AGENTS = {"codex": []}
    layer = runner.installed_harness("codex").version
    for version in (layer.rsplit(".", 1)[0], layer + "rc1", "0.0.1"):
        why = _why(harness="codex", version=version)
        assert why.startswith(f"harness version {version} not built") and why.by == "submission"
    unstated = _why(harness="codex", version="")
    assert unstated == (f"the submission does not say which codex version it ran; the site "
                        f"runs codex {layer}") and unstated.by == "submission"
    # At the layer's version, what remains is the site's: its layer or its endpoint's API.
    agent, why = _resolve(harness="codex", version=f"codex-cli {layer}")
    assert agent is not None or why.by == "site", why


def test_an_unknown_harness_is_on_the_submissions_side(site):
    why = _why(harness="mystery")
    assert "cannot run harness 'mystery'" in why and why.by == "submission"


def test_not_runnable_is_a_str_callers_keep_using():
    why = NotRunnable("the site has no endpoint", "site")
    assert why == "the site has no endpoint" and why.upper().startswith("THE SITE")
    assert f"not re-runnable: {why}" == "not re-runnable: the site has no endpoint"
    assert getattr(why, "by", "site") == "site" and NotRunnable("x").by == "site"
    copy = pickle.loads(pickle.dumps(NotRunnable("custom", agents.SUBMISSION)))
    assert (copy, copy.by) == ("custom", "submission")
    with pytest.raises(ValueError, match="by is"):
        NotRunnable("x", "worker")
