from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        # Imported here, as Django's system-check documentation prescribes: registering checks
        # in ready() (the runner it reaches reads settings).
        from evaluation import checks  # noqa: F401  registers the deploy checks
