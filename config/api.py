"""What every /api/v1/ operation shares: JSON answers whatever the Accept header or a ?format=
parameter say, the error bodies (``{"detail": ...}``; a refused query string also lists its
fields' problems under ``errors``), strict query-string validation against the serializer that
documents the parameters in the OpenAPI schema, and a JSON 404 for /api/ URLs nothing answers.

Query parameters an operation does not list are ignored, on every operation (the schema's
description says so); a listed one given twice is refused.
"""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiResponse, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.exceptions import NotFound
from rest_framework.negotiation import DefaultContentNegotiation
from django.urls import reverse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

# Text parameters: any string without a NUL character (a database refuses those).
NO_NUL = r"^[^\x00]*$"
# The largest row id and page offset a database column or a slice can hold.
BIGINT_MAX = 2**63 - 1
OFFSET_MAX = 2**31 - 1

Error = inline_serializer("Error", {"detail": serializers.CharField()})
InvalidQuery = inline_serializer("InvalidQuery", {
    "detail": serializers.CharField(),
    "errors": serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="the refused parameters, each with its problems"),
})


def error(description: str, serializer=Error) -> OpenApiResponse:
    return OpenApiResponse(serializer, description=description)


INVALID_QUERY = error("a listed query parameter out of its bounds, not of its type or enum, or "
                      "given twice; `errors` names each", InvalidQuery)


class JsonOnly(DefaultContentNegotiation):
    """The API speaks JSON only: it answers JSON to any Accept header (no 406) and has no
    ?format= parameter (an unlisted parameter, ignored as every other)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ApiView(APIView):
    content_negotiation_class = JsonOnly


class QueryRefused(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid_query"

    def __init__(self, errors: dict):
        super().__init__({"detail": "invalid query parameters", "errors": errors})


class StrictIntegerField(serializers.IntegerField):
    """Decimal digits only (optionally signed with -): not "1_000", " 5", "+5" or "5.0", which
    int() would take though the schema's integer does not name them."""

    def to_internal_value(self, data):
        if isinstance(data, str) and not re.fullmatch(r"-?[0-9]{1,1000}", data):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false, as the schema's boolean is written in a query string; 1/0 (the pages'
    checkbox value) too."""

    TRUE_VALUES = {"true", "1"}
    FALSE_VALUES = {"false", "0"}
    NULL_VALUES: set = set()


class _TextParam(serializers.Field):
    """A string matching ``pattern``, empty included when the pattern allows it, taken as sent.
    Not a CharField: drf-spectacular documents a blank-allowing CharField's pattern as a oneOf
    (and a blank-refusing one's with minLength); the schema is the class's annotation."""

    default_error_messages = {"invalid": "This value does not match the required pattern."}

    def __init__(self, pattern: str, **kwargs):
        super().__init__(required=False, **kwargs)
        self.pattern = re.compile(pattern)

    def to_internal_value(self, data):
        if not isinstance(data, str) or not self.pattern.search(data):
            self.fail("invalid")
        return data

    def to_representation(self, value):
        return value


def text_param(pattern: str = NO_NUL, **kwargs) -> serializers.Field:
    """An optional string parameter matching ``pattern`` (which says whether empty is allowed),
    taken as sent (no trimming)."""
    # A class per pattern: a serializer copies its fields by class, not an instance's attributes.
    documented = extend_schema_field({"type": "string", "pattern": pattern})(
        type("TextParam", (_TextParam,), {}))
    return documented(pattern, **kwargs)


def query_params(serializer_class: type[serializers.Serializer], request: Request) -> dict:
    """The request's query string validated by ``serializer_class`` (the one its
    ``extend_schema(parameters=...)`` documents): its fields only, each at most once."""
    fields = serializer_class().fields
    query = request.query_params
    # A list parameter (a ListField, documented as a repeated parameter) is the one kind that
    # may be given more than once.
    lists = {name for name, f in fields.items() if isinstance(f, serializers.ListField)}
    repeated = {name: ["given more than once"] for name in fields
                if name not in lists and len(query.getlist(name)) > 1}
    if repeated:
        raise QueryRefused(repeated)
    # A plain dict: an empty value is a value (refused where the schema's type refuses it), not
    # the absent field an HTML form's empty input would be.
    serializer = serializer_class(data={k: query.getlist(k) if k in lists else query[k]
                                        for k in fields if k in query})
    if not serializer.is_valid():
        raise QueryRefused({k: [str(m) for m in v] for k, v in serializer.errors.items()})
    return serializer.validated_data


# What /api/v1/ lists: each read operation's collection, the schema and its documentation.
API_ROOT = {
    "benchmarks": "api-benchmarks",
    "leaderboard": "api-leaderboard",
    "categories": "api-categories",
    "groups": "api-groups",
    "harness_families": "api-harness-families",
    "trials": "api-trials",
    "compare": "api-compare",
    "submissions": "api-submissions",
    "schema": "api-schema",
    "docs": "api-docs",
}


class ApiRoot(ApiView):
    """/api/v1/: where each collection, the OpenAPI schema and its documentation are (absolute
    URLs), so a client that starts at the root finds the rest. Not an operation of the schema
    (the schema is the full description)."""

    schema = None

    def get(self, request: Request, *args, **kwargs):
        return Response({key: request.build_absolute_uri(reverse(name))
                         for key, name in API_ROOT.items()})


class NotFoundApi(ApiView):
    """Any /api/.../ URL no operation answers (a malformed submission id included): the JSON
    404 every operation gives, not the site's HTML page. Not an operation of the schema."""

    schema = None

    def get(self, request: Request, *args, **kwargs):
        raise NotFound()

    post = put = patch = delete = get


# OpenAPI links (drf-spectacular has no API for them): operation id -> response status -> links.
# They say where an answer's ids lead, for clients and for the fuzzer's stateful phase, which
# walks them: upload -> its status. Trials have no per-submission operation (the trials table
# lists ranked agents only), so no link leads there; and a link reads a value every answer of
# its status holds (a list's first row is not one: a page may be empty).
_STATUS = "submissions_retrieve"
LINKS = {
    "submissions_create": {"202": {"SubmissionStatus": {
        "operationId": _STATUS, "parameters": {"id": "$response.body#/id"},
        "description": "the upload's status: poll it until `status` leaves "
                       "received/validating"}}},
}


def add_links(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: LINKS into the response objects. A link to or from
    an operation the schema no longer has is an error, so the links cannot drift silently."""
    operations = {op["operationId"]: op for path in result.get("paths", {}).values()
                  for op in path.values() if isinstance(op, dict) and "operationId" in op}
    for source, by_status in LINKS.items():
        for code, links in by_status.items():
            for name, link in links.items():
                if source not in operations or link["operationId"] not in operations:
                    raise ValueError(f"OpenAPI link {name}: no operation {source} or "
                                     f"{link['operationId']}")
                operations[source]["responses"][code].setdefault("links", {})[name] = link
    return result
