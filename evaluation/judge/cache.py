"""The X-ray LLM judge on the site: its configuration, the gateway a verifier gets, the cache.

The judge is the OpenAI-compatible endpoint of settings XRAY_JUDGE_URL / XRAY_JUDGE_MODEL /
XRAY_JUDGE_API_KEY (secret settings), asked with the versioned prompt of
evaluation/judge/xray_judge_prompt.txt (PROMPT_VERSION). A verifier that needs it gets a
gateway (evaluation/runner/judge/container.py) loaded with this task's cached replies; what the gateway
asked the upstream comes back in its log and is stored here (`judge_record`), so the second
re-grade of the same output is answered from the database: same votes, no upstream call.

Without XRAY_JUDGE_URL, `judge_for` raises JudgeNotConfigured: the caller records the trial as
"awaiting judge" (never an infrastructure error that would be retried forever).
"""

from __future__ import annotations

import urllib.parse
from collections import defaultdict
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F

from evaluation import runner
from evaluation.judge.client import PROMPT_VERSION, SYSTEM_PROMPT, ChatJudge, endpoint_url
from evaluation.judge.client import VOTES, parse_verdict
from evaluation.models import JudgeCacheEntry
from evaluation.runner.judge.server import cache_key

# Cached entries given to one verifier's gateway (the most recent first).
MAX_PRELOAD = 5000


class JudgeNotConfigured(Exception):
    """The task needs the LLM judge and none is configured (XRAY_JUDGE_URL is empty)."""


def task_needs_judge(task_dir: Path) -> bool:
    spec = runner.load_task_toml(task_dir)
    return "XRAY_JUDGE_URL" in ((spec.get("verifier") or {}).get("env") or {})


def judge_configured() -> bool:
    return bool((settings.XRAY_JUDGE_URL or "").strip())


def judge_identity() -> dict:
    """What a verdict records: the judge model and the prompt version."""
    return {"model": settings.XRAY_JUDGE_MODEL, "prompt_version": PROMPT_VERSION}


def _scope(task_dir: Path) -> str:
    return str((runner.load_task_toml(task_dir).get("task") or {}).get("name") or task_dir.name)


def judge_for(task_dir: Path, *, cached: bool = True) -> runner.JudgeGateway | None:
    """The gateway for a verifier of this task: None when the task needs no judge. Without
    `cached` (task validation, which runs without a database) it asks the upstream for all."""
    task_dir = Path(task_dir)
    if not task_needs_judge(task_dir):
        return None
    if not judge_configured():
        raise JudgeNotConfigured(
            "no X-ray judge is configured (XRAY_JUDGE_URL): awaiting judge; "
            "`manage.py judge_pending` re-grades once one is")
    model = settings.XRAY_JUDGE_MODEL
    rows = [] if not cached else (
        JudgeCacheEntry.objects
        .filter(scope=_scope(task_dir), prompt_version=PROMPT_VERSION, model=model)
        .order_by("-updated_at").values_list("key", "replies")[:MAX_PRELOAD])
    return runner.JudgeGateway(
        upstream_url=endpoint_url(settings.XRAY_JUDGE_URL), model=model,
        api_key=settings.XRAY_JUDGE_API_KEY, prompt_version=PROMPT_VERSION,
        system_prompt=SYSTEM_PROMPT, cache=dict(rows),
        timeout_s=settings.XRAY_JUDGE_TIMEOUT_S, network=settings.XRAY_JUDGE_EGRESS_NETWORK,
        ca_pem=runner.ca_bundle(settings.XRAY_JUDGE_CA_FILE)
        if urllib.parse.urlsplit(settings.XRAY_JUDGE_URL).scheme == "https" else b"")


def judge_record(gateway: runner.JudgeGateway, log: list[dict] | None, task_dir: Path) -> dict:
    """Store the replies a gateway got from the upstream and count the ones it served from
    the cache. Returns the verdict's judge record (model, prompt version, requests, hits)."""
    new: dict[str, dict[int, str]] = defaultdict(dict)
    hits: dict[str, int] = defaultdict(int)
    errors = 0
    for entry in log or []:
        key = entry.get("key")
        if not isinstance(key, str) or len(key) != 64:
            errors += 1
            continue
        if entry.get("hit"):
            hits[key] += 1
        elif isinstance(entry.get("content"), str) and isinstance(entry.get("index"), int):
            new[key][entry["index"]] = entry["content"]
        else:
            errors += 1
    scope = _scope(Path(task_dir))
    for key, replies in new.items():
        with transaction.atomic():
            JudgeCacheEntry.objects.bulk_create([JudgeCacheEntry(
                key=key, prompt_version=gateway.prompt_version, model=gateway.model,
                scope=scope, replies=[])], ignore_conflicts=True)
            row = JudgeCacheEntry.objects.select_for_update().get(key=key)
            stored = list(row.replies)
            for index in sorted(replies):
                if index == len(stored):  # the votes stay in order, without gaps
                    stored.append(replies[index])
            if stored != row.replies:
                JudgeCacheEntry.objects.filter(pk=row.pk).update(replies=stored)
    for key, n in hits.items():
        JudgeCacheEntry.objects.filter(key=key).update(hits=F("hits") + n)
    served = sum(hits.values())
    asked = sum(len(r) for r in new.values())
    return {"model": gateway.model, "prompt_version": gateway.prompt_version,
            "requests": served + asked + errors, "cache_hits": served, "upstream_calls": asked,
            "errors": errors}


def cache_hit_ratio(records: list[dict]) -> float | None:
    """Cache hits over judge requests, summed over verdicts' judge records."""
    requests = sum(r.get("requests", 0) for r in records)
    return None if not requests else sum(r.get("cache_hits", 0) for r in records) / requests


# The scope of judgements asked by `manage.py grade` (no task: answer files given by hand).
COMMAND_SCOPE = "manage.py grade"


class CachedJudge:
    """The judgement cache of the site's verifiers, for a judge asked in this process
    (`manage.py grade`): the n-th vote of a grading is the n-th stored reply of its key (the
    gateway's cache_key of prompt version, model, report and answer), and only the missing
    votes are asked upstream and stored, as the gateway does. So grading the same output twice
    asks the judge once, and a verifier's stored judgement answers the command too."""

    def __init__(self, judge: ChatJudge, *, scope: str = COMMAND_SCOPE):
        self.judge = judge
        self.scope = scope
        self.stats = {"requests": 0, "cache_hits": 0, "upstream_calls": 0}

    def vote(self, reference_findings, candidate_findings, injected_errors=(), n=VOTES):
        injected = list(injected_errors)
        key = cache_key(PROMPT_VERSION, self.judge.model, candidate_findings,
                        {"reference_findings": reference_findings, "injected_errors": injected})
        row = JudgeCacheEntry.objects.filter(key=key).first()
        stored = list(row.replies) if row is not None else []
        replies = stored[:n]
        new = [self.judge.reply(reference_findings, candidate_findings, injected)
               for _ in range(n - len(replies))]
        self.stats["requests"] += n
        self.stats["cache_hits"] += len(replies)
        self.stats["upstream_calls"] += len(new)
        if new:
            with transaction.atomic():
                JudgeCacheEntry.objects.bulk_create([JudgeCacheEntry(
                    key=key, prompt_version=PROMPT_VERSION, model=self.judge.model,
                    scope=self.scope, replies=[])], ignore_conflicts=True)
                locked = JudgeCacheEntry.objects.select_for_update().get(key=key)
                merged = list(locked.replies)
                merged += new[:max(0, n - len(merged))]
                JudgeCacheEntry.objects.filter(pk=locked.pk).update(replies=merged)
            replies = merged[:n]
        if stored[:n]:
            JudgeCacheEntry.objects.filter(key=key).update(hits=F("hits") + len(stored[:n]))
        return [parse_verdict(r) for r in replies]
