"""manage.py bench_isolation (--runtime NAME=CHOICE ... | --engine NAME=DOCKER_HOST ...)
                            [--task ...] [--repeat N] [--no-rerun]

The cost of an isolation boundary, per trial, on the same task in one run: the wall time of a
re-grade (runner.run_verifier of the oracle's output: a fresh verifier container), of a
replay-like agent run (the oracle's commands run as the agent in the sandbox runtime, as a replay
runs the recorded ones) and of a re-run (`harbor run` of Harbor's oracle agent by the real Harbor
CLI, its task container on network none under the re-run's runtime: Harbor's container life
cycle without a model's time), repeated and interleaved across variants so the machine's noise
falls on all of them alike. Prints medians and each variant's ratio to the first.

Variants are either sandbox runtimes on this engine (``--runtime runc=default --runtime
gvisor=runsc``: VERIFICATION_SANDBOX_RUNTIME for each; the gVisor row of docs/reliability.md) or
engines (``--engine identity=unix:///run/hab-plain.sock --engine remapped=unix:///var/run/docker.
sock``: the user-namespace row). Each engine needs the task's image (scripts/build-images with
DOCKER_HOST); the re-run needs the Harbor CLI (scripts/harbor-venv).
"""

import statistics
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation import runner

KINDS = ("regrade", "replay", "rerun")


class Command(BaseCommand):
    help = "Per-trial re-grade, replay and re-run wall time across runtimes or engines, as ratios."

    def add_arguments(self, parser):
        parser.add_argument("--runtime", action="append", default=[],
                            help="NAME=VERIFICATION_SANDBOX_RUNTIME (default, runsc, auto); the "
                                 "first is the baseline")
        parser.add_argument("--engine", action="append", default=[],
                            help="NAME=DOCKER_HOST (the first is the baseline)")
        parser.add_argument("--task", type=Path,
                            default=Path("tasks/ct-abnormality-classification/synthetic_01"))
        parser.add_argument("--repeat", type=int, default=5)
        parser.add_argument("--no-rerun", action="store_true",
                            help="skip the Harbor re-run (no Harbor CLI on this machine)")

    def _use(self, host: str, choice: str) -> None:
        settings.DOCKER_HOST = host
        settings.VERIFICATION_SANDBOX_RUNTIME = choice
        runner.reset_client()

    def _trial(self, task: Path, work: Path, n: int, rerun: bool) -> dict[str, float]:
        runtime = runner.sandbox_runtime()
        t0 = time.perf_counter()
        agent = runner.run_agent(task, job_id=f"bench-iso-{n}", purpose="oracle",
                                 command="bash /solution/solve.sh",
                                 copy_in={"/solution": task / "solution"},
                                 out_dir=work / f"agent-{n}", runtime=runtime)
        t1 = time.perf_counter()
        if not agent.result.ok:
            raise CommandError(f"the oracle failed: {agent.result.reason}")
        verdict = runner.run_verifier(task, job_id=f"bench-iso-{n}",
                                      artifacts_dir=work / f"agent-{n}")
        t2 = time.perf_counter()
        if not verdict.passed:
            raise CommandError(f"the oracle's output did not pass: {verdict.error}")
        got = {"replay": t1 - t0, "regrade": t2 - t1}
        if rerun:
            image, _built = runner.build_task_image(task)
            (work / f"rerun-{n}").mkdir(parents=True)
            t3 = time.perf_counter()
            hb = runner.harbor_run(task, agent="oracle", model="none/none",
                                   base_url="http://127.0.0.1:9/v1", agent_kwargs={},
                                   secret_env={}, image=image, attempts=1,
                                   work_dir=work / f"rerun-{n}", job_label=f"bench-iso-rr-{n}",
                                   runtime=runtime)
            got["rerun"] = time.perf_counter() - t3
            trial = hb.trials[0]
            if trial.exception_type:
                raise CommandError(f"the Harbor re-run failed: {trial.exception_type}: "
                                   f"{trial.exception_message[:300]}\n{hb.log_tail[-1500:]}")
        return got

    def handle(self, *args, runtime, engine, task, repeat, no_rerun, **options):
        task = task if task.is_absolute() else Path(settings.BASE_DIR) / task
        if bool(runtime) == bool(engine):
            raise CommandError("give either --runtime NAME=CHOICE or --engine NAME=DOCKER_HOST")
        pairs = [tuple(v.split("=", 1)) for v in runtime or engine]
        if any(len(p) != 2 for p in pairs):
            raise CommandError("--runtime takes NAME=CHOICE, --engine NAME=DOCKER_HOST")
        saved = (settings.DOCKER_HOST, settings.VERIFICATION_SANDBOX_RUNTIME)
        variants = [(name, (saved[0], value) if runtime else (value, saved[1]))
                    for name, value in pairs]
        rerun = not no_rerun
        if rerun and runner.harbor_problem():
            raise CommandError(f"{runner.harbor_problem()} (or --no-rerun)")
        kinds = [k for k in KINDS if rerun or k != "rerun"]
        times = {name: {k: [] for k in kinds} for name, _ in variants}
        words = {}
        try:
            with tempfile.TemporaryDirectory(prefix="hab-bench-iso-") as tmp:
                for n in range(repeat + 1):  # the first round warms each variant up
                    for name, (host, choice) in variants:
                        self._use(host, choice)
                        words[name] = runner.isolation(runner.sandbox_runtime())
                        got = self._trial(task, Path(tmp) / name, n, rerun)
                        if n:
                            for kind, seconds in got.items():
                                times[name][kind].append(seconds)
        finally:
            self._use(*saved)
        base = variants[0][0]
        for name, _ in variants:
            self.stdout.write(f"{name}: {words[name]}")
            for kind in kinds:
                med = statistics.median(times[name][kind])
                ratio = med / statistics.median(times[base][kind])
                self.stdout.write(f"  {kind:8s} median {med:6.2f} s over {repeat}  "
                                  f"x{ratio:.2f} vs {base}")
