"""The reader-facing parts of the pages that do not need a browser: the heatmap's colour scale,
counts and rounding (shared with the table), empty states, drill-down links, outcome letters,
sort markers, compression, error pages, HEAD on CSVs and the trials API's count and links."""

import gzip
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.http import HttpResponse
from django.test import Client

from config.middleware import StyledErrorPagesMiddleware
from leaderboard import charts, selectors
from leaderboard.formatting import format_pct
from leaderboard.services import leaderboard_recompute
from leaderboard.templatetags.lb import pct
from submissions.models import Submission

Q = "?benchmark=small%401.0"


@pytest.fixture
def board(two_agents):
    bv, tasks, a, b = two_agents
    leaderboard_recompute(benchmark_version=bv)
    return bv, tasks, a, b


def _luminance(hex_colour: str) -> float:
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_rounding_is_half_up_and_shared_by_the_pct_filter():
    assert format_pct(3 / 24, 0) == "13%"  # 12.5% (Python's f-string would print 12%)
    assert format_pct(0.125, 0) == pct(0.125, 0) == "13%"
    assert format_pct(0.4198, 1) == "42.0%" and format_pct(None) == "–"
    assert format_pct(2 / 3, 1) == "66.7%" and format_pct(1, 0) == "100%"


def test_heatmap_scale_runs_light_at_0_to_dark_at_1_and_cells_show_counts(board):
    bv, *_ = board
    categories, entries = selectors.category_matrix(benchmark_version=bv,
                                                    filters=selectors.EntryFilters())
    trace = charts.category_heatmap(categories, entries)["data"][0]
    scale = trace["colorscale"]
    assert (trace["zmin"], trace["zmax"]) == (0, 1) and scale[0][0] == 0 and scale[-1][0] == 1
    lum = [_luminance(c) for _, c in scale]
    assert lum == sorted(lum, reverse=True) and lum[0] > 0.9 and lum[-1] < 0.25
    assert trace["texttemplate"] == "%{text}"
    # Alpha on txt-one (PPF FTE): 2 successes of 6 attempts -> "33%" and the count.
    alpha = [e.agent.display_name for e in entries].index("Alpha (M1)")
    col = [c.slug for c in categories].index("txt-one")
    assert trace["text"][alpha][col] == "33%<br>2/6"


def test_heatmap_cells_and_the_table_print_the_same_percentages(board, client):
    body = client.get("/categories/" + Q).content.decode()
    fig = json.loads(re.search(r'<script id="cat-chart" type="application/json">(.*?)</script>',
                               body, re.S).group(1))
    chart_pcts = [t.split("<br>")[0] for row in fig["data"][0]["text"] for t in row if t != "–"]
    table = body.split('data-testid="categories-table"')[1].split("</table>")[0]
    table_pcts = re.findall(r'<td class="num"[^>]*>(\d+%) <span class="muted">', table)
    assert chart_pcts == table_pcts and len(chart_pcts) >= 5


@pytest.mark.parametrize("path", ["/", "/categories/", "/imaging-vs-text/", "/cost/",
                                  "/task-matrix/"])
def test_a_filter_that_matches_nothing_shows_an_empty_state_not_empty_axes(path, board, client):
    body = client.get(path + Q + "&verified=1").content.decode()
    assert 'data-testid="empty-state"' in body and "for this benchmark version and filters" in body
    if path != "/imaging-vs-text/":  # the harness-family chart is not filtered
        assert "plotly-cartesian" not in body and 'class="chart"' not in body


def test_the_leaderboard_says_when_its_results_last_changed(board, client):
    bv, *_ = board
    body = client.get("/" + Q).content.decode()
    stamp = bv.aggregate_version.updated_at.strftime("%Y-%m-%d %H:%M")
    assert f'data-testid="last-updated">Results last updated <time' in body and stamp in body


def test_no_page_loads_plotly_and_only_chart_pages_name_it_for_the_interactive_chart(board,
                                                                                  client):
    body = client.get("/" + Q).content.decode()
    # Named for charts.js to fetch on request, never a <script src> of the first paint.
    assert 'data-plotly="/static/vendor/plotly/plotly-cartesian-4.1.1.min.js"' in body
    assert not re.search(r"<script[^>]*src=\"[^\"]*plotly", body)
    for path in ("/task-matrix/", "/tasks/", "/methods/", "/contribute/"):
        assert "plotly-cartesian" not in client.get(path + Q).content.decode(), path


def test_charts_name_their_table_as_text_alternative(board, client):
    body = client.get("/" + Q).content.decode()
    fig = body.split('<figure class="chart-figure"')[1].split("</figure>")[0]
    assert 'aria-labelledby="lb-chart-caption"' in fig and 'href="#leaderboard-table"' in fig
    assert 'id="leaderboard-table"' in body


def test_drill_down_links_from_row_to_agent_to_submission_to_trial(board, client):
    bv, tasks, a, _ = board
    sub = Submission.objects.get(agent=a)
    index = client.get("/" + Q).content.decode()
    assert f'href="/agents/{a.slug}/?benchmark=small%401.0"' in index
    assert f'href="/submissions/{sub.pk}/#trials"' in index
    agent = client.get(f"/agents/{a.slug}/" + Q).content.decode()
    assert f'href="/submissions/{sub.pk}/" data-testid="submission-link"' in agent
    assert f'href="/submissions/{sub.pk}/#t{tasks[0].pk}-3"' in agent
    matrix = client.get("/task-matrix/" + Q).content.decode()
    anchors = re.findall(rf'href="/submissions/{sub.pk}/#(t\d+-\d)"[^>]*>([PFTEI])</a>', matrix)
    assert len(anchors) == 15  # 5 tasks x 3 attempts, one letter each
    status = client.get(f"/submissions/{sub.pk}/").content.decode()
    for anchor, _letter in anchors:
        assert f'<tr id="{anchor}">' in status
    task = client.get(f"/tasks/img/case_01/{Q}").content.decode()
    assert f'href="/submissions/{sub.pk}/#t{tasks[0].pk}-1"' in task


def test_matrix_outcomes_are_letters_with_a_legend(board, client):
    body = client.get("/task-matrix/" + Q).content.decode()
    assert 'data-testid="outcome-legend"' in body
    # Beta's first task is PPI: the letters are in the cell, not only a colour
    assert re.search(r'class="att pass"[^>]*>P</a><a class="att pass"[^>]*>P</a>'
                     r'<a class="att infra[^>]*>I</a>', body)


def test_the_sorted_column_has_aria_sort_and_an_arrow(board, client):
    body = client.get("/" + Q + "&sort=cost&order=desc").content.decode()
    th = re.findall(r'<th scope="col"(?: class="[\w-]+")? aria-sort="(\w+)">.*?</th>', body)
    assert th == ["descending"]
    assert "Reported cost / attempt <span class=\"arrow\" aria-hidden=\"true\">▼" in body
    assert "<th></th>" not in body


def test_trajectory_viewer_has_outcome_back_and_previous_next(board, client, settings, tmp_path):
    bv, tasks, a, _ = board
    settings.MEDIA_ROOT = str(tmp_path)
    sub = Submission.objects.get(agent=a)
    Submission.objects.filter(pk=sub.pk).update(files_prefix="s")
    trials = list(sub.trials.order_by("benchmark_task__position", "attempt")[:3])
    for t in trials:
        default_storage.save(f"s/{t.pk}.json", ContentFile(b'{"steps": []}'))
        type(t).objects.filter(pk=t.pk).update(trajectory_path=f"{t.pk}.json")
    body = client.get(f"/submissions/{sub.pk}/trials/{trials[1].pk}/trajectory/").content.decode()
    assert f'href="/submissions/{sub.pk}/#t{tasks[0].pk}-2" data-testid="back"' in body
    assert f'/trials/{trials[0].pk}/trajectory/" rel="prev"' in body
    assert f'/trials/{trials[2].pk}/trajectory/" rel="next"' in body
    assert re.search(r'data-testid="trial-outcome"><span data-testid="outcome">'
                     r'<span class="outcome outcome-passed"', body)


def test_html_json_and_streamed_csv_are_gzip_compressed(board, client):
    for path in ("/task-matrix/" + Q, "/api/v1/trials/" + Q, "/trials.csv" + Q):
        plain = client.get(path)
        packed = client.get(path, HTTP_ACCEPT_ENCODING="gzip")
        assert packed["Content-Encoding"] == "gzip", path
        raw = b"".join(packed.streaming_content) if packed.streaming else packed.content
        body = b"".join(plain.streaming_content) if plain.streaming else plain.content
        assert gzip.decompress(raw) == body and len(raw) < len(body)


def test_csv_urls_answer_head(board, client):
    response = client.head("/leaderboard.csv" + Q)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")


def test_trials_api_reports_the_total_and_links_the_next_page(board, client):
    first = client.get("/api/v1/trials/" + Q + "&limit=20").json()
    assert first["count"] == 30 and len(first["results"]) == 20 and first["previous"] is None
    assert "offset=20" in first["next"] and "benchmark=small%401.0" in first["next"]
    last = client.get(first["next"]).json()
    assert len(last["results"]) == 10 and last["next"] is None and "offset=0" in last["previous"]


def test_unknown_pages_get_the_styled_404_with_and_without_debug(board, client, settings):
    for debug in (False, True):
        settings.DEBUG = debug
        response = client.get("/no-such-page/")
        assert response.status_code == 404
        assert 'data-testid="error-page"' in response.content.decode(), debug


def test_debug_500_pages_are_styled_and_api_errors_stay_json(rf, settings):
    settings.DEBUG = True
    page = StyledErrorPagesMiddleware(lambda r: HttpResponse("<pre>Traceback", status=500))
    assert b'data-testid="error-page"' in page(rf.get("/")).content
    api = StyledErrorPagesMiddleware(
        lambda r: HttpResponse("{}", status=404, content_type="application/json"))
    assert api(rf.get("/api/v1/x/")).content == b"{}"


def test_non_staff_get_403_on_moderation_and_anonymous_are_sent_to_sign_in(db, client):
    assert client.get("/moderation/").status_code == 302
    user = get_user_model().objects.create_user("someone", "s@example.org", "pw-someone-123!")
    c = Client()
    c.force_login(user)
    response = c.get("/moderation/")
    assert response.status_code == 403 and 'data-testid="error-page"' in response.content.decode()


def test_task_page_does_not_call_public_data_licensed(board, client):
    body = client.get("/tasks/img/case_01/" + Q).content.decode()
    assert "public" in body and "licensed" not in body
    assert "no runnable package" in body


def test_api_docs_are_served_from_this_site(db, client):
    body = client.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/" in body and "cdn" not in body.lower()
    assert client.get("/api/docs/?script=").status_code == 200
