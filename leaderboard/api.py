"""Read-only JSON API (/api/v1/). Same columns and values as the CSV downloads.

Each operation's query string is validated by the serializer its schema documents
(config.api.query_params), so the bounds, enums and patterns of /api/schema/ are the ones
enforced."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.utils.decorators import method_decorator
from drf_spectacular.utils import extend_schema, extend_schema_serializer, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from config.api import (
    INVALID_QUERY,
    OFFSET_MAX,
    ApiView,
    QueryRefused,
    StrictBooleanField,
    StrictIntegerField,
    error,
    query_params,
    text_param,
)
from leaderboard import compare, history, selectors, tables
from leaderboard.caching import cached_response
from leaderboard.filters import EntryFilters, EntryFilterSet

# name@version (selectors.benchmark_version_get: the name a slug, the version any text); empty
# or absent: the default version.
BENCHMARK_PATTERN = r"^([-a-zA-Z0-9_]+@[^\x00]+)?$"
NOT_FOUND = error("no such benchmark version (or none registered yet)")


# Each column kind of leaderboard.tables as the API's field.
_FIELDS = {tables.INT: serializers.IntegerField, tables.FLOAT: serializers.FloatField,
           tables.BOOL: serializers.BooleanField, tables.TEXT: serializers.CharField,
           tables.DATE: serializers.DateField}


def row_serializer(spec: tables.TableSpec) -> type[serializers.Serializer]:
    """The serializer (and OpenAPI component) of one table's rows, from its declaration."""
    fields = {}
    for column in spec.columns:
        options = {"allow_null": True} if column.null else {}
        if column.help:
            options["help_text"] = column.help
        fields[column.name] = _FIELDS[column.kind](**options)
    serializer = type(f"{spec.component}Serializer", (serializers.Serializer,), fields)
    return extend_schema_serializer(component_name=spec.component)(serializer)


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
    as_of = serializers.DateField(
        required=False, help_text="YYYY-MM-DD: the board as it stood at the end of that day "
        "(its rows, ranks and levels, from the history of publishes, withdrawals and "
        "re-grades); rows in rank order, sort and q do not apply")


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
    """Agents, one page at a time (limit/offset, limit <= 1000), sorted and searched as the
    leaderboard page is (sort, order, q): by rank, the ranked ones, then those never ranked (a
    discrepancy: rank and tie_group null, ranked false, unranked_reason says why);
    /leaderboard.csv has every row."""

    OutputSerializer = row_serializer(tables.LEADERBOARD)

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
        if "as_of" in data:
            snapshot = history.board_as_of(bv, data["as_of"])
            rows = history.rows_filtered(snapshot.rows, filters) if snapshot else []
            return _page(request, len(rows), offset, limit, rows[offset:offset + limit])
        sort = data.get("sort", "rank")
        order = data.get("order", "desc" if sort == "success" else "asc")
        window = selectors.EntryWindow(
            sort=sort, descending=order == "desc", offset=offset, limit=limit,
            search=data.get("q", "").strip()[:100])
        entries, count = selectors.leaderboard_window(benchmark_version=bv, filters=filters,
                                                      window=window)
        return _page(request, count, offset, limit, [
            dict(zip(tables.LEADERBOARD.names, tables.LEADERBOARD.row(e), strict=True))
            for e in entries])


class CategoryListApi(_TableApi):
    table = "categories"

    OutputSerializer = row_serializer(tables.CATEGORIES)

    @_list_schema(FilterQuery, OutputSerializer(many=True))
    def get(self, request: Request) -> HttpResponse:
        return super().get(request)


class GroupListApi(_TableApi):
    table = "groups"

    OutputSerializer = row_serializer(tables.GROUPS)

    @_list_schema(FilterQuery, OutputSerializer(many=True))
    def get(self, request: Request) -> HttpResponse:
        return super().get(request)


class HarnessFamilyListApi(_TableApi):
    table = "harness-families"
    query = BenchmarkQuery

    OutputSerializer = row_serializer(tables.HARNESS_FAMILIES)

    @_list_schema(BenchmarkQuery, OutputSerializer(many=True),
                  "Every ranked agent of the version, by harness family: the entry filters "
                  "(harness, provider, verified) do not apply here.")
    def get(self, request: Request) -> HttpResponse:
        return super().get(request)


class TrialListApi(ApiView):
    """Trials of ranked agents, paginated with limit/offset (limit <= 5000)."""

    OutputSerializer = row_serializer(tables.TRIALS)

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


class CompareQuery(BenchmarkQuery):
    a = serializers.ListField(
        child=text_param(r"^[-a-zA-Z0-9_]+$"), required=False, max_length=compare.MAX_AGENTS,
        help_text="an agent's slug (its page's /agents/<slug>/), repeated: a=x&a=y")
    agents = text_param(r"^[-a-zA-Z0-9_,]*$",
                        help_text="agent slugs, comma-separated (with a=, at most "
                                  f"{compare.MAX_AGENTS} in all)")


def _compare_schema():
    cell = row_serializer(tables.COMPARE)
    category = inline_serializer("CompareCategory", {
        "category": serializers.CharField(), "success_rate": serializers.FloatField(),
        "ci_low": serializers.FloatField(), "ci_high": serializers.FloatField(),
        "successes": serializers.IntegerField(), "attempts": serializers.IntegerField()})
    agent = inline_serializer("CompareAgent", {
        **{c.name: _FIELDS[c.kind](allow_null=c.null, **({"help_text": c.help} if c.help
                                                          else {}))
           for c in tables.LEADERBOARD.columns if c.name in COMPARE_AGENT_COLUMNS},
        "categories": category}, many=True)
    pair = inline_serializer("ComparePair", {
        "better": serializers.CharField(help_text="agent slug ahead on the paired tasks"),
        "worse": serializers.CharField(),
        "tasks": serializers.IntegerField(help_text="tasks both agents have scored attempts on"),
        "difference": serializers.FloatField(help_text="mean per-task success share, better "
                                                       "minus worse (a fraction)"),
        "wins": serializers.IntegerField(), "losses": serializers.IntegerField(),
        "ties": serializers.IntegerField(),
        "p_value": serializers.FloatField(help_text="two-sided paired sign-flip permutation "
                                                    "test over the tasks"),
        "p_holm": serializers.FloatField(help_text="Holm-corrected over every pair compared"),
        "pairs": serializers.IntegerField(),
        "method": serializers.CharField(help_text="exact (convolution), exact (enumeration) "
                                                  "or Monte Carlo"),
        "draws": serializers.IntegerField(help_text="Monte Carlo draws (0 when exact)"),
        "seed": serializers.IntegerField(allow_null=True),
        "separable": serializers.BooleanField(help_text="p_holm below alpha"),
        "sentence": serializers.CharField()}, many=True)
    return inline_serializer("Comparison", {
        "benchmark": serializers.CharField(), "alpha": serializers.FloatField(),
        "agents": agent, "pairs": pair, "grid": cell(many=True)})


COMPARE_AGENT_COLUMNS = ("rank", "agent", "agent_slug", "harness", "model", "success_rate",
                         "ci_low", "ci_high", "successes", "attempts", "pass_at_3",
                         "reported_cost_per_attempt_usd", "reported_mean_duration_s",
                         "reported_mean_output_tokens", "tie_group", "verification_level",
                         "ranked", "reconstructed", "submission_id")


class CompareApi(ApiView):
    """Two to eight agents compared on one version, as the compare page shows them: each
    agent's figures and categories, every pair's paired test (Holm-corrected over the pairs)
    and the task grid (tasks where the agents differ first). An agent without a published
    result on the version is a 404, more than eight agents a 400; with fewer than two there
    are no pairs."""

    @extend_schema(parameters=[CompareQuery],
                   responses={200: _compare_schema(), 400: INVALID_QUERY, 404: NOT_FOUND})
    @method_decorator(cached_response)
    def get(self, request: Request) -> HttpResponse:
        data = query_params(CompareQuery, request)
        bv = getattr(request, "benchmark_version", None)
        try:
            bv = bv or selectors.benchmark_version_get(slug=data.get("benchmark", ""))
            slugs = compare.parse_agents(data.get("a", []), data.get("agents", ""))
        except selectors.UnknownBenchmark as exc:
            raise NotFound(str(exc)) from exc
        except compare.CompareRefused as exc:
            raise QueryRefused({"a": [str(exc)]}) from exc
        entries, tasks, missing = selectors.compare_entries(benchmark_version=bv,
                                                            agent_slugs=slugs)
        if missing:
            raise NotFound(f"no published result on {bv.slug} for: {', '.join(missing)}")
        found = compare.comparison(entries, tasks, alpha=settings.LEADERBOARD_TIE_ALPHA)
        return _json(comparison_payload(found, bv))


def comparison_payload(found: compare.Comparison, bv) -> dict:
    """What the compare API answers (the page's figures, tests and grid)."""
    names = tables.LEADERBOARD.names
    agents = []
    for e in found.entries:
        row = dict(zip(names, tables.LEADERBOARD.row(e), strict=True))
        agents.append({**{k: row[k] for k in COMPARE_AGENT_COLUMNS}, "categories": [
            {"category": ce.category.slug, "success_rate": round(ce.success_rate, 6),
             "ci_low": round(ce.ci_low, 6), "ci_high": round(ce.ci_high, 6),
             "successes": ce.successes, "attempts": ce.attempts} for ce in e.category_rows]})
    pairs = [{"better": t.better, "worse": t.worse, "tasks": t.tasks,
              "difference": round(t.difference, 6), "wins": t.wins, "losses": t.losses,
              "ties": t.ties, "p_value": t.p_value, "p_holm": t.p_adjusted, "pairs": t.pairs,
              "method": t.method, "draws": t.draws, "seed": t.seed, "separable": t.separable,
              "sentence": f["words"]} for f in found.findings for t in [f["test"]]]
    return {"benchmark": bv.slug, "alpha": found.alpha, "agents": agents, "pairs": pairs,
            "grid": list(tables.compare_table(found).dicts())}
