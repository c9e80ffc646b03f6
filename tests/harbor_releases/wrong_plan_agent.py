"""A scripted agent that fails every synthetic task, for the Harbor release matrix.

Harbor imports it (``--agent-import-path wrong_plan_agent:WrongPlanAgent`` before 0.17,
``-a wrong_plan_agent:WrongPlanAgent`` from 0.17 on, with this folder on PYTHONPATH) inside the
venv of the release under test, so it uses only what every release's ``BaseAgent`` has:
``name``, ``version``, ``setup``, ``run`` and ``environment.exec``.

Its plan is wrong on purpose: it writes an empty JSON object where the JSON answers go and one
stray file in the output folder, so every grader gives 0 (and none fails on missing input). The
commands it ran are recorded as an ATIF trajectory (one ``bash`` tool call per command, the
shape Copilot CLI records), so the site's replay can run them again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from harbor.agents.base import BaseAgent

PLAN = (
    "mkdir -p /workspace/output",
    "printf '{}\\n' > /workspace/submission.json",
    "printf 'no answer\\n' > /workspace/output/README.txt",
)


class WrongPlanAgent(BaseAgent):
    @staticmethod
    def name() -> str:
        return "hab-wrong-plan"

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment) -> None:
        return None

    async def run(self, instruction: str, environment, context) -> None:
        steps = [{"step_id": 1, "source": "user", "message": instruction, "timestamp": _now()}]
        for i, command in enumerate(PLAN, start=2):
            result = await environment.exec(command=command)
            call = f"call_{i}"
            steps.append({
                "step_id": i, "source": "agent", "timestamp": _now(),
                "message": "Writing an answer without reading the task.",
                "tool_calls": [{"tool_call_id": call, "function_name": "bash",
                                "arguments": {"command": command}}],
                "observation": {"results": [{"source_call_id": call,
                                             "content": f"exit {result.return_code}"}]},
            })
        trajectory = {
            "schema_version": "ATIF-v1.4",
            "session_id": f"wrong-plan-{self.logs_dir.parent.name}",
            "agent": {"name": self.name(), "version": self.version()},
            "steps": steps,
            "final_metrics": {"total_prompt_tokens": 0, "total_completion_tokens": 0,
                              "total_steps": len(steps)},
        }
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "trajectory.json").write_text(json.dumps(trajectory, indent=2))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
