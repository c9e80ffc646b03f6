"""Turn an ATIF trajectory into plain display rows for the viewer (text only: the template
escapes everything; nothing here produces HTML). Long outputs are folded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

FOLD_CHARS = 2_000  # longer texts are shown folded (<details>) with this much visible
MAX_STEPS = 2_000


@dataclass
class ToolCallView:
    name: str
    arguments: str


@dataclass
class StepView:
    step_id: object
    source: str
    message: str
    reasoning: str = ""
    tool_calls: list[ToolCallView] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    metrics: str = ""


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


def trajectory_steps(doc) -> list[StepView]:
    """Display rows for each step; tolerant of unknown fields and odd types."""
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise ValueError("not an ATIF trajectory (no steps list)")
    views = []
    for step in doc["steps"][:MAX_STEPS]:
        if not isinstance(step, dict):
            continue
        obs = (step.get("observation") or {}).get("results") or []
        views.append(StepView(
            step_id=step.get("step_id"),
            source=str(step.get("source", "")),
            message=_text(step.get("message")),
            reasoning=_text(step.get("reasoning_content")),
            tool_calls=[ToolCallView(str(c.get("function_name", "")),
                                     json.dumps(c.get("arguments", {}), ensure_ascii=False,
                                                indent=1))
                        for c in step.get("tool_calls") or [] if isinstance(c, dict)],
            observations=[_text(r.get("content")) for r in obs if isinstance(r, dict)],
            metrics=json.dumps(step["metrics"], ensure_ascii=False) if isinstance(
                step.get("metrics"), dict) else "",
        ))
    return views
