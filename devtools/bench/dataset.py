"""Generated benchmark data at scale: one benchmark version (7 categories, 54 tasks), N agents
with one published submission each, 3 attempts per task, inserted with PostgreSQL COPY.

Deterministic for a seed. Outcomes follow a logistic skill x difficulty model with a few
timeouts, agent errors and infrastructure errors, and every trial carries the site's re-grade
(``verified_reward``), a sprinkling of which disagrees with the claim, so the leaderboard's
"re-grade overrides the claim" path runs at scale too.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np
from django.db import connection, transaction
from django.utils import timezone

from evaluation.models import (
    AIModel,
    Agent,
    BenchmarkTask,
    BenchmarkVersion,
    Category,
    Group,
    Harness,
)
from submissions.models import Outcome, Submission, SubmissionStatus, Trial

# (slug, group, tasks): the paper's seven categories and 54 tasks.
CATEGORIES = [
    ("xray-report-correction", Group.IMAGING, 8),
    ("pathology-tumor-region", Group.IMAGING, 8),
    ("ct-abnormality-classification", Group.IMAGING, 8),
    ("ehr-data-quality-audit", Group.TEXT, 8),
    ("ehr-format-conversion", Group.TEXT, 8),
    ("ehr-event-modeling", Group.TEXT, 7),
    ("clinical-trial-matching", Group.TEXT, 7),
]
ATTEMPTS = 3
HARNESS_FAMILIES = ["codex", "claude-code", "copilot-cli", "terminus", "openhands", "aider",
                    "goose", "mini-swe"]
PROVIDERS = ["OpenAI", "Anthropic", "Google", "Meta", "Mistral", "DeepSeek"]
_OUTCOMES = [Outcome.PASSED, Outcome.FAILED, Outcome.TIMEOUT, Outcome.AGENT_ERROR,
             Outcome.INFRA_ERROR]


@dataclass(frozen=True)
class Generated:
    benchmark_version: BenchmarkVersion
    agents: int
    trials: int


def catalogue_create(*, name: str = "bench-scale") -> BenchmarkVersion:
    """The benchmark version, its categories and tasks (61 rows)."""
    bv = BenchmarkVersion.objects.create(name=name, version="1.0", title="bench_scale",
                                         attempts_per_task=ATTEMPTS, is_default=True)
    position = 0
    for i, (slug, group, n) in enumerate(CATEGORIES):
        cat = Category.objects.create(
            benchmark_version=bv, slug=slug, name=slug.replace("-", " ").capitalize(),
            group=group, modality="generated", data_source="generated", access="public",
            success_criterion="generated", position=i)
        for case in range(1, n + 1):
            position += 1
            BenchmarkTask.objects.create(benchmark_version=bv, category=cat,
                                         name=f"{slug}/case_{case:02d}", position=position)
    return bv


def _harnesses_and_models(n_agents: int) -> tuple[list[Harness], list[AIModel]]:
    harnesses = [
        Harness(slug=f"{fam}-v{v}", display_name=f"{fam.title()} v{v}", family=fam)
        for fam in HARNESS_FAMILIES for v in range(1, 4)
    ]
    n_models = max(6, min(300, n_agents // 10))
    models = [
        AIModel(slug=f"model-{m:03d}", display_name=f"Model {m // 10}.{m % 10}",
                provider=PROVIDERS[m % len(PROVIDERS)], family=f"Line {m % 17}",
                version_order=m)
        for m in range(n_models)
    ]
    return Harness.objects.bulk_create(harnesses), AIModel.objects.bulk_create(models)


def agents_create(*, n_agents: int, start: int = 0) -> list[Agent]:
    """n distinct agent configurations spread over the harnesses and models."""
    harnesses, models = list(Harness.objects.order_by("pk")), list(AIModel.objects.order_by("pk"))
    if not harnesses:
        harnesses, models = _harnesses_and_models(n_agents)
    agents = []
    for i in range(start, start + n_agents):
        h, m = harnesses[i % len(harnesses)], models[(i // len(harnesses)) % len(models)]
        agents.append(Agent(
            harness=h, model=m, harness_version=h.slug.rsplit("-v", 1)[1],
            settings={"run": i}, settings_digest=hashlib.sha256(str(i).encode()).hexdigest(),
            display_name=f"{h.display_name} ({m.display_name}) #{i}", slug=f"agent-{i:05d}",
        ))
    return Agent.objects.bulk_create(agents, batch_size=2000)


def submissions_create(*, benchmark_version: BenchmarkVersion, agents: list[Agent],
                       status: str = SubmissionStatus.PUBLISHED) -> list[Submission]:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    published = status == SubmissionStatus.PUBLISHED
    subs = [
        Submission(agent=a, benchmark_version=benchmark_version, status=status,
                   is_verified=i % 5 != 0, submitted_on=date(2026, 1, 1) + timedelta(days=i % 300),
                   published_at=base + timedelta(minutes=i) if published else None,
                   source="bench_scale", trials_total=162)
        for i, a in enumerate(agents)
    ]
    return Submission.objects.bulk_create(subs, batch_size=2000)


def _copy_constants(provided: set[str]) -> list[tuple[str, str]]:
    """COPY text of every other concrete column's model default (so added columns still load)."""
    out = []
    for f in Trial._meta.concrete_fields:
        if f.primary_key or f.column in provided:
            continue
        value = f.get_default()
        if value is None:
            text = r"\N"
        elif isinstance(value, bool):
            text = "t" if value else "f"
        elif isinstance(value, dict | list):
            text = "{}" if isinstance(value, dict) else "[]"
        else:
            text = str(value)
        out.append((f.column, text))
    return out


def trials_copy(*, submissions: list[Submission], tasks: list[BenchmarkTask], seed: int) -> int:
    """Insert 3 attempts of every task for every submission with COPY. Returns the row count."""
    rng = np.random.default_rng(seed)
    n_sub, n_task = len(submissions), len(tasks)
    skill = rng.uniform(-2.5, 1.5, size=n_sub)
    difficulty = rng.normal(0.0, 1.2, size=n_task)
    shape = (n_sub, n_task, ATTEMPTS)
    p_pass = 1 / (1 + np.exp(-(skill[:, None, None] - difficulty[None, :, None])))
    u = rng.uniform(size=shape)
    # 0 passed, 1 failed, 2 timeout, 3 agent error, 4 infrastructure error
    code = np.where(u < p_pass, 0, 1)
    other = rng.uniform(size=shape)
    code = np.where((code == 1) & (other < 0.04), 2, code)
    code = np.where((code == 1) & (other > 0.98), 3, code)
    code = np.where(rng.uniform(size=shape) < 0.004, 4, code)
    # The site's re-grade disagrees with a claimed pass now and then: the site's outcome is
    # then a failure, the claim stays beside it.
    verified = np.where(code == 0, np.where(rng.uniform(size=shape) < 0.003, 0.0, 1.0), 0.0)
    site = np.where((code == 0) & (verified < 1.0), 1, code)
    cost = np.round(rng.gamma(2.0, 0.4, size=shape), 4)
    duration = np.round(rng.gamma(3.0, 150.0, size=shape), 1)
    out_tokens = rng.integers(1_000, 60_000, size=shape)
    now = timezone.now().isoformat()
    provided = ["created_at", "updated_at", "submission_id", "benchmark_task_id", "attempt",
                "outcome", "success", "claimed_outcome", "claimed_success", "reward",
                "verified_reward", "cost_usd", "duration_s", "output_tokens", "input_tokens",
                "cached_tokens"]
    constants = _copy_constants(set(provided))
    columns = provided + [c for c, _ in constants]
    tail = "".join("\t" + t for _, t in constants)
    outcome_text = [str(o) for o in _OUTCOMES]
    sub_ids = [s.pk for s in submissions]
    task_ids = [t.pk for t in tasks]
    sql = f"COPY {Trial._meta.db_table} ({', '.join(columns)}) FROM STDIN"
    with transaction.atomic(), connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for i, sub_id in enumerate(sub_ids):
            buf = io.StringIO()
            for j, task_id in enumerate(task_ids):
                for k in range(ATTEMPTS):
                    c, o = int(code[i, j, k]), int(site[i, j, k])
                    buf.write(
                        f"{now}\t{now}\t{sub_id}\t{task_id}\t{k + 1}\t{outcome_text[o]}\t"
                        f"{'t' if o == 0 else 'f'}\t{outcome_text[c]}\t{'t' if c == 0 else 'f'}\t"
                        f"{1.0 if c == 0 else 0.0}\t"
                        f"{verified[i, j, k]}\t{cost[i, j, k]:.4f}\t{duration[i, j, k]}\t"
                        f"{out_tokens[i, j, k]}\t{out_tokens[i, j, k] * 12}\t"
                        f"{out_tokens[i, j, k] * 5}{tail}\n")
            copy.write(buf.getvalue())
    return n_sub * n_task * ATTEMPTS


def dataset_generate(*, n_agents: int, seed: int = 20261203) -> Generated:
    """The whole data set: catalogue, agents, published submissions and their trials."""
    with transaction.atomic():
        bv = catalogue_create()
        agents = agents_create(n_agents=n_agents)
        subs = submissions_create(benchmark_version=bv, agents=agents)
    tasks = list(bv.tasks.order_by("position"))
    n = trials_copy(submissions=subs, tasks=tasks, seed=seed)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Trial._meta.db_table}")
    return Generated(benchmark_version=bv, agents=n_agents, trials=n)


def dataset_find(*, name: str = "bench-scale") -> Generated:
    """The data set an earlier run generated and kept (``bench_scale --keep``)."""
    bv = BenchmarkVersion.objects.get(name=name)
    subs = Submission.objects.filter(benchmark_version=bv, status=SubmissionStatus.PUBLISHED)
    return Generated(benchmark_version=bv, agents=subs.count(),
                     trials=Trial.objects.filter(submission__in=subs).count())
