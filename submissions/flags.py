"""A trial's integrity flags (Trial.flags): findings against its claim, and states that say what
the site could not (yet) check. Plain constants, re-exported by submissions.models."""

# Integrity flag of a trial whose claimed infrastructure error the site has not confirmed.
FLAG_INFRA_UNCONFIRMED = "infra_unconfirmed"
# Integrity flags of a trial the reward-hacking screen flagged: one per uncleared rule,
# "reward_hack:RH1" (evaluation/screen_rules.toml).
FLAG_REWARD_HACK = "reward_hack"
# A trial of a task graded by the X-ray LLM judge while no judge is configured: not scored by
# the site (its level stays "claimed"), shown as "awaiting judge" until `manage.py
# judge_pending` or the next verification re-grades it.
FLAG_AWAITING_JUDGE = "awaiting_judge"
# A trial of a task graded by the X-ray LLM judge whose verifier, on the submitter's machine, had
# no judge to ask and recorded no grade: no claim to check and no infrastructure error to
# confirm; the site's own re-grade (with the site's judge) alone decides it. The submitter
# needs no judge of their own (Submit page).
FLAG_NO_CLAIMED_GRADE = "no_claimed_grade"
# A trial whose trajectory the site could not replay (unknown tools, sub-agents): shown with
# the trial, but a replay that could not be tried contradicts nothing.
FLAG_NOT_REPLAYABLE = "not_replayable"
# The trajectory judge (evaluation/judge/trajectory.py) over a counted pass: none configured
# (the pass waits, like FLAG_AWAITING_JUDGE, and publishing waits), or a "suspicious" judgement
# (the maintainer's queue: shown, counted, contradicting nothing until a maintainer decides). A
# "hack" judgement is the screen hit TRAJECTORY_JUDGE_HIT: flag reward_hack:TJ, a failure until
# a maintainer clears it with a reason, like a rule's.
FLAG_AWAITING_TRAJECTORY_JUDGE = "awaiting_trajectory_judge"
FLAG_TRAJECTORY_SUSPICIOUS = "trajectory_suspicious"
TRAJECTORY_JUDGE_HIT = "TJ"
# Flags that state what the site could not (yet) check. Every other flag (a re-grade or replay
# mismatch, a reward-hacking rule, an unconfirmed infrastructure error) is a finding against
# the claim, and only those make a trial "flagged" in the counts (methods page).
STATE_FLAGS = frozenset({FLAG_NOT_REPLAYABLE, FLAG_AWAITING_JUDGE, FLAG_NO_CLAIMED_GRADE,
                         FLAG_AWAITING_TRAJECTORY_JUDGE, FLAG_TRAJECTORY_SUSPICIOUS})


def is_flagged(flags) -> bool:
    """True when the trial's flags include a finding against the claim (not only states)."""
    return any(f not in STATE_FLAGS for f in (flags or ()))
