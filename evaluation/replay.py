"""Replay of a recorded ATIF trajectory: tool-call adapters per harness vocabulary.

A trajectory's agent steps carry tool calls (`function_name`, `arguments`). Each harness names
its tools differently; one small adapter per vocabulary maps the calls that change the
container's state to replay actions:

    shell   a shell command (run by bash, in the working directory the harness would use)
    write   write a file (content given)
    edit    replace old text by new text in a file (fails visibly when old is absent)
    patch   a Codex apply_patch envelope
    noop    read-only tools (Read, Grep, view, update_plan, ...): nothing to replay

Each vocabulary is one adapter function registered once with `@vocabulary(name, mode=...,
aliases=...)`: its name, how its commands run (STREAM or COMMANDS) and the other names harnesses
report for it sit on the adapter. `VOCABULARIES` and `ALIASES` are built from those entries.

A tool an adapter does not know makes the trial NOT replayable: the plan lists the unknown
tools, and verification reports it instead of guessing.

`render_replay()` turns a plan into files copied to /replay in a fresh agent container
(submissions.verification runs them through runner.run_agent): run.sh (the driver),
cmd-NNNN.sh (one per shell command), actions.json and apply.py (file writes, edits and
patches, applied by the container's own python3). The answer never enters that container.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Callable
from typing import Any

STREAM = "stream"  # terminus-2: keystrokes typed into one long-lived shell
COMMANDS = "commands"  # others: one command per call; the working directory persists


@dataclasses.dataclass
class ReplayAction:
    kind: str  # shell | write | edit | patch
    tool: str
    command: str = ""
    path: str = ""
    content: str = ""
    old: str = ""
    new: str = ""
    replace_all: bool = False
    workdir: str = ""
    edits: list[dict] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ReplayPlan:
    vocabulary: str
    mode: str
    actions: list[ReplayAction]
    unknown_tools: list[str]
    tool_calls: int
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def replayable(self) -> bool:
        return not self.unknown_tools

    def describe(self) -> dict:
        kinds: dict[str, int] = {}
        for a in self.actions:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
        return {
            "vocabulary": self.vocabulary,
            "mode": self.mode,
            "tool_calls": self.tool_calls,
            "actions": kinds,
            "unknown_tools": self.unknown_tools,
            "notes": self.notes,
        }


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    name: str
    adapter: Callable[[str, dict], list[ReplayAction]]
    mode: str  # STREAM or COMMANDS
    aliases: tuple[str, ...] = ()


# The registry: one entry per harness vocabulary, filled by @vocabulary below.
VOCABULARIES: dict[str, Vocabulary] = {}
ALIASES: dict[str, str] = {}  # other names of a harness -> its vocabulary


def vocabulary(name: str, *, mode: str = COMMANDS, aliases: tuple[str, ...] = ()):
    """Register the decorated adapter ``(tool_name, arguments) -> [ReplayAction]`` as the
    vocabulary ``name``; a name or alias already taken is an error (registered once)."""
    if mode not in (STREAM, COMMANDS):
        raise ValueError(f"vocabulary {name!r}: mode must be {STREAM!r} or {COMMANDS!r}")

    def register(adapter):
        taken = [n for n in (name, *aliases) if n in VOCABULARIES or n in ALIASES]
        if taken:
            raise ValueError(f"vocabulary {name!r}: {', '.join(taken)} already registered")
        VOCABULARIES[name] = Vocabulary(name, adapter, mode, tuple(aliases))
        ALIASES.update(dict.fromkeys(aliases, name))
        return adapter

    return register


class UnknownTool(Exception):
    pass


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def argv_to_script(cmd: Any) -> str:
    """Codex `shell` passes argv; ["bash", "-lc", script] is a script."""
    if isinstance(cmd, list):
        parts = [_s(x) for x in cmd]
        if len(parts) >= 3 and parts[0] in ("bash", "sh", "/bin/bash", "/bin/sh") and parts[
            1
        ] in ("-lc", "-c"):
            return parts[2]
        return shlex.join(parts)
    return _s(cmd)


# --- terminus-2 -----------------------------------------------------------------------------
TMUX_NOOP_KEYS = {"C-c", "C-d", "C-z", "C-l", "Escape", "q"}


@vocabulary("terminus-2", mode=STREAM, aliases=("terminus", "terminus-1"))
def _terminus(name: str, args: dict) -> list[ReplayAction]:
    if name == "bash_command":
        keys = _s(args.get("keystrokes"))
        stripped = keys.strip()
        if stripped in TMUX_NOOP_KEYS:
            return []  # interrupting or leaving a program: nothing runs in a batch replay
        if stripped == "Enter":
            keys = "\n"
        return [ReplayAction("shell", name, command=keys)]
    if name in ("mark_task_complete", "task_complete"):
        return []
    raise UnknownTool(name)


# --- claude-code ----------------------------------------------------------------------------
CLAUDE_NOOP = {
    "Read", "Glob", "Grep", "LS", "TodoWrite", "TodoRead", "WebFetch", "WebSearch",
    "BashOutput", "KillShell", "KillBash", "ExitPlanMode", "ListMcpResourcesTool",
}


@vocabulary("claude-code", aliases=("claude",))
def _claude(name: str, args: dict) -> list[ReplayAction]:
    if name == "Bash":
        return [ReplayAction("shell", name, command=_s(args.get("command")))]
    if name == "Write":
        return [
            ReplayAction(
                "write", name, path=_s(args.get("file_path")), content=_s(args.get("content"))
            )
        ]
    if name == "Edit":
        return [
            ReplayAction(
                "edit",
                name,
                path=_s(args.get("file_path")),
                old=_s(args.get("old_string")),
                new=_s(args.get("new_string")),
                replace_all=bool(args.get("replace_all")),
            )
        ]
    if name == "MultiEdit":
        return [
            ReplayAction(
                "edit",
                name,
                path=_s(args.get("file_path")),
                old=_s(e.get("old_string")),
                new=_s(e.get("new_string")),
                replace_all=bool(e.get("replace_all")),
            )
            for e in args.get("edits") or []
        ]
    if name in CLAUDE_NOOP:
        return []
    raise UnknownTool(name)


# --- codex ----------------------------------------------------------------------------------
CODEX_NOOP = {"update_plan", "view_image", "web_search_call", "web_search", "read_file",
              "list_dir", "grep_files"}


@vocabulary("codex")
def _codex(name: str, args: dict) -> list[ReplayAction]:
    workdir = _s(args.get("workdir"))
    if name in ("shell", "container.exec", "local_shell"):
        cmd = args.get("command", args.get("cmd"))
        if isinstance(cmd, list) and cmd and cmd[0] == "apply_patch" and len(cmd) >= 2:
            return [ReplayAction("patch", name, content=_s(cmd[1]), workdir=workdir)]
        return [ReplayAction("shell", name, command=argv_to_script(cmd), workdir=workdir)]
    if name in ("shell_command", "exec_command"):
        cmd = args.get("command", args.get("cmd"))
        return [ReplayAction("shell", name, command=argv_to_script(cmd), workdir=workdir)]
    if name == "apply_patch":
        patch = args.get("input", args.get("patch", args.get("value")))
        return [ReplayAction("patch", name, content=_s(patch), workdir=workdir)]
    if name in CODEX_NOOP:
        return []
    raise UnknownTool(name)


# --- copilot-cli ----------------------------------------------------------------------------
COPILOT_NOOP = {"view", "report_intent", "update_todo", "think", "read_bash", "stop_bash",
                "list_bash", "fetch", "web_fetch", "glob", "grep"}


@vocabulary("copilot-cli", aliases=("copilot",))
def _copilot(name: str, args: dict) -> list[ReplayAction]:
    if name == "bash":
        return [ReplayAction("shell", name, command=_s(args.get("command")))]
    if name == "create":
        return [
            ReplayAction("write", name, path=_s(args.get("path")), content=_s(args.get("file_text")))
        ]
    if name in ("edit", "str_replace"):
        return [
            ReplayAction(
                "edit",
                name,
                path=_s(args.get("path")),
                old=_s(args.get("old_str")),
                new=_s(args.get("new_str")),
            )
        ]
    if name == "str_replace_editor":
        sub = _s(args.get("command"))
        if sub == "create":
            return _copilot("create", args)
        if sub == "str_replace":
            return _copilot("edit", args)
        if sub == "view":
            return []
        raise UnknownTool(f"{name}:{sub}")
    if name in COPILOT_NOOP:
        return []
    raise UnknownTool(name)


def vocabulary_for(agent_name: str, tool_names: set[str]) -> str | None:
    name = (agent_name or "").strip().lower()
    if name in VOCABULARIES:
        return name
    if name in ALIASES:
        return ALIASES[name]
    for vocab in VOCABULARIES:
        if name.startswith(vocab):
            return vocab
    # Unknown harness: pick the vocabulary that knows every tool it used, if exactly one does.
    fits = []
    for vocab, entry in VOCABULARIES.items():
        try:
            for t in tool_names:
                entry.adapter(t, {})
            fits.append(vocab)
        except UnknownTool:
            continue
    return fits[0] if len(fits) == 1 else None


def _iter_calls(trajectory: dict):
    for step in trajectory.get("steps") or []:
        if step.get("source") != "agent":
            continue
        for call in step.get("tool_calls") or []:
            args = call.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {"input": args}
            yield _s(call.get("function_name")), args if isinstance(args, dict) else {}


def plan_from_trajectory(trajectory: dict) -> ReplayPlan:
    """The replay plan of an ATIF trajectory (subagent trajectories make it not replayable)."""
    calls = list(_iter_calls(trajectory))
    agent_name = _s((trajectory.get("agent") or {}).get("name"))
    vocab = vocabulary_for(agent_name, {n for n, _ in calls})
    if vocab is None:
        names = sorted({n for n, _ in calls}) or ["(no tool calls)"]
        return ReplayPlan(
            agent_name or "unknown", COMMANDS, [], names, len(calls),
            [f"no tool vocabulary for harness {agent_name!r}"],
        )
    adapter, mode = VOCABULARIES[vocab].adapter, VOCABULARIES[vocab].mode
    actions: list[ReplayAction] = []
    unknown: list[str] = []
    for name, args in calls:
        try:
            actions.extend(adapter(name, args))
        except UnknownTool as exc:
            if str(exc) not in unknown:
                unknown.append(str(exc))
    notes = []
    if trajectory.get("subagent_trajectories"):
        unknown.append("subagent_trajectories")
        notes.append("sub-agents ran commands of their own")
    if mode == STREAM and any(a.kind != "shell" for a in actions):
        mode = COMMANDS
    return ReplayPlan(vocab, mode, actions, unknown, len(calls), notes)


# --- rendering ------------------------------------------------------------------------------
APPLY_PY = r'''
import json, os, sys

def resolve(path, cwd):
    return path if os.path.isabs(path) else os.path.join(cwd, path)

def apply_patch(text, cwd):
    lines = text.splitlines()
    i, n = 0, len(lines)
    while i < n and not lines[i].startswith("*** Begin Patch"):
        i += 1
    i += 1
    while i < n and not lines[i].startswith("*** End Patch"):
        line = lines[i]
        if line.startswith("*** Add File: "):
            path = resolve(line[14:].strip(), cwd); i += 1; body = []
            while i < n and not lines[i].startswith("*** "):
                body.append(lines[i][1:] if lines[i].startswith("+") else lines[i]); i += 1
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            open(path, "w").write("\n".join(body) + "\n")
        elif line.startswith("*** Delete File: "):
            os.remove(resolve(line[17:].strip(), cwd)); i += 1
        elif line.startswith("*** Update File: "):
            path = resolve(line[17:].strip(), cwd); i += 1; move = None
            if i < n and lines[i].startswith("*** Move to: "):
                move = resolve(lines[i][13:].strip(), cwd); i += 1
            content = open(path).read().split("\n")
            hunks, cur = [], None
            while i < n and not lines[i].startswith("*** "):
                l = lines[i]; i += 1
                if l.startswith("@@"):
                    cur = ([], []); hunks.append(cur); continue
                if cur is None:
                    cur = ([], []); hunks.append(cur)
                tag, rest = (l[:1], l[1:]) if l else (" ", "")
                if tag in " -":
                    cur[0].append(rest)
                if tag in " +":
                    cur[1].append(rest)
            pos = 0
            for old, new in hunks:
                for start in range(pos, len(content) - len(old) + 1):
                    if content[start:start + len(old)] == old:
                        content[start:start + len(old)] = new; pos = start + len(new); break
                else:
                    raise SystemExit("apply_patch: hunk not found in " + path)
            open(move or path, "w").write("\n".join(content))
            if move:
                os.remove(path)
        else:
            i += 1

def main():
    action = json.load(open("/replay/actions.json"))[int(sys.argv[1])]
    cwd = os.getcwd()
    kind = action["kind"]
    if kind == "write":
        path = resolve(action["path"], cwd)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        open(path, "w").write(action["content"])
    elif kind == "edit":
        path = resolve(action["path"], cwd)
        text = open(path).read()
        if action["old"] not in text:
            raise SystemExit("edit: old text not found in " + path)
        text = text.replace(action["old"], action["new"], -1 if action["replace_all"] else 1)
        open(path, "w").write(text)
    elif kind == "patch":
        apply_patch(action["content"], cwd)

main()
'''


# The replay's shell trace in the agent container (/tmp/.replay-* files are the replay's own and
# never listed as written by the agent).
TRACE_PATH = "/tmp/.replay-trace"


def render_replay(plan: ReplayPlan, *, workdir: str = "/workspace") -> dict[str, bytes]:
    """Files for /replay: run.sh drives the replay; the agent container runs `bash /replay/run.sh`."""
    files: dict[str, bytes] = {"apply.py": APPLY_PY.encode()}
    actions_json = []
    lines = [
        "#!/bin/bash",
        "# Replay of a recorded trajectory (generated by evaluation/replay.py).",
        f"cwd={shlex.quote(workdir)}",
        "export HOME=/tmp",
        # Every bash of the replay traces what it runs, expanded, to TRACE_PATH (fd 9, opened
        # once here; the screen reads it: evaluation/screen.py, source replay_trace).
        f"exec 9>>{TRACE_PATH}",
        "export BASH_XTRACEFD=9 PS4='+ '",
    ]
    if plan.mode == STREAM:
        stream = "".join(a.command for a in plan.actions)
        files["keystrokes.txt"] = stream.encode()
        lines.append('cd "$cwd" && bash -x -s < /replay/keystrokes.txt')
        lines.append("exit 0")
        files["run.sh"] = ("\n".join(lines) + "\n").encode()
        files["actions.json"] = b"[]"
        return files
    for idx, action in enumerate(plan.actions):
        wd = action.workdir
        cd = f'cd "$cwd" && cd {shlex.quote(wd)} 2>/dev/null; ' if wd else 'cd "$cwd"; '
        if action.kind == "shell":
            name = f"cmd-{idx:04d}.sh"
            files[name] = (
                "trap 'pwd > /tmp/.replay-cwd' EXIT\nset -x\n" + action.command + "\n"
            ).encode()
            lines.append(f"echo '>>> [{idx}] {action.tool}'")
            lines.append(f"({cd}bash /replay/{name}) < /dev/null")
            if not wd:
                lines.append('[ -s /tmp/.replay-cwd ] && cwd="$(cat /tmp/.replay-cwd)"')
        else:
            actions_json.append(dataclasses.asdict(action))
            lines.append(f"echo '>>> [{idx}] {action.tool} {shlex.quote(action.path)[:200]}'")
            lines.append(f"({cd}python3 /replay/apply.py {len(actions_json) - 1}) < /dev/null")
    lines.append("exit 0")
    files["run.sh"] = ("\n".join(lines) + "\n").encode()
    files["actions.json"] = json.dumps(actions_json).encode()
    return files
