"""System checks of the evaluation app.

The synthetic judge (evaluation/synthetic_judge.py) is a rule for the synthetic benchmark, not
an LLM: a production site (DEBUG off) configured with it would publish X-ray grades no judge
gave. `manage.py check --deploy` (run in CI with DEBUG off) fails on it.
"""

from django.conf import settings
from django.core.checks import Error, Tags, register

from evaluation.synthetic_judge import SYNTHETIC_JUDGE_MODEL, is_synthetic


@register(Tags.security, deploy=True)
def synthetic_judge_not_in_production(app_configs=None, **kwargs):
    if settings.DEBUG or not is_synthetic(settings.XRAY_JUDGE_MODEL):
        return []
    return [Error(
        f"XRAY_JUDGE_MODEL is {SYNTHETIC_JUDGE_MODEL!r}, the synthetic judge of `make run` "
        "(a rule for the synthetic benchmark, not an LLM)",
        hint="configure a real OpenAI-compatible judge (XRAY_JUDGE_URL, XRAY_JUDGE_MODEL, "
             "XRAY_JUDGE_API_KEY), or leave XRAY_JUDGE_URL empty: X-ray trials then await it",
        id="evaluation.E001")]
