"""pathology-tumor-region: select the tumour tiles of a whole-slide image on a fixed grid.

Submission: {"tumor_tiles": [[row, col], ...]}
Answer:     {"grid": {"rows": R, "cols": C}, "tumor_tiles": [[row, col], ...]}
Passes when the tile-level F1 >= 0.9.

Decisions:
- F1 = 2*tp / (2*tp + fp + fn), compared with 9/10 in exact integer arithmetic
  (20*tp >= 9*(2*tp + fp + fn)), so F1 exactly 0.9 passes with no float rounding.
- Both sets empty: F1 = 1 (pass). Precision/recall with a zero denominator are reported as 1.0
  when both sets are empty and 0.0 otherwise.
- Duplicate tiles count once (the sets are what is graded).
- A tile is a 2-element array of integers; an integral JSON number written as 3.0 is the number
  3 (JSON does not tell them apart). Anything else, in either file, is a GradingInputError.
- A submitted tile outside the grid covers no tumour: it is a false positive (reported as
  `outside_grid`), not an input error, since it is an answer, only a wrong one. Answer tiles must
  lie inside the grid.
"""

from fractions import Fraction

from evaluation.grading import (
    GradeResult,
    GradingInputError,
    expect_int,
    expect_list,
    expect_object,
    load_object,
    ratio,
)

# Bump with any change that can change a grade (tests/evaluation/test_grader_versions.py;
# maintainers then re-score published submissions: `manage.py rescore --category`).
# 2: reads its files through the graders' one loading step (evaluation/grading.py
#    load_object, issue 24) and the shared kit gained it; grades unchanged.
VERSION = 2

F1_THRESHOLD = Fraction(9, 10)
MAX_GRID_TILES = 10_000_000


def f1_fraction(tp, fp, fn):
    """Exact F1 as a Fraction; 1 when there is nothing to find and nothing was found."""
    denominator = 2 * tp + fp + fn
    if denominator == 0:
        return Fraction(1)
    return Fraction(2 * tp, denominator)


def _integral(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _tiles(value, *, label, where, rows, cols, outside_ok=False):
    tiles = set()
    for index, tile in enumerate(expect_list(value, label=label, where=where)):
        item = f"{where}[{index}]"
        if not isinstance(tile, list) or len(tile) != 2:
            raise GradingInputError(f"{label}: {item} must be a [row, col] pair of integers")
        row = expect_int(_integral(tile[0]), label=label, where=f"{item} row")
        col = expect_int(_integral(tile[1]), label=label, where=f"{item} col")
        if not outside_ok and not (0 <= row < rows and 0 <= col < cols):
            raise GradingInputError(
                f"{label}: {item} = [{row}, {col}] is outside the {rows}x{cols} tile grid"
            )
        tiles.add((row, col))
    return tiles


def score(gold, predicted, *, grid=None):
    """Metrics and verdict for two sets of tiles."""
    tp = len(gold & predicted)
    fp = len(predicted - gold)
    fn = len(gold - predicted)
    f1 = f1_fraction(tp, fp, fn)
    both_empty = not gold and not predicted
    metrics = {
        "f1": float(f1),
        "precision": ratio(tp, tp + fp, empty=1.0 if both_empty else 0.0),
        "recall": ratio(tp, tp + fn, empty=1.0 if both_empty else 0.0),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "answer_tiles": len(gold),
        "submitted_tiles": len(predicted),
    }
    if grid is not None:
        metrics["outside_grid"] = sum(1 for r, c in predicted
                                      if not (0 <= r < grid[0] and 0 <= c < grid[1]))
    return GradeResult(passed=f1 >= F1_THRESHOLD, metrics=metrics)


def grade(answer_path, submission_path, **options):
    answer_label, answer = load_object(
        answer_path, where="the answer", required=("grid", "tumor_tiles"))
    grid = expect_object(answer["grid"], label=answer_label, where='"grid"', required=("rows", "cols"))
    rows = expect_int(grid["rows"], label=answer_label, where='"grid.rows"', minimum=1)
    cols = expect_int(grid["cols"], label=answer_label, where='"grid.cols"', minimum=1)
    if rows * cols > MAX_GRID_TILES:
        raise GradingInputError(f"{answer_label}: the grid has more than {MAX_GRID_TILES} tiles")
    gold = _tiles(answer["tumor_tiles"], label=answer_label, where='"tumor_tiles"', rows=rows, cols=cols)

    submission_label, submission = load_object(
        submission_path, where="the submission", required=("tumor_tiles",))
    predicted = _tiles(
        submission["tumor_tiles"], label=submission_label, where='"tumor_tiles"', rows=rows,
        cols=cols, outside_ok=True,
    )
    return score(gold, predicted, grid=(rows, cols))
