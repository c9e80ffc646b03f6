"""Read-only JSON API (/api/v1/). Same columns and values as the CSV downloads.

Each operation's query string is validated by the serializer its schema documents
(config.api.query_params), so the bounds, enums and patterns of /api/schema/ are the ones
enforced."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.utils.decorators import method_decorator
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from config.api import (
    INVALID_QUERY,
    OFFSET_MAX,
    ApiView,
    StrictBooleanField,
    StrictIntegerField,
    error,
    query_params,
    text_param,
)
from leaderboard import selectors, tables
from leaderboard.caching import cached_response
from leaderboard.filters import EntryFilters, EntryFilterSet

# name@version (selectors.benchmark_version_get: the name a slug, the version any text); empty
# or absent: the default version.
BENCHMARK_PATTERN = r"^([-a-zA-Z0-9_]+@[^\x00]+)?$"
NOT_FOUND = error("no such benchmark version (or none registered yet)")


def _label(name: str) -> str:
    return EntryFilterSet.base_filters[name].label


@extend_schema_serializer(component_name="BenchmarkQuery")
class BenchmarkQuery(serializers.Serializer):
    benchmark = text_param(
        BENCHMARK_PATTERN,
        help_text="name@version, e.g. healthagentbench@1.0 (absent or empty: the default "
                  "version); an unknown one is a 404")


class FilterQuery(BenchmarkQuery):
    """The entry filters (leaderboard.filters.EntryFilterSet, which the pages parse too)."""

    harness = text_param(help_text=_label("harness"))
    provider = text_param(help_text=_label("provider"))
    verified = StrictBooleanField(required=False, help_text=_label("verified"))


class LeaderboardQuery(FilterQuery):
    limit = StrictIntegerField(min_value=1, max_value=1000, required=False,
                               help_text="rows per page (default LEADERBOARD_PAGE_SIZE, 100)")
    offset = StrictIntegerField(min_value=0, max_value=OFFSET_MAX, required=False,
                                help_text="rows to skip (default 0)")
    sort = serializers.ChoiceField(sorted(selectors.SORTABLE), required=False,
                                   help_text="default rank")
    order = serializers.ChoiceField(["asc", "desc"], required=False,
                                    help_text="default desc for success, asc otherwise")
    q = text_param(help_text="search agent, harness, model (its first 100 characters)")


class TrialQuery(FilterQuery):
    limit = StrictIntegerField(min_value=1, max_value=5000, required=False,
                               help_text="rows per page (default 1000)")
    offset = StrictIntegerField(min_value=0, max_value=OFFSET_MAX, required=False,
                                help_text="rows to skip (default 0)")


def _params(request: Request, query: type[serializers.Serializer]):
    """(benchmark version, entry filters, validated query) of a request."""
    data = query_params(query, request)
    # The cache layer has looked the version up already (no second query).
    bv = getattr(request, "benchmark_version", None)
    try:
        bv = bv or selectors.benchmark_version_get(slug=data.get("benchmark", ""))
    except selectors.UnknownBenchmark as exc:
        raise NotFound(str(exc)) from exc
    filters = EntryFilters(harness=data.get("harness", ""), provider=data.get("provider", ""),
                           verified_only=data.get("verified", False))
    return bv, filters, data


def _json(payload) -> HttpResponse:
    """The payload rendered once, as DRF renders it, so the bytes can be cached."""
    return HttpResponse(JSONRenderer().render(payload), content_type="application/json")


def _list_schema(query: type[serializers.Serializer], ok, description: str = ""):
    return extend_schema(parameters=[query], description=description or None,
                         responses={200: ok, 400: INVALID_QUERY, 404: NOT_FOUND})


class _TableApi(ApiView):
    table: str = ""
    query: type[serializers.Serializer] = FilterQuery

    @method_decorator(cached_response)
    def get(self, request: Request) -> HttpResponse:
        bv, filters, _data = _params(request, self.query)
        table = tables.TABLES[self.table](bv, filters)
        return _json(list(table.dicts()))


class LeaderboardListApi(ApiView):
    """Ranked agents, one page at a time (limit/offset, limit <= 1000), sorted and searched as
    the leaderboard page is (sort, order, q); /leaderboard.csv has every row."""

    @extend_schema_serializer(component_name="LeaderboardRow")
    class OutputSerializer(serializers.Serializer):
        rank = serializers.IntegerField()
        agent = serializers.CharField()
        harness = serializers.CharField()
        model = serializers.CharField()
        success_rate = serializers.FloatField()
        ci_low = serializers.FloatField()
        ci_high = serializers.FloatField()
        successes = serializers.IntegerField()
        attempts = serializers.IntegerField()
        reported_cost_per_attempt_usd = serializers.FloatField(
            allow_null=True, help_text="mean USD per scored attempt, as the submission "
                                       "reported it (not measured by the site)")
        reported_mean_duration_s = serializers.FloatField(
            allow_null=True, help_text="mean seconds per scored attempt, as the submission "
                                       "reported it (not measured by the site)")
        reported_mean_output_tokens = serializers.FloatField(
            allow_null=True, help_text="mean output tokens per scored attempt, as the "
                                       "submission reported them (not measured by the site)")
        verified = serializers.BooleanField()
        tie_group = serializers.IntegerField()
        provider = serializers.CharField()
        infra_errors = serializers.IntegerField(help_text="= infra_errors_confirmed")
        coverage = serializers.FloatField()
        reported_cost_per_success_usd = serializers.FloatField(
            allow_null=True, help_text="total reported cost / successes (the cost as the "
                                       "submission reported it)")
        pass_at_3 = serializers.FloatField()
        pass_hat_3 = serializers.FloatField()
        reconstructed = serializers.BooleanField()
        date = serializers.DateField(allow_null=True)
        provenance = serializers.CharField()
        claimed_successes = serializers.IntegerField()
        flagged_trials = serializers.IntegerField()
        infra_errors_claimed = serializers.IntegerField(
            help_text="trials the submission reports as infrastructure errors")
        infra_errors_confirmed = serializers.IntegerField(
            help_text="of those, confirmed by the site (only these leave the denominator)")
        verification_level = serializers.CharField(
            help_text="verified | consistent | discrepancy | unverified | reconstructed (/methods/#verdicts)")
        regraded_trials = serializers.IntegerField(allow_null=True)
        reproduced_trials = serializers.IntegerField(allow_null=True)
        rerun_trials = serializers.IntegerField(allow_null=True)
        counted_trials = serializers.IntegerField(allow_null=True)
        passes_not_reproduced_or_rerun = serializers.IntegerField(allow_null=True)
        badge = serializers.CharField()
        agent_id = serializers.IntegerField(help_text="stable id of the agent")
        agent_slug = serializers.CharField(help_text="the agent page's /agents/<slug>/")
        submission_id = serializers.IntegerField(help_text="the ranked (latest published) "
                                                 "submission: /submissions/<id>/")

    PageSerializer = extend_schema_serializer(component_name="LeaderboardPage")(type(
        "LeaderboardPageSerializer", (serializers.Serializer,), {
            "count": serializers.IntegerField(help_text="agents matching the filters and search"),
            "next": serializers.URLField(allow_null=True, help_text="the next page, null on the last"),
            "previous": serializers.URLField(allow_null=True),
            "offset": serializers.IntegerField(), "limit": serializers.IntegerField(),
            "results": OutputSerializer(many=True)}))

    @_list_schema(LeaderboardQuery, PageSerializer)
    @method_decorator(cached_response)
    def get(self, request: Request) -> HttpResponse:
        bv, filters, data = _params(request, LeaderboardQuery)
        limit = data.get("limit", settings.LEADERBOARD_PAGE_SIZE)
        offset = data.get("offset", 0)
        sort = data.get("sort", "rank")
        order = data.get("order", "desc" if sort == "success" else "asc")
        window = selectors.EntryWindow(
            sort=sort, descending=order == "desc", offset=offset, limit=limit,
            search=data.get("q", "").strip()[:100])
        entries, count = selectors.leaderboard_window(benchmark_version=bv, filters=filters,
                                                      window=window)
        return _page(request, count, offset, limit, [
            dict(zip(tables.LEADERBOARD_COLUMNS, tables.leaderboard_row(e), strict=True))
            for e in entries])


class CategoryListApi(_TableApi):
    table = "categories"

    @extend_schema_serializer(component_name="CategoryRow")
    class OutputSerializer(serializers.Serializer):
        agent = serializers.CharField()
        category = serializers.CharField()
        group = serializers.CharField()
        successes = serializers.IntegerField()
        attempts = serializers.IntegerField()
        success_rate = serializers.FloatField()
        ci_low = serializers.FloatField()
        ci_high = serializers.FloatField()
        provenance = serializers.CharField()
        agent_id = serializers.IntegerField(help_text="stable id of the agent")
        submission_id = serializers.IntegerField(help_text="the ranked submission")

    @_list_schema(FilterQuery, OutputSerializer(many=True))
    def get(self, request: Request) -> HttpResponse:
        return super().get(request)


class GroupListApi(_TableApi):
    table = "groups"

    @extend_schema_serializer(component_name="GroupRow")
    class OutputSerializer(serializers.Serializer):
        agent = serializers.CharField()
        harness = serializers.CharField()
        group = serializers.CharField()
        macro_success_rate = serializers.FloatField()
        pooled_success_rate = serializers.FloatField()
        provenance = serializers.CharField()
        agent_id = serializers.IntegerField(help_text="stable id of the agent")
        submission_id = serializers.IntegerField(help_text="the ranked submission")

    @_list_schema(FilterQuery, OutputSerializer(many=True))
    def get(self, request: Request) -> HttpResponse:
        return super().get(request)


class HarnessFamilyListApi(_TableApi):
    table = "harness-families"
    query = BenchmarkQuery

    @extend_schema_serializer(component_name="HarnessFamilyRow")
    class OutputSerializer(serializers.Serializer):
        harness_family = serializers.CharField()
        agents = serializers.IntegerField()
        mean_success_rate = serializers.FloatField()
        pooled_success_rate = serializers.FloatField()
        imaging_macro_success_rate = serializers.FloatField(allow_null=True)
        text_macro_success_rate = serializers.FloatField(allow_null=True)
        imaging_pooled_success_rate = serializers.FloatField(allow_null=True)
        text_pooled_success_rate = serializers.FloatField(allow_null=True)

    @_list_schema(BenchmarkQuery, OutputSerializer(many=True),
                  "Every ranked agent of the version, by harness family: the entry filters "
                  "(harness, provider, verified) do not apply here.")
    def get(self, request: Request) -> HttpResponse:
        return super().get(request)


class TrialListApi(ApiView):
    """Trials of ranked agents, paginated with limit/offset (limit <= 5000)."""

    @extend_schema_serializer(component_name="TrialRow")
    class OutputSerializer(serializers.Serializer):
        agent = serializers.CharField()
        task = serializers.CharField()
        category = serializers.CharField()
        attempt = serializers.IntegerField()
        outcome = serializers.CharField(help_text="the site's outcome (counted by every aggregate)")
        success = serializers.BooleanField(help_text="the site's: outcome == passed")
        reported_cost_usd = serializers.FloatField(
            allow_null=True, help_text="USD as the submission reported it (computed from its "
                                       "reported tokens with the dated price table when it "
                                       "recorded none); not measured by the site")
        reported_duration_s = serializers.FloatField(
            allow_null=True, help_text="seconds, as the submission reported them")
        reported_output_tokens = serializers.IntegerField(
            allow_null=True, help_text="as the submission reported them")
        reported_input_tokens = serializers.IntegerField(
            allow_null=True, help_text="as the submission reported them (cached ones included)")
        reported_cached_tokens = serializers.IntegerField(
            allow_null=True, help_text="as the submission reported them")
        provenance = serializers.CharField()
        claimed_outcome = serializers.CharField(help_text="what the submitted run recorded")
        claimed_success = serializers.BooleanField()
        claimed_reward = serializers.FloatField(allow_null=True)
        verified_reward = serializers.FloatField(allow_null=True,
                                                 help_text="the site's re-grade (null: not re-graded)")
        verification_level = serializers.CharField(
            help_text=("re-run | reproduced | re-graded | claimed | reconstructed, strongest "
                       "first (/methods/#verification-levels)"))
        flags = serializers.CharField(help_text="integrity flags, ';'-separated "
                                                "(awaiting_judge: not scored, no X-ray judge)")
        submission = serializers.IntegerField()
        judge_model = serializers.CharField(
            help_text="the LLM judge model of the site's re-grade (X-ray; empty otherwise)")
        judge_prompt_version = serializers.CharField(
            help_text="the judge prompt's version id (X-ray; empty otherwise)")
        trial_id = serializers.IntegerField()
        agent_id = serializers.IntegerField()
        grader_version = serializers.CharField(
            help_text="<category>@<version> of the grader the site's score was graded with "
                      "(empty: not re-graded)")
        infra_confirmed = serializers.BooleanField(
            help_text="a claimed infrastructure error the site counts as one (left out of the "
                      "denominator); false for every other trial")
        infra_confirmed_by = serializers.CharField(
            help_text="site (its own re-attempt hit an infrastructure failure) | maintainer "
                      "| empty")
        infra_confirm_reason = serializers.CharField(help_text="why (public)")
        trajectory_judgement = serializers.CharField(
            help_text="the trajectory judge's reading of a counted pass: clean | suspicious | "
                      "hack | awaiting (no judge configured) | empty (not a counted pass)")
        trajectory_judge_model = serializers.CharField(help_text="its model (empty: none)")
        trajectory_judge_prompt_version = serializers.CharField(
            help_text="its prompt's version id (empty: none)")

    PageSerializer = extend_schema_serializer(component_name="TrialPage")(type(
        "TrialPageSerializer", (serializers.Serializer,), {
            "count": serializers.IntegerField(help_text="trials matching the filters, on every "
                                                        "page"),
            "next": serializers.URLField(allow_null=True,
                                         help_text="the next page, null on the last"),
            "previous": serializers.URLField(allow_null=True),
            "offset": serializers.IntegerField(), "limit": serializers.IntegerField(),
            "results": OutputSerializer(many=True)}))

    @_list_schema(TrialQuery, PageSerializer)
    @method_decorator(cached_response)
    def get(self, request: Request) -> HttpResponse:
        bv, filters, data = _params(request, TrialQuery)
        limit, offset = data.get("limit", 1000), data.get("offset", 0)
        rows = list(tables.trials_table(bv, filters, offset=offset, limit=limit).dicts())
        count = selectors.trial_count(benchmark_version=bv, filters=filters)
        return _page(request, count, offset, limit, rows)


def _page(request: Request, count: int, offset: int, limit: int, rows: list) -> HttpResponse:
    return _json({
        "count": count,
        "next": _page_url(request, offset + limit, limit) if offset + limit < count else None,
        "previous": _page_url(request, max(offset - limit, 0), limit) if offset else None,
        "offset": offset, "limit": limit, "results": rows,
    })


def _page_url(request: Request, offset: int, limit: int) -> str:
    """This request's absolute URL with another offset (filters kept), as DRF's paginators do."""
    query = request.query_params.copy()
    query["offset"], query["limit"] = str(offset), str(limit)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


class BenchmarkListApi(ApiView):
    @extend_schema_serializer(component_name="BenchmarkVersion")
    class OutputSerializer(serializers.Serializer):
        slug = serializers.CharField()
        title = serializers.CharField()
        attempts_per_task = serializers.IntegerField()
        reconstructed = serializers.BooleanField()

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response([
            {"slug": bv.slug, "title": bv.title, "attempts_per_task": bv.attempts_per_task,
             "reconstructed": bv.is_reconstructed}
            for bv in selectors.benchmark_version_list()
        ])
