"""manage.py bench_runner [--task tasks/<category>/<task_id>] [--repeat N] [--harbor PATH]

For one trial of a synthetic task, the wall time of the runner against baselines, as ratios:

  verifier   runner.run_verifier (fresh hardened container, outputs copied in as data)
             vs a bare `docker run --rm --network none` of the same `bash /tests/test.sh`
             with the output and tests/ bind-mounted;
  trial      runner oracle trial (run_agent + run_verifier, two containers)
             vs `harbor run -p <task> -a oracle --env docker` (when a Harbor CLI is found:
             --harbor, else .venv-harbor/bin/harbor from scripts/harbor-venv).

Medians over --repeat runs (after one warm-up each). Prints one line per comparison.
"""

import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation import runner


class Command(BaseCommand):
    help = "Runner wall time vs a bare docker run (and the harbor CLI), for one synthetic trial."

    def add_arguments(self, parser):
        parser.add_argument("--task", type=Path,
                            default=Path("tasks/ct-abnormality-classification/synthetic_01"))
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--harbor", type=Path, default=None)

    def handle(self, *args, task, repeat, harbor, **options):
        task = task if task.is_absolute() else Path(settings.BASE_DIR) / task
        if not (task / "task.toml").is_file():
            raise CommandError(f"{task} is not a task package")
        image, _ = runner.build_task_image(task)
        outputs = runner.declared_outputs(task)
        with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
            tmp = Path(tmp)
            t0 = time.time()
            oracle = runner.run_agent(task, job_id="bench-oracle", out_dir=tmp / "out",
                                      command="bash /solution/solve.sh",
                                      copy_in={"/solution": task / "solution"}, image=image)
            oracle_s = time.time() - t0
            if not oracle.result.ok or oracle.missing:
                raise CommandError(f"oracle failed: {oracle.result.reason}")

            def ours():
                t = time.time()
                v = runner.run_verifier(task, job_id="bench-verifier", artifacts_dir=tmp / "out",
                                        image=image)
                assert v.reward is not None, v.error
                return time.time() - t

            binds = {task / "tests": "/tests"}
            for p in outputs:
                binds[tmp / "out" / p.lstrip("/")] = p

            def bare():
                code, wall, text = runner.bare_docker_run(
                    image, binds=binds,
                    command=["bash", "-c", "bash /tests/test.sh && cat /logs/verifier/reward.json"])
                if code != 0 or "reward" not in text:
                    raise CommandError(f"bare docker run failed ({code}): {text}")
                return wall

            ours(), bare()  # warm-up (page cache, image layers)
            ours_s = statistics.median(ours() for _ in range(repeat))
            bare_s = statistics.median(bare() for _ in range(repeat))
            self.stdout.write(
                f"verifier  runner {ours_s:6.2f} s   bare docker run {bare_s:6.2f} s   "
                f"ratio {ours_s / bare_s:5.2f}x   ({task.parent.name}/{task.name}, "
                f"median of {repeat})")
            trial_s = oracle_s + ours_s
            harbor = harbor or Path(settings.BASE_DIR) / ".venv-harbor" / "bin" / "harbor"
            if not harbor.exists():
                self.stdout.write(f"trial     runner {trial_s:6.2f} s   harbor CLI not found "
                                  f"({harbor}; run scripts/harbor-venv)")
                return
            env = {"PATH": f"{harbor.parent}:/usr/local/bin:/usr/bin:/bin"}
            docker_config = harbor.parent.parent / "docker-config"
            if docker_config.is_dir():
                env["DOCKER_CONFIG"] = str(docker_config)
            times = []
            for _ in range(repeat):
                t = time.time()
                proc = subprocess.run(  # noqa: S603
                    [str(harbor), "run", "-p", str(task), "-a", "oracle", "--env", "docker",
                     "-o", str(tmp / "harbor-jobs")],
                    capture_output=True, text=True, timeout=900, env=env, check=False)
                times.append(time.time() - t)
                if proc.returncode != 0:
                    raise CommandError(f"harbor run failed: {proc.stdout[-1500:]}"
                                       f"{proc.stderr[-1500:]}")
            harbor_s = statistics.median(times)
            self.stdout.write(
                f"trial     runner {trial_s:6.2f} s   harbor run      {harbor_s:6.2f} s   "
                f"ratio {trial_s / harbor_s:5.2f}x   (oracle agent + verifier)")
