"""Lighthouse in the suite: accessibility and best practices score 100 on
every public page, mobile profile, in a real Chromium (Debian's, through Lighthouse 12.2.3
from npm). Performance and SEO are printed by `scripts/measure-pages` (timing is noisy on a
shared machine), never asserted here."""

import pytest
from django.core.management import call_command

from tests.browser.lighthouse import lighthouse

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PUBLIC = ["/", "/categories/", "/imaging-vs-text/", "/harness-effect/", "/cost/",
          "/task-matrix/", "/tasks/", "/tasks/pathology-tumor-region/case_01/",
          "/agents/codex-gpt-5-5/", "/methods/", "/contribute/", "/pricing/", "/downloads/",
          "/changelog/", "/submit/", "/accounts/login/", "/accounts/signup/"]


def test_every_public_page_scores_100_for_accessibility_and_best_practices(live_server):
    call_command("load_demo", verbosity=0)
    below = {}
    for path in PUBLIC:
        result = lighthouse(live_server.url + path, form_factor="mobile",
                            categories=("accessibility", "best-practices"))
        if result.scores != {"accessibility": 100, "best-practices": 100}:
            below[path] = (result.scores, result.failing)
    assert below == {}
