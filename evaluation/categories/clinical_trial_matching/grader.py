"""clinical-trial-matching: rank the trials a patient is eligible for.

Submission: {"ranked_trials": ["<trial_id>", ...]}
Answer:     {"eligible_trials": ["<trial_id>", ...], "all_trials": [...] (optional)}
Passes when recall@50 == 1.0.

Decisions:
- Only the first 50 *distinct* ids count: a repeated id is skipped and does not use up a slot.
  Ids after the 50th distinct one are ignored.
- Ids are compared exactly (case-sensitive, surrounding spaces trimmed).
- A ranked id that is no trial of the corpus matches nothing and still takes its slot, like any
  wrong id; with the answer's "all_trials" (every trial of the corpus) such ids are reported as
  `unknown_ids`. (They used to be a GradingInputError, which rejected a ranking that merely
  contained a wrong id instead of grading it.)
- An answer with no eligible trials is a GradingInputError (recall would be undefined).
"""

from evaluation.grading import GradeResult, GradingInputError, expect_list, expect_str, load_object, ratio

# Bump with any change that can change a grade (tests/evaluation/test_grader_versions.py;
# maintainers then re-score published submissions: `manage.py rescore --category`).
# 2: reads its files through the graders' one loading step (evaluation/grading.py
#    load_object, issue 24) and the shared kit gained it; grades unchanged.
VERSION = 2

K = 50
MAX_RANKED = 100_000


def _ids(value, *, label, key):
    ids = []
    for index, item in enumerate(expect_list(value, label=label, where=f'"{key}"')):
        ids.append(expect_str(item, label=label, where=f"{key}[{index}]").strip())
    return ids


def top_k_distinct(ranked, k=K):
    seen, top = set(), []
    for trial_id in ranked:
        if trial_id in seen:
            continue
        seen.add(trial_id)
        top.append(trial_id)
        if len(top) == k:
            break
    return top


def score(eligible, ranked, *, all_trials=None, label="submission"):
    eligible = set(eligible)
    top = set(top_k_distinct(ranked))
    found = len(eligible & top)
    distinct = len(set(ranked))
    metrics = {
        "recall_at_50": ratio(found, len(eligible)),
        "eligible_in_top_50": found,
        "eligible_trials": len(eligible),
        "recall_all_ranked": ratio(len(eligible & set(ranked)), len(eligible)),
        "ranked_distinct": distinct,
        "duplicate_ids": len(ranked) - distinct,
    }
    if all_trials is not None:
        metrics["unknown_ids"] = sum(1 for t in set(ranked) if t not in all_trials)
    return GradeResult(passed=found == len(eligible), metrics=metrics)


def grade(answer_path, submission_path, **options):
    answer_label, answer = load_object(
        answer_path, where="the answer", required=("eligible_trials",))
    eligible = _ids(answer["eligible_trials"], label=answer_label, key="eligible_trials")
    if not eligible:
        raise GradingInputError(f"{answer_label}: the answer has no eligible trials (recall undefined)")
    all_trials = None
    if "all_trials" in answer:
        all_trials = set(_ids(answer["all_trials"], label=answer_label, key="all_trials"))
        if not set(eligible) <= all_trials:
            raise GradingInputError(f'{answer_label}: eligible trials missing from "all_trials"')
    submission_label, submission = load_object(
        submission_path, where="the submission", required=("ranked_trials",))
    ranked = _ids(submission["ranked_trials"], label=submission_label, key="ranked_trials")
    if len(ranked) > MAX_RANKED:
        raise GradingInputError(f"{submission_label}: more than {MAX_RANKED} ranked trials")
    return score(eligible, ranked, all_trials=all_trials, label=submission_label)
