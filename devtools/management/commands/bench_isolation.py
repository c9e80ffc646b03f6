"""manage.py bench_isolation --engine NAME=DOCKER_HOST [--engine ...] [--task ...] [--repeat N]

the cost of the second isolation boundary, per trial, on the same task in one run.
For each engine (e.g. ``identity=unix:///run/hab-plain.sock`` and ``remapped=unix:///var/run/
docker.sock``), the wall time of a re-grade (runner.run_verifier of the oracle's output: a
fresh verifier container) and of a replay-like agent run (the oracle's commands run as the agent
in the sandbox runtime, as a replay runs the recorded ones), repeated and interleaved across
engines so the machine's noise falls on all of them alike. Prints medians and each engine's
ratio to the first. Each engine needs the task's image (scripts/build-images with DOCKER_HOST).
"""

import statistics
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation import runner


class Command(BaseCommand):
    help = "Per-trial re-grade and replay wall time on several Docker engines, as ratios."

    def add_arguments(self, parser):
        parser.add_argument("--engine", action="append", required=True,
                            help="NAME=DOCKER_HOST (the first is the baseline)")
        parser.add_argument("--task", type=Path,
                            default=Path("tasks/ct-abnormality-classification/synthetic_01"))
        parser.add_argument("--repeat", type=int, default=5)

    def _use(self, host: str) -> None:
        settings.DOCKER_HOST = host
        runner.reset_client()

    def _trial(self, task: Path, work: Path, n: int) -> dict[str, float]:
        t0 = time.perf_counter()
        agent = runner.run_agent(task, job_id=f"bench-iso-{n}", purpose="oracle",
                                 command="bash /solution/solve.sh",
                                 copy_in={"/solution": task / "solution"},
                                 out_dir=work / f"agent-{n}", runtime=runner.sandbox_runtime())
        t1 = time.perf_counter()
        if not agent.result.ok:
            raise CommandError(f"the oracle failed: {agent.result.reason}")
        verdict = runner.run_verifier(task, job_id=f"bench-iso-{n}",
                                      artifacts_dir=work / f"agent-{n}")
        t2 = time.perf_counter()
        if not verdict.passed:
            raise CommandError(f"the oracle's output did not pass: {verdict.error}")
        return {"replay": t1 - t0, "regrade": t2 - t1}

    def handle(self, *args, engine, task, repeat, **options):
        task = task if task.is_absolute() else Path(settings.BASE_DIR) / task
        engines = [tuple(e.split("=", 1)) for e in engine]
        if any(len(e) != 2 for e in engines):
            raise CommandError("--engine takes NAME=DOCKER_HOST")
        saved = settings.DOCKER_HOST
        times: dict[str, dict[str, list[float]]] = {n: {"replay": [], "regrade": []}
                                                    for n, _ in engines}
        words = {}
        try:
            with tempfile.TemporaryDirectory(prefix="hab-bench-iso-") as tmp:
                for n in range(repeat + 1):  # the first round warms each engine up
                    for name, host in engines:
                        self._use(host)
                        words[name] = runner.isolation(runner.sandbox_runtime())
                        got = self._trial(task, Path(tmp) / name, n)
                        if n:
                            for kind, seconds in got.items():
                                times[name][kind].append(seconds)
        finally:
            self._use(saved)
        base = engines[0][0]
        for name, _ in engines:
            self.stdout.write(f"{name}: {words[name]}")
            for kind in ("regrade", "replay"):
                med = statistics.median(times[name][kind])
                ratio = med / statistics.median(times[base][kind])
                self.stdout.write(f"  {kind:8s} median {med:6.2f} s over {repeat}  "
                                  f"x{ratio:.2f} vs {base}")
