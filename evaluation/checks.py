"""System checks of the evaluation app.

The synthetic judge (evaluation/judge/synthetic.py) is a rule for the synthetic benchmark, not
an LLM: a production site (DEBUG off) configured with it would publish X-ray grades no judge
gave. `manage.py check --deploy` (run in CI with DEBUG off) fails on it, on the synthetic
trajectory judge (TRAJECTORY_JUDGE_SYNTHETIC), and on the public
default of the re-run sample's secret (VERIFICATION_SAMPLE_SECRET). `manage.py check` fails on
a configured published-images record it cannot read (PUBLISHED_IMAGES_FILE: /registry.json and
intake would fail on it).
"""

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.core.checks import Warning as CheckWarning

from evaluation.judge.synthetic import SYNTHETIC_JUDGE_MODEL, is_synthetic
from evaluation.published import PublishedImagesError, published_tasks


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


@register(Tags.security, deploy=True)
def synthetic_trajectory_judge_not_in_production(app_configs=None, **kwargs):
    """make run's synthetic trajectory judge is a rule: a production site would publish
    trajectories no judge read."""
    if settings.DEBUG or not settings.TRAJECTORY_JUDGE_SYNTHETIC:
        return []
    return [Error(
        "TRAJECTORY_JUDGE_SYNTHETIC is on: the synthetic trajectory judge of `make run` (a "
        "rule, not an LLM) would judge the passes of try-out versions",
        hint="unset TRAJECTORY_JUDGE_SYNTHETIC (it defaults to DEBUG) and configure a real "
             "trajectory judge (TRAJECTORY_JUDGE_URL)",
        id="evaluation.E004")]


@register(Tags.security, deploy=True)
def sample_secret_not_default(app_configs=None, **kwargs):
    """The re-run sample is an HMAC under VERIFICATION_SAMPLE_SECRET: with the public default
    anyone could compute which tasks the site will re-run and be honest only on those."""
    if settings.VERIFICATION_SAMPLE_SECRET != settings.VERIFICATION_SAMPLE_SECRET_DEFAULT:
        return []
    return [Error(
        "VERIFICATION_SAMPLE_SECRET is the public development default: every submitter could "
        "predict which trials the site re-runs",
        hint="set VERIFICATION_SAMPLE_SECRET (or VERIFICATION_SAMPLE_SECRET_FILE) to a long "
             "random value kept private, e.g. `head -c 48 /dev/urandom | base64`",
        id="evaluation.E002")]


@register()
def published_images_readable(app_configs=None, **kwargs):
    """A configured record that is not there publishes nothing (a warning); one that is broken
    would make /registry.json and intake fail (an error)."""
    path = settings.PUBLISHED_IMAGES_FILE
    if not path:
        return []
    try:
        tasks = published_tasks()
    except PublishedImagesError as exc:
        return [Error(str(exc), hint="rewrite it with `IMAGE_REGISTRY=... make images`, or "
                      "unset PUBLISHED_IMAGES_FILE", id="evaluation.E003")]
    if not tasks:
        return [CheckWarning(f"PUBLISHED_IMAGES_FILE={path} is missing or names no task image: "
                             "/registry.json names none", id="evaluation.W001")]
    return []
