from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "Leaderboard"

    def ready(self) -> None:
        from leaderboard import signals

        signals.connect()
