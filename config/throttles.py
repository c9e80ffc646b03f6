"""The API's rate limits, named in settings.REST_FRAMEWORK (DEFAULT_THROTTLE_CLASSES, their
rates in DEFAULT_THROTTLE_RATES from API_THROTTLE_*). Each class picks its own requests, so one
request is counted by exactly one of them: anonymous reads by client address, authenticated
reads by account, uploads (the API's only writes) by account. Past a rate DRF answers 429 with
Retry-After, the seconds until the next request is let through (docs/deploy.md, "Accounts").

The counters live in the "throttle" cache (settings.CACHES), shared by every web process when
it is Redis. The daily submission quota is not here: it is a database counter (A10)."""

from __future__ import annotations

from django.core.cache import caches
from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


class _Throttle(SimpleRateThrottle):
    @property
    def cache(self):
        return caches["throttle"]

    def get_rate(self) -> str | None:
        # Read when the request comes, not when the class was imported, as every setting is.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    @staticmethod
    def _signed_in(request) -> bool:
        return bool(request.user and request.user.is_authenticated)


class AnonReadThrottle(_Throttle):
    """GET/HEAD/OPTIONS without a token or session, by client address: a scraper walking every
    trial's trajectory is slowed to the rate, a reader of the board never notices it."""

    scope = "anon_read"

    def get_cache_key(self, request, view):
        if request.method not in SAFE_METHODS or self._signed_in(request):
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class UserReadThrottle(_Throttle):
    """Reads with a token or session, by account (a submitter polling its status)."""

    scope = "user_read"

    def get_cache_key(self, request, view):
        if request.method not in SAFE_METHODS or not self._signed_in(request):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class UploadThrottle(_Throttle):
    """Uploads (an unsafe method the view handles: the API's only one is the upload), by
    account. A method the view lacks is left to its 405, and an unauthenticated upload is
    refused (401) before throttles run."""

    scope = "upload"

    def get_cache_key(self, request, view):
        if request.method in SAFE_METHODS or not hasattr(view, request.method.lower()):
            return None
        ident = request.user.pk if self._signed_in(request) else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
