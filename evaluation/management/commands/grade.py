"""Grade one attempt from the command line, without touching the database.

    python manage.py grade <category> --answer <file-or-dir> --submission <file-or-dir>

Prints one JSON object {"passed": true|false, "metrics": {...}} and exits 0 whenever the attempt
could be graded. Malformed or oversized input exits 2 with a message naming the file and the
problem; an unavailable X-ray judge exits 3 (an infrastructure error, never a failure).
The judge is configured by settings XRAY_JUDGE_URL, XRAY_JUDGE_MODEL, XRAY_JUDGE_API_KEY and
XRAY_JUDGE_TIMEOUT_S. The grading itself lives in evaluation.graders (no Django there).

The X-ray judge's votes go through the site's judgement cache (evaluation.judge.cache.CachedJudge,
the JudgeCacheEntry rows the verifiers use): grading the same output twice asks the judge once.
That needs the database; `--no-cache` asks the judge directly and touches no database (the
other categories never do).
"""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from evaluation.judge import cache as judging
from evaluation.graders import (
    CATEGORIES,
    JUDGE_CATEGORIES,
    ChatJudge,
    GradingInputError,
    JudgeUnavailable,
    grade,
)


class Command(BaseCommand):
    help = ("Grade one attempt of a HealthAgentBench category (the database only for the X-ray "
            "judge's cache; --no-cache for none).")
    # Grading needs no system checks (models may be mid-migration); the database only for the
    # X-ray judgement cache.
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("category", choices=CATEGORIES)
        parser.add_argument("--answer", required=True, help="hidden answer file or directory")
        parser.add_argument("--submission", required=True, help="submission file or directory")
        parser.add_argument("--no-cache", action="store_true",
                            help="ask the X-ray judge directly, without the judgement cache "
                                 "(no database)")

    def handle(self, *args, category, answer, submission, no_cache=False, **options):
        try:
            judge = _judge_from_settings() if category in JUDGE_CATEGORIES else None
            if judge is not None and not no_cache:
                judge = judging.CachedJudge(judge)
            result = grade(category, answer, submission, judge=judge)
        except DatabaseError as exc:
            raise CommandError(
                f"the judgement cache (database) is unavailable: {exc}; --no-cache asks the "
                "judge without it", returncode=3) from None
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
