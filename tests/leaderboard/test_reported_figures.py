"""Cost, time and tokens are the submitter's figures (Harbor's result.json), never checked by the
site: the pages that rank or plot them say so beside them and link the methods section that
explains where they come from. Success, beside them, is the site's count."""

import csv
import io
import json
import re
from decimal import Decimal

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from leaderboard import tables
from leaderboard.api import TrialListApi
from leaderboard.models import LeaderboardEntry
from leaderboard.services import leaderboard_recompute
from submissions.models import Submission, Trial
from tests.factories import AgentFactory, published_submission

Q = "?benchmark=small%401.0"
pytestmark = pytest.mark.django_db


@pytest.fixture
def board(two_agents):
    bv, *_ = two_agents
    leaderboard_recompute(benchmark_version=bv)


@pytest.mark.parametrize("path", ["/", "/cost/"])
def test_pages_with_cost_time_and_tokens_say_they_are_reported(board, client, path):
    html = client.get(path + Q).content.decode()
    lede = html.split('class="lede"')[1].split("</p>")[0]
    assert "Cost, time and tokens" in lede or "cost, time and tokens" in lede
    assert "reported" in lede and "not measured by the site" in lede
    assert 'href="/methods/#reported"' in lede


def test_methods_explains_where_cost_time_and_tokens_come_from(client):
    html = client.get("/methods/").content.decode()
    assert '<h2 id="reported">' in html
    text = html.split('data-testid="reported-not-measured">')[1].split("</p>")[0]
    assert "not what the site\nmeasured" in text and "result.json" in text
    assert "never these figures" in text and 'href="/pricing/"' in text


# --- the names: every header, axis, hover text, CSV column and API field says "reported" ---

OLD_NAMES = ("cost_per_attempt_usd", "mean_duration_s", "mean_output_tokens",
             "cost_per_success_usd", "cost_usd", "duration_s", "output_tokens", "input_tokens",
             "cached_tokens")


def _csv(client, path):
    body = b"".join(client.get(path).streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body))), body.split("\r\n")[0].split(",")


def test_leaderboard_csv_and_api_name_cost_time_and_tokens_reported(board, client):
    rows, header = _csv(client, "/leaderboard.csv" + Q)
    assert header[9:12] == ["reported_cost_per_attempt_usd", "reported_mean_duration_s",
                            "reported_mean_output_tokens"]
    assert "reported_cost_per_success_usd" in header
    assert not set(OLD_NAMES) & set(header)
    # only the names changed: the values are the entries' own
    alpha = LeaderboardEntry.objects.get(agent__slug="alpha")
    row = next(r for r in rows if r["agent"] == "Alpha (M1)")
    assert row["reported_cost_per_attempt_usd"] == "1.0"
    assert row["reported_cost_per_success_usd"] == str(float(alpha.cost_per_success_usd))
    assert row["reported_mean_duration_s"] == "600.0"
    assert row["reported_mean_output_tokens"] == "10000.0"
    api = client.get("/api/v1/leaderboard/" + Q).json()["results"]
    first = next(r for r in api if r["agent"] == "Alpha (M1)")
    assert (first["reported_cost_per_attempt_usd"], first["reported_mean_duration_s"],
            first["reported_mean_output_tokens"]) == (1.0, 600.0, 10000.0)
    assert not set(OLD_NAMES) & set(first)


def test_trials_csv_and_api_name_cost_time_and_tokens_reported(board, client):
    trial = Trial.objects.filter(submission__agent__slug="alpha").order_by("pk").first()
    Trial.objects.filter(pk=trial.pk).update(input_tokens=120_000, cached_tokens=30_000,
                                             output_tokens=4_321, duration_s=75.5,
                                             cost_usd=Decimal("0.1234"))
    from django.core.cache import cache
    cache.clear()
    rows, header = _csv(client, "/trials.csv" + Q)
    assert header[6:11] == ["reported_cost_usd", "reported_duration_s", "reported_output_tokens",
                            "reported_input_tokens", "reported_cached_tokens"]
    assert not set(OLD_NAMES) & set(header)
    row = next(r for r in rows if r["trial_id"] == str(trial.pk))
    assert (row["reported_cost_usd"], row["reported_duration_s"], row["reported_output_tokens"],
            row["reported_input_tokens"], row["reported_cached_tokens"]) == (
        "0.1234", "75.5", "4321", "120000", "30000")
    api = client.get("/api/v1/trials/" + Q + "&limit=100").json()["results"]
    mine = next(r for r in api if r["trial_id"] == trial.pk)
    assert {k: v for k, v in mine.items() if k.startswith("reported_")} == {
        "reported_cost_usd": 0.1234, "reported_duration_s": 75.5,
        "reported_output_tokens": 4321, "reported_input_tokens": 120000,
        "reported_cached_tokens": 30000}
    assert not set(OLD_NAMES) & set(mine)


def test_openapi_schema_and_downloads_page_use_the_reported_names(board, client):
    schema = client.get("/api/schema/?format=json").json()["components"]["schemas"]
    lb = schema["LeaderboardRow"]["properties"]
    assert list(lb) == list(tables.LEADERBOARD_COLUMNS)
    for name in ("reported_cost_per_attempt_usd", "reported_mean_duration_s",
                 "reported_mean_output_tokens", "reported_cost_per_success_usd"):
        assert "reported" in lb[name]["description"], name
    # The trials page's schema lists its rows as plain objects; its row serializer (TrialRow)
    # still documents the fields, and must name them as the API does.
    trial = TrialListApi.OutputSerializer().fields
    assert list(trial) == list(tables.TRIAL_COLUMNS)
    for name in ("reported_cost_usd", "reported_duration_s", "reported_output_tokens",
                 "reported_input_tokens", "reported_cached_tokens"):
        assert "reported" in trial[name].help_text, name
    assert not set(OLD_NAMES) & (set(lb) | set(trial))
    page = client.get("/downloads/").content.decode()
    listed = page.split('id="trials"')[1].split("</p>")[0]
    assert "<code>reported_cost_usd</code>, <code>reported_duration_s</code>" in listed
    assert "<code>cost_usd</code>" not in page
    note = page.split('data-testid="reported-columns">')[1].split("</p>")[0]
    assert "<code>reported_</code>" in note and "does not measure them" in note


def _headers(html: str, testid: str) -> list[str]:
    table = html.split(f'data-testid="{testid}"')[1].split("</thead>")[0]
    return [re.sub(r"<[^>]+>", "", h).replace("▲", "").replace("▼", "").strip()
            for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]


def test_every_page_header_says_reported(board, client):
    lb = _headers(client.get("/" + Q).content.decode(), "leaderboard-table")
    assert {"Reported cost / attempt", "Reported mean time",
            "Reported mean output tokens"} <= set(lb)
    assert "Cost / attempt" not in lb and "Mean time" not in lb
    cost = _headers(client.get("/cost/" + Q).content.decode(), "cost-table")
    assert cost[2:6] == ["Reported cost / attempt", "Reported cost / success",
                         "Reported mean time", "Reported mean output tokens"]
    task = _headers(client.get("/tasks/img/case_01/" + Q).content.decode(), "task-attempts")
    assert task[-3:] == ["Reported cost", "Reported time", "Reported output tokens"]
    harness = client.get("/harness-effect/" + Q).content.decode()
    assert "<th scope=\"col\">Cost / attempt</th>" not in harness
    agent = client.get("/agents/alpha/" + Q).content.decode()
    facts = agent.split('data-testid="agent-facts"')[1].split("</dl>")[0]
    assert "<dt>Reported cost</dt><dd>$1.00 per attempt" in facts
    assert "<dt>Reported mean time / output tokens</dt><dd>10.0 min / 10.0k" in facts
    sub = Trial.objects.filter(submission__agent__slug="alpha").first().submission_id
    status = _headers(client.get(f"/submissions/{sub}/").content.decode(), "trials")
    assert "Reported cost · time · output tokens" in status and "Cost" not in status
    columns = client.get("/" + Q).content.decode().split('data-testid="column-toggles"')[1]
    assert 'data-col="cost" checked> Reported cost / attempt</label>' in columns


def test_trajectory_page_says_which_figures_are_reported(board, client, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    trial = Trial.objects.filter(submission__agent__slug="alpha").order_by("pk").first()
    Submission.objects.filter(pk=trial.submission_id).update(files_prefix="s")
    default_storage.save(f"s/{trial.pk}.json", ContentFile(json.dumps({"steps": [
        {"step_id": 1, "source": "agent", "message": "hi",
         "metrics": {"prompt_tokens": 10, "completion_tokens": 5}}]}).encode()))
    Trial.objects.filter(pk=trial.pk).update(trajectory_path=f"{trial.pk}.json",
                                             input_tokens=120_000, cached_tokens=30_000)
    body = client.get(f"/submissions/{trial.submission_id}/trials/{trial.pk}/trajectory/")
    html = body.content.decode()
    facts = html.split('data-testid="trial-reported">')[1].split("</dd>")[0]
    assert facts.startswith("$1.00 / 10.0 min / 10.0k output, 120.0k input (30.0k cached): "
                            "as the submission reported them")
    assert "reported metrics {" in html


@pytest.mark.parametrize("axis, title, hover", [
    ("cost", "Reported mean cost per attempt (USD)", "reported cost/attempt $%{x:.2f}"),
    ("time", "Reported mean time per attempt (minutes)", "reported time/attempt (min) %{x:.1f}"),
    ("tokens", "Reported mean output tokens per attempt",
     "reported output tokens/attempt %{x:,.0f}"),
])
def test_cost_chart_axis_title_switch_and_hover_say_reported(board, client, axis, title, hover):
    html = client.get(f"/cost/{Q}&x={axis}").content.decode()
    fig = json.loads(html.split('<script id="cost-chart" type="application/json">')[1]
                     .split("</script>")[0])
    assert fig["layout"]["xaxis"]["title"]["text"] == title
    points = [t for t in fig["data"] if t["name"] != "Pareto frontier"]
    assert points and all(hover in t["hovertemplate"] for t in points)
    assert f"Success vs {title[0].lower()}{title[1:]}, with the Pareto frontier" in html
    switch = html.split('data-testid="axis-switch"')[1].split("</nav>")[0]
    assert ("Reported mean cost per attempt (USD)" in switch
            and "Reported mean time per attempt (minutes)" in switch
            and "Reported mean output tokens per attempt" in switch)


# --- a cost of 0 or none is "no reported cost", never a free agent on the Pareto frontier ---

@pytest.fixture
def costs(small_benchmark):
    """Free: the best success at a reported cost of $0; Unknown: second best, no cost at all;
    Cheap ($0.50) and Dear ($2.00): the real frontier."""
    bv, tasks = small_benchmark
    for name, slug, outcomes, cost in (
            ("Free", "free", ["PPP", "PPP", "PPP", "PPP", "PPF"], Decimal("0")),
            ("Unknown", "unknown", ["PPP", "PPP", "PPP", "PPF", "FFF"], None),
            ("Cheap", "cheap", ["PFF", "FFF", "FFF", "FFF", "FFF"], Decimal("0.5000")),
            ("Dear", "dear", ["PPP", "PPF", "FFF", "FFF", "FFF"], Decimal("2.0000"))):
        published_submission(AgentFactory(display_name=name, slug=slug), tasks, outcomes,
                             cost=cost, duration_s=0.0 if slug == "free" else 600.0)
    leaderboard_recompute(benchmark_version=bv)
    return bv


def _figure(html: str) -> dict:
    return json.loads(html.split('<script id="cost-chart" type="application/json">')[1]
                      .split("</script>")[0])


def _on_frontier(html: str) -> dict[str, str]:
    table = html.split('data-testid="cost-table"')[1].split("</table>")[0]
    return dict(re.findall(r'<th scope="row"><a [^>]*>([^<]+)</a></th>.*?'
                           r'<td data-testid="on-frontier">([^<]*)</td>', table, re.S))


def test_a_cost_of_zero_or_none_is_never_on_the_pareto_frontier(costs, client):
    html = client.get("/cost/?benchmark=small%401.0&x=cost").content.decode()
    assert _on_frontier(html) == {"Free": "no: no reported cost",
                                  "Unknown": "no: no reported cost",
                                  "Cheap": "yes", "Dear": "yes"}
    fig = _figure(html)
    frontier = next(t for t in fig["data"] if t["name"] == "Pareto frontier")
    assert frontier["x"] == [0.5, 2.0]
    # the $0 row is still plotted (at 0), named as having no reported cost and left unlabelled
    points = {h: (x, text) for t in fig["data"] if t["name"] != "Pareto frontier"
              for h, x, text in zip(t["hovertext"], t["x"], t["text"], strict=True)}
    assert points["Free (no reported cost)"] == (0.0, "")
    assert points["Cheap"] == (0.5, "Cheap") and points["Dear"] == (2.0, "Dear")
    assert not any(h.startswith("Unknown") for h in points)  # no x to plot: listed only


def test_a_time_of_zero_is_no_reported_time_on_the_time_axis(costs, client):
    html = client.get("/cost/?benchmark=small%401.0&x=time").content.decode()
    marks = _on_frontier(html)
    assert marks["Free"] == "no: no reported time"
    # on time every other row reported 600 s: the most successful of them is the frontier
    assert marks["Unknown"] == "yes" and marks["Cheap"] == "no" and marks["Dear"] == "no"


def test_methods_says_where_the_sites_own_figures_stand(client):
    html = client.get("/methods/").content.decode()
    text = html.split('data-testid="measured-beside-reported">')[1].split("</p>")[0]
    assert "re-run agent's time" in text and 'href="/pricing/"' in text
    assert "<code>rerun_figures</code>" in text and "flagged" in text
