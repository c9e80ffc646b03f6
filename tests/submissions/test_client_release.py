"""The upload client with nothing to clone: the site serves
submissions/client.py as one standard-library file at /client/hab-submit.py, the Submit page
names its version and sha256, and its `metadata` command writes metadata.yaml from what Harbor
recorded, with placeholders the site refuses until the submitter replaces them.

The newcomer journey (tests/evaluation/test_newcomer_journey.py) runs the served file with the
machine's own python3 on real Harbor jobs, from a directory holding nothing else."""

from __future__ import annotations

import hashlib
import html
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from devtools.harbor_fixtures import HarborJobBuilder
from evaluation.task_specs import version_packages
from submissions import client as submit_client
from submissions.metadata import MetadataError, parse_metadata
from submissions.validation import spec_from_packages, validate_submission

REPO = Path(__file__).resolve().parents[2]
SLUG = "healthagentbench-synthetic@1.0"
MODEL = "openai/gpt-5.5"


@pytest.fixture(scope="module")
def spec():
    return spec_from_packages(version_packages(REPO / "tasks", SLUG), slug=SLUG,
                              attempts_per_task=3)


def test_the_site_serves_the_client_the_submit_page_names_by_version_and_sha256(client, db):
    call_command("sync_tasks", verbosity=0)  # a version to submit to: the page's guide shows
    served = client.get("/client/hab-submit.py")
    assert served.status_code == 200
    assert served["Content-Type"] == "text/x-python; charset=utf-8"
    data = served.content
    assert data == (REPO / "submissions" / "client.py").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert served["ETag"] == f'"{digest}"' and "max-age=300" in served["Cache-Control"]
    assert served["X-Client-Version"] == submit_client.__version__
    # Revalidated by its digest: nothing is sent again while it is the same file.
    again = client.get("/client/hab-submit.py", HTTP_IF_NONE_MATCH=f'"{digest}"')
    assert again.status_code == 304 and again.content == b""
    assert client.get("/client/hab-submit.py", HTTP_IF_NONE_MATCH='"old"').status_code == 200
    assert client.post("/client/hab-submit.py").status_code == 405
    page = html.unescape(client.get("/submit/").content.decode())
    release = page.split('data-testid="client-release">')[1].split("</p>")[0]
    assert f"version {submit_client.__version__}, sha256 <code>{digest}</code>" in release
    download = page.split('data-testid="client-download">')[1].split("</pre>")[0]
    assert download.splitlines()[0] == "curl -O http://testserver/client/hab-submit.py"
    assert f"# {digest}" in download.splitlines()[1]


def test_the_clients_placeholder_is_the_one_the_site_refuses():
    """The client cannot import the site (it is one standalone file): its marker is pinned here."""
    from submissions.metadata import PLACEHOLDER

    assert submit_client.TODO == PLACEHOLDER


def test_the_client_is_one_standard_library_file():
    """What it imports is the standard library's: it runs where only Python is."""
    source = (REPO / "submissions" / "client.py").read_text()
    imported = set(re.findall(r"^\s*(?:import|from) ([a-z_.]+)", source, re.M))
    top = {name.split(".")[0] for name in imported} - {"__future__"}
    assert top <= set(sys.stdlib_module_names), top - set(sys.stdlib_module_names)


def _metadata(jobs: list[Path], *args: str) -> str:
    from io import StringIO

    out = StringIO()
    assert submit_client.main(["metadata", *args, *map(str, jobs)], out=out) == 0
    return out.getvalue()


def _filled(text: str) -> str:
    """The submitter's review: every TODO replaced."""
    values = {"agent_display_name": "Codex (GPT 5.5)", "agent_url": "https://github.com/openai/codex",
              "agent_org_display_name": "OpenAI", "model_display_name": "GPT 5.5",
              "model_org_display_name": "OpenAI"}
    lines = []
    for line in text.splitlines():
        key = line.strip().lstrip("- ").split(":", 1)[0]
        if "TODO" in line and key in values:
            line = f"{line.split(':', 1)[0]}: {values[key]!r}".replace("'", '"')
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_metadata_from_harbor_jobs_names_what_they_ran_and_is_refused_until_reviewed(tmp_path,
                                                                                    spec):
    jobs = HarborJobBuilder(spec.tasks, attempts=3, agent="codex", model=MODEL).build(tmp_path)
    text = _metadata([jobs.job_dir], "--benchmark", SLUG)
    assert 'harness: "codex"' in text and f'model_name: "{MODEL}"' in text
    assert 'model_provider: "openai"' in text and f'benchmark: "{SLUG}"' in text
    # Unreviewed: each placeholder is refused, naming its field.
    with pytest.raises(MetadataError) as refused:
        parse_metadata(text)
    assert sorted(p.path for p in refused.value.problems) == [
        "metadata:agent_display_name", "metadata:agent_org_display_name", "metadata:agent_url",
        "metadata:models[0].model_display_name", "metadata:models[0].model_org_display_name"]
    assert all("placeholder" in p.message for p in refused.value.problems)
    # Reviewed: accepted, and it agrees with the trials on harness, version and model.
    meta = parse_metadata(_filled(text))
    report = validate_submission(tmp_path, meta, spec)
    assert not [p for p in report.problems if p.code.startswith("metadata")], report.problems
    assert meta.harness_version == report.trials[0].agent_version


def test_metadata_refuses_jobs_of_two_agents_and_what_is_not_a_job(tmp_path, spec, capsys):
    one = HarborJobBuilder(spec.tasks, attempts=1, agent="codex", model=MODEL,
                           job_name="a").build(tmp_path / "a")
    two = HarborJobBuilder(spec.tasks, attempts=1, agent="claude-code",
                           model="anthropic/opus-4.8", job_name="b").build(tmp_path / "b")
    with pytest.raises(SystemExit, match="one submission is one agent"):
        _metadata([one.job_dir, two.job_dir])
    with pytest.raises(SystemExit, match="not a Harbor job directory"):
        _metadata([tmp_path])
    # Without --benchmark, a `-p` job does not say which version it ran: a placeholder.
    assert 'benchmark: "TODO: the benchmark version' in _metadata([one.job_dir])


def test_the_client_says_its_version(tmp_path):
    copy = tmp_path / "hab-submit.py"  # as downloaded: alone in a folder
    copy.write_bytes((REPO / "submissions" / "client.py").read_bytes())
    done = subprocess.run([sys.executable, "-I", str(copy), "--version"],  # noqa: S603
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"hab-submit {submit_client.__version__}"


def _sparse_configs(job_dir: Path) -> None:
    """Rewrite a job's config.json files as Harbor 0.20 to 0.25 write them: the fields left at
    their defaults are left out, the agent with them when it is the default (found by the
    release matrix, tests/submissions/test_harbor_releases.py). result.json and lock.json keep
    their full dumps."""
    import json

    config = json.loads((job_dir / "config.json").read_text())
    (job_dir / "config.json").write_text(json.dumps(
        {k: config[k] for k in ("job_name", "jobs_dir", "datasets", "artifacts") if k in config}))
    for trial in job_dir.glob("*/config.json"):
        doc = json.loads(trial.read_text())
        trial.write_text(json.dumps({k: doc[k] for k in ("task", "trial_name", "trials_dir",
                                                         "artifacts", "job_id") if k in doc}))


def test_sparse_configs_name_their_agent_from_the_full_dumps(tmp_path, spec):
    """The client's metadata and the site's intake both read the agent from lock.json or
    result.json when config.json leaves it out; an override is still found in result.json's
    dump (an edited config.json cannot hide one)."""
    import json

    jobs = HarborJobBuilder(spec.tasks, attempts=3, agent="codex", model=MODEL).build(tmp_path)
    _sparse_configs(jobs.job_dir)
    text = _metadata([jobs.job_dir], "--benchmark", SLUG)
    assert 'harness: "codex"' in text and f'model_name: "{MODEL}"' in text
    report = validate_submission(tmp_path, parse_metadata(_filled(text)), spec)
    assert report.problems == [] and report.agent_config.name == "codex"
    assert {t.agent.name for t in report.trials} == {"codex"}
    first = sorted(jobs.job_dir.glob("*/result.json"))[0]
    doc = json.loads(first.read_text())
    doc["config"]["agent"]["override_timeout_sec"] = 7200
    first.write_text(json.dumps(doc))
    report = validate_submission(tmp_path, parse_metadata(_filled(text)), spec)
    assert [(p.code, p.message.split(" is set")[0]) for p in report.problems] == [
        ("override", "agent.override_timeout_sec")]
