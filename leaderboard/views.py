"""HTML pages and CSV downloads. Thin: parse the query string, call selectors, render."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.conf import settings
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_safe

from leaderboard import (
    cards,
    chart_svg,
    charts,
    compare,
    csv_copy,
    history,
    selectors,
    sharing,
    simulation_results,
    simulation_robustness,
    tables,
)
from leaderboard.caching import cached_response, cached_site_response
from leaderboard.csv_export import csv_bytes_response, csv_response, csv_stream_response
from leaderboard.filters import entry_filters
from leaderboard.models import UNRANKED_TITLE
from leaderboard.tables import PROVENANCE_NOTE

# Tables built whole and cached (a row per agent or fewer); the per-trial and per-cell ones
# stream.
CACHED_TABLES = {"leaderboard", "categories", "groups", "harness-families", "tasks"}


def _params(request: HttpRequest):
    """Benchmark version and filters from the query string (kept in every link). One query,
    or none when the cache layer already looked the version up."""
    bv = getattr(request, "benchmark_version", None)
    try:
        bv = bv or selectors.benchmark_version_get(slug=request.GET.get("benchmark", ""))
    except selectors.UnknownBenchmark as exc:
        raise Http404(str(exc)) from exc
    return bv, entry_filters(request.GET)


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


@dataclass(frozen=True)
class Pager:
    """The window a list page shows, and the links to the others (filters and sort kept)."""

    first: int
    last: int
    total: int
    search: str
    show_all: bool
    previous_url: str = ""
    next_url: str = ""
    all_url: str = ""
    noun: str = "agents"


def _window(request: HttpRequest, page_size: int) -> selectors.EntryWindow:
    """Sort, search and page from the query string: ``page`` of ``page_size`` agents, or every
    agent with ``show=all``."""
    sort = request.GET.get("sort", "rank")
    order = request.GET.get("order", "desc" if sort == "success" else "asc")
    page = request.GET.get("page", "1")
    page = max(int(page), 1) if page.isdigit() else 1
    show_all = request.GET.get("show") == "all"
    return selectors.EntryWindow(
        sort=sort, descending=order == "desc", search=request.GET.get("q", "").strip()[:100],
        offset=0 if show_all else (page - 1) * page_size, limit=None if show_all else page_size)


def _pager(request: HttpRequest, window: selectors.EntryWindow, shown: int, total: int,
           param: str = "page", noun: str = "agents") -> Pager:
    def url(**changes) -> str:
        q = request.GET.copy()
        for k, v in changes.items():
            q.pop(k, None)
            if v is not None:
                q[k] = v
        return "?" + q.urlencode()

    page = window.offset // window.limit + 1 if window.limit else 1
    more = window.limit is not None and window.offset + shown < total
    return Pager(
        first=window.offset + 1 if shown else 0, last=window.offset + shown, total=total,
        search=window.search, show_all=window.limit is None, noun=noun,
        previous_url=url(**{param: str(page - 1) if page > 2 else None}) if page > 1 else "",
        next_url=url(**{param: str(page + 1)}) if more else "",
        all_url=(url(show="all", page=None, vpage=None)
                 if window.limit is not None and total > shown else ""),
    )


def _rows_window(request: HttpRequest, rows: list, param: str, noun: str) -> tuple[list, Pager]:
    """One page of grouped rows (``param`` names its page in the URL; ``show=all``, ``q``
    shared with the other sections of the page)."""
    size = settings.LEADERBOARD_GROUP_PAGE_SIZE
    page = request.GET.get(param, "1")
    page = max(int(page), 1) if page.isdigit() else 1
    show_all = request.GET.get("show") == "all"
    window = selectors.EntryWindow(search=request.GET.get("q", "").strip()[:100],
                                   offset=0 if show_all else (page - 1) * size,
                                   limit=None if show_all else size)
    if window.search:
        needle = window.search.lower()
        rows = [r for r in rows if needle in r.label.lower() or any(
            needle in e.agent.display_name.lower() for e in r.entries)]
    shown = rows if window.limit is None else rows[window.offset:window.offset + window.limit]
    return shown, _pager(request, window, len(shown), len(rows), param=param, noun=noun)


# Leaderboard columns a visitor can hide (``?hide=cost&hide=time``): key -> header.
TOGGLE_COLUMNS = {"tie": "Tie group", "harness": "Harness", "model": "Model",
                  "cost": "Reported cost / attempt", "time": "Reported mean time",
                  "tokens": "Reported mean output tokens",
                  "coverage": "Coverage", "status": "Status", "date": "Date"}


def _columns(request: HttpRequest) -> tuple[list[tuple[str, str, bool]], list[tuple[str, str]]]:
    """(key, header, hidden) of each toggle column, and the other query parameters the
    column form keeps (as hidden inputs)."""
    hidden = set(request.GET.getlist("hide"))
    keep = [(k, v) for k in request.GET if k not in ("hide", "page", "cols", "show_col")
            for v in request.GET.getlist(k)]
    return [(k, label, k in hidden) for k, label in TOGGLE_COLUMNS.items()], keep


def _as_of(request: HttpRequest):
    """The day of ``?as_of=`` (None without it); a malformed date is a 404 saying why."""
    if "as_of" not in request.GET:
        return None
    try:
        return history.parse_day(request.GET["as_of"])
    except history.BadDate as exc:
        raise Http404(str(exc)) from exc


def _show_board_as_of(request: HttpRequest, day) -> HttpResponse:
    bv, filters, ctx = _context(request)
    snapshot = history.board_as_of(bv, day)
    rows = history.rows_filtered(snapshot.rows, filters) if snapshot else []
    ctx.update({"as_of": day, "snapshot": snapshot, "first_day": history.first_day(bv),
                "ranked_rows": [r for r in rows if r["ranked"]],
                "unranked_rows": [r for r in rows if not r["ranked"]]})
    return render(request, "leaderboard/as_of.html", ctx)


@require_GET
@cached_response
def show_leaderboard(request: HttpRequest) -> HttpResponse:
    if (day := _as_of(request)) is not None:
        return _show_board_as_of(request, day)
    bv, filters, ctx = _context(request)
    window = _window(request, settings.LEADERBOARD_PAGE_SIZE)
    entries, total = selectors.leaderboard_window(benchmark_version=bv, filters=filters,
                                                  window=window, ranked=True)
    if "cols" in request.GET:
        # The column form without JavaScript: the shown columns become the canonical hide=...
        q = request.GET.copy()
        shown = set(q.getlist("show_col"))
        for k in ("cols", "show_col", "page"):
            q.pop(k, None)
        q.setlist("hide", [k for k in TOGGLE_COLUMNS if k not in shown])
        return HttpResponseRedirect(request.path + "?" + q.urlencode())
    columns, keep = _columns(request)
    ctx.update({
        "entries": entries, "pager": _pager(request, window, len(entries), total),
        "sort": window.sort, "order": "desc" if window.descending else "asc",
        "columns": columns, "column_keep": keep,
        "hidden_classes": " ".join(f"hide-{k}" for k, _, off in columns if off),
        "chart": charts.leaderboard_bar(sorted(entries, key=lambda e: e.rank)),
        "any_reconstructed": any(e.reconstructed for e in entries),
        "unranked": selectors.unranked_rows(benchmark_version=bv, filters=filters,
                                            search=window.search),
        "unranked_title": UNRANKED_TITLE,
        "rank_changes": history.rank_changes(bv),
        "rank_change_days": history.RANK_CHANGE_DAYS,
        "max_compare": compare.MAX_AGENTS,
    })
    return render(request, "leaderboard/index.html", ctx)


@require_GET
@cached_response
def show_categories(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    window = _window(request, settings.LEADERBOARD_PAGE_SIZE)
    categories, entries = selectors.category_matrix(benchmark_version=bv, filters=filters,
                                                    window=window)
    total = selectors.entry_count(benchmark_version=bv, filters=filters, search=window.search)
    rows = [(e, [e.category_results.get(c.slug) for c in categories]) for e in entries]
    ctx.update({"categories": categories, "rows": rows,
                "pager": _pager(request, window, len(entries), total),
                "chart": charts.category_heatmap(categories, entries),
                "any_reconstructed": any(e.reconstructed for e in entries)})
    return render(request, "leaderboard/categories.html", ctx)


@require_GET
@cached_response
def show_groups(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    window = _window(request, settings.LEADERBOARD_PAGE_SIZE)
    entries, total = selectors.leaderboard_window(benchmark_version=bv, filters=filters,
                                                  window=window)
    families = selectors.harness_family_aggregates(benchmark_version=bv)
    ctx.update({
        "entries": entries, "families": families,
        "agent_chart": charts.imaging_text_bars(
            [e.agent.display_name for e in entries], [e.imaging_macro for e in entries],
            [e.text_macro for e in entries]),
        "family_chart": charts.imaging_text_bars(
            [f.label for f in families], [f.imaging_macro for f in families],
            [f.text_macro for f in families]),
        "pager": _pager(request, window, len(entries), total),
        "any_reconstructed": any(e.reconstructed for e in entries),
    })
    return render(request, "leaderboard/groups.html", ctx)


@require_GET
@cached_response
def show_harness_effect(request: HttpRequest) -> HttpResponse:
    bv, _filters, ctx = _context(request)
    # Windowed by model (and by harness x model line), page sizes in the URL: at 10,000 agents
    # the whole comparison is megabytes. The CSVs keep every agent.
    same_model, same_pager = _rows_window(
        request, selectors.same_model_across_harnesses(benchmark_version=bv), "page", "models")
    versions, versions_pager = _rows_window(
        request, selectors.versions_within_harness(benchmark_version=bv), "vpage",
        "harness · model lines")
    ctx.update({
        "same_model": same_model, "versions": versions, "same_pager": same_pager,
        "versions_pager": versions_pager, "search": same_pager.search,
        "families": selectors.harness_family_aggregates(benchmark_version=bv),
        "harness_chart": charts.comparison_dots(same_model, lambda e: e.agent.harness.display_name),
        "version_chart": charts.comparison_dots(versions, lambda e: e.agent.model.display_name),
        "any_reconstructed": any(e.reconstructed for r in same_model + versions
                                 for e in r.entries),
    })
    return render(request, "leaderboard/harness.html", ctx)


@require_GET
@cached_response
def show_cost(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    axis = _cost_axis(request)
    window = _window(request, settings.LEADERBOARD_PAGE_SIZE)
    shown, total = selectors.leaderboard_window(benchmark_version=bv, filters=filters,
                                                window=window)
    # The chart and its Pareto frontier cover every agent; the table one window of them.
    entries = selectors.leaderboard_rows(benchmark_version=bv, filters=filters)
    # A row without the figure (0 or missing: nothing reported) is listed, never on it.
    frontier = charts.frontier_names(entries, axis)
    rows = [(e, charts.has_figure(charts.axis_value(e, axis))) for e in shown]
    ctx.update({"entries": shown, "rows": rows, "axis": axis, "axes": charts.X_AXES,
                "no_figure": charts.NO_FIGURE[axis],
                "pager": _pager(request, window, len(shown), total),
                "frontier": frontier, "chart": charts.cost_scatter(entries, axis),
                "chart_title": charts.cost_title(axis),
                "any_reconstructed": any(e.reconstructed for e in entries)})
    return render(request, "leaderboard/cost.html", ctx)


def _cost_axis(request: HttpRequest) -> str:
    axis = request.GET.get("x", "cost")
    return axis if axis in charts.X_AXES else "cost"


# Each chart a page draws, rebuilt from the page's own query string for its SVG download:
# chart id -> (page's URL name, builder(request, bv, filters) -> (figure, title, whether it
# shows reconstructed rows)). The same selectors and windows as the page, so the file is the
# chart the reader was looking at.
def _recon(entries) -> bool:
    return any(e.reconstructed for e in entries)


def _lb_figure(request, bv, filters):
    entries, _ = selectors.leaderboard_window(
        benchmark_version=bv, filters=filters,
        window=_window(request, settings.LEADERBOARD_PAGE_SIZE), ranked=True)
    return (charts.leaderboard_bar(sorted(entries, key=lambda e: e.rank)),
            "Success rate with its 95% task-clustered interval", _recon(entries))


def _categories_figure(request, bv, filters):
    categories, entries = selectors.category_matrix(
        benchmark_version=bv, filters=filters,
        window=_window(request, settings.LEADERBOARD_PAGE_SIZE))
    return (charts.category_heatmap(categories, entries), "Success rate by category",
            _recon(entries))


def _agents_figure(request, bv, filters):
    entries, _ = selectors.leaderboard_window(
        benchmark_version=bv, filters=filters,
        window=_window(request, settings.LEADERBOARD_PAGE_SIZE))
    return (charts.imaging_text_bars([e.agent.display_name for e in entries],
                                     [e.imaging_macro for e in entries],
                                     [e.text_macro for e in entries]),
            "Imaging vs text per agent (macro means)", _recon(entries))


def _families_figure(request, bv, filters):
    families = selectors.harness_family_aggregates(benchmark_version=bv)
    return (charts.imaging_text_bars([f.label for f in families],
                                     [f.imaging_macro for f in families],
                                     [f.text_macro for f in families]),
            "Imaging vs text per harness family (macro means)", False)


def _harness_figure(request, bv, filters):
    rows, _ = _rows_window(request, selectors.same_model_across_harnesses(benchmark_version=bv),
                           "page", "models")
    return (charts.comparison_dots(rows, lambda e: e.agent.harness.display_name),
            "Success rate of one model under each harness (dots with 95% intervals)",
            _recon([e for r in rows for e in r.entries]))


def _versions_figure(request, bv, filters):
    rows, _ = _rows_window(request, selectors.versions_within_harness(benchmark_version=bv),
                           "vpage", "harness · model lines")
    return (charts.comparison_dots(rows, lambda e: e.agent.model.display_name),
            "Model versions within a harness (dots with 95% intervals)",
            _recon([e for r in rows for e in r.entries]))


def _cost_figure(request, bv, filters):
    axis = _cost_axis(request)
    entries = selectors.leaderboard_rows(benchmark_version=bv, filters=filters)
    return charts.cost_scatter(entries, axis), charts.cost_title(axis), _recon(entries)


CHART_FIGURES = {
    "lb-chart": ("leaderboard", _lb_figure), "cat-chart": ("categories", _categories_figure),
    "agent-chart": ("groups", _agents_figure), "family-chart": ("groups", _families_figure),
    "harness-chart": ("harness", _harness_figure), "version-chart": ("harness", _versions_figure),
    "cost-chart": ("cost", _cost_figure),
}


@require_GET
def download_chart_svg(request: HttpRequest, chart: str) -> HttpResponse:
    """One chart as a standalone SVG file: its title, and the site's name, the benchmark
    version, the date and the page's permalink under it."""
    if chart not in CHART_FIGURES:
        raise Http404("unknown chart")
    page, build = CHART_FIGURES[chart]
    bv, filters = _params(request)
    fig, title, reconstructed = build(request, bv, filters)
    query = request.GET.urlencode()
    permalink = request.build_absolute_uri(reverse(page)) + (f"?{query}" if query else "")
    footer = (f"HealthAgentBench leaderboard · {bv.slug} · {timezone.now():%Y-%m-%d} · "
              f"{permalink}")
    if reconstructed:
        footer += " · includes the paper's reconstructed rows (not real runs)"
    svg = chart_svg.render(fig, chart_id=chart, standalone=True, heading=title, footer=footer)
    response = HttpResponse('<?xml version="1.0" encoding="UTF-8"?>\n' + svg,
                            content_type="image/svg+xml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{chart}-{bv.slug}.svg"'
    return response


@require_GET
@cached_response
def show_task_matrix(request: HttpRequest) -> HttpResponse:
    bv, filters, ctx = _context(request)
    window = _window(request, settings.LEADERBOARD_MATRIX_PAGE_SIZE)
    tasks, entries = selectors.task_matrix(benchmark_version=bv, filters=filters, window=window)
    total = selectors.entry_count(benchmark_version=bv, filters=filters, search=window.search)
    ctx.update({"tasks": tasks, "entries": entries,
                "pager": _pager(request, window, len(entries), total),
                "any_reconstructed": any(e.reconstructed for e in entries)})
    return render(request, "leaderboard/task_matrix.html", ctx)


@require_GET
@cached_response
def list_tasks(request: HttpRequest) -> HttpResponse:
    bv, _filters, ctx = _context(request)
    ctx.update({"tasks": selectors.task_catalogue(benchmark_version=bv),
                "categories": selectors.categories_for(benchmark_version=bv),
                "any_reconstructed": bv.is_reconstructed})
    return render(request, "leaderboard/tasks.html", ctx)


@require_GET
@cached_response
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
@cached_response
def show_agent(request: HttpRequest, slug: str) -> HttpResponse:
    bv, _filters, ctx = _context(request)
    entry = selectors.entry_get(benchmark_version=bv, agent_slug=slug)
    if entry is None:
        raise Http404("this agent has no published result on this benchmark version")
    ctx.update({"entry": entry, "any_reconstructed": entry.reconstructed,
                "history": selectors.score_history(benchmark_version=bv,
                                                   agent_id=entry.agent_id),
                "share": _sharing(request, bv, entry)})
    return render(request, "leaderboard/agent.html", ctx)


def _sharing(request: HttpRequest, bv, entry) -> dict:
    """The badge's address and embed snippets, and the citation, of an agent page."""
    query = f"?benchmark={quote(bv.slug, safe='@')}"
    page = request.build_absolute_uri(reverse("agent", args=[entry.agent.slug])) + query
    badge = request.build_absolute_uri(reverse("badge", args=[entry.agent.slug])) + query
    facts = sharing.citation_facts(entry, benchmark_slug=bv.slug, url=page)
    return {"badge_url": badge, "page_url": page,
            "badge_markdown": f"[![{sharing.LABEL} {bv.slug}]({badge})]({page})",
            "bibtex": sharing.bibtex(facts), "cff": sharing.cff(facts)}


@require_GET
@cached_response
def show_badge(request: HttpRequest, slug: str) -> HttpResponse:
    """An agent's SVG badge on one benchmark version (rate, interval, level: the site's own
    finding), cached and revalidated with the version's aggregates. An agent without a
    published result there gets a "no published result" badge with a 404."""
    bv, _filters = _params(request)
    entry = selectors.entry_get(benchmark_version=bv, agent_slug=slug)
    svg = (sharing.entry_badge(entry, bv.slug) if entry is not None
           else sharing.missing_badge(bv.slug))
    return HttpResponse(svg, content_type="image/svg+xml; charset=utf-8",
                        status=200 if entry is not None else 404)


def _png(data: bytes, status: int = 200) -> HttpResponse:
    return HttpResponse(data, content_type="image/png", status=status)


@require_GET
@cached_response
def show_leaderboard_card(request: HttpRequest) -> HttpResponse:
    """The leaderboard's link-preview image (Open Graph): its first five rows."""
    bv, _filters = _params(request)
    return _png(cards.leaderboard_card(selectors.top_entries(benchmark_version=bv), bv.slug))


@require_GET
@cached_response
def show_agent_card(request: HttpRequest, slug: str) -> HttpResponse:
    """An agent page's link-preview image: its rate, interval, rank and level."""
    bv, _filters = _params(request)
    entry = selectors.entry_get(benchmark_version=bv, agent_slug=slug)
    if entry is None:
        raise Http404("this agent has no published result on this benchmark version")
    return _png(cards.agent_card(entry, bv.slug))


@require_GET
def show_submission_card(request: HttpRequest, pk: int) -> HttpResponse:
    """A published submission's link-preview image (its leaderboard row's figures); a 404 for
    any other submission, which is not public."""
    entry = selectors.submission_entry(submission_id=pk)
    if entry is None:
        raise Http404("no published submission")
    response = _png(cards.agent_card(entry, entry.benchmark_version.slug,
                                     note=f"submission {pk}"))
    response["Cache-Control"] = "public, max-age=300"
    return response


@require_GET
@cached_response
def show_citation(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    """The agent page's citation as a file: BibTeX (.bib) or Citation File Format (.cff)."""
    if fmt not in ("bib", "cff"):
        raise Http404("a citation is cite.bib or cite.cff")
    bv, _filters = _params(request)
    entry = selectors.entry_get(benchmark_version=bv, agent_slug=slug)
    if entry is None:
        raise Http404("this agent has no published result on this benchmark version")
    shared = _sharing(request, bv, entry)
    body, kind = ((shared["bibtex"], "application/x-bibtex") if fmt == "bib"
                  else (shared["cff"], "application/x-yaml"))
    response = HttpResponse(body, content_type=f"{kind}; charset=utf-8")
    name = "CITATION.cff" if fmt == "cff" else f"{slug}.bib"
    response["Content-Disposition"] = f'inline; filename="{name}"'
    return response


def _compare(request: HttpRequest):
    """(benchmark version, comparison) of a compare request; the agents are ``a=<slug>``
    (repeated: the leaderboard's ticked rows) and/or ``agents=<slug>,<slug>``. An unknown
    agent is a 404; more than MAX_AGENTS a CompareRefused. Fewer than two: no pairs."""
    bv, _filters = _params(request)
    slugs = compare.parse_agents(request.GET.getlist("a"), request.GET.get("agents", ""))
    entries, tasks, missing = selectors.compare_entries(benchmark_version=bv, agent_slugs=slugs)
    if missing:
        raise Http404(f"no published result on {bv.slug} for: {', '.join(missing)}")
    return bv, compare.comparison(entries, tasks, alpha=settings.LEADERBOARD_TIE_ALPHA)


@require_GET
@cached_response
def show_compare(request: HttpRequest) -> HttpResponse:
    """Chosen agents side by side: figures, categories, the paired tests, the task grid."""
    ctx = {"query": "", "max_agents": compare.MAX_AGENTS,
           "alpha": settings.LEADERBOARD_TIE_ALPHA}
    try:
        bv, found = _compare(request)
    except compare.CompareRefused as exc:
        bv, _filters = _params(request)
        return render(request, "leaderboard/compare.html",
                      {**ctx, "bv": bv, "refused": str(exc)}, status=400)
    canonical = _compare_query(bv, [e.agent.slug for e in found.entries])
    ctx.update({
        "bv": bv, "cmp": found if found.tests else None, "entries": found.entries,
        "query": f"benchmark={quote(bv.slug, safe='@')}",
        "categories": compare.category_table(found.entries),
        "permalink": f"{request.build_absolute_uri(reverse('compare'))}?{canonical}",
        "canonical_query": canonical,
        "any_reconstructed": any(e.reconstructed for e in found.entries),
    })
    return render(request, "leaderboard/compare.html", ctx)


def _compare_query(bv, slugs: list[str]) -> str:
    """The canonical query of a comparison: the version, then each agent in rank order."""
    return "&".join([f"benchmark={quote(bv.slug, safe='@')}",
                     *(f"a={quote(s)}" for s in slugs)])


@require_safe
@cached_response
def download_compare_csv(request: HttpRequest) -> HttpResponse:
    """The compare page's grid as CSV: one row per task and agent (a header alone when no
    agent is named)."""
    try:
        bv, found = _compare(request)
    except compare.CompareRefused as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    return csv_bytes_response(tables.compare_table(found), "compare.csv")


@require_GET
def show_downloads(request: HttpRequest) -> HttpResponse:
    """Every CSV, its columns and stable ids, and the outcome letters' legend."""
    return render(request, "leaderboard/downloads.html", {
        "tables": [(name, tables.COLUMNS_OF[name]) for name in tables.TABLES],
        "letters": tables.OUTCOME_LETTERS,
    })


@require_GET
@cached_site_response
def show_changelog(request: HttpRequest) -> HttpResponse:
    """Benchmark versions (task sets) and the site's data changes: publishes, withdrawals."""
    return render(request, "leaderboard/changelog.html", {
        "versions": selectors.changelog_versions(),
        "events": selectors.changelog_events(limit=settings.LEADERBOARD_CHANGELOG_EVENTS),
        "event_limit": settings.LEADERBOARD_CHANGELOG_EVENTS,
        "reconstructed": selectors.reconstructed_loads(),
    })


@require_GET
def show_methods(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/methods.html",
                  {**selectors.screen_rules_described(), **selectors.verification_described(),
                   "sim": simulation_results.committed_table(),
                   "rerun_sim": simulation_results.committed_rerun_table(),
                   "compare_sim": simulation_results.committed_compare_table(),
                   "robust": simulation_robustness.committed_robustness()})


@require_GET
def show_contribute(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/contribute.html",
                  {"repository_url": settings.REPOSITORY_URL})


@require_safe  # HEAD too: download managers and link checkers ask before they fetch
def download_csv(request: HttpRequest, table: str) -> HttpResponse:
    if table not in tables.TABLES:
        raise Http404("unknown table")
    if (day := _as_of(request)) is not None:
        if table != "leaderboard":
            raise Http404("as_of applies to the leaderboard table only")
        bv, filters = _params(request)
        snapshot = history.board_as_of(bv, day)
        rows = history.rows_filtered(snapshot.rows, filters) if snapshot else []
        return csv_response(tables.Table("leaderboard", tables.LEADERBOARD.names,
                                         [tuple(r.values()) for r in rows]),
                            f"leaderboard-as-of-{day.isoformat()}.csv")
    if table in CACHED_TABLES:
        return _download_cached_csv(request, table)
    bv, filters = _params(request)
    if table in csv_copy.COPY_TABLES and csv_copy.supported():
        # PostgreSQL formats and streams the large tables itself (COPY); SQLite uses Python.
        columns, build_sql = csv_copy.COPY_TABLES[table]
        return csv_stream_response(csv_copy.copy_lines(columns, *build_sql(bv, filters)),
                                   f"{table}.csv")
    return csv_response(tables.TABLES[table](bv, filters), f"{table}.csv")


@cached_response
def _download_cached_csv(request: HttpRequest, table: str) -> HttpResponse:
    bv, filters = _params(request)
    return csv_bytes_response(tables.TABLES[table](bv, filters), f"{table}.csv")


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


@require_GET
def show_registry(request: HttpRequest) -> JsonResponse:
    """Harbor's registry format (a JSON array of datasets) for the public benchmark versions:
    those whose task packages all live in this repository (licensed sources are never listed),
    naming each task's published image when there is one (docs/images.md)."""
    return JsonResponse(selectors.registry_datasets(), safe=False)
