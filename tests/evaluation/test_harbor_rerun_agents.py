"""Who decides what a Harbor re-run may use (no Docker); the re-run's test and its power are
tests/submissions/test_rerun_design.py's.

* resolve_site_agent: a Harbor harness is runnable only at an accepted version and for a model
  with a site endpoint whose key is in the secret settings; endpoint kwargs of the submission
  are dropped from what Harbor gets.
"""

import pytest

from evaluation import agents, runner


def _resolve(version="2.0.0", model="openai/m", harness="terminus-2", kwargs=None):
    return agents.resolve_site_agent(harness, harness_version=version, agent_settings={
        "harbor_agent": harness, "model_name": model, "kwargs": kwargs or {}})


def test_harbor_agent_needs_accepted_version_and_site_endpoint(harbor_settings):
    agent, why = _resolve(kwargs={"api_base": "http://evil/v1", "temperature": 0.2})
    assert (agent.kind, agent.name, agent.model, why) == ("harbor", "terminus-2", "openai/m", "")
    endpoint, _ = agents.model_endpoint("openai/m")
    assert endpoint.base_url == "http://10.9.8.7:8000/v1"
    assert endpoint.env == {"OPENAI_API_KEY": "sk-site"} and endpoint.host == "10.9.8.7:8000"
    assert runner.site_kwargs(agent.kwargs) == ({"temperature": 0.2}, ["api_base"])

    assert _resolve(version="1.9.0") == (None, _resolve(version="1.9.0")[1])
    assert "the submission used 1.9.0" in _resolve(version="1.9.0")[1]
    assert "no endpoint for model 'openai/other'" in _resolve(model="openai/other")[1]
    assert "'ABSENT'" in _resolve(model="openai/nokey")[1]
    assert "cannot run harness 'mystery'" in _resolve(harness="mystery")[1]
    # A Harbor installed agent the site does not bake: not re-runnable, and why.
    assert _resolve(harness="aider")[1].startswith(
        "aider runs inside the task container and installs itself from the internet")
    assert "does not re-run codex (VERIFICATION_HARBOR_AGENTS)" in _resolve(
        harness="codex", version="0.171.0")[1]


def test_baked_cli_needs_its_layer_version_and_an_endpoint_in_its_api(harbor_settings):
    """S12: the submission's harness version selects the layer; a version with none is
    "harness version X not built"; a CLI is run only against a site endpoint in its API."""
    harbor_settings.VERIFICATION_HARBOR_AGENTS = {"codex": [], "claude-code": [],
                                                  "copilot-cli": []}
    harbor_settings.VERIFICATION_RERUN_MODEL_ENDPOINTS["anthropic/c"] = {
        "base_url": "https://api.example/v1", "key_env": "ANTHROPIC_API_KEY",
        "key_secret": "SITE_M", "api_format": "anthropic", "auth_header": "x-api-key"}
    for name, version in (("codex", "0.171.0"), ("claude-code", "2.1.332"),
                          ("copilot-cli", "1.0.102")):
        assert runner.installed_harness(name).version == version
        assert runner.harness_problem(name, "0.0.1") == (
            f"harness version 0.0.1 not built ({name}: the site's layer is {version})")
        assert _resolve(harness=name, version="0.0.1") == (
            None, runner.harness_problem(name, "0.0.1"))
    # (the layers themselves may be absent on this machine: only the API check is asserted)
    why = runner.harness_problem("codex", "0.171.0")
    if not why:
        assert _resolve(harness="codex", version="0.171.0")[0].name == "codex"
        assert _resolve(harness="codex", version="0.171.0", model="anthropic/c")[1] == (
            "codex cannot use the site's endpoint (the site's endpoint for anthropic/c speaks "
            "anthropic; codex speaks openai)")
    if not runner.harness_problem("claude-code", "2.1.332"):
        assert "claude-code cannot use the site's endpoint" in _resolve(
            harness="claude-code", version="2.1.332")[1]
        assert _resolve(harness="claude-code", version="2.1.332", model="anthropic/c")[1] == ""
    if not runner.harness_problem("copilot-cli", "1.0.102"):
        assert _resolve(harness="copilot-cli", version="1.0.102", model="anthropic/c")[1] == ""


def test_npm_layer_is_pinned_by_an_integrity_lock():
    """Every npm CLI's lock names the CLI at its layer's version and carries an integrity hash
    for every package, the platform package holding the native executable included."""
    import json

    from evaluation.runner.harnesses import npm_dockerfile, npm_wrappers

    for harness in runner.INSTALLED_HARNESSES.values():
        if harness.kind != "npm":
            continue
        lock = json.loads(harness.requirements_path.read_text())
        packages = {k: v for k, v in lock["packages"].items() if k}
        assert packages and all(v["integrity"].startswith("sha512-") for v in packages.values())
        command, target = harness.commands[0]
        executable = target.split('" ')[-1].split()[-1]
        platform_pkg = executable.split("node_modules/")[1].rsplit("/", 1)[0].split("/vendor")[0]
        assert f"node_modules/{platform_pkg}" in packages, (harness.name, platform_pkg)
        assert packages[f"node_modules/{platform_pkg}"]["version"].startswith(harness.version)
        text = npm_dockerfile(harness)
        assert "RUN " in text and "npm" not in text.split("RUN ", 1)[1]  # nothing fetched
        assert f"--version | grep -qF '{harness.version}'" in text
        assert npm_wrappers(harness)[command].endswith('"$@"\n')
        assert runner.harness_image_tag(harness).startswith(f"hab-harness/{harness.name}:")


def test_openhands_layer_has_its_own_python_and_a_hashed_offline_lock(harbor_settings):
    """OpenHands: openhands-ai 1.6.0 (the newest with openhands.core.main, which
    Harbor's agent runs) in Harbor's venv path, on the layer's own CPython 3.12, installed
    offline from a lock whose every package is hashed; Harbor's recorded version text
    ("OpenHands version: 1.6.0") selects the layer."""
    from evaluation.runner.harnesses import harness_dockerfile

    harness = runner.installed_harness("openhands")
    assert (harness.version, harness.python, harness.venv, harness.endpoint_kwarg,
            harness.key_env) == ("1.6.0", "3.12", "/opt/openhands-venv", "api_base",
                                 "LLM_API_KEY")
    assert harness.paths == ("/opt/hab-harness", "/opt/openhands-venv")
    lines = harness.requirements_path.read_text().splitlines()
    assert "# hab-python: 3.12" in lines and "# hab-sdist: func-timeout" in lines
    pins = [line.split()[0] for line in lines if line and line[0].isalpha()]
    assert "openhands-ai==1.6.0" in pins and "uv==0.13.9" in pins and len(pins) > 300
    blocks = "\n".join(lines).split("\n" + pins[0])[1]
    assert blocks.count("--hash=sha256:") >= len(pins)  # every pin carries its hashes
    text = harness_dockerfile(harness, "uv.whl")
    assert "curl" not in text and "pip download" not in text
    assert "uv pip install --offline --no-index --find-links /tmp/wheels" in text
    assert "uv venv --offline --python /opt/hab-harness/python/bin/python3.12 " \
        "/opt/openhands-venv" in text
    for printed in ("OpenHands version: 1.6.0", "1.6.0",
                    "grpc.py:43: FutureWarning: grpcio < 1.83.0\nOpenHands version: 1.6.0"):
        assert runner.plain_version(printed) == "1.6.0"
    assert runner.plain_version("2.1.332 (Claude Code)") == "2.1.332"
    assert runner.plain_version("2.0.0rc1") == "2.0.0rc1"
    harbor_settings.VERIFICATION_HARBOR_AGENTS = {"openhands": []}
    why = _resolve(harness="openhands", version="OpenHands version: 1.6.0")[1]
    assert not why.startswith("harness version"), why
    assert _resolve(harness="openhands", version="OpenHands version: 1.11.0")[1] == (
        "harness version 1.11.0 not built (openhands: the site's layer is 1.6.0; openhands-ai "
        "1.7.0 and later no longer ship openhands.core.main, which Harbor's openhands agent runs)")


def test_a_python_runtime_copied_into_a_layer_runs_from_its_new_place(tmp_path):
    """The layer's CPython is the build host's, copied with its runpath made relative: it runs
    from another directory with its own standard library (its prefix is where it lies)."""
    import subprocess
    import sys

    from evaluation.runner.harnesses import _set_runpath, copy_python_runtime, host_python_runtime

    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    dest = tmp_path / "python"
    copy_python_runtime(host_python_runtime(version), dest, version)
    exe = dest / "bin" / f"python{version}"
    done = subprocess.run([exe, "-I", "-c", "import sys, ssl, sqlite3; print(sys.prefix)"],  # noqa: S603
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, str(dest)), done.stderr
    assert not (dest / "lib" / f"python{version}" / "test").exists()
    # the rewrite is in place and idempotent; a longer runpath than the old one is refused
    assert _set_runpath(exe, "$ORIGIN/../lib") in ("$ORIGIN/../lib", "")
    if _set_runpath(exe, "$ORIGIN/../lib"):
        with pytest.raises(runner.InfrastructureError, match="longer"):
            _set_runpath(exe, "/a/much/longer/runpath/than/the/one/it/has")


def test_installed_agent_gateway_holds_the_site_key(harbor_settings):
    endpoint, _ = agents.model_endpoint("openai/m")
    gw = endpoint.gateway()
    assert (gw.upstream, gw.auth_header, gw.auth_value) == (
        "http://10.9.8.7:8000/v1", "Authorization", "Bearer sk-site")
    assert gw.config(None)["paths"] == ["/chat/completions", "/responses"]
    assert "sk-site" not in repr(gw)
    harbor_settings.VERIFICATION_RERUN_MODEL_ENDPOINTS["anthropic/c"] = {
        "base_url": "https://api.example/v1", "key_env": "ANTHROPIC_API_KEY",
        "key_secret": "SITE_M", "api_format": "anthropic", "auth_header": "x-api-key"}
    gw = agents.model_endpoint("anthropic/c")[0].gateway()
    assert (gw.auth_header, gw.auth_value, gw.config(None)["paths"]) == (
        "x-api-key", "sk-site", ["/messages"])
    # The task container joins only the re-run's internal network (terminus-2's: none).
    from evaluation.runner.harbor import _overlay

    overlay = _overlay("img:1", "job", 1, 60, network="hab-egress-job-1")
    assert "networks: [hab_site_egress]" in overlay and "network_mode" not in overlay
    assert 'name: "hab-egress-job-1"' in overlay and "external: true" in overlay
    assert "network_mode: none" in _overlay("img:1", "job", 1, 60)


def test_every_endpoint_kwarg_is_dropped():
    kwargs = {k: "x" for k in runner.ENDPOINT_KWARGS} | {"max_turns": 5}
    kept, dropped = runner.site_kwargs(kwargs)
    assert kept == {"max_turns": 5} and dropped == sorted(runner.ENDPOINT_KWARGS)
