"""Print this evaluation worker's health (R12) and exit 1 when it is unhealthy."""

import json

from django.core.management.base import BaseCommand, CommandError

from evaluation.health import worker_health


class Command(BaseCommand):
    help = "Disk free, Docker engine, runc, base and task images: exit 1 when unhealthy."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **opts):
        report = worker_health()
        if opts["json"]:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            for check in report["checks"]:
                self.stdout.write(f"{'ok  ' if check['ok'] else 'FAIL'} {check['name']}: "
                                  f"{check['detail']}")
            for warning in report["warnings"]:
                self.stdout.write(f"WARN {warning}")
        if not report["healthy"]:
            raise CommandError("unhealthy: " + "; ".join(report["problems"]))
