"""A6 (reliability matrix): stored XSS payloads in every name a submitter controls, rendered by a
real browser (Playwright driving Debian's chromium) on every page that shows them."""

import json

import pytest
from django.test import Client

from tests.conftest import TEST_OUTPUT
from tests.leaderboard.test_browser import chromium

pytestmark = pytest.mark.browser

PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    '"><script>alert(2)</script>',
    "</script><script>alert(3)</script>",
    "javascript:alert(4)",
    "'-alert(5)-'<svg onload=alert(6)>",
]
HOSTILE = " ".join(PAYLOADS)
# Harness and model names hold at most 120 characters: a tag, a script break-out and an SVG
# handler, whole (the agent and organisation names carry every payload).
SHORT_HOSTILE = " ".join(PAYLOADS[i] for i in (0, 2, 4))


@pytest.fixture
def hostile_site(live_server, transactional_db, small_benchmark, settings, tmp_path):
    """A published and a queued submission whose agent, harness, model and organisation names,
    status reason and trajectory text are XSS payloads."""
    from django.contrib.auth import get_user_model
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from django.utils import timezone

    from leaderboard.services import leaderboard_recompute
    from submissions.models import SubmissionStatus, Trial
    from tests.factories import (
        AgentFactory,
        AIModelFactory,
        HarnessFactory,
        SubmissionFactory,
        published_submission,
    )

    settings.MEDIA_ROOT = str(tmp_path / "media")
    bv, tasks = small_benchmark
    owner = get_user_model().objects.create_user("xss-owner", "x@example.org", "pw-x-123456!")
    agent = AgentFactory(
        slug="xss-agent", display_name="A " + HOSTILE, organisation=HOSTILE,
        url="javascript:alert(7)",
        harness=HarnessFactory(slug="xss-h", display_name="H " + SHORT_HOSTILE, family="xss-h"),
        model=AIModelFactory(slug="xss-m", display_name="M " + SHORT_HOSTILE, provider=HOSTILE[:60]))
    published_submission(agent, tasks, ["PPP", "FFF", "PPF", "FFF", "PPP"], owner=owner)
    leaderboard_recompute(benchmark_version=bv)
    queued = SubmissionFactory(owner=owner, agent=agent, benchmark_version=bv,
                               status=SubmissionStatus.QUEUED, published_at=None,
                               queued_at=timezone.now(), status_reason=HOSTILE,
                               files_prefix="submissions/xss/tree", trials_total=1)
    trajectory = {"schema_version": "ATIF-v1.7", "session_id": "s",
                  "agent": {"name": HOSTILE, "version": "1"},
                  "steps": [{"step_id": 1, "source": "agent", "message": HOSTILE,
                             "tool_calls": [{"tool_call_id": "c1", "function_name": HOSTILE,
                                             "arguments": {"command": HOSTILE}}],
                             "observation": {"results": [{"source_call_id": "c1",
                                                          "content": HOSTILE}]}}]}
    default_storage.save("submissions/xss/tree/job/t1/agent/trajectory.json",
                         ContentFile(json.dumps(trajectory).encode()))
    trial = Trial.objects.create(submission=queued, benchmark_task=tasks[0], attempt=1,
                                 outcome="passed", success=True, claimed_outcome="passed",
                                 claimed_success=True, reward=1.0, trial_dir="job/t1",
                                 trajectory_path="job/t1/agent/trajectory.json")
    c = Client()
    c.force_login(owner)
    q = f"?benchmark={bv.slug}"
    pages = ["/" + q, "/categories/" + q, "/imaging-vs-text/" + q, "/harness-effect/" + q,
             "/cost/" + q, "/task-matrix/" + q, f"/agents/{agent.slug}/" + q,
             f"/tasks/{tasks[0].name}/" + q, f"/submissions/{queued.pk}/",
             f"/submissions/{queued.pk}/trials/{trial.pk}/trajectory/"]
    return live_server.url, c.cookies["sessionid"].value, pages


def test_a6_stored_xss_payloads_never_run_in_a_real_browser(hostile_site):
    """A6: every page showing submitter-controlled text (leaderboard, charts fed by JSON in a
    script tag, agent and task pages, status page, trajectory viewer) renders the payloads as
    text: no dialog opens, no console error or page error, every response carries a CSP
    without 'unsafe-inline' scripts, no link has a javascript: URL, and an injected inline
    script is blocked by that CSP."""
    base, session, pages = hostile_site
    host = base.split("//", 1)[1].split(":")[0]
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1300, "height": 900})
        context.add_cookies([{"name": "sessionid", "value": session, "domain": host,
                              "path": "/"}])
        page = context.new_page()
        dialogs, problems, csp = [], [], {}
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: problems.append(f"{m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))

        def on_response(r):
            if r.request.resource_type == "document":
                csp[r.url] = r.headers.get("content-security-policy", "")
                if r.status >= 400:
                    problems.append(f"HTTP {r.status} {r.url}")

        page.on("response", on_response)
        for path in pages:
            page.goto(base + path)
            page.wait_for_load_state("networkidle")
            text = page.inner_text("body")
            assert "alert(" in text, f"{path}: payload not shown as text"
            hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
            assert not [h for h in hrefs if h.lower().startswith("javascript:")], path
            assert page.locator("img[src='x'], svg[onload]").count() == 0, path
        TEST_OUTPUT.mkdir(exist_ok=True)
        page.goto(base + pages[0])
        page.screenshot(path=str(TEST_OUTPUT / "xss-leaderboard.png"), full_page=True)
        assert dialogs == [] and problems == [], (dialogs, problems)
        assert len(csp) >= len(pages)
        for url, policy in csp.items():
            script_src = policy.split("script-src", 1)[1].split(";")[0]
            assert "'unsafe-inline'" not in script_src and "'self'" in script_src, url
        # Residual script: an inline <script> injected into the page is refused by the CSP.
        page.evaluate("""() => { const s = document.createElement('script');
            s.textContent = 'window.__xss = 1'; document.body.appendChild(s); }""")
        assert page.evaluate("() => window.__xss") is None
        assert any("Content Security Policy" in p for p in problems), problems
        context.close()
