from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from submissions.services import TokenNameTaken, token_issue


class Command(BaseCommand):
    help = "Create the user if missing and print a new API token as the last line of output."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", help="a label for the token, unique among the user's "
                            "active tokens (default: cli, cli-2, ...)")
        parser.add_argument("--staff", action="store_true", help="make the user a maintainer")

    def handle(self, *args, username: str, name: str, staff: bool, **options):
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
        if staff and not user.is_staff:
            user.is_staff = True
        user.save()
        try:
            _token, raw = token_issue(user=user, name=name, base="cli")
        except TokenNameTaken as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"{'created' if created else 'existing'} user {username}")
        self.stdout.write(raw)
