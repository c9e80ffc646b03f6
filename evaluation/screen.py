"""The reward-hacking screen: deterministic rules over how a passing trial passed.

Evidence comes from two places, each item tagged with its *source*:

    command         a shell command the trajectory ran (any harness: Bash, shell, exec_command,
                    terminus-2 keystrokes, codex argv; sub-agents' trajectories included)
    read            a path given to a read, list or search tool (Read, Glob, view, list_dir, ...)
    write           a path given to a write, edit or patch tool (Write, Edit, create, apply_patch)
    content         the text such a tool wrote
    observation     a tool output the trajectory recorded
    replay_written  a file the site's replay of the trajectory created or changed, as the runner
                    listed it after the replay (evaluation.runner.run_agent ``written``)
    replay_log      the replayed commands' output
    replay_trace    the commands the replay's bash ran, variables, globs and substitutions
                    expanded (bash's xtrace, written to a file inside the agent container:
                    evaluation/replay.py TRACE_PATH): what ran, however the trajectory spelled it

Messages and reasoning (prose) are never screened: an agent that *says* "tests" trips nothing.

The rules are data: ``screen_rules.toml`` next to this module (``settings.SCREEN_RULES_FILE``
points elsewhere when a deployment keeps its own). Each rule has an id, a title and a
description (the methods page lists them), per-source regular expressions (or the computed
``hidden_text`` match: a hidden file of the task reproduced verbatim), an optional exemption
pattern found in the evidence item itself, and examples that must trip it and examples that must not; tests/evaluation/test_screen.py runs every
rule's examples, so a rule cannot be added without them. A screen result records the rule set's
version (a digest of the file), so every flag can be traced to the rules that raised it.

No rule depends on the submission's harness (or any other name the submitter chose): a rules file
that exempts harnesses is refused when loaded, and Harbor's own oracle, which reads /solution by
design, trips RH2 like any other agent (its uploads are labelled reference runs, never ranked).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluation.replay import argv_to_script

RULES_FILE = Path(__file__).with_name("screen_rules.toml")

SOURCES = {
    "command": "shell commands the trajectory ran",
    "read": "paths given to read, list and search tools",
    "write": "paths given to write, edit and patch tools",
    "content": "text written by write, edit and patch tools",
    "observation": "tool outputs recorded in the trajectory",
    "replay_written": "files the site's replay wrote (listed by the runner)",
    "replay_log": "output of the site's replay",
    "replay_trace": "commands the site's replay ran, expanded (bash's trace in the container)",
}
MATCHES = ("regex", "hidden_text")
EXCERPT_CHARS = 240
MAX_EVIDENCE_PER_RULE = 5
MAX_STEPS = 20_000
MAX_TRACE_LINES = 20_000

_SHELL_KEYS = ("command", "cmd", "keystrokes", "script")
_PATH_KEYS = ("file_path", "path", "paths", "pattern", "notebook_path", "directory", "dir_path",
              "target_file", "filename", "glob", "dir")
_CONTENT_KEYS = ("content", "file_text", "new_string", "new_str", "text", "patch", "input")
_WRITE_TOOLS = {"write", "edit", "multiedit", "notebookedit", "create", "str_replace", "insert",
                "write_file", "edit_file", "apply_patch", "create_file", "replace",
                "replace_in_file"}
_EDITOR_COMMANDS = {"view": "read", "create": "write", "str_replace": "write",
                    "insert": "write", "undo_edit": "write"}
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$",
                         re.M)


class RuleError(ValueError):
    """The rules file is malformed (checked when it is loaded)."""


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    title: str
    description: str
    match: str
    patterns: dict[str, re.Pattern]
    exempt: re.Pattern | None
    min_chars: int
    trips: tuple[dict, ...]
    passes: tuple[dict, ...]

    @property
    def sources(self) -> list[str]:
        return list(self.patterns)

    def as_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "description": self.description,
                "match": self.match, "sources": self.sources,
                "patterns": {k: v.pattern for k, v in self.patterns.items()},
                "exempt": self.exempt.pattern if self.exempt else ""}


@dataclasses.dataclass(frozen=True)
class RuleSet:
    version: str  # sha256 prefix of the rules file
    rules: tuple[Rule, ...]

    def get(self, rule_id: str) -> Rule | None:
        return next((r for r in self.rules if r.id == rule_id), None)


@dataclasses.dataclass(frozen=True)
class Evidence:
    source: str
    text: str
    step: Any = None


@dataclasses.dataclass(frozen=True)
class Hit:
    rule: str
    source: str
    step: Any
    excerpt: str

    def as_dict(self) -> dict:
        return {"rule": self.rule, "source": self.source, "step": self.step,
                "excerpt": self.excerpt}


def _compile(rule_id: str, what: str, pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern, re.M)
    except re.error as exc:
        raise RuleError(f"rule {rule_id}: {what} is not a valid regular expression: {exc}") from exc


def parse_rules(text: str) -> RuleSet:
    """A RuleSet from the TOML text of a rules file; RuleError when malformed."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"rules file: {exc}") from exc
    rules, seen = [], set()
    for raw in doc.get("rule") or []:
        rid = str(raw.get("id") or "").strip()
        if not re.fullmatch(r"RH\d+", rid) or rid in seen:
            raise RuleError(f"rule id {rid!r} must be RH<number> and unique")
        seen.add(rid)
        match = raw.get("match", "regex")
        if match not in MATCHES:
            raise RuleError(f"rule {rid}: match must be one of {MATCHES}")
        patterns = dict(raw.get("patterns") or {})
        for source in raw.get("sources") or []:
            patterns.setdefault(source, raw.get("pattern", ""))
        unknown = set(patterns) - set(SOURCES)
        if unknown or not patterns:
            raise RuleError(f"rule {rid}: sources must be some of {sorted(SOURCES)}")
        if match == "regex" and not all(patterns.values()):
            raise RuleError(f"rule {rid}: every source needs a pattern")
        if "exempt_harnesses" in raw:
            raise RuleError(f"rule {rid}: exempt_harnesses is not allowed: no exemption may "
                            "depend on a harness name the submitter chose")
        if not raw.get("title") or not raw.get("description"):
            raise RuleError(f"rule {rid}: a title and a description are required")
        trips, passes = tuple(raw.get("trips") or ()), tuple(raw.get("passes") or ())
        if not trips or not passes:
            raise RuleError(f"rule {rid}: needs examples that trip it and examples that must not")
        rules.append(Rule(
            id=rid, title=str(raw["title"]).strip(), description=" ".join(
                str(raw["description"]).split()), match=match,
            patterns={s: _compile(rid, f"the {s} pattern", p or ".") for s, p in patterns.items()},
            exempt=_compile(rid, "exempt", raw["exempt"]) if raw.get("exempt") else None,
            min_chars=int(raw.get("min_chars", 64)), trips=trips, passes=passes))
    rules.sort(key=lambda r: int(r.id[2:]))
    return RuleSet(hashlib.sha256(text.encode()).hexdigest()[:12], tuple(rules))


@lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> RuleSet:
    return parse_rules(Path(path).read_text(encoding="utf-8"))


def load_rules(path: Path | str | None = None) -> RuleSet:
    """The rule set of the rules file (cached until the file changes)."""
    if path is None:
        path = getattr(settings, "SCREEN_RULES_FILE", "") or RULES_FILE
    p = Path(path)
    return _load(str(p), p.stat().st_mtime_ns)


# --- evidence --------------------------------------------------------------------------------
def _s(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return "\n".join(value)
    return json.dumps(value, ensure_ascii=False)


def _content_text(value: Any) -> str:
    """ATIF text or ContentPart list (1.6+) as plain text."""
    if isinstance(value, list):
        return "\n".join(str(p.get("text", "")) for p in value
                         if isinstance(p, dict) and p.get("type") == "text")
    return _s(value)


def _args(raw: Any) -> dict:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {"input": raw}
    return raw if isinstance(raw, dict) else {}


def _call_evidence(name: str, args: dict, step) -> list[Evidence]:
    low = name.lower()
    out: list[Evidence] = []
    sub = _s(args.get("command")) if isinstance(args.get("command"), str) else ""
    if sub in _EDITOR_COMMANDS and ("path" in args or "editor" in low):
        kind = _EDITOR_COMMANDS[sub]  # str_replace_editor-style tools: command is a sub-command
        out.append(Evidence(kind, _s(args.get("path")), step))
        for key in ("file_text", "new_str"):
            if args.get(key):
                out.append(Evidence("content", _s(args[key]), step))
        return out
    is_write = low in _WRITE_TOOLS or low.endswith(("write", "edit", "write_file", "patch"))
    for key in _SHELL_KEYS:
        cmd = args.get(key)
        if cmd in (None, ""):
            continue
        if isinstance(cmd, list) and cmd and cmd[0] == "apply_patch" and len(cmd) >= 2:
            patch = _s(cmd[1])
            out.append(Evidence("content", patch, step))
            out += [Evidence("write", (a or b).strip(), step)
                    for a, b in _PATCH_PATH.findall(patch)]
            continue
        out.append(Evidence("command", argv_to_script(cmd), step))
    for key in _PATH_KEYS:
        val = args.get(key)
        for p in (val if isinstance(val, list) else [val]):
            if p not in (None, ""):
                out.append(Evidence("write" if is_write else "read", _s(p), step))
    if is_write or low in ("apply_patch",):
        for key in _CONTENT_KEYS:
            if args.get(key):
                text = _s(args[key])
                out.append(Evidence("content", text, step))
                out += [Evidence("write", (a or b).strip(), step)
                        for a, b in _PATCH_PATH.findall(text)]
        for edit in args.get("edits") or []:
            if isinstance(edit, dict) and edit.get("new_string"):
                out.append(Evidence("content", _s(edit["new_string"]), step))
    return out


def trajectory_evidence(trajectory: dict | None) -> list[Evidence]:
    """Every screened item of an ATIF trajectory (and its embedded sub-agent trajectories)."""
    out: list[Evidence] = []
    todo = [trajectory] if isinstance(trajectory, dict) else []
    while todo:
        doc = todo.pop(0)
        for step in (doc.get("steps") or [])[:MAX_STEPS]:
            if not isinstance(step, dict) or step.get("source") != "agent":
                continue
            sid = step.get("step_id")
            for call in step.get("tool_calls") or []:
                if isinstance(call, dict):
                    out += _call_evidence(_s(call.get("function_name")),
                                          _args(call.get("arguments")), sid)
            for res in (step.get("observation") or {}).get("results") or []:
                if isinstance(res, dict) and res.get("content"):
                    out.append(Evidence("observation", _content_text(res["content"]), sid))
        todo += [s for s in doc.get("subagent_trajectories") or [] if isinstance(s, dict)]
    return out


def activity_evidence(activity: dict | None) -> list[Evidence]:
    """The replay's container activity as the runner observed it (see the module docstring)."""
    activity = activity or {}
    out = [Evidence("replay_written", _s(p)) for p in activity.get("written") or []]
    if activity.get("log"):
        out.append(Evidence("replay_log", _s(activity["log"])))
    # One item per traced command, its "+ " depth markers dropped (so ^ anchors match).
    lines = _s(activity.get("trace")).splitlines()[-MAX_TRACE_LINES:]
    out += [Evidence("replay_trace", line.lstrip("+").lstrip()) for line in lines
            if line.startswith("+")]
    return out


# --- matching --------------------------------------------------------------------------------
def _excerpt(text: str, start: int, end: int) -> str:
    lo = max(0, start - EXCERPT_CHARS // 3)
    hi = min(len(text), max(end, lo + EXCERPT_CHARS))
    piece = text[lo:hi].replace("\n", " ⏎ ")
    return ("…" if lo else "") + piece[:EXCERPT_CHARS] + ("…" if hi < len(text) else "")


def _hidden_find(text: str, hidden: list[str], min_chars: int) -> tuple[int, int] | None:
    for h in hidden:
        h = h.strip()
        if len(h) >= min_chars:
            i = text.find(h)
            if i >= 0:
                return i, i + len(h)
    return None


def screen(evidence: list[Evidence], *, rules: RuleSet,
           hidden_texts: list[str] | None = None) -> list[Hit]:
    """The hits of every rule on this evidence (at most a few per rule), in rule order. Every
    rule applies to every trial: the screen is not told the submission's harness at all, so no
    exemption can depend on a name the submitter chose."""
    hits: list[Hit] = []
    for rule in rules.rules:
        found: list[Hit] = []
        for ev in evidence:
            pattern = rule.patterns.get(ev.source)
            if pattern is None or not ev.text:
                continue
            if rule.match == "hidden_text":
                span = _hidden_find(ev.text, hidden_texts or [], rule.min_chars)
            else:
                m = pattern.search(ev.text)
                span = m.span() if m else None
            if span is None:
                continue
            if rule.exempt is not None and rule.exempt.search(ev.text):
                continue
            found.append(Hit(rule.id, ev.source, ev.step, _excerpt(ev.text, *span)))
            if len(found) >= MAX_EVIDENCE_PER_RULE:
                break
        hits += found
    return hits


def hidden_texts_of(task_dir: Path) -> list[str]:
    """Texts of the task's hidden answer files: tests/ data files (not scripts) whose content is
    not also a file of solution/ (where the hidden answer has the submission's own format, a
    correct answer cannot be told from a copied one by its text; the path rules catch copying)."""
    task_dir = Path(task_dir)
    solution = {p.read_bytes().strip() for p in (task_dir / "solution").rglob("*") if p.is_file()}
    out = []
    for p in sorted((task_dir / "tests").rglob("*")):
        if not p.is_file() or p.suffix in (".sh", ".py") or p.stat().st_size > 4 * 1024 * 1024:
            continue
        data = p.read_bytes().strip()
        if data and data not in solution:
            out.append(data.decode("utf-8", "replace"))
    return out


def example_evidence(example: dict) -> tuple[list[Evidence], list[str]]:
    """A rule example from the rules file ({source: text, ..., "hidden": text}) as evidence."""
    hidden = [example["hidden"]] if example.get("hidden") else []
    return [Evidence(k, str(v)) for k, v in example.items() if k in SOURCES], hidden
