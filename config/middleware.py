"""Site-wide middleware.

Content-Security-Policy: scripts only from this origin, never inline (no script-src
'unsafe-inline'). Styles allow inline because Plotly.js injects its own <style> rules.

Styled error pages: with DEBUG off Django renders templates/404.html and 500.html itself; with
DEBUG on (`make run`) it answers with its technical pages, which readers of the development site
should not see either. STYLED_ERROR_PAGES=0 brings the technical pages back for debugging (the
traceback of a 500 is always in the server's log)."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'; object-src 'none'"
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        return response


class StyledErrorPagesMiddleware:
    """Under DEBUG, replace Django's technical 404/500 HTML pages by the site's templates."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not (settings.DEBUG and settings.STYLED_ERROR_PAGES):
            return response
        if response.status_code not in (404, 500) or response.streaming:
            return response
        if not response.get("Content-Type", "").startswith("text/html"):
            return response  # API errors stay JSON
        # 500: rendered without the request, as Django's own server_error view does, so that a
        # broken context processor or database cannot break the error page too.
        body = (render_to_string("404.html", request=request) if response.status_code == 404
                else render_to_string("500.html"))
        styled = HttpResponse(body, status=response.status_code)
        return styled
