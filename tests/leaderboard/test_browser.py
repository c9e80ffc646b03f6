"""Real browser (Playwright driving Debian's chromium): pages render their table and charts with
no console errors. Screenshots go to test-output/."""

import os
import shutil
from contextlib import contextmanager

import pytest
from django.core.management import call_command

from tests.conftest import TEST_OUTPUT

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def site(live_server, transactional_db):
    """The live server with the demo loaded. live_server flushes the database after each test."""
    call_command("load_demo", verbosity=0)
    return live_server.url


@contextmanager
def chromium():
    """Playwright's sync API runs an event loop: keep it inside the test body, so that database
    teardown (which Django refuses to run inside an event loop) happens after it is closed."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Debian's chromium is needed for browser tests: apt-get install chromium "
                    f"(looked for {CHROMIUM})")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def _open(browser, url: str, shot: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status} {r.url}")
            if r.status >= 400 else None)
    page.goto(url)
    page.wait_for_selector("div.chart .main-svg", timeout=15_000)
    TEST_OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(TEST_OUTPUT / shot), full_page=True)
    return page, problems


def test_leaderboard_and_categories_pages_render_tables_and_charts(site):
    with chromium() as browser:
        _check_leaderboard(browser, site)
        _check_categories(browser, site)


def _check_leaderboard(browser, site):
    page, problems = _open(browser, site + "/", "leaderboard.png")
    rows = page.locator('[data-testid="leaderboard-table"] tbody tr')
    assert rows.count() == 10
    assert "Codex (GPT 5.5)" in rows.nth(0).inner_text()
    assert page.locator("div.chart .main-svg .bars .point").count() == 10
    assert page.locator('[data-testid="reconstructed-notice"]').is_visible()
    assert problems == []
    page.close()


def test_cost_page_renders_scatter_with_pareto_frontier(site):
    with chromium() as browser:
        _check_cost(browser, site)


def _check_cost(browser, site):
    page, problems = _open(browser, site + "/cost/", "cost.png")
    assert page.locator('[data-testid="cost-table"] tbody tr').count() == 10
    assert page.locator("div.chart .main-svg .scatterlayer .trace").count() == 2
    assert page.locator(".legendtext", has_text="Pareto frontier").count() == 1
    page.click("text=Mean time per attempt (minutes)")
    page.wait_for_selector("div.chart .main-svg")
    assert "x=time" in page.url
    assert page.locator(".xtitle", has_text="minutes").count() == 1
    assert problems == []
    page.close()


def _check_categories(browser, site):
    page, problems = _open(browser, site + "/categories/", "categories.png")
    assert page.locator("div.chart .main-svg .hm").count() >= 1
    assert problems == []
    page.close()
