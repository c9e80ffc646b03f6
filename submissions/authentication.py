"""DRF authentication by personal API token: `Authorization: Token <key>` (or `Bearer <key>`)."""

from rest_framework import authentication, exceptions

from submissions.services import token_authenticate


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("token", "bearer")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>'")
        try:
            raw = header[1].decode()
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("invalid token") from exc
        user = token_authenticate(raw=raw)
        if user is None:
            raise exceptions.AuthenticationFailed("invalid or revoked token")
        return user, None

    def authenticate_header(self, request) -> str:
        return "Token"
