from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/", include("leaderboard.api_urls")),
    path("api/v1/", include("submissions.api_urls")),
    path("", include("submissions.urls")),
    path("", include("leaderboard.urls")),
]
