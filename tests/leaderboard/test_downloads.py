"""CSV downloads and the JSON API: fixed names, headers, values, filters, formula injection."""

import csv
import io

import pytest

from leaderboard.csv_export import neutralise
from leaderboard.services import leaderboard_recompute
from tests.factories import AgentFactory, AIModelFactory, HarnessFactory, published_submission

Q = "?benchmark=healthagentbench@1.0"
FIXED = {
    "leaderboard": ["rank", "agent", "harness", "model", "success_rate", "ci_low", "ci_high",
                    "successes", "attempts", "reported_cost_per_attempt_usd",
                    "reported_mean_duration_s", "reported_mean_output_tokens", "verified"],
    "categories": ["agent", "category", "group", "successes", "attempts", "success_rate",
                   "ci_low", "ci_high"],
    "groups": ["agent", "harness", "group", "macro_success_rate", "pooled_success_rate"],
    "trials": ["agent", "task", "category", "attempt", "outcome", "success",
               "reported_cost_usd", "reported_duration_s", "reported_output_tokens",
               "reported_input_tokens", "reported_cached_tokens"],
}


def _csv(client, path):
    response = client.get(path)
    assert response.status_code == 200, path
    assert response.streaming
    assert response["Content-Type"].startswith("text/csv")
    name = path.split("?")[0].lstrip("/")
    assert response["Content-Disposition"] == f'attachment; filename="{name}"'
    assert response["X-Content-Type-Options"] == "nosniff"
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text))), text.splitlines()[0].split(",")


@pytest.mark.parametrize("table", list(FIXED))
def test_fixed_csv_starts_with_the_published_columns(table, client, demo_bv):
    rows, header = _csv(client, f"/{table}.csv{Q}")
    assert header[: len(FIXED[table])] == FIXED[table]
    assert "provenance" in header
    assert rows and all(r["provenance"] == "reconstructed-from-published-aggregates" for r in rows)


def test_leaderboard_csv_values(client, demo_bv):
    rows, _ = _csv(client, f"/leaderboard.csv{Q}")
    assert len(rows) == 10
    top = rows[0]
    assert (top["rank"], top["agent"], top["harness"], top["model"]) == (
        "1", "Codex (GPT 5.5)", "codex", "gpt-5.5")
    assert (top["successes"], top["attempts"]) == ("68", "162")
    assert float(top["success_rate"]) == pytest.approx(68 / 162, abs=1e-6)
    assert float(top["ci_low"]) < float(top["success_rate"]) < float(top["ci_high"])
    assert float(top["reported_cost_per_attempt_usd"]) == pytest.approx(2.8)
    assert float(top["reported_mean_duration_s"]) == pytest.approx(900, abs=30)
    assert top["verified"] == "false"
    assert [int(r["rank"]) for r in rows] == list(range(1, 11))
    for r in rows:
        assert 0 <= float(r["ci_low"]) <= float(r["success_rate"]) <= float(r["ci_high"]) <= 1


def test_categories_and_groups_csv_values(client, demo_bv):
    rows, _ = _csv(client, f"/categories.csv{Q}")
    assert len(rows) == 70
    fc = [r for r in rows if r["category"] == "ehr-format-conversion"]
    assert sum(1 for r in fc if r["successes"] == "3" and r["attempts"] == "3") == 9
    groups, _ = _csv(client, f"/groups.csv{Q}")
    assert len(groups) == 20
    codex = {r["group"]: r for r in groups if r["agent"] == "Codex (GPT 5.5)"}
    assert abs(float(codex["imaging"]["macro_success_rate"]) - 0.35) <= 0.01
    # pooled and macro differ for text: the 1-task category weighs more in the macro mean
    assert codex["text"]["macro_success_rate"] != codex["text"]["pooled_success_rate"]


def test_trials_csv_has_every_attempt(client, demo_bv):
    rows, _ = _csv(client, f"/trials.csv{Q}")
    assert len(rows) == 1620
    assert {r["attempt"] for r in rows} == {"1", "2", "3"}
    assert {r["outcome"] for r in rows} <= {"passed", "failed", "timeout", "agent_error"}
    assert sum(r["success"] == "true" for r in rows if r["agent"] == "Codex (GPT 5.5)") == 68


def test_csv_filters_match_the_page_filters(client, demo_bv):
    rows, _ = _csv(client, f"/leaderboard.csv{Q}&harness=codex")
    assert {r["harness"] for r in rows} == {"codex"} and len(rows) == 4
    rows, _ = _csv(client, f"/leaderboard.csv{Q}&provider=Anthropic")
    assert len(rows) == 5
    rows, _ = _csv(client, f"/leaderboard.csv{Q}&verified=1")
    assert rows == []
    rows, _ = _csv(client, f"/trials.csv{Q}&harness=copilot-cli")
    assert len(rows) == 324


def test_unknown_benchmark_is_a_404(client, demo_bv):
    assert client.get("/leaderboard.csv?benchmark=nope@9").status_code == 404
    assert client.get("/api/v1/leaderboard/?benchmark=nope@9").status_code == 404
    assert client.get("/nonexistent.csv").status_code == 404


def test_api_leaderboard_returns_the_csv_fields(client, demo_bv):
    page = client.get(f"/api/v1/leaderboard/{Q}").json()
    data = page["results"]
    csv_rows, _ = _csv(client, f"/leaderboard.csv{Q}")
    assert len(data) == page["count"] == 10 and page["next"] is None
    assert list(data[0])[: len(FIXED["leaderboard"])] == FIXED["leaderboard"]
    for api_row, csv_row in zip(data, csv_rows, strict=True):
        assert str(api_row["rank"]) == csv_row["rank"]
        assert api_row["agent"] == csv_row["agent"]
        assert api_row["success_rate"] == pytest.approx(float(csv_row["success_rate"]))
    assert 0 <= data[0]["success_rate"] <= 1


def test_api_leaderboard_pages_sorts_and_searches_like_the_page(client, demo_bv):
    everything = client.get(f"/api/v1/leaderboard/{Q}&limit=1000").json()["results"]
    first = client.get(f"/api/v1/leaderboard/{Q}&limit=4").json()
    assert (first["count"], first["offset"], first["limit"]) == (10, 0, 4)
    assert first["previous"] is None and "offset=4" in first["next"] and "limit=4" in first["next"]
    pages, url = [], f"/api/v1/leaderboard/{Q}&limit=4"
    while url:
        page = client.get(url).json()
        pages += page["results"]
        url = page["next"] and page["next"].removeprefix("http://testserver")
    assert pages == everything  # next links walk every row once, filters kept
    cheap = client.get(f"/api/v1/leaderboard/{Q}&sort=cost&order=asc&limit=3").json()["results"]
    costs = sorted(r["reported_cost_per_attempt_usd"] for r in everything
                   if r["reported_cost_per_attempt_usd"] is not None)
    assert [r["reported_cost_per_attempt_usd"] for r in cheap] == costs[:3]
    codex = client.get(f"/api/v1/leaderboard/{Q}&q=codex").json()
    assert codex["count"] == sum(r["harness"].startswith("codex") for r in everything) > 0
    assert {r["agent_id"] for r in everything} == {
        int(r["agent_id"]) for r in _csv(client, f"/leaderboard.csv{Q}")[0]}
    assert client.get(f"/api/v1/leaderboard/{Q}&limit=0").status_code == 400


def test_api_tables_and_pagination(client, demo_bv):
    assert len(client.get(f"/api/v1/categories/{Q}").json()) == 70
    assert len(client.get(f"/api/v1/groups/{Q}").json()) == 20
    fams = {r["harness_family"]: r for r in client.get(f"/api/v1/harness-families/{Q}").json()}
    assert set(fams) == {"codex", "claude-code", "copilot-cli"}
    page = client.get(f"/api/v1/trials/{Q}&limit=100&offset=1600").json()
    assert (page["offset"], page["limit"], len(page["results"])) == (1600, 100, 20)
    assert client.get(f"/api/v1/trials/{Q}&limit=x").status_code == 400
    assert client.get("/api/v1/benchmarks/").json()[0]["slug"] == "healthagentbench@1.0"


def test_openapi_schema_describes_the_api(client, demo_bv):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    assert "/api/v1/leaderboard/" in schema["paths"]
    params = {p["name"] for p in schema["paths"]["/api/v1/leaderboard/"]["get"]["parameters"]}
    assert {"benchmark", "harness", "provider", "verified"} <= params


def test_healthz(client, db):
    assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"])
def test_formula_injection_is_neutralised(prefix):
    assert neutralise(prefix + "HYPERLINK(\"x\")") == "'" + prefix + "HYPERLINK(\"x\")"
    assert neutralise(-0.5) == -0.5  # numbers are not text cells


def test_hostile_agent_names_are_neutralised_in_every_csv(client, small_benchmark):
    bv, tasks = small_benchmark
    agent = AgentFactory(display_name='=HYPERLINK("http://evil","x")',
                         harness=HarnessFactory(slug="h-1", display_name="+cmd"),
                         model=AIModelFactory(slug="m-1", display_name="@SUM(A1)"))
    published_submission(agent, tasks, ["PPP", "FFF", "PPF", "FFF", "PPP"])
    leaderboard_recompute(benchmark_version=bv)
    for table in ("leaderboard", "categories", "groups", "trials", "task-matrix"):
        response = client.get(f"/{table}.csv?benchmark={bv.slug}")
        text = b"".join(response.streaming_content).decode()
        assert "'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")" in text, table
        assert '\n=HYPERLINK' not in text and ',=HYPERLINK' not in text


def test_openapi_schema_generates_without_warnings_and_validates(tmp_path, db):
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "LeaderboardRow" in text and "ApiToken" in text and "/api/v1/submissions/" in text


@pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"])
def test_a7_formula_prefixes_are_neutralised_in_every_csv_download(prefix, client,
                                                                   small_benchmark):
    """A7: an agent, harness and model name starting with =, +, -, @, tab or CR reaches every
    CSV export as a text cell prefixed with ', its quotes doubled, in a download the server
    names itself (attachment; filename="<table>.csv")."""
    bv, tasks = small_benchmark
    hostile = prefix + 'cmd|"/C calc"!A0'
    agent = AgentFactory(display_name=hostile,
                         harness=HarnessFactory(slug="h-a7", display_name=prefix + "harness",
                                                family=prefix + "family"),
                         model=AIModelFactory(slug="m-a7", display_name=prefix + "model"))
    published_submission(agent, tasks, ["PPP", "FFF", "PPF", "FFF", "PPP"])
    leaderboard_recompute(benchmark_version=bv)
    for table in ("leaderboard", "categories", "groups", "trials", "task-matrix",
                  "harness-families"):
        rows, _header = _csv(client, f"/{table}.csv?benchmark={bv.slug}")
        assert rows, table
        cells = [v for row in rows for v in row.values() if isinstance(v, str)]
        names = {hostile, prefix + "harness", prefix + "model", prefix + "family"}
        assert {"'" + n for n in names} & set(cells), table  # each table shows one of them
        assert not names & set(cells), table
        assert not any(c.startswith(prefix) for c in cells if c and c != "-"), table
        if "'" + hostile in cells:
            raw = b"".join(client.get(f"/{table}.csv?benchmark={bv.slug}").streaming_content)
            assert b'cmd|""/C calc""!A0' in raw, table


def test_csvs_carry_stable_ids_and_the_letters_are_spelled_out(client, demo_bv):
    trials, _ = _csv(client, f"/trials.csv{Q}")
    assert len({r["trial_id"] for r in trials}) == len(trials) == 1620
    assert all(r["agent_id"].isdigit() for r in trials)
    matrix, header = _csv(client, f"/task-matrix.csv{Q}")
    assert header[-4:] == ["outcome_names", "agent_id", "submission_id", "task_id"]
    names = {"P": "passed", "F": "failed", "T": "timeout", "E": "agent_error",
             "I": "infra_error"}
    for r in matrix:
        assert r["outcome_names"] == "|".join(names[c] for c in r["outcomes"])
    lb, _ = _csv(client, f"/leaderboard.csv{Q}")
    by_agent = {r["agent_id"]: r["submission_id"] for r in lb}
    assert {(r["agent_id"], r["submission_id"]) for r in matrix} == set(by_agent.items())
    page = client.get("/downloads/").content.decode()
    for letter, name in names.items():
        assert f"<code>{letter}</code></th><td>{name}</td>" in page
    assert 'id="task-matrix"' in page and "outcome_names" in page


def test_the_column_form_without_javascript_lands_on_hide_in_the_url(client, demo_bv):
    response = client.get(f"/{Q}&sort=cost&cols=1&show_col=tie&show_col=harness&page=2")
    assert response.status_code == 302 and response["Location"].startswith("/?")
    assert client.get("/?cols=1&show_col=cost")["Location"] == (
        "/?hide=tie&hide=harness&hide=model&hide=time&hide=tokens&hide=coverage&hide=status"
        "&hide=date")
    target = response["Location"]
    assert "sort=cost" in target and "hide=model" in target and "hide=tie" not in target
    body = client.get(target).content.decode()
    assert 'class="data sortable hide-model hide-cost' in body
    assert '<input type="checkbox" name="show_col" value="tie" data-col="tie" checked>' in body
