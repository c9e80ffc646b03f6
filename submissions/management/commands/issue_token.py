from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from submissions.services import token_issue


class Command(BaseCommand):
    help = "Create the user if missing and print a new API token as the last line of output."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="a label for the token")
        parser.add_argument("--staff", action="store_true", help="make the user a maintainer")

    def handle(self, *args, username: str, name: str, staff: bool, **options):
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
        if staff and not user.is_staff:
            user.is_staff = True
        user.save()
        _token, raw = token_issue(user=user, name=name)
        self.stderr.write(f"{'created' if created else 'existing'} user {username}")
        self.stdout.write(raw)
