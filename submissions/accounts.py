"""The glue between the site's accounts and django-allauth / django-axes (settings: "Accounts").

Local accounts sign in once their e-mail address is confirmed; an account a maintainer made
(createsuperuser, the admin) has no allauth e-mail record and its address is vouched for. Every
sign-up records the address it came from (AccountOrigin), which limits sign-ups per address and
shows maintainers the accounts one address made. Failed sign-ins are counted by axes under the
name typed (user name or e-mail) and the client address; all three limits and the API throttles
read the client address the same way (client_address)."""

from __future__ import annotations

import logging
from datetime import timedelta

from allauth.account import forms as allauth_forms
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.app_settings import EmailVerificationMethod
from allauth.account.models import EmailAddress
from allauth.account.signals import user_signed_up
from django.conf import settings
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.timesince import timeuntil

logger = logging.getLogger(__name__)


def client_address(request: HttpRequest) -> str:
    """The client's address: the peer's, or with TRUSTED_PROXY_COUNT proxies in front the entry
    of X-Forwarded-For they vouch for (as DRF's throttles read it with NUM_PROXIES)."""
    proxies = settings.REST_FRAMEWORK.get("NUM_PROXIES") or 0
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [a.strip() for a in forwarded.split(",") if a.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    return request.META.get("REMOTE_ADDR", "") or "0.0.0.0"  # noqa: S104 - never bound, a key


def axes_username(request: HttpRequest, credentials: dict | None) -> str | None:
    """The account a sign-in attempt names: the user name or e-mail typed in allauth's `login`
    field (allauth passes it as `username` or `email`), lower-cased so case cannot dodge it."""
    credentials = credentials or {}
    typed = (credentials.get("username") or credentials.get("email")
             or request.POST.get("login") or request.POST.get("username"))
    return typed.strip().lower() if typed else None


def lockout_response(request: HttpRequest, original_response=None,
                     credentials: dict | None = None) -> HttpResponse:
    """axes' answer to a locked-out sign-in: the lockout page, 429 with Retry-After."""
    logger.warning("sign-in locked out: account %r, address %s",
                   axes_username(request, credentials), client_address(request))
    cooloff = timedelta(hours=settings.AXES_COOLOFF_TIME)
    response = render(request, "account/lockout.html", {
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cooloff": timeuntil(timezone.now() + cooloff + timedelta(seconds=1)),
    }, status=429)
    response["Retry-After"] = str(int(cooloff.total_seconds()))
    return response


class AccountAdapter(DefaultAccountAdapter):
    def get_client_ip(self, request: HttpRequest) -> str:
        # allauth's own limits (e-mail sending, password resets) key on the same address.
        return client_address(request)


class LoginForm(allauth_forms.LoginForm):
    def _clean_with_password(self, credentials: dict):
        cleaned = super()._clean_with_password(credentials)
        login = getattr(self, "_login", None)
        # Sign-ups (local or social) always have an allauth e-mail record; one without was made
        # by a maintainer, who vouched for the address, so it is not asked to confirm it.
        if login is not None and not EmailAddress.objects.filter(user_id=login.user.pk).exists():
            login.email_verification = EmailVerificationMethod.NONE
        return cleaned


@receiver(user_signed_up, dispatch_uid="submissions.accounts.record_origin")
def _record_origin(sender, request, user, **kwargs) -> None:
    from submissions.services import account_origin_record

    sociallogin = kwargs.get("sociallogin")
    method = sociallogin.account.provider if sociallogin is not None else "email"
    account_origin_record(user=user, address=client_address(request), method=method)
