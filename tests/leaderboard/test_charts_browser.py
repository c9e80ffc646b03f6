"""Charts and export in a real browser (Debian's chromium through Playwright), at 390x844 and
1440x900: every chart page shows its chart with JavaScript off (the server's SVG, the variant for
the width, inside its container) and fetches no Plotly; with JavaScript on, "Copy table as
Markdown" puts the table on the clipboard (on a chart page and on the task matrix), "Download
SVG" saves the chart's file, and the permalink keeps the filters."""

import re

import pytest
from django.core.management import call_command

from tests.browser.pagecheck import VIEWPORTS
from tests.leaderboard.test_browser import chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHART_PAGES = ["/", "/categories/", "/imaging-vs-text/", "/harness-effect/", "/cost/",
               "/cost/?x=time"]

_SHOWN = """() => [...document.querySelectorAll('div.chart')].map(c => {
  const box = c.getBoundingClientRect();
  const svgs = [...c.querySelectorAll('svg.chart-svg')].filter(s => s.getClientRects().length);
  const r = svgs.length === 1 ? svgs[0].getBoundingClientRect() : null;
  return {chart: c.dataset.chart, shown: svgs.map(s => s.getAttribute('class')),
          marks: svgs.length === 1 ? svgs[0].querySelectorAll('.cs-mark').length : 0,
          fits: !!r && r.width > 200 && r.height > 150 && r.left >= box.left - 0.5
                && r.right <= box.right + 0.5};
})"""


def test_every_chart_is_drawn_without_javascript_at_both_widths(live_server):
    call_command("load_demo", verbosity=0)
    bad = {}
    with chromium() as browser:
        for viewport, (w, h) in VIEWPORTS.items():
            ctx = browser.new_context(viewport={"width": w, "height": h},
                                      java_script_enabled=False)
            page = ctx.new_page()
            scripts: list[str] = []
            page.on("request", lambda r, s=scripts: s.append(r.url)
                    if r.resource_type == "script" else None)
            variant = "chart-svg-narrow" if w < 600 else "chart-svg-wide"
            for path in CHART_PAGES:
                page.goto(live_server.url + path)
                charts = page.evaluate(_SHOWN)
                if not charts or not all(c["fits"] and c["marks"] > 0
                                         and c["shown"] == [f"chart-svg {variant}"]
                                         for c in charts):
                    bad[f"{path} @ {viewport}"] = charts
                if page.locator("button.js-only").first.is_visible():
                    bad[f"{path} @ {viewport}"] = "a button that needs JavaScript is shown"
            assert not [s for s in scripts if "plotly" in s]
            ctx.close()
    assert bad == {}


def test_markdown_is_copied_and_the_svg_downloaded_at_both_widths(live_server, tmp_path):
    call_command("load_demo", verbosity=0)
    with chromium() as browser:
        for viewport, (w, h) in VIEWPORTS.items():
            ctx = browser.new_context(viewport={"width": w, "height": h}, accept_downloads=True,
                                      permissions=["clipboard-read", "clipboard-write"])
            page = ctx.new_page()
            plotly: list[str] = []
            page.on("request", lambda r, p=plotly: p.append(r.url)
                    if "/vendor/plotly/" in r.url else None)
            page.goto(live_server.url + "/categories/?verified=&q=codex")
            bar = page.locator('[data-testid="export-bar"]')

            bar.get_by_role("button", name="Copy table as Markdown").click()
            bar.get_by_role("status").filter(has_text="Table copied as Markdown.").wait_for()
            md = page.evaluate("() => navigator.clipboard.readText()")
            lines = md.splitlines()
            assert lines[0].startswith("| Agent | Chest X-ray report correction"), lines[0]
            assert set(lines[1].replace(" ", "")) <= set("|-")
            body = [ln for ln in lines[2:] if ln.startswith("|")]
            # The rows the filtered table shows (every Codex agent), with their cells.
            assert len(body) == page.locator("#categories-table tbody tr").count() >= 2
            assert all("Codex" in ln for ln in body) and re.search(r"\| \d+% \d+/\d+ \|", md)
            assert "HealthAgentBench leaderboard · healthagentbench@1.0 · " in md
            assert "/categories/?verified=&q=codex" in md
            assert "reconstructed rows" in md

            with page.expect_download() as info:
                page.get_by_test_id("svg-download").first.click()
            download = info.value
            assert download.suggested_filename == "cat-chart-healthagentbench@1.0.svg"
            target = tmp_path / f"{viewport}.svg"
            download.save_as(target)
            svg = target.read_text()
            assert svg.startswith('<?xml version="1.0"') and "<svg " in svg
            assert svg.count('class="cs-mark"') == 7 * len(body)
            assert "Success rate by category" in svg

            bar.get_by_role("button", name="Copy permalink").click()
            bar.get_by_role("status").filter(has_text="Permalink copied.").wait_for()
            link = page.evaluate("() => navigator.clipboard.readText()")
            assert link.endswith("/categories/?verified=&q=codex")
            # A table page without a chart: the same bar, its own table.
            page.goto(live_server.url + "/task-matrix/?q=codex")
            bar = page.locator('[data-testid="export-bar"]')
            bar.get_by_role("button", name="Copy table as Markdown").click()
            bar.get_by_role("status").filter(has_text="Table copied as Markdown.").wait_for()
            md = page.evaluate("() => navigator.clipboard.readText()")
            rows = [ln for ln in md.splitlines()[2:] if ln.startswith("| Codex")]
            assert len(rows) == page.locator("#task-matrix tbody tr").count() >= 2, md[:300]
            assert plotly == []  # none of it needed Plotly
            ctx.close()
