"""Real browser (Playwright driving Debian's chromium): a maintainer confirms, then revokes, a
claimed infrastructure error on the submission page, at phone (390x844) and desktop width; a
visitor (another browser context, signed out) sees the reason on the public submission page and
the leaderboard row change: 7/15 -> 7/14 -> 7/15 (hand-checked: 2+0+2+0+3 passes; the two
claimed infrastructure errors count as failures until one is confirmed).

Playwright's sync API runs an event loop, so it stays inside the test body (the database
teardown happens after the browser closes)."""

import pytest

from tests.browser.pagecheck import VIEWPORTS, launch, sign_in

pytestmark = pytest.mark.browser

Q = "?benchmark=small@1.0"
AGENT = "Flaky (M1)"
_WIDTH = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"


@pytest.fixture
def flaky_site(live_server, transactional_db, small_benchmark, django_user_model):
    from submissions.models import SubmissionStatus, Trial
    from submissions.services import submission_publish
    from tests.factories import AgentFactory, published_submission

    _bv, tasks = small_benchmark
    # Claims: two infrastructure errors (img/case_01 attempt 3, txt-one/case_02 attempt 2).
    sub = published_submission(AgentFactory(display_name=AGENT, slug="flaky"), tasks,
                               ["PPI", "FFF", "PPF", "FIF", "PPP"], infra_confirmed=False,
                               status=SubmissionStatus.VERIFIED, published_at=None)
    maintainer = django_user_model.objects.create_user("maint", "m@example.org",
                                                       "pw-maint-123!", is_staff=True)
    sub = submission_publish(submission=sub, actor=maintainer)
    trial = Trial.objects.get(submission=sub, benchmark_task=tasks[0], attempt=3)
    return live_server.url, sub, trial


def _row_text(page, base, sub) -> str:
    page.goto(f"{base}/{Q}")
    return page.locator(f'a[href="/submissions/{sub.pk}/#trials"]').inner_text().strip()


def _claim(page, trial):
    return page.locator(f'[data-testid="infra-claim"][data-trial="{trial.pk}"]')


def test_maintainer_confirms_then_revokes_and_the_public_sees_reason_and_row(flaky_site):
    from playwright.sync_api import sync_playwright

    base, sub, trial = flaky_site
    seen = []
    with sync_playwright() as p:
        try:
            browser = launch(p)
        except FileNotFoundError as exc:
            pytest.fail(str(exc))
        try:
            session = sign_in(browser, base, "maint", "pw-maint-123!")
            for name, (width, height) in VIEWPORTS.items():
                size = {"width": width, "height": height}
                staff = browser.new_context(viewport=size, storage_state=session).new_page()
                public = browser.new_context(viewport=size).new_page()
                assert _row_text(public, base, sub) == "7/15"

                confirm = f"Engine <restart> at 03:10 UTC broke this trial ({name})"
                staff.goto(f"{base}/submissions/{sub.pk}/")
                claim = _claim(staff, trial)
                assert claim.get_attribute("data-confirmed") == "false"
                claim.get_by_label("Reason for confirming").fill(confirm)
                claim.get_by_role("button", name="Confirm infrastructure error").click()
                staff.wait_for_url(f"**/submissions/{sub.pk}/#infra")
                assert _claim(staff, trial).get_attribute("data-confirmed") == "true"

                public.goto(f"{base}/submissions/{sub.pk}/")
                claim = _claim(public, trial)
                assert claim.get_attribute("data-confirmed-by") == "maintainer"
                assert claim.locator(".badge").inner_text() == (
                    "confirmed by a maintainer: not counted")
                reason = claim.get_by_test_id("infra-reason")
                assert reason.is_visible() and reason.inner_text().endswith(
                    f"by maint: {confirm}")
                assert public.get_by_test_id("infra-counts").locator("strong").inner_text() == (
                    "2 claimed, 1 confirmed")
                assert claim.get_by_role("button").count() == 0  # no controls for the public
                scroll, client = public.evaluate(_WIDTH)
                assert scroll <= client, (name, scroll, client)
                after_confirm = _row_text(public, base, sub)
                assert after_confirm == "7/14"

                revoke = f"the engine log shows no restart during this trial ({name})"
                staff.goto(f"{base}/submissions/{sub.pk}/")
                claim = _claim(staff, trial)
                claim.get_by_label("Reason for revoking").fill(revoke)
                claim.get_by_role("button", name="Revoke confirmation").click()
                staff.wait_for_url(f"**/submissions/{sub.pk}/#infra")

                public.goto(f"{base}/submissions/{sub.pk}/")
                claim = _claim(public, trial)
                assert claim.get_attribute("data-confirmed") == "false"
                assert claim.locator(".badge").inner_text() == (
                    "not confirmed: counted as a failure")
                assert claim.get_by_test_id("infra-reason").inner_text() == (
                    f"confirmation (a maintainer: {confirm}) revoked by a maintainer: {revoke}")
                assert public.get_by_test_id("infra-counts").locator("strong").inner_text() == (
                    "2 claimed, 0 confirmed")
                after_revoke = _row_text(public, base, sub)
                assert after_revoke == "7/15"
                seen.append((name, after_confirm, after_revoke))
                staff.context.close()
                public.context.close()
        finally:
            browser.close()
    assert seen == [("mobile", "7/14", "7/15"), ("desktop", "7/14", "7/15")]
