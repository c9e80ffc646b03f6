"""A phone at 390x844 (real browser, Debian's chromium): the leaderboard's first screen shows,
for every agent, rank, tie group, agent, success with its interval and the verification level
without scrolling the table sideways; the reconstructed-data notice is one line (its full text
opens in place); no chart (the server's narrow SVG) is wider than its container."""

import pytest
from django.core.management import call_command

from tests.leaderboard.test_browser import chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHART_PAGES = ["/", "/categories/", "/imaging-vs-text/", "/harness-effect/", "/cost/"]

_KEY_CELLS = """() => {
  const box = document.querySelector('#leaderboard-table').parentElement.getBoundingClientRect();
  const out = [];
  for (const r of document.querySelector('#leaderboard-table').tBodies[0].rows) {
    const cells = [r.cells[0], r.querySelector('.col-tie'), r.querySelector('th'),
                   r.querySelector('.col-success .ci'), r.querySelector('.col-status [data-testid=badge]')];
    out.push(cells.map(c => { const b = c.getBoundingClientRect();
                              return b.width > 0 && b.left >= box.left && b.right <= box.right + 0.5; }));
  }
  return out;
}"""

_CHARTS = """() => [...document.querySelectorAll('div.chart')].map(c => {
  const box = c.getBoundingClientRect();
  const svg = [...c.querySelectorAll('svg.chart-svg')].filter(s => s.getClientRects().length);
  const plots = svg.map(s => s.getBoundingClientRect());
  const shown = svg.length === 1 && svg[0].classList.contains('chart-svg-narrow');
  const inside = r => r.left >= box.left - 0.5 && r.right <= box.right + 0.5;
  // Every axis label is drawn inside the chart, and no two x labels overlap (readable).
  const ticks = [...c.querySelectorAll('.cs-axes text')].map(e => e.getBoundingClientRect())
    .filter(r => r.width > 0);
  // (level labels: a rotated label's box overlaps its neighbour's though its text does not)
  const xs = [...c.querySelectorAll('.cs-axes text[text-anchor=middle]')]
    .filter(e => !(e.getAttribute('transform') || '').includes('rotate'))
    .map(e => e.getBoundingClientRect())
    .filter(r => r.width > 0).sort((a, b) => a.left - b.left);
  const overlaps = xs.slice(1).filter((r, i) => r.left < xs[i].right - 0.5 && r.top < xs[i].bottom - 0.5
                                                 && xs[i].top < r.bottom - 0.5).length;
  return {box: [box.left, box.right],
          fits: shown && plots.every(inside) && ticks.every(inside) && overlaps === 0,
          plots: plots.map(p => [p.left, p.right]), overlaps: overlaps,
          outside: ticks.filter(r => !inside(r)).map(r => [r.left, r.right])};
})"""


_HEATMAP = """() => {
  // Type size as drawn: the SVG's font size times the scale its viewBox is drawn at.
  const svg = document.querySelector('div.chart svg.chart-svg-narrow');
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const cells = [...svg.querySelectorAll('.cs-trace text')];
  const px = cells.map(e => parseFloat(getComputedStyle(e).fontSize) * scale);
  const rotated = [...svg.querySelectorAll('.cs-axes text')]
    .filter(e => (e.getAttribute('transform') || '').includes('rotate')).length;
  return [[cells.length, px], rotated];
}"""


def test_phone_shows_success_and_level_first_one_line_notice_and_charts_fit(live_server):
    call_command("load_demo", verbosity=0)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(live_server.url + "/")
        rows = page.evaluate(_KEY_CELLS)
        assert len(rows) == 10 and all(all(r) for r in rows), rows
        notice = page.locator('[data-testid="reconstructed-notice"]')
        assert notice.bounding_box()["height"] < 44, notice.bounding_box()
        assert page.locator("h1").bounding_box()["y"] < 200
        assert not notice.get_by_text("seeded random draws").is_visible()
        notice.locator("summary").click()
        assert notice.get_by_text("seeded random draws").is_visible()
        assert notice.get_by_role("link", name="How the reconstruction works").get_attribute(
            "href") == "/methods/#reconstruction"
        clipped = {}
        for path in CHART_PAGES:
            page.goto(live_server.url + path)
            charts = page.evaluate(_CHARTS)
            if not all(c["fits"] for c in charts):
                clipped[path] = charts
            if path == "/categories/":
                # Every category's column is readable: 70 cells (10 agents x 7) in type of at
                # least 9 px, and level column labels (the narrow variant, charts.py).
                sizes, rotated = page.evaluate(_HEATMAP)
                assert sizes[0] == 70 and min(sizes[1]) >= 9, sizes
                assert rotated == 0, rotated
        page.close()
    assert clipped == {}
