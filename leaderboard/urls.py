from django.urls import path

from leaderboard import views

urlpatterns = [
    path("", views.show_leaderboard, name="leaderboard"),
    path("categories/", views.show_categories, name="categories"),
    path("imaging-vs-text/", views.show_groups, name="groups"),
    path("harness-effect/", views.show_harness_effect, name="harness"),
    path("cost/", views.show_cost, name="cost"),
    path("task-matrix/", views.show_task_matrix, name="task_matrix"),
    path("compare/", views.show_compare, name="compare"),
    path("compare.csv", views.download_compare_csv, name="compare-csv"),
    path("tasks/", views.list_tasks, name="tasks"),
    path("tasks/<slug:category>/<slug:case>/", views.show_task, name="task"),
    path("agents/<slug:slug>/", views.show_agent, name="agent"),
    path("agents/<slug:slug>/cite.<str:fmt>", views.show_citation, name="agent-cite"),
    path("charts/<slug:chart>.svg", views.download_chart_svg, name="chart-svg"),
    path("badge/<slug:slug>.svg", views.show_badge, name="badge"),
    path("card/leaderboard.png", views.show_leaderboard_card, name="card-leaderboard"),
    path("card/agents/<slug:slug>.png", views.show_agent_card, name="card-agent"),
    path("card/submissions/<int:pk>.png", views.show_submission_card, name="card-submission"),
    path("methods/", views.show_methods, name="methods"),
    path("changelog/", views.show_changelog, name="changelog"),
    path("downloads/", views.show_downloads, name="downloads"),
    path("contribute/", views.show_contribute, name="contribute"),
    path("healthz", views.healthz, name="healthz"),
    path("registry.json", views.show_registry, name="registry"),
    path("<slug:table>.csv", views.download_csv, name="csv"),
]
