"""The several-machine deployment on this machine (devtools/cluster.py):

    .venv/bin/python manage.py cluster up        # start it, print its addresses, Ctrl-C stops
    .venv/bin/python manage.py cluster batch     # the batch, a host lost, the S3 store stopped

`batch` uploads --submissions synthetic submissions through the API (gunicorn on the web host),
kills one evaluation host whole (worker, engine, containers) while it holds a job, brings it back,
then stops the S3 store for --s3-outage seconds while uploads arrive. It prints what happened
and a JSON report (the last line): jobs per host, verified exactly once, lost, duplicated,
stuck, re-claim time, the S3 outage's answers. Needs root, PostgreSQL's server binaries,
redis-server, dockerd and the images of scripts/build-images on this machine's engine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from devtools.cluster import Cluster, describe


class Command(BaseCommand):
    help = "Start the several-machine cluster (up) or run its batch and faults (batch)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["up", "batch"])
        parser.add_argument("--submissions", type=int, default=6)
        parser.add_argument("--stale-after", type=int, default=15,
                            help="VERIFICATION_STALE_AFTER_S of the cluster")
        parser.add_argument("--s3-outage", type=float, default=30.0)
        parser.add_argument("--timeout", type=float, default=600.0)
        parser.add_argument("--keep", action="store_true", help="keep var/cluster-<pid>/")

    def handle(self, *args, **opts):
        if os.geteuid() != 0:
            raise CommandError("the cluster needs root (network namespaces, dockerd)")
        root = Path(settings.BASE_DIR) / "var" / f"cluster-{os.getpid()}"
        cluster = Cluster(root, stale_after_s=opts["stale_after"], say=self._say)
        saved = dict(connections["default"].settings_dict)
        try:
            cluster.start()
            self._say(describe(cluster))
            if opts["action"] == "up":
                self._say("cluster up; Ctrl-C stops it")
                stop = {signal.SIGINT, signal.SIGTERM}
                signal.pthread_sigmask(signal.SIG_BLOCK, stop)
                signal.sigwait(stop)
                return
            from devtools.cluster_batch import Batch

            self._use_cluster_db(cluster)
            report = Batch(cluster, say=self._say, timeout=opts["timeout"]).run(
                submissions=opts["submissions"], outage_s=opts["s3_outage"])
            self._say(json.dumps(report))
        finally:
            connections["default"].close()
            connections.settings["default"] = saved
            del connections["default"]
            cluster.stop()
            if not opts["keep"]:
                shutil.rmtree(root, ignore_errors=True)

    def _use_cluster_db(self, cluster: Cluster) -> None:
        """This process reads the cluster's database as an operator would (the report)."""
        connections["default"].close()
        connections.settings["default"] = {
            **connections["default"].settings_dict, "ENGINE": "django.db.backends.postgresql",
            "NAME": "postgres", "USER": "postgres", "PASSWORD": "",
            "HOST": cluster.net.gateway, "PORT": str(cluster.pg.port), "OPTIONS": {},
            "CONN_MAX_AGE": 0}
        del connections["default"]

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

