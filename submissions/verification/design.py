"""How many trials the site re-runs, and the test that compares them with the site's outcomes:
a sequential, paired design with an exact conditional test against inflation.

What the re-runs are compared with is the site's outcome of each trial (after the re-grade), not
the submission's claim: an output the site graded as a pass is a pass whatever was claimed, so
a fabricated pass with no claimed grade is tested like any other. Below, "claims" means those
outcomes. Which design a submission gets is the site's choice (``plan``): its caps come from the
site's own cost estimate, and a design that cannot reach the power floor leaves the submission
short of "verified".

Pure Python + numpy/scipy: no models, no settings; every parameter is passed in (`Design`).

The model
---------
An honest, stochastic agent passes an attempt at task ``t`` with an unknown probability
``p_t``; its claimed attempts and the site's re-run attempts at that task are independent
Bernoulli(p_t) draws. A re-run of trial (t, a) is a *fresh* attempt, not a replay of the
original one, so under honesty it is exchangeable with **every** claimed attempt of task t, not
only with attempt a. An inflating submitter turns some failed trials into claimed passes: the
claims of the tasks it touched are higher than what the agent does when the site runs it.

The test (paired by task, exact, conditional)
---------------------------------------------
The re-runs of a task form a stratum with that task's claims: its ``A_t`` counted claimed
attempts (``s_t`` of them passes) and its ``r_t`` re-runs (``y_t`` passes). Under honesty the
``A_t + r_t`` outcomes of the stratum are exchangeable, so, conditional on the stratum's total
``m = s_t + y_t``, ``y_t`` is hypergeometric (``r_t`` draws from ``A_t + r_t`` outcomes of which
``m`` are passes) whatever ``p_t`` is; strata are independent. The statistic is the total number
of re-run passes ``S``; its null distribution given the totals is the convolution of those
hypergeometrics, computed exactly. Inflation makes ``S`` small: the test is one-sided (lower
tail). Task difficulty, however spread, cannot raise a false alarm: it is conditioned away, which
is what "honest run-to-run noise is not inflation" requires.

McNemar's exact test is the special case whose stratum is the single trial (``A_t = r_t = 1``:
the re-run against its own claim): a concordant pair is uninformative and a discordant one is b
or c with probability 1/2, b ~ Binomial(b + c, 1/2). For an honest agent b and c have the same
expectation p(1 - p), so McNemar's null is exactly the honest case too; it is available as
``stratum="trial"``. It is less powerful: the re-run of (t, a) is a fresh draw, so its own claim
says no more about the task than the task's other claims, which McNemar throws away (the variance
of the comparison per re-run is p(1-p)(1 + 1) against p(1-p)(1 + r_t/A_t) with the task's claims).
``devtools.simulation`` (``simulate_stats``) shows both. The comparison stays paired: re-runs
are compared with the claims of their own task, never with other tasks, and a re-run covers
(is evidence for) only the trial (task, attempt) it reproduces.

The design (sequential, exact group-sequential alpha spending)
---------------------------------------------------------------
The caller gives every counted trial in a secret order (an HMAC of the archive). The re-run queue
is the tasks in order of their first trial in that order; each queued task re-runs its first
``reruns_per_task`` trials in that order (the default, one, gives the most power per re-run: a
second re-run of a task shares its claims with the first). Looks are after ``first``,
``first + step``, ... tasks, up to the cap (the trial cap, the model-cost cap divided by the
per-trial cost estimate, and the number of tasks). At look k the test rejects when
``S_k <= c_k``, ``c_k`` the largest value such that the exact conditional probability under
honesty of crossing at this look or an earlier one, given the strata totals, is at most
``alpha(t_k)`` (a Lan-DeMets spending function of the information fraction ``t_k = n_k / n_max``);
the earlier looks' bounds are recomputed from the same totals, so a crossing at any look has
conditional probability at most ``alpha`` whatever the totals, and the false-alarm rate is at
most ``alpha``. Before the last look the design stops as consistent (futility; non-binding, so it
only lowers the false-alarm rate) when the re-runs are no worse than the claims predict:
z < ``futility_z``, z = (expected - observed re-run passes) / sd under the conditional null. At
the last look it is consistent only when z < ``accept_z``; a shortfall the bound does not reject
but that is that large ends inconclusive.

Every task is queued, those with no pass too. Skipping them (they are nearly uninformative)
would choose strata by their outcomes: honest agents at a 20% rate were then flagged 23% of the
time in simulation. The exact correction (a hypergeometric truncated to at least one pass) makes
a task with one pass and a failing re-run carry no evidence at all, exactly where fakes spread
one per task land: detection of such a +10-point inflation fell from 24-37% to 1-13%.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from scipy.special import comb, expit
from scipy.stats import norm

CONSISTENT = "consistent"
INFLATED = "inflated"
INCONCLUSIVE = "inconclusive"
SPENDING = ("pocock", "obrien-fleming", "linear")
STRATA = ("task", "trial")
POWER_TARGET = 0.8
# The spread (logit sd) of task difficulty the power statement assumes, as the methods page's
# table does (devtools.simulation.RERUN_SHAPE).
TASK_SD = 1.5
_TOL = 1e-12
_CODES = {0: INCONCLUSIVE, 1: CONSISTENT, 2: INFLATED}


@dataclass(frozen=True)
class Trial:
    """A candidate trial: task, attempt and the site's outcome of it (after the re-grade: a
    submitted output the site graded as a pass is a pass, whatever the submission claimed)."""

    task: str
    attempt: int
    passed: bool

    @property
    def key(self) -> tuple[str, int]:
        return (self.task, self.attempt)


@dataclass(frozen=True)
class Design:
    """The design's parameters (the site's come from the VERIFICATION_RERUN_* settings).

    ``first``: tasks re-run before the first look; ``step``: tasks added per later look;
    ``max_trials``: the hard cap on re-run trials; ``reruns_per_task``: trials re-run per queued
    task; ``max_cost_usd`` with ``cost_per_trial_usd``: the model-cost cap (either None: none);
    ``alpha``: the false-alarm rate; ``futility_z``: stop as consistent before the last look when
    the standardized shortfall of re-run passes is below it; ``accept_z``: at the last look, a
    shortfall at or above it that the bound does not reject ends inconclusive, not consistent;
    ``spending``: the alpha spending function; ``stratum``: "task" (the site's test) or "trial"
    (McNemar)."""

    first: int
    step: int
    max_trials: int
    alpha: float = 0.05
    reruns_per_task: int = 1
    max_cost_usd: float | None = None
    cost_per_trial_usd: float | None = None
    futility_z: float = 0.0
    accept_z: float = math.inf
    spending: str = "pocock"
    stratum: str = "task"

    def __post_init__(self):
        if self.first < 1 or self.step < 1 or self.max_trials < 0 or self.reruns_per_task < 1:
            raise ValueError("first, step and reruns_per_task must be at least 1, "
                             "max_trials at least 0")
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        if self.spending not in SPENDING:
            raise ValueError(f"spending must be one of {SPENDING}")
        if self.stratum not in STRATA:
            raise ValueError(f"stratum must be one of {STRATA}")

    @classmethod
    def from_settings(cls, conf, *, cost_per_trial_usd: float | None = None) -> Design:
        """The site's design from a settings object (django.conf.settings, passed in):
        VERIFICATION_RERUN_* (a MAX_COST_USD of 0 is no cost cap)."""
        cost = float(conf.VERIFICATION_RERUN_MAX_COST_USD) or None
        return cls(first=conf.VERIFICATION_RERUN_FIRST_TASKS,
                   step=conf.VERIFICATION_RERUN_STEP_TASKS,
                   max_trials=conf.VERIFICATION_RERUN_MAX_TRIALS,
                   alpha=conf.VERIFICATION_RERUN_ALPHA,
                   reruns_per_task=conf.VERIFICATION_RERUN_PER_TASK,
                   max_cost_usd=cost, cost_per_trial_usd=cost_per_trial_usd,
                   futility_z=conf.VERIFICATION_RERUN_FUTILITY_Z,
                   accept_z=conf.VERIFICATION_RERUN_ACCEPT_Z,
                   spending=conf.VERIFICATION_RERUN_SPENDING)

    def trial_cap(self) -> int:
        """Most re-run trials: the trial cap and the cost cap."""
        cap = self.max_trials
        if self.max_cost_usd is not None and self.cost_per_trial_usd:
            cap = min(cap, int(math.floor(self.max_cost_usd / self.cost_per_trial_usd + 1e-9)))
        return max(cap, 0)

    def task_cap(self, n_tasks: int) -> int:
        """Most tasks re-run: whole tasks within the trial cap, at most every task."""
        return max(0, min(n_tasks, self.trial_cap() // self.reruns_per_task))

    def looks(self, n_tasks: int) -> tuple[int, ...]:
        """The planned looks, as cumulative numbers of tasks re-run (the last is the cap)."""
        cap = self.task_cap(n_tasks)
        if cap == 0:
            return ()
        sizes = list(range(min(self.first, cap), cap, self.step))
        return tuple(sizes) if sizes and sizes[-1] == cap else tuple(sizes + [cap])

    def spent(self, looks: Sequence[int]) -> np.ndarray:
        """Cumulative alpha spent by each look (the last spends all of alpha)."""
        if not looks:
            return np.zeros(0)
        t = np.asarray(looks, dtype=float) / looks[-1]
        if self.spending == "pocock":
            out = self.alpha * np.log1p((math.e - 1) * t)
        elif self.spending == "obrien-fleming":
            out = 2 * norm.sf(norm.isf(self.alpha / 2) / np.sqrt(t))
        else:
            out = self.alpha * t
        out[-1] = self.alpha
        return out


# ---------------------------------------------------------------------------------------------
# The exact test
# ---------------------------------------------------------------------------------------------


def stratum_pmf(claimed_passes, claimed_attempts, reruns, rerun_passes, top: int) -> np.ndarray:
    """Null pmf of a stratum's re-run passes (0..top) given its total m = claimed + re-run
    passes: hypergeometric, C(r, k) C(A, m - k) / C(A + r, m). Arrays broadcast; the pmf is on a
    new last axis."""
    s, a, r, y = (np.asarray(v, dtype=float)[..., None]
                  for v in (claimed_passes, claimed_attempts, reruns, rerun_passes))
    k = np.arange(top + 1, dtype=float)
    m = s + y
    return comb(r, k) * comb(a, m - k) / comb(a + r, m)


def exact_p_value(strata: Iterable[tuple[int, int, int, int]]) -> float:
    """One-sided exact conditional p-value that re-runs pass less often than their strata's
    claims: P(S <= observed) for S the sum of the strata's hypergeometric re-run passes.

    ``strata``: (claimed passes, claimed attempts, re-run passes, re-runs) per stratum. With one
    claim and one re-run per stratum this is McNemar's exact one-sided test (p = P(Binomial(b +
    c, 1/2) >= b))."""
    dist, observed = np.array([1.0]), 0
    for s, a, y, r in strata:
        if not (0 <= s <= a and 0 <= y <= r):
            raise ValueError("a stratum needs 0 <= passes <= attempts")
        dist = np.convolve(dist, stratum_pmf(s, a, r, y, r))
        observed += y
    return float(min(1.0, dist[: observed + 1].sum()))


def mcnemar_p_value(b: int, c: int) -> float:
    """McNemar's exact one-sided p-value against inflation: b claimed passes that failed on
    re-run, c claimed failures that passed; P(Binomial(b + c, 1/2) >= b)."""
    return exact_p_value([(1, 1, 0, 1)] * b + [(0, 1, 1, 1)] * c)


# ---------------------------------------------------------------------------------------------
# The sequential engine (vectorised over replications; decision() runs it on one)
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    """The design's outcome on R replications (arrays of length R)."""

    status: np.ndarray  # 0 inconclusive, 1 consistent, 2 inflated
    look: np.ndarray  # 1-based look at which it stopped (0: no look reached)
    strata: np.ndarray  # strata (tasks, or trials for McNemar) at that look
    trials: np.ndarray  # re-run trials used
    passes: np.ndarray  # re-run passes at that look
    critical: np.ndarray  # the look rejects when passes <= critical (-1: it cannot)
    expected: np.ndarray  # expected re-run passes under honesty, given the totals
    z: np.ndarray
    p_value: np.ndarray  # nominal one-sided exact conditional p-value at that look
    spent: np.ndarray  # cumulative alpha spent by that look

    def statuses(self) -> list[str]:
        return [_CODES[int(c)] for c in self.status]


def run_design(s, a, r, y, looks: Sequence[int], spent: Sequence[float], futility_z: float,
               available: int | None = None, accept_z: float = math.inf) -> Run:
    """Run the sequential test on R replications at once.

    ``s``, ``a``, ``r``, ``y``: (R, n) arrays, per queued stratum in queue order: claimed passes,
    claimed attempts, re-runs and re-run passes (n >= the last look). ``looks``: cumulative
    numbers of strata; ``spent``: cumulative alpha by look. ``available``: how many strata have
    their results (default: all); later looks are not evaluated, and a replication that has not
    stopped by then is inconclusive. At the last look a replication the bound does not reject is
    consistent only when z < ``accept_z``; otherwise it ends inconclusive: re-runs clearly worse
    than the claims predict are never called consistent because the bound was not crossed."""
    s, a, r, y = (np.atleast_2d(np.asarray(v, dtype=float)) for v in (s, a, r, y))
    reps = s.shape[0]
    n = looks[-1] if looks else 0
    avail = n if available is None else min(available, n)
    top = int(r[:, :n].max()) if n else 0
    pmf = stratum_pmf(s[:, :n], a[:, :n], r[:, :n], y[:, :n], top)  # (R, n, top + 1)
    kk = np.arange(top + 1)
    mean_i = (pmf * kk).sum(axis=2)
    var_i = (pmf * kk**2).sum(axis=2) - mean_i**2
    width = int(r[:, :n].sum(axis=1).max()) + 1 if n else 1
    alive = np.zeros((reps, width))
    alive[:, 0] = 1.0
    full = alive.copy()
    crossed = np.zeros(reps)
    rows = np.arange(reps)
    out = Run(*(np.zeros(reps, dtype=int) for _ in range(5)), np.full(reps, -1),
              *(np.full(reps, np.nan) for _ in range(3)), np.zeros(reps))
    stopped = np.zeros(reps, dtype=bool)
    prev, used, last = 0, 0, len(looks) - 1
    for k, size in enumerate(looks):
        if size > avail:
            break
        for i in range(prev, size):
            alive = _convolve(alive, pmf[:, i])
            full = _convolve(full, pmf[:, i])
        prev = size
        used = r[:, :size].sum(axis=1).astype(int)
        passes = y[:, :size].sum(axis=1).astype(int)
        mean = mean_i[:, :size].sum(axis=1)
        sd = np.sqrt(np.maximum(var_i[:, :size].sum(axis=1), 0.0))
        cdf = np.cumsum(alive, axis=1)
        # the largest c whose crossing probability (this look and the earlier ones) fits in the
        # alpha spent so far; cdf is non-decreasing, so the count of fitting values - 1
        crit = (crossed[:, None] + cdf <= spent[k] + _TOL).sum(axis=1) - 1
        crossed = crossed + np.where(crit >= 0, cdf[rows, np.maximum(crit, 0)], 0.0)
        alive[np.arange(width)[None, :] <= crit[:, None]] = 0.0  # the paths that crossed here
        z = np.divide(mean - passes, sd, out=np.zeros(reps), where=sd > 0)
        pval = np.minimum(np.cumsum(full, axis=1)[rows, passes], 1.0)
        reject = passes <= crit
        final = k == last
        futile = ~reject & np.where(final, z < accept_z, z < futility_z)
        here = ~stopped
        out.look[here] = k + 1
        out.strata[here] = size
        out.trials[here] = used[here]
        out.passes[here] = passes[here]
        out.critical[here] = crit[here]
        out.expected[here] = mean[here]
        out.z[here] = z[here]
        out.p_value[here] = pval[here]
        out.spent[here] = spent[k]
        out.status[here & reject] = 2
        out.status[here & futile] = 1
        stopped |= reject | futile | final
        if stopped.all():
            break
    return out


def _convolve(dist: np.ndarray, pmf: np.ndarray) -> np.ndarray:
    """Row-wise convolution of dist (R, W) with a short pmf (R, top + 1), truncated to W (the
    width holds the largest possible sum)."""
    out = dist * pmf[:, :1]
    for k in range(1, pmf.shape[1]):
        out[:, k:] += dist[:, :-k] * pmf[:, k:k + 1]
    return out


# ---------------------------------------------------------------------------------------------
# The API a verification job uses
# ---------------------------------------------------------------------------------------------


@dataclass
class RerunState:
    """A submission's re-run so far: its design, every counted trial in the caller's secret
    order (with the site's outcome the test compares with) and the re-run outcomes recorded so
    far, by (task, attempt) (True: the re-run passed)."""

    design: Design
    candidates: Sequence[Trial]
    results: Mapping[tuple[str, int], bool] = field(default_factory=dict)

    def claims(self) -> dict[str, tuple[int, int]]:
        """(passes, attempts) per task by the site's outcome, tasks in the secret order."""
        out: dict[str, list[int]] = {}
        for t in self.candidates:
            c = out.setdefault(t.task, [0, 0])
            c[0] += bool(t.passed)
            c[1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}

    def looks(self) -> tuple[int, ...]:
        return self.design.looks(len(self.claims()))

    def queue(self) -> list[list[Trial]]:
        """The queued tasks, each as the trials it re-runs: its first ``reruns_per_task`` trials
        in the secret order; as many tasks as the last look. Every task is queued, those with
        no pass too: choosing tasks by their outcomes would bias the exact test (the module
        docstring says by how much)."""
        per_task: dict[str, list[Trial]] = {}
        for t in self.candidates:
            got = per_task.setdefault(t.task, [])
            if len(got) < self.design.reruns_per_task:
                got.append(t)
        looks = self.looks()
        return list(per_task.values())[: looks[-1] if looks else 0]

    def completed(self) -> int:
        """Queued tasks whose re-runs are all recorded, counted from the front of the queue."""
        n = 0
        for group in self.queue():
            if any(t.key not in self.results for t in group):
                break
            n += 1
        return n

    def strata(self, tasks: Sequence[Sequence[Trial]]) -> tuple[list, list, list, list]:
        """(claimed passes, claimed attempts, re-runs, re-run passes) of each stratum: one per
        task (the site's test) or one per re-run trial (McNemar)."""
        claims = self.claims()
        s, a, r, y = [], [], [], []
        for group in tasks:
            ys = [int(bool(self.results.get(t.key, False))) for t in group]
            if self.design.stratum == "task":
                passes, attempts = claims[group[0].task]
                s.append(passes), a.append(attempts), r.append(len(group)), y.append(sum(ys))
            else:
                for t, yt in zip(group, ys, strict=True):
                    s.append(int(bool(t.passed))), a.append(1), r.append(1), y.append(yt)
        return s, a, r, y


def _stratum_looks(state: RerunState, looks: Sequence[int]) -> tuple[list[int], list[int]]:
    """Looks in strata (the engine's unit) for looks in tasks; and the strata per queued task."""
    per = [len(g) if state.design.stratum == "trial" else 1 for g in state.queue()]
    cum = np.concatenate([[0], np.cumsum(per)]).astype(int)
    return [int(cum[n]) for n in looks], per


def decision(state: RerunState) -> dict:
    """The test's verdict on the re-runs recorded so far (at the last complete look).

    Returns a dict: "status" ("consistent", "inflated" or "inconclusive": the design has not
    decided yet, or the caps allow no re-run), "look" (1-based; 0 before the first), "looks"
    (planned, in tasks), "tasks" and "trials" (re-run at that look), "rerun_passes",
    "expected_passes" (under honesty given the strata totals), "z", "p_value" (nominal one-sided
    exact conditional p-value at that look), "critical" (the look rejects at or below this
    many re-run passes; -1: it cannot), "alpha_spent" (cumulative, by that look), "alpha", "b"
    and "c" (the paired view: claimed passes that failed on re-run, claimed failures that
    passed), "covered" (the (task, attempt) trials re-run: each covers only itself), "test",
    "reason"."""
    design = state.design
    looks = state.looks()
    queue = state.queue()
    done = state.completed()
    ran = [t for group in queue[:done] for t in group]
    base = {"looks": list(looks), "alpha": design.alpha, "test": describe_test(design),
            "b": sum(1 for t in ran if t.passed and not state.results[t.key]),
            "c": sum(1 for t in ran if not t.passed and state.results[t.key]),
            "covered": [t.key for t in ran], "tasks": done, "trials": len(ran), "look": 0,
            "p_value": None, "final": False}
    if not looks:
        reason = "the caps allow no re-run"
        return {**base, "status": INCONCLUSIVE, "reason": reason, "final": True}
    if done < looks[0]:
        return {**base, "status": INCONCLUSIVE,
                "reason": f"{done} of the first look's {looks[0]} tasks re-run"}
    strata_looks, per = _stratum_looks(state, looks)
    s, a, r, y = state.strata(queue)
    run = run_design([s], [a], [r], [y], strata_looks, design.spent(looks), design.futility_z,
                     available=int(sum(per[:done])), accept_z=design.accept_z)
    status = run.statuses()[0]
    look = int(run.look[0])
    final = status != INCONCLUSIVE or look == len(looks)
    reason = {INFLATED: "the re-runs passed less often than the site's outcomes allow: at or "
                        "below the look's exact bound",
              CONSISTENT: ("the last look did not reject and the re-runs are in line with the "
                           "site's outcomes" if look == len(looks)
                           else "the re-runs are no worse than the site's outcomes predict "
                                "(stopped early)"),
              INCONCLUSIVE: (f"the last look did not reject, but the re-runs passed "
                             f"{float(run.z[0]):.2f} sd below what the site's outcomes predict "
                             f"(consistent needs under {design.accept_z:g} sd)"
                             if look == len(looks) else "more re-runs needed")}[status]
    return {**base, "status": status, "look": look, "tasks": looks[look - 1], "final": final,
            "trials": int(run.trials[0]), "rerun_passes": int(run.passes[0]),
            "expected_passes": float(run.expected[0]), "z": float(run.z[0]),
            "p_value": float(run.p_value[0]), "critical": int(run.critical[0]),
            "alpha_spent": float(run.spent[0]), "reason": reason}


def next_stage(state: RerunState) -> list[Trial] | None:
    """The trials to re-run next (those missing up to the next look), or None when the design
    has stopped: a verdict, or nothing the caps allow."""
    looks = state.looks()
    if not looks:
        return None
    done = state.completed()
    if done >= looks[0] and decision(state)["final"]:
        return None
    target = next((n for n in looks if n > done), None)
    if target is None:
        return None
    return [t for group in state.queue()[:target] for t in group if t.key not in state.results]


def describe_test(design: Design) -> str:
    what = ("re-runs against their task's claims, stratified by task"
            if design.stratum == "task" else "McNemar: each re-run against its own claim")
    return (f"exact conditional one-sided test ({what}), sequential with {design.spending} "
            f"alpha spending, alpha {design.alpha:g}")


# ---------------------------------------------------------------------------------------------
# Simulation and power, with the design's own engine
# ---------------------------------------------------------------------------------------------


def inflate(outcomes: np.ndarray, points: float, rng: np.random.Generator) -> np.ndarray:
    """Claims inflated by ``points`` (a share of all trials, 0.15 = 15 points): that many of each
    submission's failed trials, chosen at random, claimed as passes (all of them when fewer).
    ``outcomes``: (R, T, A) booleans."""
    reps = outcomes.shape[0]
    flat = outcomes.reshape(reps, -1).copy()
    k = int(round(points * flat.shape[1]))
    if k > 0:
        keys = rng.random(flat.shape) + flat  # failures first (keys < 1), in random order
        ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
        flat |= ranks < k
    return flat.reshape(outcomes.shape)


def simulate(design: Design, claimed: np.ndarray, p: np.ndarray, rng: np.random.Generator,
             present: np.ndarray | None = None) -> Run:
    """The design on R simulated submissions: ``claimed`` (R, T, A) booleans, the outcomes the
    site compares with (the design sees nothing else); ``p`` (R, T) the agent's true success
    probability per task, from which the site's re-runs are fresh draws; ``present`` (T, A)
    which cells are trials (default all). The secret order is a random permutation per
    replication."""
    reps, n_tasks, attempts = claimed.shape
    present = np.ones((n_tasks, attempts), dtype=bool) if present is None else present
    claimed = claimed & present[None]
    order = np.argsort(rng.random((reps, n_tasks)), axis=1)  # tasks in secret order
    counts = present.sum(axis=1)
    rows = np.arange(reps)[:, None, None]
    # each task's attempts in a random order (present ones first); the first r are re-run
    akeys = rng.random((reps, n_tasks, attempts)) + ~present[order]
    picks = np.argsort(akeys, axis=2)[:, :, : design.reruns_per_task]
    r = np.minimum(counts[order], design.reruns_per_task)  # (R, T)
    live = np.arange(design.reruns_per_task)[None, None, :] < r[..., None]
    own = claimed[rows, order[..., None], picks] & live
    y = (rng.random(own.shape) < p[np.arange(reps)[:, None], order][..., None]) & live
    looks = design.looks(n_tasks)
    if not looks:
        zero = np.zeros(reps, dtype=int)
        return Run(zero, zero, zero, zero, zero, zero - 1,
                   *(np.full(reps, np.nan) for _ in range(3)), np.zeros(reps))
    n = looks[-1]
    if design.stratum == "task":
        s = claimed.sum(axis=2)[np.arange(reps)[:, None], order]
        args = (s[:, :n], counts[order[:, :n]], r[:, :n], y[:, :n].sum(axis=2))
        strata_looks = list(looks)
    else:
        flat = live[:, :n].reshape(reps, -1)
        args = (own[:, :n].reshape(reps, -1), np.ones_like(flat, dtype=int), flat.astype(int),
                y[:, :n].reshape(reps, -1))
        # the McNemar strata of a task are its re-run trials: looks scaled by reruns_per_task
        # (tasks with fewer trials contribute empty strata: r = 0)
        strata_looks = [k * design.reruns_per_task for k in looks]
    return run_design(*args, strata_looks, design.spent(looks), design.futility_z,
                      accept_z=design.accept_z)


def inflate_spread(outcomes: np.ndarray, points: float) -> np.ndarray:
    """Claims inflated by ``points`` spread thin: one fake pass per task, weakest tasks first
    (fewest true passes), then a second round, and so on. Each fake moves its own task's
    stratum by one pass only, which is what makes it the hardest inflation for a test
    stratified by task to see. ``outcomes``: (R, T, A)."""
    reps, n_tasks, attempts = outcomes.shape
    out = outcomes.copy()
    left = np.full(reps, int(round(points * n_tasks * attempts)))
    for _round in range(attempts):
        if not left.any():
            break
        passes = out.sum(axis=2)
        # weakest first among tasks that still have a failure; the rest last
        key = np.where(passes < attempts, passes, attempts + 1).astype(float)
        order = np.argsort(key + np.arange(n_tasks) / (2 * n_tasks), axis=1)
        for j in range(n_tasks):
            t = order[:, j]
            cell = out[np.arange(reps), t]  # (R, A)
            can = (left > 0) & ~cell.all(axis=1)
            first_fail = np.argmin(cell, axis=1)
            out[np.flatnonzero(can), t[can], first_fail[can]] = True
            left -= can
    return out


_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(61)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def ability_for(rate: float, task_sd: float) -> float:
    """The logit ability theta whose expected success rate over tasks of logit-normal difficulty
    (sd ``task_sd``) is ``rate``: mean of expit(theta + task_sd Z) = rate."""
    rate = min(max(rate, 1e-4), 1 - 1e-4)
    return float(optimize.brentq(lambda th: expit(th + task_sd * _NODES) @ _WEIGHTS - rate,
                                 -40.0, 40.0))


def _shape(candidates: Sequence[Trial]) -> tuple[int, int, float]:
    """(tasks, attempts per task, pass rate by the site's outcome) of a submission."""
    n_tasks = len(dict.fromkeys(t.task for t in candidates))
    attempts = max(1, round(len(candidates) / n_tasks)) if n_tasks else 1
    rate = sum(bool(t.passed) for t in candidates) / len(candidates) if candidates else 0.0
    return n_tasks, attempts, rate


def power_at(candidates: Sequence[Trial], design: Design, points: int, *,
             task_sd: float = TASK_SD, reps: int = 2000, seed: int = 0,
             spread: bool = False) -> float:
    """How often the design flags claims inflated by ``points`` on a benchmark of this
    submission's size and pass rate, under the methods page's model (logit-normal task
    difficulty, sd ``task_sd``; the true rate is the submission's rate minus the inflation;
    fakes on random failures, or spread one per task with ``spread``). Seeded, so the same
    submission always gets the same figure."""
    n_tasks, attempts, rate = _shape(candidates)
    if not n_tasks or points <= 0:
        return 0.0
    rng = np.random.default_rng([seed, points, int(spread)])
    theta = ability_for(rate - points / 100, task_sd)
    p = expit(theta + task_sd * rng.standard_normal((reps, n_tasks)))
    truth = rng.random((reps, n_tasks, attempts)) < p[..., None]
    claimed = inflate_spread(truth, points / 100) if spread else inflate(truth, points / 100, rng)
    return float((simulate(design, claimed, p, rng).status == 2).mean())


@dataclass(frozen=True)
class Plan:
    """The re-run the site plans for one submission: the design (its caps from the site's own
    cost estimate), the power of that design against the floor's inflation, and whether it
    reaches the floor (else the submission cannot be verified: the re-run is underpowered)."""

    design: Design
    floor_points: int
    floor_power: float
    power: float
    cap: int  # re-run trials at most, for this submission's tasks

    @property
    def powered(self) -> bool:
        """Reaches the floor; with no pass the site graded there is nothing to inflate, and
        nothing for power to be short of."""
        return self.floor_points <= 0 or self.power >= self.floor_power

    def sentence(self) -> str:
        if self.floor_points <= 0:
            return "has no pass to test: the site graded none"
        per = self.design.reruns_per_task
        return (f"detects a {self.floor_points}-point inflation {self.power:.0%} of the time "
                f"(the site requires {self.floor_power:.0%}; {per} re-run{'s' if per > 1 else ''}"
                f" per task, at most {self.cap} re-run trials)")


def plan(candidates: Sequence[Trial], base: Design, *, floor_points: int, floor_power: float,
         reps: int = 1000, seed: int = 0) -> Plan:
    """The site's design for these trials: the base design, or, when it cannot reach the power
    floor, the same with more re-runs per task (up to the attempts per task); the first that
    reaches the floor, else the base design (the cheapest: a re-run that cannot verify still
    tests for inflation). The points are capped by what the submission's pass rate allows
    (claims of 10% cannot hide 15 points)."""
    n_tasks, attempts, rate = _shape(candidates)
    points = min(int(floor_points), int(math.floor(100 * rate + 1e-9)))
    first = None
    for per_task in range(base.reruns_per_task, max(base.reruns_per_task, attempts) + 1):
        d = Design(**{**base.__dict__, "reruns_per_task": per_task})
        pw = power_at(candidates, d, points, reps=reps, seed=seed) if points > 0 else 0.0
        looks = d.looks(n_tasks)
        got = Plan(d, points, floor_power, pw,
                   min(looks[-1] * per_task, len(candidates)) if looks else 0)
        first = first or got
        if got.powered or points <= 0:
            return got if got.powered else first
    return first


def describe_power(candidates: Sequence[Trial], design: Design, *, task_sd: float = TASK_SD,
                   target: float = POWER_TARGET, reps: int = 2000, seed: int = 0) -> dict:
    """What the design detects against this submission's claims, and the sentence the submission
    page shows.

    Seeded simulation with the design's engine, on the model of the methods page's table: a
    benchmark of this submission's size (its tasks, its attempts per task) whose task difficulty
    is logit-normal (sd ``task_sd``), an agent whose true rate is the claimed rate minus d points,
    and claims inflated by d points (that many of its failed trials claimed as passes, so the
    claimed rate is what this submission claims); the site's re-runs are fresh draws in a random
    secret order. The detectable inflation is the smallest whole number of points detected with
    at least ``target`` power (bisection: larger inflations are detected more often). The
    false-alarm rate is the design's alpha, exact whatever the tasks' difficulties.

    Returns {"points" (None: no inflation these claims allow reaches the target), "power" (at
    those points), "claimed_rate", "alpha", "target", "cap" (re-run trials at most), "looks",
    "task_sd", "reps", "seed", "sentence"}."""
    tasks = list(dict.fromkeys(t.task for t in candidates))
    looks = design.looks(len(tasks))
    cap = min(looks[-1] * design.reruns_per_task, len(candidates)) if looks else 0
    claimed_rate = _shape(candidates)[2]
    base = {"alpha": design.alpha, "target": target, "cap": cap, "looks": list(looks),
            "claimed_rate": claimed_rate, "task_sd": task_sd, "reps": reps, "seed": seed}
    if not looks:
        return {**base, "points": None, "power": 0.0,
                "sentence": "The site re-runs no trial of this submission: the caps allow none."}
    def power(points: int) -> float:
        return power_at(candidates, design, points, task_sd=task_sd, reps=reps, seed=seed)

    top = int(math.floor(100 * claimed_rate))
    at_top = power(top) if top >= 1 else 0.0
    if at_top < target:
        sentence = (f"With at most {cap} re-run trials, no inflation of these claims is detected "
                    f"with {target:.0%} power (if all {top} points of claimed passes were false, "
                    f"the test would flag it {at_top:.0%} of the time); false-alarm rate at most "
                    f"{design.alpha:.0%}.")
        return {**base, "points": None, "power": at_top, "sentence": sentence}
    lo, hi, at = 0, top, at_top  # power(hi) >= target; lo: not known to reach it
    while hi - lo > 1:
        mid = (lo + hi) // 2
        pw = power(mid)
        if pw >= target:
            hi, at = mid, pw
        else:
            lo = mid
    sentence = (f"An inflation of {hi} points or more is detected with {target:.0%} power (at "
                f"most {cap} re-run trials); false-alarm rate at most {design.alpha:.0%}.")
    return {**base, "points": hi, "power": at, "sentence": sentence}
