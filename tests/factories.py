"""factory_boy factories for the leaderboard and submissions models."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import factory

from evaluation.models import (
    AIModel,
    Agent,
    BenchmarkTask,
    BenchmarkVersion,
    Category,
    Group,
    Harness,
)
from submissions.models import Outcome, Submission, SubmissionStatus, Trial, site_outcome


class BenchmarkVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BenchmarkVersion
        django_get_or_create = ("name", "version")

    name = "testbench"
    version = factory.Sequence(lambda n: f"1.{n}")
    attempts_per_task = 3


class CategoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Category

    benchmark_version = factory.SubFactory(BenchmarkVersionFactory)
    slug = factory.Sequence(lambda n: f"category-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())
    group = Group.IMAGING
    modality = "synthetic modality"
    data_source = "synthetic"
    access = "public"
    success_criterion = "all right"
    position = factory.Sequence(int)


class BenchmarkTaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BenchmarkTask

    category = factory.SubFactory(CategoryFactory)
    benchmark_version = factory.LazyAttribute(lambda o: o.category.benchmark_version)
    name = factory.Sequence(lambda n: f"task/case_{n:02d}")
    position = factory.Sequence(int)


class HarnessFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Harness
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"harness-{n}")
    display_name = factory.LazyAttribute(lambda o: o.slug.title())
    family = factory.LazyAttribute(lambda o: o.slug)


class AIModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AIModel
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"model-{n}")
    display_name = factory.LazyAttribute(lambda o: o.slug.upper())
    provider = "TestAI"
    family = "Model"


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent

    harness = factory.SubFactory(HarnessFactory)
    model = factory.SubFactory(AIModelFactory)
    settings_digest = factory.Sequence(lambda n: f"{n:064d}")
    display_name = factory.LazyAttribute(
        lambda o: f"{o.harness.display_name} ({o.model.display_name})"
    )
    slug = factory.Sequence(lambda n: f"agent-{n}")


class SubmissionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Submission

    agent = factory.SubFactory(AgentFactory)
    benchmark_version = factory.SubFactory(BenchmarkVersionFactory)
    status = SubmissionStatus.PUBLISHED
    submitted_on = date(2026, 7, 1)
    published_at = factory.LazyFunction(lambda: datetime(2026, 7, 1, tzinfo=UTC))


class TrialFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Trial

    submission = factory.SubFactory(SubmissionFactory)
    benchmark_task = factory.SubFactory(BenchmarkTaskFactory)
    attempt = 1
    outcome = Outcome.PASSED
    success = factory.LazyAttribute(lambda o: o.outcome == Outcome.PASSED)
    claimed_outcome = factory.LazyAttribute(lambda o: o.outcome)
    claimed_success = factory.LazyAttribute(lambda o: o.success)
    reward = factory.LazyAttribute(lambda o: 1.0 if o.outcome == Outcome.PASSED else 0.0)
    cost_usd = Decimal("1.0000")
    duration_s = 600.0
    output_tokens = 10_000
    input_tokens = 100_000
    cached_tokens = 50_000


CODES = {"P": Outcome.PASSED, "F": Outcome.FAILED, "T": Outcome.TIMEOUT,
         "E": Outcome.AGENT_ERROR, "I": Outcome.INFRA_ERROR}


def published_submission(agent: Agent, tasks: list[BenchmarkTask], outcomes: list[str],
                         cost: Decimal = Decimal("1.0000"), duration_s: float = 600.0,
                         output_tokens: int = 10_000, infra_confirmed: bool = True,
                         **kwargs) -> Submission:
    """A published submission whose task i has attempts given by outcomes[i], e.g. "PFT".

    The codes are the claims; the site's outcome follows ``site_outcome`` without a re-grade.
    "I" is an infrastructure error the site confirmed unless ``infra_confirmed`` is False.
    """
    sub = SubmissionFactory(agent=agent, benchmark_version=tasks[0].benchmark_version, **kwargs)

    def site(c):
        return site_outcome(claimed=CODES[c], verified_reward=None,
                            infra_confirmed=infra_confirmed)

    Trial.objects.bulk_create([
        Trial(submission=sub, benchmark_task=t, attempt=i + 1, outcome=site(c),
              success=site(c) == Outcome.PASSED, claimed_outcome=CODES[c],
              claimed_success=c == "P", infra_confirmed=c == "I" and infra_confirmed,
              infra_confirmed_by="site" if c == "I" and infra_confirmed else "",
              infra_confirm_reason="test fixture" if c == "I" and infra_confirmed else "",
              flags=["infra_unconfirmed"] if c == "I" and not infra_confirmed else [],
              reward=(1.0 if c == "P" else 0.0) if c != "I" else None, cost_usd=cost,
              duration_s=duration_s, output_tokens=output_tokens)
        for t, codes in zip(tasks, outcomes, strict=True) for i, c in enumerate(codes)
    ])
    return sub
