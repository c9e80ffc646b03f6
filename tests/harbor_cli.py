"""The real Harbor CLI for tests: the pinned `harbor` of .venv-harbor (scripts/harbor-venv) with
Compose v2 as a docker CLI plugin, run as subprocesses in their own process groups.

Used by tests/tasks/test_harbor_compat.py (oracle and nop on one package),
tests/tasks/test_harbor_registry.py (a dataset resolved from the site's /registry.json) and
tests/submissions/test_journey_browser.py (the "Submitting an agent" loop of the README and
docs/submitting.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV_TIMEOUT_S = 900  # a cold install with pip takes about 1 to 1.5 minutes here


def harbor_environment(release: str | None = None) -> dict[str, str]:
    """Environment in which `harbor` is the pinned CLI and `docker compose` is Compose v2
    (creates .venv-harbor when needed; fails the test with the script's output otherwise).
    ``release``: an older Harbor of the release matrix instead (`scripts/harbor-venv --release`,
    its venv outside the checkout)."""
    t0 = time.monotonic()
    args = ["--release", release] if release else []
    try:
        done = subprocess.run(  # noqa: S603 - the repository's own script
            [str(REPO / "scripts" / "harbor-venv"), *args], cwd=REPO, capture_output=True,
            text=True, timeout=VENV_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"scripts/harbor-venv took over {VENV_TIMEOUT_S} s: {exc}", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"scripts/harbor-venv failed (exit {done.returncode}):\n"
                    f"{done.stdout}{done.stderr}", pytrace=False)
    print(f"scripts/harbor-venv: {time.monotonic() - t0:.1f} s ({done.stdout.strip()})")
    # The script prints the harbor it made ready, last: <venv>/bin/harbor [(cached)].
    venv = Path(done.stdout.strip().splitlines()[-1].split()[0]).parents[1]
    env = dict(os.environ)
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        DOCKER_CONFIG=str(venv / "docker-config"),
        # LiteLLM (imported by Harbor) otherwise tries to download its model price list, with
        # retries, before the job ends; this machine has no route to it.
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        # Harbor sends a usage event at exit from an executor thread that asyncio joins for up
        # to 300 s; with no route out every run would end with that wait.
        HARBOR_TELEMETRY="0",
        NO_COLOR="1",
        COLUMNS="160",
        PYTHONWARNINGS="ignore",
    )
    env.pop("VIRTUAL_ENV", None)
    version = subprocess.run(  # noqa: S603
        ["docker", "compose", "version"],  # noqa: S607 - the docker CLI Harbor will use
        env=env, capture_output=True, text=True, timeout=60, check=False)
    assert version.returncode == 0 and "v2." in version.stdout, (
        f"`docker compose version` with DOCKER_CONFIG={env['DOCKER_CONFIG']}: "
        f"{version.stdout}{version.stderr}")
    return env


@dataclass
class HarborRun:
    name: str
    cmd: list[str]
    returncode: int | None
    output: str
    seconds: float
    job_dir: Path

    def trials(self) -> list[Path]:
        if not self.job_dir.is_dir():
            return []
        return sorted(p for p in self.job_dir.iterdir() if (p / "result.json").is_file())

    def report(self) -> str:
        """Harbor's output plus each trial's log and verifier output, for failure messages."""
        parts = [f"$ {' '.join(self.cmd)}", f"exit {self.returncode} after {self.seconds:.0f} s",
                 self.output[-6000:]]
        for trial in self.trials():
            for rel in ("trial.log", "exception.txt", "verifier/test-stdout.txt"):
                f = trial / rel
                if f.is_file():
                    parts.append(f"--- {trial.name}/{rel}\n{f.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def rewards(self) -> list[float | None]:
        """Each trial's reward as Harbor recorded it in its result.json."""
        out = []
        for trial in self.trials():
            verifier = json.loads((trial / "result.json").read_text()).get("verifier_result")
            out.append(float(verifier["rewards"]["reward"]) if verifier else None)
        return out


def stop(proc: subprocess.Popen) -> None:
    """Interrupt a timed-out harbor (it tears its containers down on SIGINT), then kill it."""
    for sig, grace in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)  # the group this test started (start_new_session)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_all(cmds: dict[str, tuple[list[str], Path]], *, cwd: Path, env: dict[str, str],
            timeout_s: float, stagger_s: float = 0.0) -> dict[str, HarborRun]:
    """Start every `harbor` command at once (name -> (argv, the job directory it writes)), wait
    for all of them within `timeout_s`; a command still running then is stopped."""
    started = {}
    for name, (cmd, job_dir) in cmds.items():
        log = (Path(cwd) / f"{name}.log").open("w+")
        proc = subprocess.Popen(  # noqa: S603 - harbor from .venv-harbor, fixed arguments
            cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        started[name] = (cmd, job_dir, proc, log, time.monotonic())
        time.sleep(stagger_s)
    runs = {}
    deadline = time.monotonic() + timeout_s
    for name, (cmd, job_dir, proc, log, t0) in started.items():
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stop(proc)
            log.write(f"\n[test] {name} killed after {timeout_s:.0f} s\n")
        log.flush()
        log.seek(0)
        runs[name] = HarborRun(name=name, cmd=cmd, returncode=proc.returncode,
                               output=log.read(), seconds=time.monotonic() - t0,
                               job_dir=job_dir)
        log.close()
        print(f"{name}: exit {proc.returncode} in {runs[name].seconds:.1f} s")
    return runs


def review_metadata(path: Path, answers: dict[str, str]) -> str:
    """The submitter's review of the metadata.yaml that `hab-submit.py metadata` wrote: each
    line still holding a TODO gets the answer for its key (``answers``; a key with no answer
    fails the test). Returns the reviewed text, which holds no TODO any more."""
    lines = []
    for line in path.read_text().splitlines():
        if "TODO" in line and not line.startswith("#"):
            key = line.split(":", 1)[0].strip()
            assert key in answers, f"metadata.yaml asks for {key!r}: {line}"
            line = f"{key}: {json.dumps(answers[key])}"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    assert not [x for x in text.splitlines() if "TODO" in x and not x.startswith("#")], text
    return text
