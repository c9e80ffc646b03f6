"""The account pages' `next`: kept only when it is a page of this site."""

from django import template
from django.utils.http import url_has_allowed_host_and_scheme

register = template.Library()


@register.simple_tag(takes_context=True)
def safe_next(context) -> str:
    request = context["request"]
    wanted = request.POST.get("next") or request.GET.get("next", "")
    if wanted and url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return wanted
    return ""
