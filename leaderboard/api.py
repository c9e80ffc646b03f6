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
from leaderboard import history, selectors, tables
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
