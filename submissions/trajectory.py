"""Turn an ATIF trajectory into plain display rows for the viewer (text only: the template
escapes everything; nothing here produces HTML). Long outputs are folded.

Per step the viewer shows what ATIF records: the source, the model, the reported tokens and
cost, and the time until the next step (from the steps' timestamps). A find (``?q=``) and a
filter on what a step holds (``?show=``) work on the server, so the page reads the same without
JavaScript; the script only makes them instant."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime

FOLD_CHARS = 2_000  # longer texts are shown folded (<details>) with this much visible
MAX_STEPS = 2_000
# What a step can hold, as the viewer's filter names it: a reader narrows a long trajectory to
# the agent's messages, its commands, what the commands printed, or its reasoning.
KINDS = (("message", "Messages"), ("tool", "Tool calls"), ("observation", "Observations"),
         ("reasoning", "Reasoning"))
SOURCES = ("agent", "user", "system")


# Tool calls by what they do, whatever the harness calls the tool: a shell command, a file
# written or edited, a file read. Matched on the tool's name, then on the arguments it carries.
COMMAND_TOOLS = ("bash", "shell", "exec", "execute", "run", "terminal", "command", "cmd")
EDIT_TOOLS = ("write", "edit", "create", "patch", "replace", "insert", "str_replace")
VIEW_TOOLS = ("read", "view", "open", "cat", "show", "ls", "list", "glob", "grep", "search")


@dataclass
class ToolCallView:
    name: str
    arguments: str
    kind: str = "other"  # command | edit | view | other
    summary: str = ""  # the command line, or the file's path

    @property
    def kind_label(self) -> str:
        return {"command": "command", "edit": "file edit", "view": "file view"}.get(
            self.kind, "tool call")


def _tool_call(call: dict) -> ToolCallView:
    name = str(call.get("function_name", ""))
    args = call.get("arguments", {})
    text = json.dumps(args, ensure_ascii=False, indent=1)
    args = args if isinstance(args, dict) else {}
    command = next((args[k] for k in ("command", "cmd", "keystrokes", "script")
                    if isinstance(args.get(k), str)), None)
    path = next((args[k] for k in ("path", "file_path", "filename", "file")
                 if isinstance(args.get(k), str)), None)
    low = name.lower()
    words = set(re.split(r"[^a-z]+", low))
    if (words & set(EDIT_TOOLS) or "apply_patch" in low) and (path or "patch" in low):
        kind = "edit"
    elif words & set(VIEW_TOOLS) and path and not command:
        kind = "view"
    elif command is not None or words & set(COMMAND_TOOLS):
        kind = "command"
    else:
        kind = "other"
    summary = command if kind == "command" and command is not None else (path or "")
    return ToolCallView(name, text, kind, summary.strip())


@dataclass
class StepView:
    step_id: object
    source: str
    message: str
    reasoning: str = ""
    tool_calls: list[ToolCallView] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    metrics: str = ""
    timestamp: str = ""
    model_name: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    duration_s: float | None = None  # until the next step started (ATIF timestamps)
    matches: bool = False  # holds the reader's find text
    shown: bool = True  # passes the reader's source and kind filter

    @property
    def anchor(self) -> str:
        return f"step-{self.step_id}"

    @property
    def kinds(self) -> list[str]:
        held = {"message": bool(self.message), "tool": bool(self.tool_calls),
                "observation": bool(self.observations), "reasoning": bool(self.reasoning)}
        return [k for k, _ in KINDS if held[k]]

    @property
    def tokens(self) -> int:
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    def text(self) -> str:
        """Everything a find searches, in one string."""
        return "\n".join([self.message, self.reasoning, *(c.name + "\n" + c.arguments
                                                        for c in self.tool_calls),
                          *self.observations])


@dataclass
class TrajectoryView:
    steps: list[StepView]
    agent: str = ""
    model_name: str = ""
    schema_version: str = ""
    truncated: int = 0  # steps beyond MAX_STEPS, not shown
    query: str = ""
    show_sources: tuple[str, ...] = SOURCES
    show_kinds: tuple[str, ...] = tuple(k for k, _ in KINDS)

    @property
    def match_count(self) -> int:
        return sum(s.matches for s in self.steps)

    @property
    def shown_count(self) -> int:
        return sum(s.shown for s in self.steps)

    @property
    def filtered(self) -> bool:
        return (set(self.show_sources) != set(SOURCES)
                or set(self.show_kinds) != {k for k, _ in KINDS})

    def total(self, attr: str):
        values = [getattr(s, attr) for s in self.steps if getattr(s, attr) is not None]
        return sum(values) if values else None

    @property
    def duration_s(self) -> float | None:
        return self.total("duration_s")

    @property
    def prompt_tokens(self) -> int | None:
        return self.total("prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        return self.total("completion_tokens")

    @property
    def cost_usd(self) -> float | None:
        return self.total("cost_usd")

    @property
    def timeline(self) -> list[tuple[StepView, float]]:
        """Each step with its share (percent) of the strip: its duration where every step has
        one, else its tokens, else an equal share."""
        steps = self.steps
        if not steps:
            return []
        durations = [s.duration_s for s in steps]
        if any(d is None for d in durations[:-1]) or not sum(d or 0.0 for d in durations):
            weights = [float(s.tokens) for s in steps]
        else:
            weights = [d or 0.0 for d in durations]
        if not sum(weights):
            weights = [1.0] * len(steps)
        total = sum(weights)
        return [(s, round(100 * w / total, 3)) for s, w in zip(steps, weights, strict=True)]


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # ContentPart list (ATIF 1.6+)
        parts = []
        for p in value:
            if isinstance(p, dict) and p.get("type") == "text":
                parts.append(str(p.get("text", "")))
            elif isinstance(p, dict) and p.get("type") == "image":
                parts.append(f"[image: {(p.get('source') or {}).get('path', '')}]")
        return "\n".join(parts)
    return json.dumps(value, ensure_ascii=False)


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _money(value) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else None


def _time(value) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=None) if moment.tzinfo is None else moment


def _step(step: dict) -> StepView:
    obs = (step.get("observation") or {}).get("results") or []
    metrics = step.get("metrics") if isinstance(step.get("metrics"), dict) else None
    return StepView(
        step_id=step.get("step_id"),
        source=str(step.get("source", "")),
        message=_text(step.get("message")),
        reasoning=_text(step.get("reasoning_content")),
        tool_calls=[_tool_call(c) for c in step.get("tool_calls") or [] if isinstance(c, dict)],
        observations=[_text(r.get("content")) for r in obs if isinstance(r, dict)],
        metrics=json.dumps(metrics, ensure_ascii=False) if metrics is not None else "",
        timestamp=step["timestamp"] if isinstance(step.get("timestamp"), str) else "",
        model_name=str(step.get("model_name") or ""),
        prompt_tokens=_count((metrics or {}).get("prompt_tokens")),
        completion_tokens=_count((metrics or {}).get("completion_tokens")),
        cached_tokens=_count((metrics or {}).get("cached_tokens")),
        cost_usd=_money((metrics or {}).get("cost_usd")),
    )


def _durations(views: list[StepView]) -> None:
    """A step's duration is the time until the next step's timestamp; the last step has none.
    A step that goes back in time (clock skew, a merged log) gets none rather than a negative."""
    moments = [_time(v.timestamp) for v in views]
    for i, view in enumerate(views[:-1]):
        start, end = moments[i], moments[i + 1]
        if start is None or end is None or (start.tzinfo is None) != (end.tzinfo is None):
            continue
        seconds = (end - start).total_seconds()
        view.duration_s = seconds if seconds >= 0 else None


def trajectory_steps(doc) -> list[StepView]:
    """Display rows for each step; tolerant of unknown fields and odd types."""
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise ValueError("not an ATIF trajectory (no steps list)")
    views = [_step(step) for step in doc["steps"][:MAX_STEPS] if isinstance(step, dict)]
    _durations(views)
    return views


def trajectory_view(doc, *, query: str = "", sources=None, kinds=None) -> TrajectoryView:
    """The viewer's whole page model: the steps, the reader's find and filter applied."""
    steps = trajectory_steps(doc)
    agent = doc.get("agent") if isinstance(doc.get("agent"), dict) else {}
    sources = tuple(s for s in (sources or SOURCES) if s in SOURCES) or SOURCES
    all_kinds = tuple(k for k, _ in KINDS)
    kinds = tuple(k for k in (kinds or all_kinds) if k in all_kinds) or all_kinds
    needle = query.strip().casefold()
    for s in steps:
        s.matches = bool(needle) and needle in s.text().casefold()
        # A step another source wrote, or holding none of the kinds asked for, is hidden.
        s.shown = s.source in sources and (not s.kinds or bool(set(s.kinds) & set(kinds)))
    return TrajectoryView(
        steps=steps,
        agent=" ".join(str(agent.get(k, "")) for k in ("name", "version") if agent.get(k)),
        model_name=str(agent.get("model_name") or ""),
        schema_version=str(doc.get("schema_version") or ""),
        truncated=max(0, len(doc["steps"]) - MAX_STEPS),
        query=query.strip(),
        show_sources=sources,
        show_kinds=kinds,
    )
