import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.signals import setting_changed
from django.dispatch import receiver

from evaluation.models import Group
from tests.factories import (
    AgentFactory,
    BenchmarkTaskFactory,
    BenchmarkVersionFactory,
    CategoryFactory,
    published_submission,
)


@pytest.fixture
def small_benchmark(db):
    """5 tasks: imaging category (i1, i2), text categories t1 (t1a, t1b) and t2 (t2a)."""
    bv = BenchmarkVersionFactory(name="small", version="1.0")
    img = CategoryFactory(benchmark_version=bv, slug="img", group=Group.IMAGING, position=0)
    t1 = CategoryFactory(benchmark_version=bv, slug="txt-one", group=Group.TEXT, position=1)
    t2 = CategoryFactory(benchmark_version=bv, slug="txt-two", group=Group.TEXT, position=2)
    tasks = [
        BenchmarkTaskFactory(category=img, name="img/case_01", position=1),
        BenchmarkTaskFactory(category=img, name="img/case_02", position=2),
        BenchmarkTaskFactory(category=t1, name="txt-one/case_01", position=3),
        BenchmarkTaskFactory(category=t1, name="txt-one/case_02", position=4),
        BenchmarkTaskFactory(category=t2, name="txt-two/case_01", position=5),
    ]
    return bv, tasks


@pytest.fixture
def two_agents(small_benchmark):
    """Agent A: PPP FFF PPF FTE PPP (8/15). Agent B: PPI FFF FFF FFF FFF (2/14, one infra)."""
    bv, tasks = small_benchmark
    a = AgentFactory(display_name="Alpha (M1)", slug="alpha")
    b = AgentFactory(display_name="Beta (M2)", slug="beta")
    published_submission(a, tasks, ["PPP", "FFF", "PPF", "FTE", "PPP"])
    published_submission(b, tasks, ["PPI", "FFF", "FFF", "FFF", "FFF"])
    return bv, tasks, a, b


@receiver(setting_changed)
def _forget_pages_rendered_under_other_settings(*, setting, **kwargs):
    """Cached pages are keyed by the data's version, not by the settings that shaped them: a
    test that changes a LEADERBOARD_ setting must not be served a page an earlier test rendered
    with the old one."""
    if setting.startswith("LEADERBOARD_"):
        cache.clear()


def pytest_collection_modifyitems(items):
    """A test that reads the module's demo data needs the test database even when it asks for
    no `db` fixture itself: pytest-django creates only the databases the selected tests declare,
    so `pytest tests/leaderboard/test_pages.py -k harness` alone found no tables on SQLite."""
    for item in items:
        if "demo_bv" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("django_db"):
            item.add_marker(pytest.mark.django_db)


@pytest.fixture(scope="module")
def demo_bv(django_db_setup, django_db_blocker):
    """The paper's reconstructed data, loaded once per module and removed afterwards."""
    from leaderboard import selectors

    with django_db_blocker.unblock():
        call_command("load_demo", verbosity=0)
        yield selectors.benchmark_version_get(slug="healthagentbench@1.0")
        _delete_everything()


def _delete_everything():
    from evaluation.models import (
        AIModel,
        Agent,
        BenchmarkTask,
        BenchmarkVersion,
        Category,
        Harness,
    )
    from submissions.models import Submission

    Submission.objects.all().delete()
    BenchmarkTask.objects.all().delete()
    Category.objects.all().delete()
    BenchmarkVersion.objects.all().delete()
    Agent.objects.all().delete()
    AIModel.objects.all().delete()
    Harness.objects.all().delete()

