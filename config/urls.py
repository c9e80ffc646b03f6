from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from config.api import ApiRoot, NotFoundApi

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a separate file: no inline script (CSP).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", ApiRoot.as_view(), name="api-root"),
    path("api/v1/", include("leaderboard.api_urls")),
    path("api/v1/", include("submissions.api_urls")),
    # Any other /api/.../ URL: a JSON 404 as every operation answers one (a path without its
    # final slash is left to APPEND_SLASH's redirect).
    re_path(r"^api/(?:.*/)?$", NotFoundApi.as_view()),
    path("", include("submissions.urls")),
    path("", include("leaderboard.urls")),
]
