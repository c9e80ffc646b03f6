from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class SubmissionsConfig(AppConfig):
    name = "submissions"
    verbose_name = "Submissions"

    def ready(self) -> None:
        # Uploads stream to this private folder; it must exist before the first request.
        Path(settings.FILE_UPLOAD_TEMP_DIR).mkdir(mode=0o700, parents=True, exist_ok=True)
        from submissions import schema  # noqa: F401  registers the OpenAPI auth extension
        from submissions import accounts  # noqa: F401  records each sign-up's address
