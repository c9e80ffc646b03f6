"""Maintainers' admin: where accounts came from (the accounts one address made)."""

from django.contrib import admin
from django.db.models import Count, OuterRef, Subquery
from django.utils.html import format_html

from submissions.models import AccountOrigin


@admin.register(AccountOrigin)
class AccountOriginAdmin(admin.ModelAdmin):
    """Each sign-up's address; "from this address" lists every account it made (search an
    address to see them together)."""

    list_display = ("user", "address", "method", "created_at", "from_this_address")
    list_filter = ("method",)
    search_fields = ("address", "user__username", "user__email")
    ordering = ("-created_at",)
    readonly_fields = ("user", "address", "method", "created_at", "updated_at")

    def get_queryset(self, request):
        same = (AccountOrigin.objects.filter(address=OuterRef("address")).values("address")
                .annotate(n=Count("pk")).values("n"))
        return super().get_queryset(request).select_related("user").annotate(
            same_address=Subquery(same))

    @admin.display(description="accounts from this address", ordering="same_address")
    def from_this_address(self, obj) -> str:
        return format_html('<a href="?q={}">{}</a>', obj.address, obj.same_address)

    def has_add_permission(self, request) -> bool:
        return False
