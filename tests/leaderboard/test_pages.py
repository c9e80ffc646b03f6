"""Server-rendered pages: every page renders the demo, says the data are reconstructed, keeps
filters in links, escapes what submitters control."""

import re

import pytest
from django.core.management import call_command

from leaderboard.models import LeaderboardEntry
from leaderboard.services import leaderboard_recompute
from submissions.models import SubmissionStatus, Trial
from submissions.services import submission_publish, submission_withdraw
from tests.factories import AgentFactory, published_submission

PAGES = ["/", "/categories/", "/imaging-vs-text/", "/harness-effect/", "/cost/", "/cost/?x=time",
         "/cost/?x=tokens", "/task-matrix/", "/tasks/", "/tasks/ehr-format-conversion/case_01/",
         "/agents/codex-gpt-5-5/"]


@pytest.mark.parametrize("path", PAGES)
def test_page_renders_and_says_rows_are_reconstructed(path, client, demo_bv):
    response = client.get(path)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-testid="reconstructed-notice"' in body
    assert "reconstructed from those published" in body
    assert "Content-Security-Policy" in response.headers
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_leaderboard_page_lists_agents_with_interval_tie_group_and_badges(client, demo_bv):
    body = client.get("/").content.decode()
    assert body.index("Codex (GPT 5.5)") < body.index("Codex (GPT 5.4 Mini)")
    assert "42.0%" in body and "68/162" in body
    assert 'class="tie tie-1"' in body
    assert "badge-recon" in body
    assert '<script id="lb-chart" type="application/json">' in body


def test_sorting_and_filters_stay_in_the_url(client, demo_bv):
    body = client.get("/?sort=cost&order=asc&harness=codex").content.decode()
    assert body.index("Codex (GPT 5.4 Mini)") < body.index("Codex (GPT 5.5)")
    assert "Claude Code (Opus 4.8)" not in body.split("<tbody>")[1].split("</tbody>")[0]
    # the sort links carry the current filters
    assert "harness=codex" in body.split('href="?')[1]


def test_task_matrix_shows_three_attempts_per_cell_and_pass_at_k(client, demo_bv):
    body = client.get("/task-matrix/").content.decode()
    # every third attempt is a letter linking to its trial row on the submission page
    assert len(re.findall(r'href="/submissions/\d+/#t\d+-3"[^>]*>[PFTEI]</a>', body)) == 10 * 54
    assert "pass@3" in body and "pass^3" in body


def test_task_page_shows_catalogue_facts_and_every_agents_attempts(client, demo_bv):
    body = client.get("/tasks/ehr-format-conversion/case_01/").content.decode()
    for fact in ("MIMIC-IV demo", "public (demo)", "MEDS"):
        assert fact in body
    assert body.count('<tr><th scope="row">') >= 30  # 10 agents x 3 attempts


def test_agent_page_shows_categories_and_tasks(client, demo_bv):
    body = client.get("/agents/codex-gpt-5-5/").content.decode()
    assert "Clinical-trial matching" in body and "clinical-trial-matching/case_09" in body


def test_methods_page_explains_the_interval_and_ties(client, db):
    body = client.get("/methods/").content.decode()
    for phrase in ("task-clustered", "Wilson", "paired t-test", "macro", "pooled",
                   "Infrastructure errors", "reconstructs"):
        assert phrase in body


def test_unknown_things_are_404(client, demo_bv):
    assert client.get("/?benchmark=missing@1").status_code == 404
    assert client.get("/agents/nobody/").status_code == 404
    assert client.get("/tasks/xray-report-correction/case_99/").status_code == 404


def test_empty_site_renders_without_data(client, db):
    assert client.get("/").status_code == 404  # no benchmark registered yet
    assert client.get("/healthz").status_code == 200


def test_submitter_controlled_names_are_escaped(client, small_benchmark):
    bv, tasks = small_benchmark
    agent = AgentFactory(display_name='<img src=x onerror="alert(1)">', slug="xss")
    published_submission(agent, tasks, ["PPP", "FFF", "PPF", "FFF", "PPP"])
    leaderboard_recompute(benchmark_version=bv)
    for path in ("/", "/categories/", "/imaging-vs-text/", "/cost/", "/task-matrix/",
                 "/agents/xss/", "/tasks/img/case_01/"):
        body = client.get(f"{path}?benchmark={bv.slug}").content.decode()
        assert '<img src=x onerror="alert(1)">' not in body, path
        assert "&lt;img src=x" in body or "\\u003Cimg" in body, path


def test_load_demo_is_idempotent(db):
    call_command("load_demo", verbosity=0)
    before = (LeaderboardEntry.objects.count(), Trial.objects.count(),
              list(Trial.objects.order_by("pk").values_list("pk", "updated_at")[:50]))
    call_command("load_demo", verbosity=0)
    after = (LeaderboardEntry.objects.count(), Trial.objects.count(),
             list(Trial.objects.order_by("pk").values_list("pk", "updated_at")[:50]))
    assert before == after
    assert before[:2] == (10, 1620)


def test_contribute_page_explains_format_checklist_and_ci(client, db):
    body = client.get("/contribute/").content.decode()
    for phrase in ("task.toml", "validate_task", "How CI validates", "SYNTHETIC", "recall@50"):
        assert phrase in body


def test_a_synced_benchmark_is_in_the_menu_and_its_empty_page_says_how_to_be_first(client, demo_bv):
    from django.conf import settings

    from evaluation.services import benchmark_tasks_sync

    assert benchmark_tasks_sync(tasks_dir=settings.TASKS_DIR).ok
    body = client.get("/").content.decode()
    assert '<option value="healthagentbench-synthetic@1.0">' in body
    body = client.get("/?benchmark=healthagentbench-synthetic@1.0").content.decode()
    empty = body.split('data-testid="empty-leaderboard"')[1].split("</td>")[0]
    assert "be the first" in empty and "benchmark: healthagentbench-synthetic@1.0" in empty
    assert 'href="/submit/?benchmark=healthagentbench-synthetic%401.0"' in empty
    filtered = client.get("/?benchmark=healthagentbench-synthetic@1.0&harness=codex")
    assert "No published results for this benchmark version and filters." in (
        filtered.content.decode())


def test_registry_json_is_harbors_registry_format_for_public_versions(client, db, settings,
                                                                      tmp_path):
    """Validated by the real Harbor's own model (the pinned .venv-harbor, scripts/harbor-venv)."""
    import json
    import subprocess
    from pathlib import Path

    from evaluation.services import benchmark_tasks_sync

    assert benchmark_tasks_sync(tasks_dir=settings.TASKS_DIR).ok
    settings.REPOSITORY_URL = "https://example.org/healthagentbench.git"
    settings.REGISTRY_GIT_COMMIT = "0" * 40
    doc = client.get("/registry.json").json()
    assert [(d["name"], d["version"]) for d in doc] == [("healthagentbench-synthetic", "1.0"),
                                                        ("healthagentbench-synthetic", "2.0")]
    task = doc[0]["tasks"][0]
    assert task["path"].startswith("tasks/") and task["git_commit_id"] == "0" * 40
    assert [len(d["tasks"]) for d in doc] == [7, 54]  # @2.0: the paper's 54
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(doc))
    harbor_python = Path(settings.HARBOR_VENV) / "bin" / "python"
    subprocess.run([str(Path(settings.BASE_DIR) / "scripts" / "harbor-venv")], check=True,
                   capture_output=True)
    proc = subprocess.run(
        [str(harbor_python), "-c",
         "import sys; from pathlib import Path; from harbor.models.registry import Registry;"
         "r = Registry.from_path(Path(sys.argv[1]));"
         "print(*[(d.name, len(d.tasks)) for d in r.datasets],"
         " type(r.datasets[0].tasks[0].to_source_task_id()).__name__)", str(registry)],
        capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["('healthagentbench-synthetic',", "7)",
                                   "('healthagentbench-synthetic',", "54)", "GitTaskId"]


def test_harness_effect_pages_by_model_with_search_in_the_url(client, demo_bv, settings):
    settings.LEADERBOARD_GROUP_PAGE_SIZE = 1
    full = client.get("/harness-effect/?show=all").content.decode()
    models = re.findall(r'<tr><th scope="row">([^<]+)</th>', full.split('data-testid="same-model-table">')[1]
                        .split("</table>")[0])
    distinct = list(dict.fromkeys(models))
    assert len(distinct) >= 2
    first = client.get("/harness-effect/").content.decode()
    table = first.split('data-testid="same-model-table">')[1].split("</table>")[0]
    assert set(re.findall(r'<tr><th scope="row">([^<]+)</th>', table)) == {distinct[0]}
    assert f"Models 1–1 of {len(distinct)}" in first and 'href="?page=2"' in first
    assert "vpage=2" in first and "show=all" in first
    second = client.get("/harness-effect/?page=2").content.decode()
    table = second.split('data-testid="same-model-table">')[1].split("</table>")[0]
    assert set(re.findall(r'<tr><th scope="row">([^<]+)</th>', table)) == {distinct[1]}
    found = client.get("/harness-effect/?q=" + distinct[-1].split()[0]).content.decode()
    assert "matching" in found and distinct[-1] in found
    # The CSV still covers every agent, and the page links it (with the families' CSV).
    assert b"".join(client.get("/leaderboard.csv?page=2").streaming_content).count(b"\n") == 11
    links = re.findall(r'<a class="download" href="([^"]+)"',
                       second.split('data-testid="harness-csv">')[1].split("</p>")[0])
    assert links == ["/leaderboard.csv?page=2", "/harness-families.csv?page=2"]
    rows = b"".join(client.get(links[0]).streaming_content).decode()
    assert all(m in rows for m in distinct)
    assert client.get(links[1]).status_code == 200


def test_changelog_lists_versions_and_each_publish_and_withdrawal(client, small_benchmark):
    bv, tasks = small_benchmark
    kept = published_submission(AgentFactory(display_name="Kept (K1)", slug="kept"), tasks,
                                ["PPP"] * 5, status=SubmissionStatus.VERIFIED, published_at=None)
    gone = published_submission(AgentFactory(display_name="Gone (G1)", slug="gone"), tasks,
                                ["FFF"] * 5, status=SubmissionStatus.VERIFIED, published_at=None)
    for sub in (kept, gone):
        submission_publish(submission=sub, actor=None)
    submission_withdraw(submission=gone, actor=None, reason="test")
    body = client.get("/changelog/").content.decode()
    versions = body.split('data-testid="changelog-versions"')[1].split("</table>")[0]
    assert "small@1.0" in versions and ">5</td>" in versions  # its five tasks
    events = body.split('data-testid="changelog-changes"')[1].split("</table>")[0]
    rows = re.findall(r'<th scope="row">(\w+)</th>\s*<td>([^<]+)</td>', events)
    assert rows == [("withdrawn", "Gone (G1)"), ("published", "Gone (G1)"),
                    ("published", "Kept (K1)")]
    # A published submission links to its page; a withdrawn one does not.
    assert f'href="/submissions/{kept.pk}/"' in events
    assert f'href="/submissions/{gone.pk}/"' not in events
    assert 'href="/changelog/"' in client.get("/methods/").content.decode()  # the footer


def test_changelog_is_cached_until_a_publish_changes_it(client, small_benchmark,
                                                        django_assert_num_queries):
    """/changelog/ is kept like the other public pages, keyed by every version's aggregate
    version: a warm request costs one query (the state), 304 with its ETag, and a publish of
    any version makes the stored page unreachable."""
    _bv, tasks = small_benchmark
    late = published_submission(AgentFactory(display_name="Late (L1)", slug="late"), tasks,
                                ["PPP"] * 5, status=SubmissionStatus.VERIFIED, published_at=None)
    first = client.get("/changelog/")
    assert "Late (L1)" not in first.content.decode()
    # One query: selectors.site_data_state (versions and their aggregate versions).
    with django_assert_num_queries(1):
        again = client.get("/changelog/")
    assert again.content == first.content and again["ETag"] == first["ETag"]
    assert client.get("/changelog/", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    submission_publish(submission=late, actor=None)
    after = client.get("/changelog/")
    assert after["ETag"] != first["ETag"]
    events = after.content.decode().split('data-testid="changelog-changes"')[1]
    assert "Late (L1)" in events.split("</table>")[0]


@pytest.mark.parametrize("path", ["/", "/categories/", "/task-matrix/", "/cost/"])
def test_every_page_has_a_meta_description_and_a_canonical_url(path, client, demo_bv):
    body = client.get(path).content.decode()
    assert '<meta name="description" content="Public leaderboard of AI agents' in body
    assert f'<link rel="canonical" href="http://testserver{path}">' in body
