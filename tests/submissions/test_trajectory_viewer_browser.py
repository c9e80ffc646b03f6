"""The trajectory viewer in a real browser (Debian's chromium) at 390 and 1440 px: find as you
type marks the matches, fold and unfold every step, a deep link opens its step, the workspace
diff reads, the arrow keys move between trials, and axe finds nothing serious."""

from __future__ import annotations

import json

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from submissions.models import SubmissionStatus
from tests.browser.pagecheck import VIEWPORTS, axe_source, check_page, launch
from tests.factories import TrialFactory
from tests.submissions.test_trajectory_viewer import DOC, XRAY_TASK

pytestmark = [pytest.mark.browser]


@pytest.fixture
def trials(live_server, transactional_db, settings, tmp_path):
    from tests.factories import BenchmarkTaskFactory, CategoryFactory, SubmissionFactory

    settings.MEDIA_ROOT = str(tmp_path / "media")
    category = CategoryFactory(slug="xray-report-correction")
    sub = SubmissionFactory(files_prefix="submissions/5/files", status=SubmissionStatus.PUBLISHED)
    made = []
    for n in (1, 2):
        task = BenchmarkTaskFactory(category=category, position=n, package_path=XRAY_TASK,
                                    name=f"xray-report-correction/synthetic_0{n}")
        trial_dir = f"xray/t{n}"
        default_storage.save(f"submissions/5/files/{trial_dir}/agent/trajectory.json",
                             ContentFile(json.dumps(DOC).encode()))
        default_storage.save(
            f"submissions/5/files/{trial_dir}/artifacts/workspace/submission.json",
            ContentFile(json.dumps({"findings": "No pneumothorax. Heart normal."}).encode()))
        made.append(TrialFactory(submission=sub, benchmark_task=task, trial_dir=trial_dir,
                                 trajectory_path=f"{trial_dir}/agent/trajectory.json"))
    return live_server.url, made


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_find_fold_deep_link_diff_and_keys(trials, viewport):
    from playwright.sync_api import sync_playwright

    base, (first, second) = trials
    path = f"/submissions/{first.submission_id}/trials/{first.pk}/trajectory/"
    with sync_playwright() as p:
        browser = launch(p)
        try:
            report = check_page(browser, base, path, viewport, axe_source())
            assert report.status == 200 and not report.serious and not report.critical, report
            w, h = VIEWPORTS[viewport]
            page = browser.new_context(viewport={"width": w, "height": h}).new_page()
            page.goto(base + path + "#step-3")
            wide = page.evaluate("""w => Array.from(document.querySelectorAll('body *'))
                .filter(e => e.getBoundingClientRect().right > w + 1)
                .map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))
                .slice(0, 8)""", w)
            assert report.width <= report.viewport_width, wide  # no sideways scrolling
            assert report.problems == [], report.problems
            assert page.locator("#step-3").evaluate("el => el.classList.contains('targeted')")
            # The diff: what the agent removed from the draft and what it added.
            diff = page.locator("[data-testid=workspace-file] .diff")
            assert diff.locator(".diff-del").count() >= 1 and diff.locator(".diff-add").count() >= 1
            assert diff.is_visible()
            # Find as you type: the observation of step 2 holds the word, marked.
            page.fill("#traj-q", "pneumothorax")
            page.locator("[data-testid=match-count]").filter(
                has_text="1 step match “pneumothorax”.").wait_for(timeout=5_000)
            assert page.locator("#step-2 mark.find").count() >= 1
            assert "q=pneumothorax" in page.url  # the permalink keeps the find
            # The filter hides the user's step without a reload.
            page.uncheck("input[name=source][value=user]")
            assert page.locator("#step-1").is_hidden()
            # Fold all, unfold all.
            page.click("button[data-action=fold]")
            assert page.locator("details.step-fold[open]").count() == 0
            page.click("button[data-action=unfold]")
            assert page.locator("details.step-fold[open]").count() == 3
            # The arrow key moves to the next trial.
            page.locator("h1").click()
            page.keyboard.press("ArrowRight")
            page.wait_for_url(f"**/trials/{second.pk}/trajectory/")
            page.keyboard.press("ArrowLeft")
            page.wait_for_url(f"**/trials/{first.pk}/trajectory/")
        finally:
            browser.close()
