"""Pure tests of evaluation.graders (no Django, no database): hand-computed boundaries of every
success criterion, malformed input, and hypothesis properties of the invariants.

Run: .venv/bin/python -m pytest tests/evaluation -q -p no:django
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from evaluation import grading as base  # noqa: E402
from evaluation.categories.clinical_trial_matching import grader as ctm  # noqa: E402
from evaluation.categories.ehr_data_quality_audit import grader as audit  # noqa: E402
from evaluation.categories.ehr_event_modeling import grader as events  # noqa: E402
from evaluation.categories.ehr_format_conversion import grader as meds  # noqa: E402
from evaluation.categories.pathology_tumor_region import grader as patho  # noqa: E402
from evaluation.graders import (  # noqa: E402
    GRADERS,
    GradingInputError,
    JudgeUnavailable,
    grade,
)


def write(path, obj):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def run(tmp_path, category, answer, submission):
    a = write(tmp_path / "answer.json", answer)
    s = write(tmp_path / "submission.json", submission)
    return grade(category, a, s)


def test_registry_has_the_seven_categories():
    assert set(GRADERS) == {
        "xray-report-correction",
        "pathology-tumor-region",
        "ct-abnormality-classification",
        "ehr-data-quality-audit",
        "ehr-format-conversion",
        "ehr-event-modeling",
        "clinical-trial-matching",
    }


def test_unknown_category_is_an_input_error(tmp_path):
    with pytest.raises(GradingInputError, match="unknown category"):
        grade("no-such-category", tmp_path / "a", tmp_path / "b")


# ------------------------------------------------------------------ safe JSON loader


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"a": 1,}', "line 1 column"),
        ('{"a": NaN}', "NaN is not allowed"),
        ('{"a": -Infinity}', "-Infinity is not allowed"),
        ('{"a": 1e999}', "not finite"),
        ('{"a": 1, "a": 2}', 'duplicate key "a"'),
        ('{"a": 1} trailing', "Extra data"),
        ('{"a": ' + "9" * 50 + "}", "too large"),
        ("[" * 100_000 + "]" * 100_000, "nesting is too deep"),
        ("   ", "empty"),
        ('{"a":\n  [1, 2,\n  }', "line 3 column"),
    ],
)
def test_loader_rejects_malformed_json(tmp_path, text, problem):
    path = write(tmp_path / "sub.json", text)
    with pytest.raises(GradingInputError) as info:
        base.load_json(path)
    assert str(path) in str(info.value)
    assert problem in str(info.value)


def test_loader_rejects_bom_invalid_utf8_oversize_dirs_symlinks(tmp_path):
    bom = tmp_path / "bom.json"
    bom.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    with pytest.raises(GradingInputError, match="byte order mark"):
        base.load_json(bom)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(GradingInputError, match="invalid UTF-8 at byte 7"):
        base.load_json(bad)
    big = write(tmp_path / "big.json", '{"a": "' + "x" * 2000 + '"}')
    with pytest.raises(GradingInputError, match="too large"):
        base.load_json(big, max_bytes=1000)
    with pytest.raises(GradingInputError, match="is a directory"):
        base.load_json(tmp_path)
    with pytest.raises(GradingInputError, match="not found"):
        base.load_json(tmp_path / "missing.json")
    link = tmp_path / "link.json"
    link.symlink_to(big)
    with pytest.raises(GradingInputError, match="symbolic link"):
        base.load_json(link)


def test_loader_size_cap_is_checked_before_reading(tmp_path, monkeypatch):
    sparse = tmp_path / "huge.json"
    with open(sparse, "wb") as handle:
        handle.truncate(base.MAX_JSON_BYTES + 1)  # sparse: costs no disk
    monkeypatch.setattr(base.os, "open", lambda *a, **k: pytest.fail("file was opened"))
    with pytest.raises(GradingInputError, match="too large"):
        base.load_json(sparse)


# ------------------------------------------------------------------ pathology-tumor-region

GRID = {"rows": 10, "cols": 10}


def tiles(n, start=0):
    return [[(start + i) // 10, (start + i) % 10] for i in range(n)]


def test_f1_exactly_0_9_passes(tmp_path):
    # tp=9, fp=1, fn=1: P = R = 0.9, F1 = 18/20 = 0.9 exactly.
    gold = tiles(10)  # tiles 0..9
    sub = tiles(9) + tiles(1, start=50)  # 9 right, 1 wrong, tile 9 missed
    result = run(tmp_path, "pathology-tumor-region", {"grid": GRID, "tumor_tiles": gold}, {"tumor_tiles": sub})
    assert (result.metrics["tp"], result.metrics["fp"], result.metrics["fn"]) == (9, 1, 1)
    assert result.metrics["f1"] == pytest.approx(0.9)
    assert result.passed


def test_f1_just_below_0_9_fails(tmp_path):
    # tp=9, fp=2, fn=1: F1 = 18/21 = 0.857...
    gold = tiles(10)
    sub = tiles(9) + tiles(2, start=50)
    result = run(tmp_path, "pathology-tumor-region", {"grid": GRID, "tumor_tiles": gold}, {"tumor_tiles": sub})
    assert result.metrics["f1"] == pytest.approx(18 / 21)
    assert not result.passed
    # tp=89, fp=10, fn=10: F1 = 178/198 = 0.8989... (just below 0.9)
    assert patho.f1_fraction(89, 10, 10) == Fraction(178, 198)
    assert not patho.score(set(range(99)), set(range(10, 109))).passed


def test_f1_threshold_uses_exact_arithmetic():
    # 2*tp/(2tp+fp+fn) == 9/10 exactly for many combinations; none may fail by float rounding.
    for tp in range(1, 200):
        for extra in range(0, 50):
            f1 = patho.f1_fraction(tp, extra, 0)
            gold, pred = set(range(tp)), set(range(tp + extra))
            assert patho.score(gold, pred).passed == (f1 >= Fraction(9, 10))


def test_pathology_empty_sets_and_duplicates(tmp_path):
    both_empty = run(tmp_path, "pathology-tumor-region", {"grid": GRID, "tumor_tiles": []}, {"tumor_tiles": []})
    assert both_empty.passed and both_empty.metrics["f1"] == 1.0
    nothing_found = run(
        tmp_path, "pathology-tumor-region", {"grid": GRID, "tumor_tiles": [[1, 1]]}, {"tumor_tiles": []}
    )
    assert not nothing_found.passed and nothing_found.metrics["f1"] == 0.0
    false_alarm = run(tmp_path, "pathology-tumor-region", {"grid": GRID, "tumor_tiles": []}, {"tumor_tiles": [[1, 1]]})
    assert not false_alarm.passed
    dup = run(
        tmp_path,
        "pathology-tumor-region",
        {"grid": GRID, "tumor_tiles": [[1, 1], [2, 2]]},
        {"tumor_tiles": [[1, 1], [1, 1], [2, 2], [2, 2]]},
    )
    assert dup.passed and dup.metrics["submitted_tiles"] == 2 and dup.metrics["fp"] == 0


@pytest.mark.parametrize(
    "submission, problem",
    [
        ({"tumor_tiles": [[1, 2, 3]]}, "[row, col] pair"),
        ({"tumor_tiles": [[1.5, 2]]}, "must be an integer"),
        ({"tumor_tiles": [[True, 2]]}, "must be an integer"),
        ({"tumor_tiles": "1,2"}, "must be a JSON array"),
        ({"tiles": []}, 'missing the key "tumor_tiles"'),
        ([], "must be a JSON object"),
    ],
)
def test_pathology_malformed_submission(tmp_path, submission, problem):
    with pytest.raises(GradingInputError) as info:
        run(tmp_path, "pathology-tumor-region", {"grid": GRID, "tumor_tiles": []}, submission)
    assert "submission.json" in str(info.value) and problem in str(info.value)


def test_pathology_tiles_outside_the_grid_are_false_positives_not_invalid(tmp_path):
    """Grader review: a tile outside the grid is a wrong answer, graded as one."""
    answer = {"grid": GRID, "tumor_tiles": [[r, c] for r in range(5) for c in range(2)]}
    one_off = run(tmp_path, "pathology-tumor-region", answer,
                  {"tumor_tiles": answer["tumor_tiles"] + [[10, 0]]})
    assert one_off.passed  # F1 = 20/21 >= 0.9
    assert (one_off.metrics["fp"], one_off.metrics["outside_grid"]) == (1, 1)
    many = run(tmp_path, "pathology-tumor-region", answer,
               {"tumor_tiles": answer["tumor_tiles"] + [[-1, c] for c in range(5)]})
    assert not many.passed and many.metrics["fp"] == 5 and many.metrics["outside_grid"] == 5


def test_pathology_integral_json_numbers_are_tiles(tmp_path):
    """JSON has one number type: [1.0, 2] (numpy's float64 dumped by json) is the tile [1, 2]."""
    answer = {"grid": GRID, "tumor_tiles": [[1, 2], [3, 4]]}
    result = run(tmp_path, "pathology-tumor-region", answer, {"tumor_tiles": [[1.0, 2], [3, 4.0]]})
    assert result.passed and result.metrics["tp"] == 2


@settings(deadline=None)
@given(
    gold=st.sets(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30),
    pred=st.sets(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30),
)
def test_f1_is_symmetric_and_bounded(gold, pred):
    a, b = patho.score(gold, pred), patho.score(pred, gold)
    assert a.metrics["f1"] == b.metrics["f1"]
    assert 0.0 <= a.metrics["f1"] <= 1.0
    assert patho.score(gold, gold).passed  # a perfect submission always passes


# ------------------------------------------------------------------ ct-abnormality-classification

CT_ANSWER = {"labels": {"Lung nodule": "yes", "Emphysema": "no", "Pleural effusion": "yes"}}


def test_ct_all_right_passes_and_case_is_ignored(tmp_path):
    sub = {"labels": {"Lung nodule": "Yes", "Emphysema": " no ", "Pleural effusion": "YES"}}
    result = run(tmp_path, "ct-abnormality-classification", CT_ANSWER, sub)
    assert result.passed and result.metrics["accuracy"] == 1.0


def test_ct_one_wrong_or_missing_fails(tmp_path):
    wrong = {"labels": {"Lung nodule": "yes", "Emphysema": "yes", "Pleural effusion": "yes"}}
    result = run(tmp_path, "ct-abnormality-classification", CT_ANSWER, wrong)
    assert not result.passed
    assert result.metrics["false_positives"] == 1 and result.metrics["correct"] == 2
    missing = {"labels": {"Lung nodule": "yes", "Emphysema": "no"}}
    result = run(tmp_path, "ct-abnormality-classification", CT_ANSWER, missing)
    assert not result.passed and result.metrics["missing"] == 1
    assert result.metrics["accuracy"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "labels, problem",
    [
        ({"Lung nodule": True}, 'must be "yes" or "no"'),
        ({"Lung nodule": "maybe"}, 'must be "yes" or "no"'),
    ],
)
def test_ct_malformed(tmp_path, labels, problem):
    with pytest.raises(GradingInputError) as info:
        run(tmp_path, "ct-abnormality-classification", CT_ANSWER, {"labels": labels})
    assert problem in str(info.value)


def test_ct_a_label_for_an_unlisted_abnormality_is_ignored_not_invalid(tmp_path):
    """Grader review: saying more than asked does not reject a right labelling."""
    sub = {"labels": {**CT_ANSWER["labels"], "Cardiomegaly": "no"}}
    result = run(tmp_path, "ct-abnormality-classification", CT_ANSWER, sub)
    assert result.passed and result.metrics["extra_findings"] == 1
    wrong = {"labels": {"Lung nodule": "no", "Emphysema": "no", "Pleural effusion": "yes",
                        "Cardiomegaly": "yes"}}
    result = run(tmp_path, "ct-abnormality-classification", CT_ANSWER, wrong)
    assert not result.passed and result.metrics["false_negatives"] == 1


def test_ct_empty_answer_is_an_answer_error(tmp_path):
    with pytest.raises(GradingInputError, match="answer.json: the answer lists no findings"):
        run(tmp_path, "ct-abnormality-classification", {"labels": {}}, {"labels": {}})


# ------------------------------------------------------------------ ehr-data-quality-audit


def rows(n, table="labevents", start=0):
    return [{"table": table, "row_id": start + i} for i in range(n)]


def test_audit_precision_exactly_0_01_fails_and_just_above_passes(tmp_path):
    answer = {"error_rows": rows(1), "tables": ["labevents", "patients"]}
    # 1 error row among 100 flagged: recall 1, precision 1/100 = 0.01 -> not > 0.01 -> fail.
    exact = run(tmp_path, "ehr-data-quality-audit", answer, {"flagged_rows": rows(100)})
    assert exact.metrics["recall"] == 1.0 and exact.metrics["precision"] == 0.01
    assert not exact.passed
    # 99 flagged: precision 1/99 > 0.01 -> pass.
    above = run(tmp_path, "ehr-data-quality-audit", answer, {"flagged_rows": rows(99)})
    assert above.passed


def test_audit_recall_below_one_fails_and_duplicates_count_once(tmp_path):
    answer = {"error_rows": rows(3)}
    miss = run(tmp_path, "ehr-data-quality-audit", answer, {"flagged_rows": rows(2)})
    assert not miss.passed and miss.metrics["missed"] == 1
    # 1 true row flagged 150 times + 2 others; distinct flagged = 3 -> precision 1.
    dup = run(
        tmp_path,
        "ehr-data-quality-audit",
        {"error_rows": rows(1)},
        {"flagged_rows": rows(1) * 150 + rows(2, start=10)},
    )
    assert dup.passed and dup.metrics["flagged_rows"] == 3
    # Row ids compare by their text form: 5 and "5" are the same row; extra keys are ignored.
    text_ids = run(
        tmp_path,
        "ehr-data-quality-audit",
        {"error_rows": [{"table": "labevents", "row_id": 5}]},
        {"flagged_rows": [{"table": "labevents", "row_id": "5", "reason": "implausible"}]},
    )
    assert text_ids.passed


def test_audit_empty_sets(tmp_path):
    nothing = run(tmp_path, "ehr-data-quality-audit", {"error_rows": rows(2)}, {"flagged_rows": []})
    assert not nothing.passed and nothing.metrics["recall"] == 0.0
    with pytest.raises(GradingInputError, match="no error rows"):
        run(tmp_path, "ehr-data-quality-audit", {"error_rows": []}, {"flagged_rows": []})


@pytest.mark.parametrize(
    "flagged, problem",
    [
        ([{"table": "labevents"}], 'missing the key "row_id"'),
        ([{"table": "labevents", "row_id": 1.5}], "row_id must be an integer or a string"),
        ([{"table": "labevents", "row_id": True}], "row_id must be an integer or a string"),
        ([["labevents", 1]], "must be a JSON object"),
    ],
)
def test_audit_malformed(tmp_path, flagged, problem):
    answer = {"error_rows": rows(1), "tables": ["labevents", "patients"]}
    with pytest.raises(GradingInputError) as info:
        run(tmp_path, "ehr-data-quality-audit", answer, {"flagged_rows": flagged})
    assert problem in str(info.value)


def test_audit_a_flagged_row_of_a_clean_table_is_a_false_positive_without_a_tables_list(tmp_path):
    """Grader review: without "tables" in the answer, a row flagged in a table that has
    no errors was an input error (the grade was invalid); it is a false positive."""
    result = run(tmp_path, "ehr-data-quality-audit", {"error_rows": rows(1)},
                 {"flagged_rows": rows(1) + rows(1, table="patients")})
    assert result.passed and result.metrics["false_positives"] == 1
    alone = run(tmp_path, "ehr-data-quality-audit", {"error_rows": rows(1)},
                {"flagged_rows": rows(1, table="patients")})
    assert not alone.passed and alone.metrics["recall"] == 0.0
    # With "tables", the same; a table the task does not have is a false positive too.
    answer = {"error_rows": rows(1), "tables": ["labevents", "patients"]}
    result = run(tmp_path, "ehr-data-quality-audit", answer,
                 {"flagged_rows": rows(1) + rows(1, table="patients") + rows(1, table="nosuch")})
    assert result.passed and result.metrics["false_positives"] == 2
    assert result.metrics["flagged_unknown_tables"] == 1


def test_audit_an_integral_json_number_is_the_same_row_id(tmp_path):
    """A row_id of 17.0 (a pandas float column dumped by json) is the JSON number 17."""
    result = run(tmp_path, "ehr-data-quality-audit", {"error_rows": rows(1, start=17)},
                 {"flagged_rows": [{"table": "labevents", "row_id": 17.0}]})
    assert result.passed and result.metrics["true_positives"] == 1


@settings(deadline=None)
@given(
    gold=st.sets(st.integers(0, 300), min_size=1, max_size=30),
    extra=st.sets(st.integers(301, 5000), max_size=3000),
)
def test_audit_precision_rule_and_perfect_submission(gold, extra):
    gold_rows = {("t", str(g)) for g in gold}
    flagged = gold_rows | {("t", str(e)) for e in extra}
    result = audit.score(gold_rows, flagged)
    assert result.passed == (Fraction(len(gold), len(flagged)) > Fraction(1, 100))
    assert audit.score(gold_rows, gold_rows).passed


# ------------------------------------------------------------------ clinical-trial-matching


def ids(n, prefix="NCT", start=0):
    return [f"{prefix}{start + i:08d}" for i in range(n)]


def test_eligible_trial_at_rank_50_passes_and_51_fails(tmp_path):
    answer = {"eligible_trials": ["NCT-ELIGIBLE"]}
    at_50 = run(tmp_path, "clinical-trial-matching", answer, {"ranked_trials": ids(49) + ["NCT-ELIGIBLE"]})
    assert at_50.passed
    at_51 = run(tmp_path, "clinical-trial-matching", answer, {"ranked_trials": ids(50) + ["NCT-ELIGIBLE"]})
    assert not at_51.passed and at_51.metrics["recall_at_50"] == 0.0
    assert at_51.metrics["recall_all_ranked"] == 1.0


def test_duplicate_ids_do_not_consume_slots(tmp_path):
    answer = {"eligible_trials": ["NCT-ELIGIBLE"]}
    ranked = ids(10) * 5 + ids(39, start=10) + ["NCT-ELIGIBLE"]  # 90 entries, eligible is 50th distinct
    result = run(tmp_path, "clinical-trial-matching", answer, {"ranked_trials": ranked})
    assert result.passed and result.metrics["duplicate_ids"] == 40


def test_trials_partial_recall_empty_and_unknown(tmp_path):
    answer = {"eligible_trials": ["A", "B", "C", "D"], "all_trials": ["A", "B", "C", "D", "E"]}
    partial = run(tmp_path, "clinical-trial-matching", answer, {"ranked_trials": ["A", "E", "B", "C"]})
    assert not partial.passed and partial.metrics["recall_at_50"] == 0.75
    empty = run(tmp_path, "clinical-trial-matching", answer, {"ranked_trials": []})
    assert not empty.passed
    # Grader review: an id outside the corpus is a wrong id, graded (it used to make
    # the grade invalid).
    unknown = run(tmp_path, "clinical-trial-matching", answer,
                  {"ranked_trials": ["A", "Z", "B", "C", "D"]})
    assert unknown.passed and unknown.metrics["unknown_ids"] == 1
    with pytest.raises(GradingInputError, match="ranked_trials\\[1\\] must be a string"):
        run(tmp_path, "clinical-trial-matching", answer, {"ranked_trials": ["A", 7]})
    with pytest.raises(GradingInputError, match="no eligible trials"):
        run(tmp_path, "clinical-trial-matching", {"eligible_trials": []}, {"ranked_trials": []})


@settings(deadline=None)
@given(
    eligible=st.sets(st.integers(0, 120), min_size=1, max_size=20),
    ranked=st.lists(st.integers(0, 120), max_size=120),
    tail=st.lists(st.integers(0, 200), max_size=40),
)
def test_recall_at_50_ignores_ids_after_the_50th_distinct(eligible, ranked, tail):
    eligible = {str(e) for e in eligible}
    ranked = [str(r) for r in ranked]
    base_result = ctm.score(eligible, ranked)
    if len(set(ranked)) >= 50:
        extended = ctm.score(eligible, ranked + [str(t) for t in tail])
        assert extended.metrics["recall_at_50"] == base_result.metrics["recall_at_50"]
        assert extended.passed == base_result.passed
    assert 0.0 <= base_result.metrics["recall_at_50"] <= 1.0
    if len(eligible) <= 50:
        assert ctm.score(eligible, sorted(eligible) + ranked).passed  # perfect always passes


# ------------------------------------------------------------------ ehr-event-modeling


def test_auroc_hand_computed_with_ties():
    # positives: 0.8, 0.5; negatives: 0.5, 0.2, 0.1
    # pairs: (0.8 > all three) = 3; (0.5 vs 0.5) tie = 1/2; (0.5 > 0.2, 0.1) = 2 -> U = 5.5 of 6.
    labels = [1, 1, 0, 0, 0]
    scores = [0.8, 0.5, 0.5, 0.2, 0.1]
    assert events.auroc_fraction(labels, scores) == Fraction(11, 12)
    # all scores tied -> 1/2
    assert events.auroc_fraction([1, 0, 1, 0], [3, 3, 3, 3]) == Fraction(1, 2)
    # ranks average over ties
    assert list(events.average_ranks([10, 20, 20, 30, 20])) == [1.0, 3.0, 3.0, 5.0, 3.0]


def event_answer(baseline):
    return {"labels": {"p1": 1, "p2": 1, "p3": 0, "p4": 0, "p5": 0}, "baseline_auroc": baseline}


EVENT_SCORES = {"p1": 0.8, "p2": 0.5, "p3": 0.5, "p4": 0.2, "p5": 0.1}  # AUROC 11/12


def test_auroc_equal_to_baseline_passes(tmp_path):
    # 11/12 is not exact in binary: the baseline is the float 0.9166666666666666.
    result = run(tmp_path, "ehr-event-modeling", event_answer(11 / 12), {"predictions": EVENT_SCORES})
    assert result.passed and result.metrics["auroc"] == pytest.approx(11 / 12)
    scores = {"p1": 0.8, "p2": 0.4, "p3": 0.5, "p4": 0.2, "p5": 0.1}  # U = 3 + 2 = 5 of 6
    assert run(tmp_path, "ehr-event-modeling", event_answer(5 / 6), {"predictions": scores}).passed
    # 0.8 as a float is slightly above 4/5; an AUROC of exactly 4/5 still equals the baseline.
    # one positive ranked above 4 of 5 negatives: U = 4 of 5 pairs.
    labels = {"a": 1, "b": 0, "c": 0, "d": 0, "e": 0, "f": 0}
    preds = {"a": 5, "b": 6, "c": 1, "d": 2, "e": 3, "f": 4}
    assert events.auroc_fraction(list(labels.values()), list(preds.values())) == Fraction(4, 5)
    result = run(tmp_path, "ehr-event-modeling", {"labels": labels, "baseline_auroc": 0.8}, {"predictions": preds})
    assert result.passed


def test_auroc_below_baseline_fails(tmp_path):
    result = run(tmp_path, "ehr-event-modeling", event_answer(0.92), {"predictions": EVENT_SCORES})
    assert not result.passed and result.metrics["auroc_minus_baseline"] < 0


def test_missing_prediction_fails_and_extra_patients_are_ignored(tmp_path):
    partial = dict(EVENT_SCORES)
    del partial["p5"]
    result = run(tmp_path, "ehr-event-modeling", event_answer(0.5), {"predictions": partial})
    assert not result.passed and result.metrics["missing_predictions"] == 1
    assert result.metrics["auroc"] == 1.0 - 0.5 / 4  # still reported over the scored patients
    empty = run(tmp_path, "ehr-event-modeling", event_answer(0.5), {"predictions": {}})
    assert not empty.passed and "auroc" not in empty.metrics
    # Grader review: scores for patients who are not held out (the training patients,
    # say) used to make the grade invalid; they are ignored.
    extra = run(tmp_path, "ehr-event-modeling", event_answer(0.5),
                {"predictions": {**EVENT_SCORES, "p9": 0.3}})
    assert extra.passed and extra.metrics["extra_predictions"] == 1


@pytest.mark.parametrize(
    "predictions, problem",
    [
        ('{"predictions": {"p1": NaN}}', "NaN is not allowed"),
        ('{"predictions": {"p1": Infinity}}', "Infinity is not allowed"),
        ('{"predictions": {"p1": "0.3"}}', 'score of patient "p1" must be a number'),
        ('{"predictions": {"p1": true}}', "must be a number"),
        ('{"predictions": [0.1, 0.2]}', '"predictions" must be a JSON object'),
    ],
)
def test_event_modeling_malformed(tmp_path, predictions, problem):
    with pytest.raises(GradingInputError) as info:
        run(tmp_path, "ehr-event-modeling", event_answer(0.5), predictions)
    assert problem in str(info.value) and "submission.json" in str(info.value)


def test_single_class_answer_is_an_answer_error(tmp_path):
    with pytest.raises(GradingInputError, match="answer.json: the labels must contain both classes"):
        run(tmp_path, "ehr-event-modeling", {"labels": {"p1": 1, "p2": 1}, "baseline_auroc": 0.5}, {"predictions": {}})
    with pytest.raises(GradingInputError, match="label of patient"):
        run(tmp_path, "ehr-event-modeling", {"labels": {"p1": 2, "p2": 0}, "baseline_auroc": 0.5}, {"predictions": {}})


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def labelled_scores(draw):
    n = draw(st.integers(2, 40))
    labels = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n).filter(lambda y: 0 < sum(y) < len(y)))
    scores = draw(st.lists(st.integers(-20, 20), min_size=n, max_size=n))  # many ties
    return labels, scores


@settings(deadline=None)
@given(labelled_scores())
def test_auroc_invariants(data):
    labels, scores = data
    value = events.auroc_fraction(labels, scores)
    assert 0 <= value <= 1
    # brute-force Mann-Whitney with ties counted 1/2
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    pairs = sum(Fraction(1) if p > q else Fraction(1, 2) if p == q else 0 for p in pos for q in neg)
    assert value == pairs / (len(pos) * len(neg))
    # a strictly order-preserving transform leaves AUROC unchanged
    assert events.auroc_fraction(labels, [3 * s**3 + 7 for s in scores]) == value
    # reversing the scores gives 1 - AUROC
    assert events.auroc_fraction(labels, [1 - s for s in scores]) == 1 - value
    # a perfect ranking always passes any baseline
    perfect = {str(i): float(y) for i, y in enumerate(labels)}
    assert events.score({str(i): y for i, y in enumerate(labels)}, perfect, 1.0).passed


# ------------------------------------------------------------------ ehr-format-conversion


def write_csv(path, header, body):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([",".join(header)] + [",".join(map(str, r)) for r in body]) + "\n")


MEDS_HEADER = ["subject_id", "time", "code", "numeric_value"]
MEDS_ROWS = [
    [1, "2020-01-01T00:00:00", "MEDS_BIRTH", ""],
    [1, "2020-03-04T10:00:00", "LAB//50912", "1.5"],
    [1, "2020-03-04T10:00:00", "LAB//50912", "1.5"],  # duplicate rows matter (multiset)
    [2, "2019-05-06T08:30:00", "GENDER//F", ""],
    [2, "2019-05-06T09:00:00", "LAB//50971", "4.0"],
]


def meds_answer(root):
    write_csv(root / "data" / "train" / "0.csv", MEDS_HEADER, MEDS_ROWS)
    codes = root / "metadata" / "codes.jsonl"
    codes.parent.mkdir(parents=True, exist_ok=True)
    codes.write_text('{"code": "LAB//50912", "description": "Creatinine", "parent_codes": ["LOINC/2160-0"]}\n'
                     '{"code": "LAB//50971", "description": "Potassium", "parent_codes": null}\n')
    return root


def meds_grade(tmp_path, answer, submission):
    return grade("ehr-format-conversion", answer, submission)


def test_meds_identical_and_reordered_typed_rows_pass(tmp_path):
    answer = meds_answer(tmp_path / "answer")
    sub = tmp_path / "sub"
    # reordered rows and columns, "4" vs "4.0" in the float column, space-separated datetime,
    # an extra column and an extra file.
    write_csv(
        sub / "data" / "train" / "0.csv",
        ["code", "numeric_value", "time", "subject_id", "extra"],
        [
            ["LAB//50971", "4", "2019-05-06 09:00:00", 2, "x"],
            ["LAB//50912", "1.50", "2020-03-04T10:00:00", 1, "x"],
            ["MEDS_BIRTH", "", "2020-01-01", 1, "x"],
            ["GENDER//F", "", "2019-05-06T08:30:00", 2, "x"],
            ["LAB//50912", "1.5e0", "2020-03-04T10:00:00", "1.0", "x"],
        ],
    )
    (sub / "metadata").mkdir(parents=True)
    (sub / "metadata" / "codes.jsonl").write_text(
        '{"description": "Potassium", "code": "LAB//50971", "parent_codes": null}\n\n'
        '{"parent_codes": ["LOINC/2160-0"], "code": "LAB//50912", "description": "Creatinine"}\n'
    )
    write(sub / "README.md", "extra files are ignored")
    result = meds_grade(tmp_path, answer, sub)
    assert result.passed, result.metrics
    assert result.metrics["files_matched"] == 2 and result.metrics["rows_expected"] == 7


def test_meds_mismatches_fail(tmp_path):
    answer = meds_answer(tmp_path / "answer")
    sub = tmp_path / "sub"
    shutil.copytree(answer, sub)
    assert meds_grade(tmp_path, answer, sub).passed
    # a duplicate row dropped
    write_csv(sub / "data" / "train" / "0.csv", MEDS_HEADER, MEDS_ROWS[:2] + MEDS_ROWS[3:])
    result = meds_grade(tmp_path, answer, sub)
    assert not result.passed and result.metrics["rows_missing"] == 1
    # "1" vs "1.0" is equal only in numeric columns: in the text column "code" it differs
    write_csv(sub / "data" / "train" / "0.csv", MEDS_HEADER, MEDS_ROWS[:-1] + [[2, "2019-05-06T09:00:00", "LAB//50971", "4.01"]])
    assert not meds_grade(tmp_path, answer, sub).passed
    # a missing column
    write_csv(sub / "data" / "train" / "0.csv", MEDS_HEADER[:3], [r[:3] for r in MEDS_ROWS])
    result = meds_grade(tmp_path, answer, sub)
    assert not result.passed and result.metrics["columns_missing"] == 1
    # a missing expected file: fail with a metric, not an input error
    shutil.rmtree(sub / "data")
    result = meds_grade(tmp_path, answer, sub)
    assert not result.passed and result.metrics["files_missing"] == 1


def test_meds_text_column_is_not_numeric(tmp_path):
    answer = tmp_path / "a"
    write_csv(answer / "codes.csv", ["code", "n"], [["01", 1], ["A", 2]])
    sub = tmp_path / "s"
    write_csv(sub / "codes.csv", ["code", "n"], [["1", 1], ["A", 2]])
    assert not meds_grade(tmp_path, answer, sub).passed  # "01" != "1": code is a text column
    write_csv(sub / "codes.csv", ["code", "n"], [["01", "1.0"], ["A", "2e0"]])
    assert meds_grade(tmp_path, answer, sub).passed


def test_meds_malformed_inputs(tmp_path, monkeypatch):
    answer = meds_answer(tmp_path / "answer")
    sub = tmp_path / "sub"
    shutil.copytree(answer, sub)
    target = sub / "data" / "train" / "0.csv"
    target.write_text("subject_id,time,code,numeric_value\n1,2020-01-01,X\n")
    with pytest.raises(GradingInputError, match="0.csv: line 2 has 3 fields, the header has 4"):
        meds_grade(tmp_path, answer, sub)
    target.write_bytes(b"subject_id,time,code,numeric_value\n1,2020,\xff,\n")
    with pytest.raises(GradingInputError, match="invalid UTF-8"):
        meds_grade(tmp_path, answer, sub)
    (sub / "metadata" / "codes.jsonl").write_text('{"code": NaN}\n')
    shutil.copy(answer / "data" / "train" / "0.csv", target)
    with pytest.raises(GradingInputError, match="codes.jsonl line 1: invalid JSON: NaN"):
        meds_grade(tmp_path, answer, sub)
    shutil.copy(answer / "metadata" / "codes.jsonl", sub / "metadata" / "codes.jsonl")
    target.unlink()
    target.symlink_to(answer / "data" / "train" / "0.csv")
    with pytest.raises(GradingInputError, match="symbolic link"):
        meds_grade(tmp_path, answer, sub)
    target.unlink()
    shutil.copy(answer / "data" / "train" / "0.csv", target)
    monkeypatch.setattr(meds, "MAX_FILE_BYTES", 100)
    with pytest.raises(GradingInputError, match="too large"):
        meds_grade(tmp_path, answer, sub)
    monkeypatch.setattr(meds, "MAX_FILE_BYTES", 10_000)
    monkeypatch.setattr(meds, "MAX_TOTAL_BYTES", 300)
    with pytest.raises(GradingInputError, match="exceed 300 bytes in total"):
        meds_grade(tmp_path, answer, sub)
    with pytest.raises(GradingInputError, match="must be a directory"):
        meds_grade(tmp_path, answer, target)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(MEDS_ROWS), st.permutations(range(4)))
def test_meds_row_and_column_permutations_never_change_the_result(rows_perm, cols_perm):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        answer = tmp / "a"
        write_csv(answer / "0.csv", MEDS_HEADER, MEDS_ROWS)
        sub = tmp / "s"
        header = [MEDS_HEADER[i] for i in cols_perm]
        write_csv(sub / "0.csv", header, [[r[i] for i in cols_perm] for r in rows_perm])
        assert meds_grade(tmp, answer, sub).passed
        broken = list(rows_perm)
        broken[0] = [broken[0][0], broken[0][1], "CHANGED", broken[0][3]]
        write_csv(sub / "0.csv", header, [[r[i] for i in cols_perm] for r in broken])
        assert not meds_grade(tmp, answer, sub).passed


# ------------------------------------------------------------------ xray (pure parts)


def test_xray_without_a_judge_is_judge_unavailable_after_validation(tmp_path):
    answer = {"reference_findings": "No acute findings.", "injected_errors": ["left effusion"]}
    with pytest.raises(GradingInputError, match='missing the key "findings"'):
        run(tmp_path, "xray-report-correction", answer, {"text": "x"})
    with pytest.raises(GradingInputError, match="too long"):
        run(tmp_path, "xray-report-correction", answer, {"findings": "x" * 20_001})
    with pytest.raises(JudgeUnavailable):
        run(tmp_path, "xray-report-correction", answer, {"findings": "No acute findings."})


# ------------------------------------------------------------------ CLI under Python 3.11


def _py311():
    candidates = [os.environ.get("HAB_PY311", ""), "/root/.pyenv/versions/3.11.7/bin/python"]
    return next((c for c in candidates if c and os.path.exists(c)), None)


def test_graders_package_has_no_django_import():
    # Everything the verifier containers import: the dispatch, the kit, the category registry,
    # each category's spec and grader, and the X-ray judge's client (with its package file).
    categories = REPO / "evaluation" / "categories"
    judge = REPO / "evaluation" / "judge"
    paths = [*(REPO / "evaluation" / "graders").glob("*.py"), REPO / "evaluation" / "grading.py",
             judge / "__init__.py", judge / "client.py",
             *categories.glob("*.py"), *categories.glob("*/__init__.py"),
             *categories.glob("*/grader.py")]
    assert len(paths) >= 2 + 1 + 2 + 2 + 7 + 7
    for path in paths:
        text = path.read_text()
        assert "import django" not in text and "from django" not in text, path


def test_cli_runs_under_python_3_11_without_django(tmp_path):
    # Verifier containers run Debian bookworm's Python 3.11 (validate_task checks that in
    # Docker); this runs the CLI on the host's 3.11 too, which these machines all have.
    py = _py311()
    assert py, "no Python 3.11 interpreter: set HAB_PY311 to one (with numpy)"
    assert subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode == 0, \
        f"{py} has no numpy: install it or point HAB_PY311 at one that has"
    answer = write(tmp_path / "answer.json", {"grid": GRID, "tumor_tiles": tiles(10)})
    sub = write(tmp_path / "submission.json", {"tumor_tiles": tiles(9) + [[5, 0]]})
    reward = tmp_path / "logs" / "reward.json"
    code = (
        "import sys, runpy; sys.modules['django'] = None; "
        "sys.argv = ['graders'] + sys.argv[1:]; "
        "runpy.run_module('evaluation.graders', run_name='__main__')"
    )
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    args = ["pathology-tumor-region", "--answer", str(answer), "--submission", str(sub), "--reward-file", str(reward)]
    proc = subprocess.run([py, "-c", code] + args, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["passed"] is True and out["metrics"]["f1"] == pytest.approx(0.9)
    assert json.loads(reward.read_text())["reward"] == 1
    # malformed input: exit 2, message names the problem, reward 0 with input_error
    bad = write(tmp_path / "bad.json", '{"tumor_tiles": [[0, NaN]]}')
    proc = subprocess.run(
        [py, "-m", "evaluation.graders", "pathology-tumor-region", "--answer", str(answer),
         "--submission", str(bad), "--reward-file", str(reward)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 2 and "bad.json" in proc.stderr and "NaN" in proc.stderr
    assert json.loads(reward.read_text()) == {"reward": 0, "input_error": 1}
