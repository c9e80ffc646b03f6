"""Replay adapters (no Docker): tool vocabularies of terminus-2, claude-code, codex and
copilot-cli map to replay actions; unknown tools make a trial not replayable; the Codex
apply_patch envelope applies; rendering keeps commands as data files."""

import json

import pytest

from evaluation import replay
from tests.evaluation.verification_support import atif


def test_terminus_keystrokes_stream():
    plan = replay.plan_from_trajectory(atif("terminus-2", [
        ("bash_command", {"keystrokes": "cd /workspace\n", "duration": 0.1}),
        ("bash_command", {"keystrokes": "C-c", "duration": 0.1}),
        ("bash_command", {"keystrokes": "echo hi > a.txt\n"}),
        ("mark_task_complete", {})]))
    assert plan.replayable and plan.vocabulary == "terminus-2" and plan.mode == replay.STREAM
    files = replay.render_replay(plan)
    assert files["keystrokes.txt"] == b"cd /workspace\necho hi > a.txt\n"
    assert b"bash -x -s < /replay/keystrokes.txt" in files["run.sh"]


def test_claude_code_tools():
    plan = replay.plan_from_trajectory(atif("claude-code", [
        ("Bash", {"command": "ls", "description": "list"}),
        ("Read", {"file_path": "/x"}), ("Glob", {"pattern": "*"}), ("TodoWrite", {"todos": []}),
        ("Write", {"file_path": "/workspace/a", "content": "A"}),
        ("Edit", {"file_path": "/workspace/a", "old_string": "A", "new_string": "B"}),
        ("MultiEdit", {"file_path": "/workspace/a", "edits": [
            {"old_string": "B", "new_string": "C"}, {"old_string": "C", "new_string": "D",
                                                     "replace_all": True}]})]))
    assert plan.replayable
    assert [a.kind for a in plan.actions] == ["shell", "write", "edit", "edit", "edit"]
    files = replay.render_replay(plan)
    actions = json.loads(files["actions.json"])
    assert [a["kind"] for a in actions] == ["write", "edit", "edit", "edit"]
    assert files["cmd-0000.sh"].endswith(b"ls\n")


def test_codex_tools_and_arguments_as_json_string():
    traj = atif("codex", [
        ("shell", {"command": ["bash", "-lc", "echo 1 > x"], "workdir": "/workspace"}),
        ("shell", {"command": ["python3", "-c", "print(1)"]}),
        ("exec_command", {"cmd": "cat x"}),
        ("apply_patch", {"input": "*** Begin Patch\n*** Add File: y\n+hi\n*** End Patch"}),
        ("update_plan", {"plan": []})])
    traj["steps"][1]["tool_calls"][0]["arguments"] = json.dumps(
        traj["steps"][1]["tool_calls"][0]["arguments"])
    plan = replay.plan_from_trajectory(traj)
    assert plan.replayable, plan.unknown_tools
    assert [a.kind for a in plan.actions] == ["shell", "shell", "shell", "patch"]
    assert plan.actions[0].command == "echo 1 > x" and plan.actions[0].workdir == "/workspace"
    assert plan.actions[1].command == "python3 -c 'print(1)'"


def test_copilot_cli_tools():
    plan = replay.plan_from_trajectory(atif("copilot-cli", [
        ("report_intent", {"intent": "x"}), ("bash", {"command": "ls", "sessionId": "1"}),
        ("view", {"path": "/workspace"}),
        ("create", {"path": "/workspace/a", "file_text": "A"}),
        ("edit", {"path": "/workspace/a", "old_str": "A", "new_str": "B"}),
        ("str_replace_editor", {"command": "create", "path": "/w/b", "file_text": "x"})]))
    assert plan.replayable
    assert [a.kind for a in plan.actions] == ["shell", "write", "edit", "write"]


@pytest.mark.parametrize("agent,calls,unknown", [
    ("claude-code", [("Bash", {"command": "ls"}), ("NotebookEdit", {})], ["NotebookEdit"]),
    ("codex", [("write_stdin", {"chars": "y\n"})], ["write_stdin"]),
    ("copilot-cli", [("write_bash", {"input": "y"})], ["write_bash"]),
    ("terminus-2", [("browser_click", {})], ["browser_click"]),
    ("mystery-harness", [("frobnicate", {})], ["frobnicate"]),
])
def test_unknown_tools_make_a_trial_not_replayable(agent, calls, unknown):
    plan = replay.plan_from_trajectory(atif(agent, calls))
    assert not plan.replayable and plan.unknown_tools == unknown


def test_subagents_are_not_replayable_and_unknown_harness_inferred():
    traj = atif("claude-code", [("Bash", {"command": "ls"})])
    traj["subagent_trajectories"] = [atif("claude-code", [])]
    assert not replay.plan_from_trajectory(traj).replayable
    plan = replay.plan_from_trajectory(atif("my-wrapper", [("Bash", {"command": "ls"}),
                                                           ("Write", {"file_path": "a"})]))
    assert plan.vocabulary == "claude-code" and plan.replayable


def test_codex_apply_patch_envelope(tmp_path):
    namespace = {}
    exec(replay.APPLY_PY.rsplit("main()", 1)[0], namespace)  # noqa: S102 - our own code
    (tmp_path / "f.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "gone.txt").write_text("x")
    namespace["apply_patch"](
        "*** Begin Patch\n"
        "*** Update File: f.txt\n@@\n one\n-two\n+TWO\n three\n"
        "*** Add File: sub/new.txt\n+hello\n+world\n"
        "*** Delete File: gone.txt\n"
        "*** End Patch\n", str(tmp_path))
    assert (tmp_path / "f.txt").read_text() == "one\nTWO\nthree\n"
    assert (tmp_path / "sub" / "new.txt").read_text() == "hello\nworld\n"
    assert not (tmp_path / "gone.txt").exists()


def test_each_vocabulary_is_registered_once_with_its_mode_and_aliases():
    assert list(replay.VOCABULARIES) == ["terminus-2", "claude-code", "codex", "copilot-cli"]
    assert {n: v.mode for n, v in replay.VOCABULARIES.items()} == {
        "terminus-2": replay.STREAM, "claude-code": replay.COMMANDS,
        "codex": replay.COMMANDS, "copilot-cli": replay.COMMANDS}
    assert replay.ALIASES == {"terminus": "terminus-2", "terminus-1": "terminus-2",
                              "claude": "claude-code", "copilot": "copilot-cli"}
    for alias, name in replay.ALIASES.items():
        assert alias in replay.VOCABULARIES[name].aliases
        assert replay.vocabulary_for(alias, set()) == name
    with pytest.raises(ValueError, match="already registered"):
        replay.vocabulary("codex")(lambda name, args: [])
    with pytest.raises(ValueError, match="already registered"):
        replay.vocabulary("claude-2", aliases=("claude",))(lambda name, args: [])
    with pytest.raises(ValueError, match="mode"):
        replay.vocabulary("x", mode="telepathy")


def test_adding_a_vocabulary_is_one_registered_adapter(monkeypatch):
    """A new harness: one decorated adapter, and plans of its trajectories (and of its alias)
    use it; nothing else changes."""
    monkeypatch.setattr(replay, "VOCABULARIES", dict(replay.VOCABULARIES))
    monkeypatch.setattr(replay, "ALIASES", dict(replay.ALIASES))

    @replay.vocabulary("gemini-cli", aliases=("gemini",))
    def _gemini(name, args):
        if name == "run_shell_command":
            return [replay.ReplayAction("shell", name, command=args["command"])]
        if name == "write_file":
            return [replay.ReplayAction("write", name, path=args["file_path"],
                                        content=args["content"])]
        if name == "read_file":
            return []
        raise replay.UnknownTool(name)

    calls = [("run_shell_command", {"command": "ls"}), ("read_file", {"path": "/x"}),
             ("write_file", {"file_path": "/workspace/out.json", "content": "{}"})]
    for harness in ("gemini-cli", "gemini"):
        plan = replay.plan_from_trajectory(atif(harness, calls))
        assert plan.replayable and plan.vocabulary == "gemini-cli"
        assert plan.mode == replay.COMMANDS
        assert [a.kind for a in plan.actions] == ["shell", "write"]
    files = replay.render_replay(plan)
    assert b"ls" in files["cmd-0000.sh"]
    unknown = replay.plan_from_trajectory(atif("gemini", [("google_web_search", {})]))
    assert not unknown.replayable and unknown.unknown_tools == ["google_web_search"]
