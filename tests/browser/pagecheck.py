"""What the browser test and `scripts/measure-pages` measure on one page at one viewport:
document width against the viewport, axe-core serious/critical violations, bytes transferred
(compressed sizes, as the network sent them), time to first byte, which scripts were fetched and
whether every chart has a text alternative.

axe-core comes from npm (package.json at the repo root, `npm ci`); it is injected into the page
as a script, never served by the site. Debian's chromium is driven through Playwright
(executable_path, never `playwright install`)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AXE_JS = ROOT / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
VIEWPORTS = {"mobile": (390, 844), "desktop": (1440, 900)}
PLOTLY_MARK = "/vendor/plotly/"

# Every chart's text alternative: it sits in a <figure> labelled by its caption, and the caption
# links a table on the page that holds the same numbers. Returns the charts without one.
_CHARTS_WITHOUT_ALT = """() => [...document.querySelectorAll('div.chart')].filter(el => {
  const fig = el.closest('figure');
  const cap = fig && fig.querySelector('figcaption');
  const labelled = cap && fig.getAttribute('aria-labelledby') === cap.id
    && cap.textContent.trim().length > 10;
  const link = cap && cap.querySelector('a[href^="#"]');
  const table = link && document.getElementById(link.getAttribute('href').slice(1));
  return !(labelled && table && table.tagName === 'TABLE' && table.id === el.dataset.altTable);
}).map(el => el.dataset.chart || 'chart')"""

_TIMING = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  return {ttfb_ms: nav.responseStart - nav.requestStart,
          bytes: nav.transferSize + res.reduce((s, r) => s + (r.transferSize || 0), 0),
          html_bytes: nav.transferSize,
          width: document.documentElement.scrollWidth,
          viewport: document.documentElement.clientWidth};
}"""


@dataclass
class PageReport:
    path: str
    viewport: str
    status: int
    width: int
    viewport_width: int
    ttfb_ms: float
    bytes: int
    html_bytes: int
    serious: list[str] = field(default_factory=list)
    critical: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    charts: int = 0
    charts_without_alt: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def overflows(self) -> bool:
        return self.width > self.viewport_width

    @property
    def fetched_plotly(self) -> bool:
        return any(PLOTLY_MARK in s for s in self.scripts)


def axe_source() -> str:
    if not AXE_JS.exists():
        raise FileNotFoundError(
            f"axe-core is missing ({AXE_JS}): run `npm ci` at the repository root "
            "(scripts/run-tests does it)")
    return AXE_JS.read_text()


def launch(playwright):
    if not os.path.exists(CHROMIUM):
        raise FileNotFoundError(f"Debian's chromium is needed: apt-get install chromium "
                                f"(looked for {CHROMIUM})")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def check_page(browser, base_url: str, path: str, viewport: str, axe: str,
               session: dict | None = None, screenshot: Path | None = None,
               wait_charts: bool = True, color_scheme: str = "light") -> PageReport:
    """Open path in a fresh context (cold cache: the weight is a first visit's) with the
    viewport, the colour scheme and, when given, a signed-in session (Playwright storage
    state)."""
    w, h = VIEWPORTS[viewport]
    context = browser.new_context(viewport={"width": w, "height": h}, storage_state=session,
                                  color_scheme=color_scheme)
    page = context.new_page()
    scripts: list[str] = []
    problems: list[str] = []
    sizes: list = []
    page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" else None)
    page.on("requestfinished", lambda r: sizes.append(r))
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    try:
        response = page.goto(base_url + path, wait_until="load")
        status = response.status if response else 0
        charts = page.locator("div.chart").count()
        if wait_charts and charts:
            # The server drew it: only one of its two variants shows at a width.
            page.wait_for_selector("div.chart svg.chart-svg", state="attached", timeout=15_000)
        timing = page.evaluate(_TIMING)
        # Encoded (on-the-wire) body plus headers of every request the page made.
        timing["bytes"] = sum(r.sizes()["responseBodySize"] + r.sizes()["responseHeadersSize"]
                              for r in sizes)
        # Evaluated through the DevTools protocol: the site's CSP forbids inline scripts.
        page.evaluate(axe + "\n;void 0")
        result = page.evaluate(
            "async () => await axe.run(document, {resultTypes: ['violations']})")
        by_impact: dict[str, list[str]] = {"serious": [], "critical": []}
        for v in result["violations"]:
            if v["impact"] in by_impact:
                by_impact[v["impact"]].append(f"{v['id']} ({len(v['nodes'])} nodes)")
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        return PageReport(
            path=path, viewport=viewport, status=status, width=timing["width"],
            viewport_width=timing["viewport"], ttfb_ms=timing["ttfb_ms"],
            bytes=timing["bytes"], html_bytes=timing["html_bytes"],
            serious=by_impact["serious"], critical=by_impact["critical"],
            scripts=[s for s in scripts if "axe" not in s], charts=charts,
            charts_without_alt=page.evaluate(_CHARTS_WITHOUT_ALT), problems=problems)
    finally:
        context.close()


def sign_in(browser, base_url: str, username: str, password: str) -> dict:
    """A signed-in session as Playwright storage state (cookies), for check_page."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(base_url + "/accounts/login/")
    page.fill("input[name=login]", username)  # allauth's field: the user name or e-mail
    page.fill("input[name=password]", password)
    page.click("form.stack button[type=submit]")
    page.wait_for_load_state("load")
    state = context.storage_state()
    context.close()
    return state
