"""The leaderboard as a Harbor hub board (manage.py export_hub): the definition and the rows
validate against the real Harbor's own strict models (the pinned .venv-harbor), and the rows
carry the site's own figures and ranks, with the rows it never ranks hidden."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from leaderboard.models import LeaderboardEntry

pytestmark = pytest.mark.django_db

VALIDATE = """
import json, sys
from pathlib import Path
from harbor.hub.leaderboards import LeaderboardCreateConfig, LeaderboardRowsCreateConfig
out = Path(sys.argv[1])
board = LeaderboardCreateConfig.model_validate(json.loads((out / "leaderboard.json").read_text()))
rows = LeaderboardRowsCreateConfig.model_validate(json.loads((out / "rows.json").read_text()))
print(board.name, board.rank_by[0].accessor, len(board.columns), len(rows.rows))
"""


def test_the_export_validates_against_harbors_models_and_carries_the_sites_rows(
        client, settings, tmp_path):
    call_command("load_demo", verbosity=0)
    out = tmp_path / "hub"
    printed = io.StringIO()
    call_command("export_hub", "--site-url", "https://lb.example.org/", "--out", str(out),
                 stdout=printed)
    entries = LeaderboardEntry.objects.filter(benchmark_version__name="healthagentbench")
    assert f"{entries.count()} rows" in printed.getvalue()
    assert "harbor hub leaderboard create --config" in printed.getvalue()

    subprocess.run([str(Path(settings.BASE_DIR) / "scripts" / "harbor-venv")], check=True,
                   capture_output=True)
    harbor_python = Path(settings.HARBOR_VENV) / "bin" / "python"
    proc = subprocess.run([str(harbor_python), "-c", VALIDATE, str(out)],  # noqa: S603
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    name, rank_by, columns, count = proc.stdout.split()
    assert (name, rank_by, int(columns), int(count)) == (
        "healthagentbench-1.0", "metrics.success_rate", 13, entries.count())

    # The rows are the leaderboard CSV's rows: same agents, success and ranks.
    rows = json.loads((out / "rows.json").read_text())["rows"]
    body = b"".join(client.get("/leaderboard.csv").streaming_content).decode()
    board = list(csv.DictReader(io.StringIO(body)))
    by_agent = {r["metadata"]["agent"]: r for r in rows}
    for line in board:
        row = by_agent[line["agent"]]
        assert row["metrics"]["success_rate"] == pytest.approx(float(line["success_rate"]))
        assert row["metrics"]["rank"] == (int(line["rank"]) if line["rank"] else None)
        assert row["status"] == ("display" if line["ranked"] == "true" else "hide")
        assert row["metadata"]["submission_url"] == (
            f"https://lb.example.org/submissions/{line['submission_id']}/")
    definition = json.loads((out / "leaderboard.json").read_text())
    assert definition["metrics_schema"]["properties"]["success_rate"]["type"] == "number"
    assert "reported" in definition["metrics_schema"]["properties"][
        "reported_cost_per_attempt_usd"]["description"]


def test_an_unknown_version_is_a_clear_error(db, tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="unknown benchmark version 'nope@9'"):
        call_command("export_hub", "--benchmark", "nope@9", "--site-url", "https://x.org",
                     "--out", str(tmp_path))
