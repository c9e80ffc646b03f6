"""Signing up as a newcomer does, through the site's pages: the sign-up form, then the link in
the confirmation e-mail (the test settings' outbox: Django's locmem mail backend, which the
live_server thread shares with the test)."""

from __future__ import annotations

import re

PASSWORD = "a-Long-passw0rd!"  # noqa: S105 - a test account's
_LINK = re.compile(r"https?://[^\s]+/accounts/confirm-email/[^\s]+/")


def confirmation_link(email: str) -> str:
    """The link of the newest confirmation e-mail sent to ``email``."""
    from django.core import mail

    for message in reversed(mail.outbox):
        if email in message.to:
            found = _LINK.search(message.body)
            assert found, message.body
            return found.group(0)
    raise AssertionError(f"no confirmation e-mail to {email}: {[m.to for m in mail.outbox]}")


def client_sign_up(client, username: str, email: str | None = None, *, password: str = PASSWORD,
                   query: str = ""):
    """Sign up with Django's test client and confirm the address; returns the confirmation's
    response (a redirect to where the sign-up was headed, signed in)."""
    email = email or f"{username}@example.org"
    response = client.post("/accounts/signup/" + query, {
        "username": username, "email": email, "password1": password, "password2": password})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert response["Location"] == "/accounts/confirm-email/", response["Location"]
    path = "/" + confirmation_link(email).split("://", 1)[1].split("/", 1)[1]
    return client.post(path)


def browser_sign_up(page, site: str, username: str, email: str | None = None, *,
                    password: str = PASSWORD, path: str = "/accounts/signup/") -> None:
    """Sign up in a Playwright page and open the confirmation link; the page ends where the
    sign-up was headed (the account page unless ``path`` carries a next)."""
    email = email or f"{username}@example.org"
    if path:
        page.goto(site + path)
    page.fill("#id_username", username)
    page.fill("#id_email", email)
    page.fill("#id_password1", password)
    page.fill("#id_password2", password)
    page.click('[data-testid="signup-form"] button[type=submit]')
    page.wait_for_url("**/accounts/confirm-email/")
    page.goto(confirmation_link(email))
    page.click("main form button[type=submit]")
    page.wait_for_load_state("load")
