"""Grade one attempt from the command line, without touching the database.

    python manage.py grade <category> --answer <file-or-dir> --submission <file-or-dir>

Prints one JSON object {"passed": true|false, "metrics": {...}} and exits 0 whenever the attempt
could be graded. Malformed or oversized input exits 2 with a message naming the file and the
problem; an unavailable X-ray judge exits 3 (an infrastructure error, never a failure).
The judge is configured by settings XRAY_JUDGE_URL, XRAY_JUDGE_MODEL, XRAY_JUDGE_API_KEY and
XRAY_JUDGE_TIMEOUT_S. The grading itself lives in evaluation.graders (no Django there).
"""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation.graders import (
    CATEGORIES,
    JUDGE_CATEGORIES,
    ChatJudge,
    GradingInputError,
    JudgeUnavailable,
    grade,
)


class Command(BaseCommand):
    help = "Grade one attempt of a HealthAgentBench category (no database access)."
    # Grading never needs the database or the system checks (models may be mid-migration).
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("category", choices=CATEGORIES)
        parser.add_argument("--answer", required=True, help="hidden answer file or directory")
        parser.add_argument("--submission", required=True, help="submission file or directory")

    def handle(self, *args, category, answer, submission, **options):
        try:
            judge = _judge_from_settings() if category in JUDGE_CATEGORIES else None
            result = grade(category, answer, submission, judge=judge)
        except GradingInputError as exc:
            raise CommandError(f"grading input error: {exc}", returncode=2) from None
        except JudgeUnavailable as exc:
            raise CommandError(
                f"judge unavailable (infrastructure error, not a failure): {exc}", returncode=3
            ) from None
        self.stdout.write(json.dumps(result.as_dict(), allow_nan=False, sort_keys=True))


def _judge_from_settings():
    url = getattr(settings, "XRAY_JUDGE_URL", "")
    if not url:
        return None  # the grader validates the input first, then reports JudgeUnavailable
    return ChatJudge(
        url,
        settings.XRAY_JUDGE_MODEL,
        api_key=settings.XRAY_JUDGE_API_KEY,
        timeout_s=settings.XRAY_JUDGE_TIMEOUT_S,
    )
