"""The entry filters every leaderboard page, CSV and API endpoint shares (django-filter).

`EntryFilterSet` parses `harness`, `provider` and `verified` from a query string (pages:
leaderboard/views.py, API: leaderboard/api.py) and applies them to leaderboard entries
(leaderboard/selectors.py). Values that do not parse filter nothing. `?benchmark=` is resolved
by selectors.benchmark_version_get.
"""

from __future__ import annotations

from dataclasses import dataclass

import django_filters
from django.db.models import QuerySet

from leaderboard.models import LeaderboardEntry

TRUE_VALUES = ("1", "true", "on")


@dataclass(frozen=True)
class EntryFilters:
    harness: str = ""
    provider: str = ""
    verified_only: bool = False


class EntryFilterSet(django_filters.FilterSet):
    harness = django_filters.CharFilter(field_name="agent__harness__slug",
                                        label="harness slug, e.g. codex")
    provider = django_filters.CharFilter(field_name="agent__model__provider", lookup_expr="iexact",
                                         label="model provider, e.g. OpenAI")
    # A checkbox ("1"), or true/on: anything else shows every entry.
    verified = django_filters.CharFilter(method="filter_verified",
                                         label="only verified submissions")

    class Meta:
        model = LeaderboardEntry
        fields: list[str] = []

    def filter_verified(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(verified=True) if value in TRUE_VALUES else queryset

    @classmethod
    def from_filters(cls, filters: EntryFilters, queryset: QuerySet) -> EntryFilterSet:
        return cls({"harness": filters.harness, "provider": filters.provider,
                    "verified": "1" if filters.verified_only else ""}, queryset=queryset)

    def entry_filters(self) -> EntryFilters:
        """The parsed values, for selectors, tables and the pages' filter form."""
        data = self.form.cleaned_data if self.form.is_valid() else {}
        return EntryFilters(harness=data.get("harness") or "",
                            provider=data.get("provider") or "",
                            verified_only=(data.get("verified") or "") in TRUE_VALUES)


def entry_filters(query) -> EntryFilters:
    """The entry filters of a query string (a QueryDict)."""
    return EntryFilterSet(query, queryset=LeaderboardEntry.objects.none()).entry_filters()
