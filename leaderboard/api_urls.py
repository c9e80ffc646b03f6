from django.urls import path

from leaderboard import api

urlpatterns = [
    path("benchmarks/", api.BenchmarkListApi.as_view(), name="api-benchmarks"),
    path("leaderboard/", api.LeaderboardListApi.as_view(), name="api-leaderboard"),
    path("categories/", api.CategoryListApi.as_view(), name="api-categories"),
    path("groups/", api.GroupListApi.as_view(), name="api-groups"),
    path("harness-families/", api.HarnessFamilyListApi.as_view(), name="api-harness-families"),
    path("trials/", api.TrialListApi.as_view(), name="api-trials"),
    path("compare/", api.CompareApi.as_view(), name="api-compare"),
]
