"""The several-machine deployment, for real, on one machine (`manage.py cluster
batch`, devtools/cluster.py): a web host (gunicorn), an intake host and two evaluation hosts,
each in a network namespace of its own with its own hostname, the evaluation hosts each with
their own Docker engine, sharing only PostgreSQL, Redis and an S3 store (moto's server mode) by
TCP. Marked `cluster`: `make test` deselects it, `.ci/run`
runs it (`-m cluster`) (about 6 minutes on the shared 2-core machine). Figures are in docs/deploy.md."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]


def test_r17_r18_a_batch_across_the_cluster_survives_a_lost_host_and_an_s3_outage(
        docker_engine):
    """R17: six synthetic submissions uploaded through the API are verified by both evaluation
    hosts, each exactly once (nothing lost, duplicated or stuck), with every archive and
    output read from the S3 store: no file in any host's MEDIA_ROOT.
    R18: one evaluation host lost whole (worker, engine, containers SIGKILLed) while it holds a
    job: the other host takes the job over after VERIFICATION_STALE_AFTER_S and finishes it, and
    the lost host, back, removes what it left (containers, networks, temporary folders) before it
    claims again.
    R16 on the cluster: the S3 store stopped for 30 s while uploads arrive: each upload gets 503
    with Retry-After (or is stored whole); sent again afterwards, each is stored whole and
    verified."""
    env = {**os.environ, "DEBUG": "1"}
    result = subprocess.run([sys.executable, "manage.py", "cluster", "batch", "--submissions",
                             "6", "--stale-after", "15", "--s3-outage", "30"], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=1500)
    out = result.stdout
    print(out[-4000:])
    assert result.returncode == 0, (out[-3000:], result.stderr[-3000:])
    report = json.loads(out.strip().splitlines()[-1])
    assert report["submissions"] == 8 and report["verified_once"] == 8, report
    assert (report["lost"], report["duplicated"], report["stuck"]) == (0, 0, 0), report
    assert all(n > 0 for n in report["jobs_per_host"].values()), report
    assert report["archives_whole"], report
    assert not any(report["local_media_files"].values()), report
    loss = report["host_loss"]
    assert loss["taken_by"] == "eval2" and loss["job_status"] == "done", loss
    # Released once its heartbeat is VERIFICATION_STALE_AFTER_S old, at the next reaper run
    # (every 5 s); taken once the other host is free (it may be finishing a job of its own).
    assert 15 <= loss["released_s"] < 15 + 2 * 5 + 5, loss
    assert loss["reclaim_s"] < loss["released_s"] + 30, loss
    assert loss["reap_logged"] and not any(loss["after_restart"].values()), loss
    outage = report["s3_outage"]
    assert all(code in (202, 503) for code, _s, _ra in outage["answers"]), outage
    assert all(ra == "30" for code, _s, ra in outage["answers"] if code == 503), outage
