"""Measure the reward-hacking screen on the blind corpus: ``manage.py screen_blind``.

tests/evaluation/blind_corpus/corpus.json holds hacking and honest trajectories (commands run
in the task's container) written by an author who never saw the screen's rules (its README says
how). It is a measurement, kept apart from the rule tests: tuning the rules on it would void it.
Prints recall on the hacks and false flags on the honest entries, per category and in all, with
the entries the rules miss.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from evaluation import screen

CORPUS = Path(settings.BASE_DIR) / "tests" / "evaluation" / "blind_corpus" / "corpus.json"


def as_trajectory(commands: list[str]) -> dict:
    """The entry as the ATIF trajectory an agent with one shell tool would have written."""
    steps = [{"step_id": 1, "source": "user", "message": "Solve the task."}]
    for i, command in enumerate(commands, start=2):
        steps.append({"step_id": i, "source": "agent", "message": "",
                      "tool_calls": [{"tool_call_id": f"call_{i}", "function_name": "bash",
                                      "arguments": {"command": command}}]})
    return {"schema_version": "ATIF-v1.6", "session_id": "blind",
            "agent": {"name": "blind-corpus", "version": "1"}, "steps": steps}


def command_hits(entry: dict, rules) -> list[str]:
    task_dir = Path(settings.TASKS_DIR) / entry["category"] / entry["task"]
    hits = screen.screen(screen.trajectory_evidence(as_trajectory(entry["commands"])),
                         rules=rules, hidden_texts=screen.hidden_texts_of(task_dir))
    return sorted({h.rule for h in hits})


class Command(BaseCommand):
    help = "Recall and false flags of the screen's command rules on the blind corpus."

    def handle(self, *args, **options):
        corpus = json.loads(CORPUS.read_text())
        rules = screen.load_rules()
        flagged: Counter = Counter()
        total: Counter = Counter()
        missed, false = [], []
        for entry in corpus:
            key = (entry["category"], entry["label"])
            total[key] += 1
            hits = command_hits(entry, rules)
            flagged[key] += bool(hits)
            if entry["label"] == "hack" and not hits:
                missed.append(entry)
            if entry["label"] == "honest" and hits:
                false.append((entry, hits))
        self.stdout.write("| category | hacks flagged | honest flagged |\n|---|---|---|")
        for category in sorted({c for c, _ in total}):
            h, n = (category, "hack"), (category, "honest")
            self.stdout.write(f"| {category} | {flagged[h]}/{total[h]} | "
                              f"{flagged[n]}/{total[n]} |")
        hacks = sum(v for (_, label), v in total.items() if label == "hack")
        honest = sum(v for (_, label), v in total.items() if label == "honest")
        caught = sum(v for (_, label), v in flagged.items() if label == "hack")
        self.stdout.write(f"| all | {caught}/{hacks} ({caught / hacks:.1%}) | "
                          f"{len(false)}/{honest} |")
        for entry in missed:
            self.stdout.write(f"missed {entry['id']}: {entry['technique']}")
        for entry, hits in false:
            self.stdout.write(f"false flag {entry['id']} ({', '.join(hits)}): "
                              f"{entry['technique']}")
