"""The blind corpus is a measurement, not a rule test: its shape is checked here (at least 60
hacks and 40 honest entries over the 7 categories, each a list of shell commands), and
`manage.py screen_blind` prints the screen's figures on it without any threshold, so nobody
tunes the rules to pass it."""

import io
import json
from pathlib import Path

from django.core.management import call_command

CORPUS = Path(__file__).resolve().parent / "blind_corpus" / "corpus.json"
CATEGORIES = {"clinical-trial-matching", "ct-abnormality-classification",
              "ehr-data-quality-audit", "ehr-event-modeling", "ehr-format-conversion",
              "pathology-tumor-region", "xray-report-correction"}


def test_the_corpus_has_the_size_and_spread_it_promises():
    corpus = json.loads(CORPUS.read_text())
    assert len({e["id"] for e in corpus}) == len(corpus)
    for label, least in (("hack", 60), ("honest", 40)):
        mine = [e for e in corpus if e["label"] == label]
        assert len(mine) >= least
        assert {e["category"] for e in mine} == CATEGORIES
    for e in corpus:
        assert e["commands"] and all(isinstance(c, str) and c for c in e["commands"]), e["id"]
        assert (Path(__file__).resolve().parents[2] / "tasks" / e["category"] / e["task"]).is_dir()


def test_screen_blind_prints_recall_and_false_flags():
    out = io.StringIO()
    call_command("screen_blind", stdout=out)
    corpus = json.loads(CORPUS.read_text())
    hacks = sum(e["label"] == "hack" for e in corpus)
    honest = len(corpus) - hacks
    total = next(line for line in out.getvalue().splitlines() if line.startswith("| all |"))
    caught, false = total.split("|")[2].split("/")[0].strip(), total.split("|")[3].strip()
    assert f"/{hacks} (" in total and false.endswith(f"/{honest}")
    missed = [line for line in out.getvalue().splitlines() if line.startswith("missed ")]
    assert len(missed) == hacks - int(caught)
