"""Real browser (Playwright driving Debian's chromium, axe-core from npm): every public page and
the signed-in pages at 390x844 and 1440x900. Asserts no horizontal overflow, zero serious or
critical axe violations, a text alternative for every chart (the server's SVG), Plotly fetched by
no page on load, no console errors (and the main pages again in dark mode); keeps a screenshot of every page
and viewport under var/screenshots/.

One browser launch and one demo load for the whole sweep (a single test), about 60 page visits:
two to five minutes depending on the load of the machine. Playwright's sync API runs an event
loop, so it stays inside the test body and the database teardown (which Django refuses to run
inside an event loop) happens after it closes."""

import json
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.browser.pagecheck import VIEWPORTS, axe_source, check_page, launch, sign_in

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
CHART_PAGES = {"/", "/categories/", "/imaging-vs-text/", "/harness-effect/", "/cost/"}
PUBLIC = [*sorted(CHART_PAGES), "/task-matrix/", "/tasks/",
          "/tasks/pathology-tumor-region/case_01/", "/agents/codex-gpt-5-5/", "/methods/",
          "/compare/?agents=codex-gpt-5-5,codex-gpt-5-4,claude-code-opus-4-8",
          "/contribute/", "/changelog/", "/downloads/", "/pricing/", "/accounts/login/",
          "/accounts/signup/",
          "/?verified=1", "/cost/?verified=1", "/no-such-page/"]
# Swagger UI (drf-spectacular-sidecar) is third-party markup: its own contrast and nested
# buttons fail axe, so it is checked for overflow, errors and "no CDN", not for axe.
THIRD_PARTY = {"/api/docs/"}


@contextmanager
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        try:
            b = launch(p)
        except FileNotFoundError as exc:
            pytest.fail(str(exc))
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def site(live_server, transactional_db, settings, tmp_path):
    """The demo, a maintainer, and one published trial with a stored trajectory."""
    from django.contrib.auth import get_user_model
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from submissions.models import (
        CheckKind,
        CheckStatus,
        Submission,
        TrialCheck,
        VerificationJob,
    )
    from submissions.trials import trial_screen_record

    settings.MEDIA_ROOT = str(tmp_path / "media")
    call_command("load_demo", verbosity=0)
    get_user_model().objects.create_user("maint", "m@example.org", "pw-maint-123!",
                                         is_staff=True)
    sub = Submission.objects.get(agent__slug="codex-gpt-5-5")
    trials = list(sub.trials.order_by("benchmark_task__position", "attempt")[:2])
    Submission.objects.filter(pk=sub.pk).update(files_prefix="submissions/demo-1")
    doc = {"schema_version": "ATIF-v1.7", "session_id": "s",
           "agent": {"name": "codex", "version": "1"},
           "steps": [{"step_id": 1, "source": "agent", "message": "ls /workspace",
                      "tool_calls": [{"tool_call_id": "c1", "function_name": "Bash",
                                      "arguments": {"command": "ls /workspace"}}],
                      "observation": {"results": [{"source_call_id": "c1", "content": "a\n"}]}}]}
    for t in trials:
        default_storage.save(f"submissions/demo-1/{t.pk}/agent/trajectory.json",
                             ContentFile(json.dumps(doc).encode()))
        type(t).objects.filter(pk=t.pk).update(trajectory_path=f"{t.pk}/agent/trajectory.json")
    # The second trial is flagged by the reward-hacking screen, with a long piece of evidence:
    # the findings (and the maintainer's clear form) render on the submission and trial pages.
    job = VerificationJob.objects.create(submission=sub, status="done", attempt=1)
    TrialCheck.objects.create(
        job=job, kind=CheckKind.SCREEN, trial=trials[1], benchmark_task=trials[1].benchmark_task,
        status=CheckStatus.MISMATCH, detail={"rules_version": "browser", "hits": [
            {"rule": "RH1", "source": "command", "step": 1,
             "excerpt": "ls -la /tests && cat /tests/" + "very-long-path-segment/" * 20}]})
    trial_screen_record(trial_id=trials[1].pk, hits=["RH1"])
    return live_server.url, sub, trials


def _shot(path: str, viewport: str, variant: str = "") -> Path:
    name = (path.strip("/") or "index").replace("/", "_").replace("?", "_").replace("=", "-")
    name = "index" + name if name.startswith("_") else name
    return SCREENSHOTS / f"{name}{variant}-{viewport}.png"


def test_every_page_fits_both_viewports_passes_axe_and_loads_no_plotly(site):
    base, sub, trials = site
    axe = axe_source()
    signed_in = ["/account/", "/submit/", "/moderation/", f"/submissions/{sub.pk}/",
                 f"/submissions/{sub.pk}/trials/{trials[0].pk}/trajectory/",
                 f"/submissions/{sub.pk}/trials/{trials[1].pk}/trajectory/"]
    failures: list[str] = []
    with chromium() as browser:
        session = sign_in(browser, base, "maint", "pw-maint-123!")
        for viewport in VIEWPORTS:
            pages = [(p, None) for p in [*PUBLIC, f"/submissions/{sub.pk}/", *THIRD_PARTY]]
            pages += [(p, session) for p in signed_in]
            for path, state in pages:
                r = check_page(browser, base, path, viewport, axe, session=state,
                               screenshot=_shot(path, viewport, "-signed-in" if state else ""))
                failures += _problems(r, path, viewport)
        # Dark mode (prefers-color-scheme) swaps every colour: contrast is checked again.
        for path in ("/", "/categories/", "/task-matrix/", f"/submissions/{sub.pk}/"):
            r = check_page(browser, base, path, "desktop", axe, color_scheme="dark",
                           screenshot=_shot(path, "desktop", "-dark"))
            failures += _problems(r, path, "desktop, dark")
        _check_interactions(browser, base, sub, trials)
    assert failures == []


def _problems(r, path: str, viewport: str) -> list[str]:
    where = f"{path} @ {viewport}"
    out = []
    expected = 404 if path == "/no-such-page/" else 200
    if r.status != expected:
        out.append(f"{where}: HTTP {r.status}")
    if r.overflows:
        out.append(f"{where}: document {r.width}px wide in a {r.viewport_width}px viewport")
    if path not in THIRD_PARTY and (r.serious or r.critical):
        out.append(f"{where}: axe {r.serious + r.critical}")
    if r.charts_without_alt:
        out.append(f"{where}: charts without a text alternative {r.charts_without_alt}")
    if r.fetched_plotly:
        out.append(f"{where}: Plotly fetched on load (charts={r.charts})")
    if (path in CHART_PAGES) != (r.charts > 0):
        out.append(f"{where}: {r.charts} charts")
    if any(not s.startswith("http://localhost") for s in r.scripts):
        out.append(f"{where}: scripts from elsewhere {r.scripts}")
    problems = [p for p in r.problems if not (expected == 404 and "404" in p)]
    if problems:
        out.append(f"{where}: console {problems}")
    return out


def _check_interactions(browser, base: str, sub, trials) -> None:
    """Menu button on a phone; cost axis switch and the interactive chart; drill-down row -> agent -> submission ->
    trial -> trajectory -> next trial and back."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    page.goto(base + "/")
    nav = page.get_by_role("navigation", name="Leaderboard pages")
    assert not nav.is_visible()
    page.get_by_role("button", name="Menu").click()
    assert nav.is_visible()
    assert page.get_by_role("button", name="Menu").get_attribute("aria-expanded") == "true"
    ctx.close()

    page = browser.new_page(viewport={"width": 1440, "height": 900})
    plotly: list[str] = []
    page.on("request", lambda r: plotly.append(r.url) if "/vendor/plotly/" in r.url else None)
    page.goto(base + "/cost/")
    svg = page.locator("div.chart svg.chart-svg-wide")
    assert svg.is_visible() and svg.locator("text", has_text="Pareto frontier").count() == 1
    page.get_by_role("link", name="Reported mean time per attempt (minutes)").click()
    page.wait_for_url("**x=time**")
    assert page.locator("div.chart svg.chart-svg-wide text",
                        has_text="Reported mean time per attempt (minutes)").count() == 1
    # Plotly only once the reader asks: the same figure, with its own axis title.
    assert plotly == []
    page.get_by_role("button", name="Interactive chart").click()
    page.wait_for_selector("div.chart .main-svg")
    assert len(plotly) == 1 and page.locator(
        ".xtitle", has_text="Reported mean time per attempt (minutes)").count() == 1
    assert page.locator(".legendtext", has_text="Pareto frontier").count() == 1

    page.goto(base + "/")
    page.get_by_role("link", name="Codex (GPT 5.5)").first.click()
    page.wait_for_url("**/agents/codex-gpt-5-5/**")
    page.locator('[data-testid="submission-link"]').click()
    page.wait_for_url(f"**/submissions/{sub.pk}/")
    row = page.locator(f"#t{trials[0].benchmark_task_id}-{trials[0].attempt}")
    assert row.count() == 1
    row.get_by_role("link").click()
    page.wait_for_url(f"**/trials/{trials[0].pk}/trajectory/")
    assert page.locator('[data-testid="outcome"]').inner_text() == trials[0].get_outcome_display()
    page.locator('[data-testid="next"]').click()
    page.wait_for_url(f"**/trials/{trials[1].pk}/trajectory/")
    page.locator('[data-testid="back"]').click()
    page.wait_for_url(f"**/submissions/{sub.pk}/#t*")
    page.close()



def test_leaderboard_columns_hide_with_and_without_javascript(site):
    """Column toggles: a checkbox hides its column at once and keeps the choice in the URL; the
    same URL loaded afresh (or the form without JavaScript) renders the column hidden."""
    base, _sub, _trials = site
    with chromium() as browser:
        _check_column_toggles(browser, base)


def _check_column_toggles(browser, base: str) -> None:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(base + "/")
    cost = page.locator("#leaderboard-table thead th.col-cost")
    assert cost.is_visible()
    page.get_by_text("Columns", exact=True).click()
    page.get_by_label("Reported cost / attempt", exact=True).uncheck()
    assert not cost.is_visible() and "hide=cost" in page.url
    page.goto(page.url)
    assert not page.locator("#leaderboard-table thead th.col-cost").is_visible()
    assert page.locator("#leaderboard-table thead th.col-time").is_visible()
    assert not page.get_by_label("Reported cost / attempt", exact=True).is_checked()
    page.close()
    context = browser.new_context(java_script_enabled=False)
    nojs = context.new_page()
    nojs.goto(base + "/?sort=cost")
    nojs.get_by_text("Columns", exact=True).click()
    nojs.get_by_label("Reported mean time", exact=True).uncheck()
    with nojs.expect_navigation():
        nojs.locator("[data-columns-apply]").click()
    nojs.wait_for_url(lambda url: "hide=time" in url)
    assert "sort=cost" in nojs.url
    assert not nojs.locator("#leaderboard-table thead th.col-time").is_visible()
    context.close()
