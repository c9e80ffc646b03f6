"""Real browser (Debian's chromium): the leaderboard with a row that is not ranked passes axe at
both viewports without overflow, and the "Verified only" switch sits on the version selector's
row and works from the keyboard, and without JavaScript."""

import pytest

from leaderboard.services import leaderboard_recompute
from tests.browser.pagecheck import VIEWPORTS, axe_source, check_page
from tests.factories import AgentFactory, published_submission
from tests.leaderboard.test_browser import chromium
from tests.leaderboard.test_unranked import DISCREPANCY, VERIFIED

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PATH = "/?benchmark=small@1.0"
_BOXES = """() => {
  const box = s => document.querySelector(s).getBoundingClientRect();
  const v = box('select[name=benchmark]'), t = box('[data-testid=verified-toggle]');
  return {select: [v.top, v.bottom, v.right], toggle: [t.top, t.bottom, t.left, t.height],
          weight: getComputedStyle(document.querySelector('[data-testid=verified-toggle]')).fontWeight};
}"""


@pytest.fixture
def site(live_server, small_benchmark):
    bv, tasks = small_benchmark
    published_submission(AgentFactory(display_name="Discrepant (M0)"), tasks, ["PPP"] * 5,
                         coverage=DISCREPANCY)
    published_submission(AgentFactory(display_name="Checked (M1)"), tasks, ["PPF"] * 5,
                         coverage=VERIFIED, is_verified=True)
    published_submission(AgentFactory(display_name="Claimed (M2)"), tasks, ["PFF"] * 5)
    leaderboard_recompute(benchmark_version=bv)
    return live_server.url


def test_the_unranked_section_passes_axe_and_fits_both_viewports(site):
    axe = axe_source()
    with chromium() as browser:
        for viewport in VIEWPORTS:
            r = check_page(browser, site, PATH, viewport, axe)
            assert r.status == 200 and not r.overflows, (viewport, r.width, r.viewport_width)
            assert not (r.serious or r.critical), (viewport, r.serious, r.critical)
            assert not r.problems, r.problems


def test_the_verified_switch_is_on_the_version_row_and_works_by_keyboard(site):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(site + PATH)
        boxes = page.evaluate(_BOXES)
        # Same row as the version selector, right after it, at least as tall, in bold.
        assert boxes["toggle"][0] < boxes["select"][1] and boxes["select"][0] < boxes["toggle"][1]
        assert boxes["toggle"][2] > boxes["select"][2] and boxes["toggle"][3] >= 24, boxes
        assert int(boxes["weight"]) >= 600, boxes
        assert page.locator('[data-testid="unranked-row"]').count() == 1
        page.focus("select[name=benchmark]")
        page.keyboard.press("Tab")
        switch = page.get_by_role("switch", name="Verified only")
        assert switch.evaluate("el => el === document.activeElement")
        page.keyboard.press("Space")
        assert switch.is_checked()
        while page.evaluate("document.activeElement.type") != "submit":
            page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        page.wait_for_url("**verified=1**")
        assert page.get_by_role("switch", name="Verified only").is_checked()
        assert page.locator('[data-testid="unranked-row"]').count() == 0
        rows = page.locator("#leaderboard-table tbody tr")
        assert rows.count() == 1 and "Checked (M1)" in rows.first.inner_text()
        page.close()


def test_the_verified_switch_works_without_javascript(site):
    with chromium() as browser:
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        page.goto(site + PATH)
        page.get_by_text("Verified only").click()
        page.get_by_role("button", name="Apply").click()
        page.wait_for_url("**verified=1**")
        assert page.get_by_role("switch", name="Verified only").is_checked()
        assert page.locator('[data-testid="unranked"]').count() == 0
        context.close()
