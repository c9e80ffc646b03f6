"""Real browser (Debian's chromium) at 390 and 1440 px: ticking rows on the leaderboard (by
mouse and keyboard, and without JavaScript) opens the compare page, whose permalink opens the
same comparison, whose paired test reads in words, whose grid keeps the task column pinned
while it scrolls, and which passes axe without overflowing the viewport."""

import pytest

from evaluation.models import Group
from leaderboard.services import leaderboard_recompute
from tests.browser.pagecheck import VIEWPORTS, axe_source, check_page
from tests.factories import (
    AgentFactory,
    BenchmarkTaskFactory,
    BenchmarkVersionFactory,
    CategoryFactory,
    published_submission,
)
from tests.leaderboard.test_browser import chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Q = "benchmark=cmp@1.0"
SEPARABLE = ("Alpha (M1) solves 100.0 points more than Beta (M2), p < 0.001 (paired over the "
             "12 tasks): separable.")


@pytest.fixture
def site(live_server):
    """12 tasks: Alpha passes every attempt, Beta and Gamma none, Delta one task in three."""
    bv = BenchmarkVersionFactory(name="cmp", version="1.0")
    img = CategoryFactory(benchmark_version=bv, slug="img", group=Group.IMAGING, position=0)
    txt = CategoryFactory(benchmark_version=bv, slug="txt", group=Group.TEXT, position=1)
    tasks = [BenchmarkTaskFactory(category=img if i < 6 else txt, position=i + 1,
                                  name=f"{'img' if i < 6 else 'txt'}/case_{i + 1:02d}")
             for i in range(12)]
    for slug, name, cells in (("alpha", "Alpha (M1)", ["PPP"] * 12),
                              ("beta", "Beta (M2)", ["FFF"] * 12),
                              ("gamma", "Gamma (M3)", ["FFF"] * 11 + ["FFI"]),
                              ("delta", "Delta (M4)", ["PFT", "FFF", "FEF"] * 4)):
        published_submission(AgentFactory(slug=slug, display_name=name), tasks, cells)
    leaderboard_recompute(benchmark_version=bv)
    return live_server.url


def _sentences(page) -> list[str]:
    return [s.strip() for s in page.locator('[data-testid="paired-sentence"]').all_inner_texts()]


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_ticking_rows_opens_the_comparison_and_its_permalink(site, viewport):
    w, h = VIEWPORTS[viewport]
    with chromium() as browser:
        page = browser.new_page(viewport={"width": w, "height": h})
        page.goto(f"{site}/?{Q}")
        page.get_by_role("checkbox", name="Compare Beta (M2)").check()
        # the keyboard: focus Alpha's box, tick it with Space
        alpha = page.get_by_role("checkbox", name="Compare Alpha (M1)")
        alpha.focus()
        page.keyboard.press("Space")
        assert alpha.is_checked()
        page.get_by_role("button", name="Compare selected").click()
        page.wait_for_url("**/compare/?**")
        assert "a=beta" in page.url and "a=alpha" in page.url
        assert _sentences(page) == [SEPARABLE]
        assert page.locator('[data-testid="differ-row"]').count() == 12
        permalink = page.locator('[data-testid="permalink"] a').first.get_attribute("href")
        assert permalink.endswith(f"/compare/?{Q}&a=alpha&a=beta")
        other = browser.new_page(viewport={"width": w, "height": h})
        other.goto(permalink)
        assert _sentences(other) == [SEPARABLE]
        # every attempt letter links to its trial on the agent's submission page
        first = other.locator("#compare-grid tbody tr").first.locator("a.att").first
        assert "/submissions/" in first.get_attribute("href") and first.inner_text() == "P"
        page.close()
        other.close()


def test_ticking_rows_works_without_javascript(site):
    with chromium() as browser:
        context = browser.new_context(java_script_enabled=False,
                                      viewport={"width": 390, "height": 844})
        page = context.new_page()
        page.goto(f"{site}/?{Q}")
        for name in ("Alpha (M1)", "Beta (M2)", "Gamma (M3)"):
            page.get_by_role("checkbox", name=f"Compare {name}").check()
        page.get_by_role("button", name="Compare selected").click()
        page.wait_for_url("**/compare/?**")
        words = _sentences(page)
        assert len(words) == 3
        # 2/4096 alone; Holm: 3 x 2/4096 = 0.0015 for the smallest
        assert ("Alpha (M1) solves 100.0 points more than Beta (M2), p = 0.001 (paired over "
                "the 12 tasks, Holm-corrected over 3 pairs): separable.") in words
        assert any(w.startswith("Beta (M2) and Gamma (M3) solve the same share of tasks, "
                                "p = 1.00") and w.endswith("not separable (a statistical tie "
                                                           "at the 5% level).") for w in words)
        context.close()


def test_the_compare_page_fits_both_viewports_passes_axe_and_pins_the_task_column(site):
    path = f"/compare/?{Q}&agents=alpha,beta,gamma,delta"
    axe = axe_source()
    with chromium() as browser:
        for viewport in VIEWPORTS:
            r = check_page(browser, site, path, viewport, axe)
            assert r.status == 200 and not r.overflows, (viewport, r.width, r.viewport_width)
            assert not (r.serious or r.critical), (viewport, r.serious, r.critical)
            assert not r.problems, r.problems
            r = check_page(browser, site, f"/?{Q}", viewport, axe)
            assert not r.overflows and not (r.serious or r.critical), (viewport, r.serious)
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(site + path)
        box = page.locator("#compare-grid").locator("xpath=..")
        assert box.evaluate("el => el.scrollWidth > el.clientWidth")  # 4 agents: it scrolls
        head = page.locator("#compare-grid tbody th").first
        before = head.bounding_box()["x"]
        box.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
        assert abs(head.bounding_box()["x"] - before) < 1  # pinned
        last = page.locator("#compare-grid tbody tr").first.locator("td").last
        assert last.bounding_box()["x"] + last.bounding_box()["width"] <= 390 + 1
        page.close()
