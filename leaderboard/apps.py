from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "Leaderboard"

    def ready(self) -> None:
        # Imported here, as Django's signals documentation prescribes: connecting receivers needs
        # the app registry ready.
        from leaderboard import signals

        signals.connect()
