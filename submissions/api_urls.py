from django.urls import path

from submissions import api

urlpatterns = [
    path("submissions/", api.SubmissionCollectionApi.as_view(), name="api-submissions"),
    path("submissions/<int:pk>/", api.SubmissionDetailApi.as_view(), name="api-submission"),
]
