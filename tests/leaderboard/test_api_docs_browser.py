"""The API docs page (/api/docs/, Swagger UI from this site's static files) shows each
operation's error responses with their descriptions, as the schema documents them: one list
operation (the leaderboard: 400, 404) and the upload (400, 401, 413, 415), expanded as a reader
would, in Debian's chromium through Playwright. Its links too: the upload's 202 names the
status operation it leads to."""

import pytest

from tests.browser.pagecheck import launch

pytestmark = pytest.mark.browser

LEADERBOARD = ("v1_leaderboard_retrieve", {
    "400": "a listed query parameter out of its bounds",
    "404": "no such benchmark version"})
UPLOAD = ("submissions_create", {
    "400": "the upload refused: every problem of its fields at once",
    "401": "no token, or a bad or revoked one",
    "413": "too large",
    "415": "not multipart/form-data"})


def test_the_api_docs_show_the_error_responses(live_server, transactional_db):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        try:
            browser = launch(p)
        except FileNotFoundError as exc:
            pytest.fail(str(exc))
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{live_server.url}/api/docs/")
            for operation_id, answers in (LEADERBOARD, UPLOAD):
                block = page.locator(f".opblock[id$='-{operation_id}']")
                expect(block).to_have_count(1, timeout=15_000)
                block.locator(".opblock-summary").first.click()
                for code, description in answers.items():
                    row = block.locator(f"tr.response[data-code='{code}']")
                    expect(row).to_be_visible()
                    expect(row.locator(".response-col_description")).to_contain_text(
                        description)
            upload = page.locator(".opblock[id$='-submissions_create']")
            expect(upload.locator("tr.response[data-code='202']")).to_contain_text(
                "submissions_retrieve")
            assert errors == []
        finally:
            browser.close()
