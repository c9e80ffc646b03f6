"""Submission metadata (``metadata.yaml`` / ``.json``): Terminal-Bench 2.0 fields plus ours.

    agent_url: https://...              # http/https only
    agent_display_name: "My Agent"
    agent_org_display_name: "Org"
    models:                             # the first: the model every trial ran (the row's)
      - {model_name: gpt-5.5, model_provider: openai,
         model_display_name: "GPT-5.5", model_org_display_name: "OpenAI"}
      - {model_name: ..., role: helper, ...}  # optional: a model the agent also calls
    harness: codex                      # the Harbor agent name (or import path's class)
    harness_version: "0.130.0"          # optional
    benchmark: healthagentbench-synthetic@1.0
    notes: "..."                        # optional
    reference: true                     # optional, maintainers only: a labelled reference run
                                        # (never ranked, no model), e.g. of Harbor's oracle

Parsing is defensive: a size cap, JSON or ``yaml.safe_load`` only, and YAML anchors/aliases are
refused outright (no billion-laughs expansion can happen: the event stream is checked before
anything is constructed, and it has a node cap). Unknown keys are ignored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from submissions.problems import Problem

MAX_METADATA_BYTES = 64 * 1024
MAX_YAML_EVENTS = 5000
METADATA_FILENAMES = ("metadata.yaml", "metadata.yml", "metadata.json")
BENCHMARK_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}@[A-Za-z0-9][A-Za-z0-9._-]{0,49}$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

# What the client's `metadata` command writes where Harbor's job does not know the answer (the
# agent's display name, URL, organisation): an upload still holding one is refused.
PLACEHOLDER = "TODO"
SHORT = 200  # names and display names
URL = 500
NOTES = 5000


class MetadataError(ValueError):
    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


def _single_line(value):
    if isinstance(value, str):
        value = value.strip()
        if _CONTROL.search(value) or "\n" in value:
            raise ValueError("must be a single line without control characters")
    return value


def _not_placeholder(value):
    if isinstance(value, str) and value.strip().upper().startswith(PLACEHOLDER):
        raise ValueError(f"is still the client's placeholder ({value.strip()[:60]!r}): write "
                         "the real value")
    return value


def _version_text(value):
    # YAML reads `harness_version: 1.0` as a float; keep what the submitter wrote.
    if isinstance(value, bool):
        raise ValueError("must be a string")
    if isinstance(value, (int, float)):
        return str(value)
    return value


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    model_name: str = Field(min_length=1, max_length=SHORT)
    model_provider: str = Field(min_length=1, max_length=SHORT)
    model_display_name: str = Field(min_length=1, max_length=SHORT)
    model_org_display_name: str = Field(min_length=1, max_length=SHORT)
    # "helper": a model the agent calls besides the row's model (models[0]); never the row's.
    role: Literal["main", "helper"] | None = Field(default=None, exclude_if=lambda v: v is None)

    @field_validator("*", mode="before")
    @classmethod
    def _one_line(cls, value):
        return _single_line(_not_placeholder(value))


class SubmissionMetadata(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    agent_url: str = Field(min_length=8, max_length=URL)
    agent_display_name: str = Field(min_length=1, max_length=SHORT)
    agent_org_display_name: str = Field(min_length=1, max_length=SHORT)
    models: list[ModelEntry] = Field(min_length=1, max_length=10)
    harness: str = Field(min_length=1, max_length=SHORT)
    harness_version: str = Field(default="", max_length=100)
    benchmark: str = Field(max_length=151)
    notes: str = Field(default="", max_length=NOTES)
    # A maintainer registers a labelled reference run (submissions.harbor_intake): never ranked.
    reference: bool = False

    @field_validator("agent_url", "agent_display_name", "agent_org_display_name", "harness",
                     "benchmark", mode="before")
    @classmethod
    def _one_line(cls, value):
        return _single_line(_not_placeholder(value))

    @field_validator("harness_version", mode="before")
    @classmethod
    def _version(cls, value):
        return _single_line(_version_text(value)) if value is not None else ""

    @field_validator("notes", mode="before")
    @classmethod
    def _notes(cls, value):
        if value is None:
            return ""
        if isinstance(value, str) and re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", value):
            raise ValueError("must not contain control characters")
        return value

    @field_validator("agent_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme.lower() not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL")
        if not parts.hostname or re.search(r"\s", value):
            raise ValueError("must be an absolute URL with a host name and no spaces")
        return value

    @field_validator("benchmark")
    @classmethod
    def _benchmark(cls, value: str) -> str:
        if not BENCHMARK_RE.match(value):
            raise ValueError("must be <name>@<version>, e.g. healthagentbench-synthetic@1.0")
        return value

    @property
    def benchmark_name(self) -> str:
        return self.benchmark.split("@", 1)[0]

    @property
    def benchmark_version(self) -> str:
        return self.benchmark.split("@", 1)[1]

    def as_dict(self) -> dict:
        return self.model_dump(mode="json")


def helper_models(metadata: dict | None) -> list[dict]:
    """The helper models a stored metadata document lists (``role: helper``), as listed."""
    models = (metadata or {}).get("models") or []
    return [m for m in models[1:] if isinstance(m, dict) and m.get("role") == "helper"]


def _check_yaml_events(text: str, label: str) -> None:
    """Refuse anchors, aliases and huge documents before constructing anything."""
    count = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            count += 1
            if count > MAX_YAML_EVENTS:
                raise MetadataError([Problem("metadata_too_complex", label,
                                             f"more than {MAX_YAML_EVENTS} YAML nodes")])
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise MetadataError([Problem("metadata_yaml_alias", label,
                                             "YAML anchors and aliases (&, *) are not allowed")])
    except yaml.YAMLError as exc:
        raise MetadataError([Problem("metadata_syntax", label,
                                     f"not valid YAML: {_short_yaml_error(exc)}")]) from None


def _short_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or exc.__class__.__name__
    return f"{problem} (line {mark.line + 1})" if mark else str(problem)


def load_metadata_document(data: bytes | str, *, label: str = "metadata"):
    """The metadata document as plain Python data (dict expected); MetadataError otherwise."""
    if isinstance(data, bytes):
        if len(data) > MAX_METADATA_BYTES:
            raise MetadataError([Problem("metadata_too_large", label,
                                         f"larger than {MAX_METADATA_BYTES} bytes")])
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise MetadataError([Problem("metadata_encoding", label,
                                         "must be UTF-8 text")]) from None
    else:
        text = data
        if len(text.encode("utf-8", "surrogatepass")) > MAX_METADATA_BYTES:
            raise MetadataError([Problem("metadata_too_large", label,
                                         f"larger than {MAX_METADATA_BYTES} bytes")])
    if not text.strip():
        raise MetadataError([Problem("metadata_missing", label, "metadata is empty")])
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise MetadataError([Problem("metadata_syntax", label,
                                         f"not valid JSON: {exc}")]) from None
    _check_yaml_events(text, label)
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise MetadataError([Problem("metadata_syntax", label,
                                     f"not valid YAML: {exc}")]) from None


def _reject_constant(name):
    raise ValueError(f"{name} is not allowed")


def parse_metadata(data: bytes | str | dict, *, label: str = "metadata") -> SubmissionMetadata:
    """Validate metadata (text or an already-loaded dict). Raises MetadataError listing every
    problem, each with the offending field in ``path`` (``metadata:models[0].model_name``)."""
    doc = data if isinstance(data, dict) else load_metadata_document(data, label=label)
    if not isinstance(doc, dict):
        raise MetadataError([Problem("metadata_invalid", label,
                                     "metadata must be a mapping of field: value")])
    try:
        return SubmissionMetadata.model_validate(doc)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
            loc = loc.lstrip(".")
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(Problem("metadata_invalid", f"{label}:{loc}" if loc else label,
                                    f"{loc or 'metadata'}: {msg}"))
        raise MetadataError(problems) from None


def find_metadata_file(tree_root: Path | str) -> Path | None:
    """``metadata.yaml``/``.yml``/``.json`` at the root of an extracted upload, if any."""
    for name in METADATA_FILENAMES:
        path = Path(tree_root) / name
        if path.is_file() and not path.is_symlink():
            return path
    return None


def read_metadata_file(path: Path) -> SubmissionMetadata:
    size = path.stat().st_size
    if size > MAX_METADATA_BYTES:
        raise MetadataError([Problem("metadata_too_large", path.name,
                                     f"larger than {MAX_METADATA_BYTES} bytes")])
    return parse_metadata(path.read_bytes(), label=path.name)
