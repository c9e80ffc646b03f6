from allauth.account import views as allauth_views
from django.urls import include, path

from submissions import views

urlpatterns = [
    # allauth's pages (templates/account/), under the names the site's templates use; sign-up
    # goes through the per-address limit first. The rest of allauth (e-mail confirmation,
    # password reset, GitHub / Hugging Face when configured) follows under accounts/.
    path("accounts/signup/", views.sign_up, name="signup"),
    path("accounts/login/", allauth_views.login, name="login"),
    path("accounts/logout/", allauth_views.logout, name="logout"),
    path("accounts/", include("allauth.urls")),
    path("account/", views.show_account, name="account"),
    path("account/tokens/", views.create_token, name="token-create"),
    path("account/tokens/<int:token_id>/revoke/", views.revoke_token, name="token-revoke"),
    path("submit/", views.submit_agent, name="submit"),
    path("client/hab-submit.py", views.client_script, name="client-script"),
    path("pricing/", views.show_pricing, name="pricing"),
    path("submissions/<int:pk>/", views.show_submission, name="submission-status"),
    path("submissions/<int:pk>/trials/<int:trial_pk>/clear-screen/", views.clear_screen_flag,
         name="screen-clear"),
    path("submissions/<int:pk>/trials/<int:trial_pk>/infra/<slug:action>/",
         views.confirm_infra_error, name="infra-confirm"),
    path("submissions/<int:pk>/<slug:action>/", views.moderate_submission,
         name="submission-moderate"),
    path("moderation/", views.list_moderation, name="moderation"),
    path("submissions/<int:pk>/trials/<int:trial_pk>/trajectory/", views.show_trajectory,
         name="trajectory"),
    path("submissions/<int:pk>/trials/<int:trial_pk>/trajectory.json",
         views.download_trajectory, name="trajectory-download"),
    path("submissions/<int:pk>/trials/<int:trial_pk>/trial.zip", views.download_trial,
         name="trial-download"),
]
