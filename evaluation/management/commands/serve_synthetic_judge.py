"""Serve the synthetic judge (evaluation/judge/synthetic.py) for `make run`: a rule standing in
for the X-ray LLM judge on the synthetic benchmark, never used in production (DEBUG only).

By default it binds the host's address on the judge's Docker network (XRAY_JUDGE_EGRESS_NETWORK,
"bridge"): Harbor's verifier containers and the site's judge gateway both reach it there. Port
8765 when free (the X-ray task's default judge port), else any free port.

With --env-file it writes XRAY_JUDGE_URL and XRAY_JUDGE_MODEL there once it listens (scripts/
run-dev exports them to the site's processes). When a judge is already configured
(XRAY_JUDGE_URL), it serves nothing and exits 0: the configured judge is the site's.
"""

import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation import runner
from evaluation.judge.synthetic import RULE, SYNTHETIC_JUDGE_MODEL, SyntheticJudge

DEFAULT_PORT = 8765


class Command(BaseCommand):
    help = ("Serve the synthetic X-ray judge (a rule for the synthetic benchmark, not an LLM) "
            "for make run; DEBUG only.")

    def add_arguments(self, parser):
        parser.add_argument("--host", default="",
                            help="address to bind (default: the host's address on the Docker "
                                 "network XRAY_JUDGE_EGRESS_NETWORK)")
        parser.add_argument("--port", type=int, default=None,
                            help=f"port (default {DEFAULT_PORT} when free, else any free port; "
                                 "0: any free port)")
        parser.add_argument("--env-file", default="",
                            help="write XRAY_JUDGE_URL=... and XRAY_JUDGE_MODEL=... here once "
                                 "listening")

    def handle(self, *args, **opts):
        if not settings.DEBUG:
            raise CommandError("the synthetic judge is for development (DEBUG=1) only: a "
                               "production site configures a real judge (XRAY_JUDGE_URL)")
        if (settings.XRAY_JUDGE_URL or "").strip():
            self.stdout.write(f"synthetic judge not started: XRAY_JUDGE_URL is set "
                              f"({settings.XRAY_JUDGE_URL}), the site uses that judge")
            return
        host = opts["host"]
        if not host:
            try:
                host = runner.host_address(settings.XRAY_JUDGE_EGRESS_NETWORK)
            except runner.InfrastructureError as exc:
                raise CommandError(f"no address for the synthetic judge: {exc}") from exc
        judge = self._bind(host, opts["port"])
        if opts["env_file"]:
            path = Path(opts["env_file"])
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(f"XRAY_JUDGE_URL={judge.url}\n"
                           f"XRAY_JUDGE_MODEL={SYNTHETIC_JUDGE_MODEL}\n")
            os.replace(tmp, path)
        self.stdout.write(f"synthetic judge (rule {RULE}, model {SYNTHETIC_JUDGE_MODEL}, not an "
                          f"LLM) listening on {judge.url}")
        self.stdout.flush()
        try:
            judge.serve_forever()
        except KeyboardInterrupt:
            pass

    def _bind(self, host: str, port: int | None) -> SyntheticJudge:
        try:
            return SyntheticJudge(host=host, port=DEFAULT_PORT if port is None else port)
        except OSError as exc:
            if port is not None:
                raise CommandError(f"cannot listen on {host}:{port}: {exc}") from exc
            return SyntheticJudge(host=host, port=0)  # 8765 is taken: any free port
