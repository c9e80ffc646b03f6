"""Cost, time and tokens are the submitter's figures (Harbor's result.json), never checked by the
site: the pages that rank or plot them say so beside them and link the methods section that
explains where they come from. Success, beside them, is the site's count."""

import pytest

from leaderboard.services import leaderboard_recompute

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
