"""HTML pages and CSV downloads. Thin: parse the query string, call selectors, render."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from leaderboard import charts, selectors, tables
from leaderboard.csv_export import csv_response
from leaderboard.tables import PROVENANCE_NOTE

SORTABLE = {
    "rank": "rank", "success": "success_rate", "cost": "cost_per_attempt_usd",
    "time": "mean_duration_s", "tokens": "mean_output_tokens", "agent": "agent",
}


def _params(request: HttpRequest):
    """Benchmark version and filters from the query string (kept in every link). One query."""
    try:
        bv = selectors.benchmark_version_get(slug=request.GET.get("benchmark", ""))
    except selectors.UnknownBenchmark as exc:
        raise Http404(str(exc)) from exc
    filters = selectors.EntryFilters(
        harness=request.GET.get("harness", ""),
        provider=request.GET.get("provider", ""),
        verified_only=request.GET.get("verified") in ("1", "true", "on"),
    )
    return bv, filters


def _context(request: HttpRequest):
    """Parameters plus what every page's header needs: versions and filter choices."""
    bv, filters = _params(request)
    base = {
        "bv": bv,
        "filters": filters,
        "versions": selectors.benchmark_version_list(),
        "query": request.GET.urlencode(),
        "provenance_note": PROVENANCE_NOTE,
        "choices": selectors.filter_choices(benchmark_version=bv),
    }
    return bv, filters, base


def _sorted(entries: list, key: str, descending: bool) -> list:
    attr = SORTABLE.get(key, "rank")
    if attr == "agent":
        return sorted(entries, key=lambda e: e.agent.display_name.lower(), reverse=descending)
    present = [e for e in entries if getattr(e, attr) is not None]
    missing = [e for e in entries if getattr(e, attr) is None]
    return sorted(present, key=lambda e: getattr(e, attr), reverse=descending) + missing


@require_GET
def show_leaderboard(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    entries = selectors.leaderboard_rows(benchmark_version=bv, filters=filters)
    sort = request.GET.get("sort", "rank")
    order = request.GET.get("order", "desc" if sort in ("success",) else "asc")
    entries = _sorted(entries, sort, order == "desc")
    ctx.update({
        "entries": entries,
        "sort": sort, "order": order,
        "chart": charts.leaderboard_bar(sorted(entries, key=lambda e: e.rank)),
        "any_reconstructed": any(e.reconstructed for e in entries),
    })
    return render(request, "leaderboard/index.html", ctx)


@require_GET
def show_categories(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    categories, entries = selectors.category_matrix(benchmark_version=bv, filters=filters)
    rows = [(e, [e.category_results.get(c.slug) for c in categories]) for e in entries]
    ctx.update({"categories": categories, "rows": rows,
                "chart": charts.category_heatmap(categories, entries),
                "any_reconstructed": any(e.reconstructed for e in entries)})
    return render(request, "leaderboard/categories.html", ctx)


@require_GET
def show_groups(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    entries = selectors.leaderboard_rows(benchmark_version=bv, filters=filters)
    families = selectors.harness_family_aggregates(benchmark_version=bv)
    ctx.update({
        "entries": entries, "families": families,
        "agent_chart": charts.imaging_text_bars(
            [e.agent.display_name for e in entries], [e.imaging_macro for e in entries],
            [e.text_macro for e in entries], "Imaging vs text per agent (macro means)"),
        "family_chart": charts.imaging_text_bars(
            [f.label for f in families], [f.imaging_macro for f in families],
            [f.text_macro for f in families], "Imaging vs text per harness family"),
        "any_reconstructed": any(e.reconstructed for e in entries),
    })
    return render(request, "leaderboard/groups.html", ctx)


@require_GET
def show_harness_effect(request: HttpRequest) -> HttpResponse:
    bv, _filters, ctx = _context(request)
    same_model = selectors.same_model_across_harnesses(benchmark_version=bv)
    versions = selectors.versions_within_harness(benchmark_version=bv)
    ctx.update({
        "same_model": same_model, "versions": versions,
        "families": selectors.harness_family_aggregates(benchmark_version=bv),
        "harness_chart": charts.comparison_lines(
            same_model, "Same model, different harness", lambda e: e.agent.harness.display_name),
        "version_chart": charts.comparison_lines(
            versions, "Model versions within a harness", lambda e: e.agent.model.display_name),
        "any_reconstructed": any(e.reconstructed for r in same_model + versions
                                 for e in r.entries),
    })
    return render(request, "leaderboard/harness.html", ctx)


@require_GET
def show_cost(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    axis = request.GET.get("x", "cost")
    if axis not in charts.X_AXES:
        axis = "cost"
    entries = selectors.leaderboard_rows(benchmark_version=bv, filters=filters)
    frontier = {p[2] for p in charts.pareto_frontier(
        [(charts.axis_value(e, axis), e.success_rate, e.agent.display_name) for e in entries
         if charts.axis_value(e, axis) is not None])}
    ctx.update({"entries": entries, "axis": axis, "axes": charts.X_AXES,
                "frontier": frontier, "chart": charts.cost_scatter(entries, axis),
                "any_reconstructed": any(e.reconstructed for e in entries)})
    return render(request, "leaderboard/cost.html", ctx)


@require_GET
def show_task_matrix(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    tasks, entries = selectors.task_matrix(benchmark_version=bv, filters=filters)
    ctx.update({"tasks": tasks, "entries": entries,
                "any_reconstructed": any(e.reconstructed for e in entries)})
    return render(request, "leaderboard/task_matrix.html", ctx)


@require_GET
def list_tasks(request: HttpRequest) -> HttpResponse:
    bv, _filters, ctx = _context(request)
    ctx.update({"tasks": selectors.task_catalogue(benchmark_version=bv),
                "categories": selectors.categories_for(benchmark_version=bv),
                "any_reconstructed": bv.is_reconstructed})
    return render(request, "leaderboard/tasks.html", ctx)


@require_GET
def show_task(request: HttpRequest, category: str, case: str) -> HttpResponse:
    bv, _filters, ctx = _context(request)
    task = selectors.task_get(benchmark_version=bv, name=f"{category}/{case}")
    if task is None:
        raise Http404("no such task in this benchmark version")
    attempts = selectors.task_attempts(benchmark_task=task)
    ctx.update({"task": task, "attempts": attempts,
                "any_reconstructed": any(e.reconstructed for e, _ in attempts)})
    return render(request, "leaderboard/task.html", ctx)


@require_GET
def show_agent(request: HttpRequest, slug: str) -> HttpResponse:
    bv, _filters, ctx = _context(request)
    entry = selectors.entry_get(benchmark_version=bv, agent_slug=slug)
    if entry is None:
        raise Http404("this agent has no published result on this benchmark version")
    ctx.update({"entry": entry, "any_reconstructed": entry.reconstructed})
    return render(request, "leaderboard/agent.html", ctx)


@require_GET
def show_methods(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/methods.html", {})


@require_GET
def show_contribute(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/contribute.html",
                  {"repository_url": settings.REPOSITORY_URL})


@require_GET
def download_csv(request: HttpRequest, table: str) -> HttpResponse:
    builder = tables.TABLES.get(table)
    if builder is None:
        raise Http404("unknown table")
    bv, filters = _params(request)
    return csv_response(builder(bv, filters), f"{table}.csv")


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
