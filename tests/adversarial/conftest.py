"""The red-team suite shares the Harbor re-run modules' session set-up (the pinned Harbor CLI
and the images)."""

from tests.evaluation.conftest import harbor_ready  # noqa: F401 - a fixture, registered here
