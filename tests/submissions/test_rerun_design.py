"""The sequential, paired re-run design (submissions/verification/design.py):
the exact test on hand-checked tables, the exact false-alarm bound of the sequential bounds, the
false-alarm rate and the detection on simulated agents, the caps, and the API a job drives."""

import itertools
import math

import numpy as np
import pytest
from django.conf import settings
from scipy.special import expit
from scipy.stats import binom, fisher_exact

from submissions.verification import design as rd
from submissions.verification.design import Design, RerunState, Trial


# --- the exact test, by hand ----------------------------------------------------------------


def test_mcnemar_one_sided_by_hand():
    assert rd.mcnemar_p_value(5, 0) == pytest.approx(1 / 32)  # all five discordant pairs are b
    assert rd.mcnemar_p_value(3, 1) == pytest.approx(5 / 16)  # P(B >= 3 | 4, 1/2) = (4 + 1)/16
    assert rd.mcnemar_p_value(0, 4) == pytest.approx(1.0)
    assert rd.mcnemar_p_value(0, 0) == 1.0
    for b, c in [(7, 2), (10, 4), (2, 9)]:
        assert rd.mcnemar_p_value(b, c) == pytest.approx(binom.sf(b - 1, b + c, 0.5))


def test_task_stratum_by_hand():
    # task claimed 3/3, its re-run fails: m = 3 of 4 outcomes pass, the re-run is the failing one
    # with probability 1/4
    assert rd.exact_p_value([(3, 3, 0, 1)]) == pytest.approx(1 / 4)
    # two such tasks: 1/16; a 2/3 task whose re-run fails: P = C(3,2)/C(4,2) = 1/2
    assert rd.exact_p_value([(3, 3, 0, 1)] * 2) == pytest.approx(1 / 16)
    assert rd.exact_p_value([(3, 3, 0, 1), (2, 3, 0, 1)]) == pytest.approx(1 / 8)
    # a 3/3 task failing and a 1/3 task passing: S = 1, P(S <= 1) = 1 - (3/4)(2/4) = 5/8
    assert rd.exact_p_value([(3, 3, 0, 1), (1, 3, 1, 1)]) == pytest.approx(5 / 8)
    # two re-runs of a 3/3 task, both failing: C(3,3)/C(5,3) = 1/10
    assert rd.exact_p_value([(3, 3, 0, 2)]) == pytest.approx(1 / 10)
    # a task claimed 0/3: a failing re-run is exactly what the claims predict
    assert rd.exact_p_value([(0, 3, 0, 1)]) == pytest.approx(1.0)


def test_one_stratum_is_fishers_exact_test():
    for s, a, y, r in [(3, 3, 0, 2), (2, 3, 1, 3), (5, 6, 1, 4), (1, 3, 0, 1)]:
        table = [[y, r - y], [s, a - s]]  # re-run pass/fail, claimed pass/fail
        expected = fisher_exact(table, alternative="less").pvalue
        assert rd.exact_p_value([(s, a, y, r)]) == pytest.approx(expected)


# --- the sequential bounds: false alarms at most alpha for every totals vector ----------------


@pytest.mark.parametrize("spending", rd.SPENDING)
def test_sequential_bounds_false_alarm_at_most_alpha_exactly(spending):
    """Enumerate every re-run outcome of 10 strata with fixed totals: the probability, under
    honesty, that the design rejects at some look is at most alpha, whatever the totals."""
    design = Design(first=4, step=3, max_trials=10, alpha=0.2, futility_z=-99.0,
                    spending=spending)
    looks = design.looks(10)
    assert looks == (4, 7, 10)
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(25):
        m = rng.integers(0, 5, size=10)  # stratum totals: claims (3) + re-run (1)
        ys = np.array(list(itertools.product((0, 1), repeat=10)))
        ok = ((m - ys) >= 0).all(axis=1) & ((m - ys) <= 3).all(axis=1)
        ys = ys[ok]
        q = m / 4
        prob = np.prod(np.where(ys == 1, q, 1 - q), axis=1)
        assert prob.sum() == pytest.approx(1.0)
        run = rd.run_design(m - ys, np.full_like(ys, 3), np.ones_like(ys), ys, looks,
                            design.spent(looks), design.futility_z)
        false_alarm = float(prob[run.status == 2].sum())
        assert false_alarm <= design.alpha + 1e-12
        worst = max(worst, false_alarm)
        # and the bound at each look holds as spent so far
        for k in range(1, len(looks) + 1):
            by_k = prob[(run.status == 2) & (run.look <= k)].sum()
            assert by_k <= design.spent(looks)[k - 1] + 1e-12
    assert worst > design.alpha / 4  # the bounds are not trivially conservative


def test_spending_is_cumulative_and_ends_at_alpha():
    for spending in rd.SPENDING:
        d = Design(first=16, step=6, max_trials=54, spending=spending)
        spent = d.spent(d.looks(54))
        assert np.all(np.diff(spent) > 0) and spent[-1] == pytest.approx(0.05)


# --- simulated agents --------------------------------------------------------------------------


def _agents(rate, reps, sd, rng, tasks=54, attempts=3):
    """Honest agents of true rate ``rate`` on fresh benchmarks with logit-normal difficulty."""
    from devtools.simulation import Shape

    theta = Shape((("all", tasks, 0.0),), task_sd=sd, interaction_sd=0.0,
                  attempts=attempts).theta_for(rate)
    p = expit(theta + sd * rng.standard_normal((reps, tasks)))
    return p, rng.random((reps, tasks, attempts)) < p[..., None]


def _site():
    return Design.from_settings(settings)


@pytest.mark.parametrize("sd", [0.0, 1.5, 3.0])
def test_false_alarms_on_honest_agents_at_most_alpha(sd):
    """Honest agents, however the tasks' difficulty is spread (none, realistic, extreme): the
    site design flags at most alpha of them (3,000 simulated submissions: within three Monte
    Carlo standard errors of alpha)."""
    design = _site()
    rng = np.random.default_rng(11)
    flagged = []
    for rate in (0.2, 0.3, 0.45):
        p, truth = _agents(rate, 1000, sd, rng)
        flagged.append(rd.simulate(design, truth, p, rng).status == 2)
    rate = np.concatenate(flagged).mean()
    assert rate <= design.alpha + 3 * math.sqrt(design.alpha * (1 - design.alpha) / 3000), rate


def test_mcnemar_and_the_task_test_both_hold_alpha_and_the_task_test_detects_more():
    rng_seed = 21
    results = {}
    for stratum in rd.STRATA:
        design = Design(first=54, step=54, max_trials=54, stratum=stratum)
        rng = np.random.default_rng(rng_seed)
        p, truth = _agents(0.3, 1500, 1.5, rng)
        honest = (rd.simulate(design, truth, p, rng).status == 2).mean()
        claimed = rd.inflate(truth, 0.15, rng)
        detected = (rd.simulate(design, claimed, p, rng).status == 2).mean()
        assert honest <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 1500)
        results[stratum] = detected
    assert results["task"] > results["trial"] + 0.05, results


def test_inflation_by_15_points_is_detected_80_percent_by_two_reruns_per_task():
    """The 80%-at-15-points target needs about 100 re-runs (two of each of the 54 tasks): the
    design detects it at least 80% of the time there. (One re-run of every task reaches about
    two thirds; the committed table has the figures.)"""
    design = Design(first=54, step=54, max_trials=108, reruns_per_task=2)
    rng = np.random.default_rng(31)
    flagged = []
    for rate in (0.2, 0.3, 0.45):
        p, truth = _agents(rate, 400, 1.5, rng)
        flagged.append(rd.simulate(design, rd.inflate(truth, 0.15, rng), p, rng).status == 2)
    assert np.concatenate(flagged).mean() >= 0.80


def test_detection_grows_with_the_inflation_and_the_site_design_meets_its_cost():
    design = _site()
    rng = np.random.default_rng(41)
    detected, trials = [], []
    for points in (0.0, 0.1, 0.2):
        p, truth = _agents(0.3, 1500, 1.5, rng)
        run = rd.simulate(design, rd.inflate(truth, points, rng), p, rng)
        detected.append((run.status == 2).mean())
        trials.append(run.trials.mean())
    assert detected[0] < detected[1] < detected[2]
    assert detected[2] >= 0.6
    assert max(trials) <= 0.2 * 162  # on average at most a fifth of a full run


def test_inflate_flips_exactly_that_many_failures():
    rng = np.random.default_rng(0)
    truth = rng.random((50, 54, 3)) < 0.3
    claimed = rd.inflate(truth, 0.15, rng)
    assert np.all(claimed >= truth)  # only failures flipped
    assert np.all((claimed.sum(axis=(1, 2)) - truth.sum(axis=(1, 2))) == round(0.15 * 162))
    everything = rd.inflate(np.zeros((2, 4, 3), dtype=bool), 2.0, rng)
    assert everything.all()  # fewer failures than asked: all of them


# --- caps ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"first": 16, "step": 6, "max_trials": 54},
    {"first": 10, "step": 7, "max_trials": 30},
    {"first": 40, "step": 5, "max_trials": 25},
    {"first": 5, "step": 5, "max_trials": 100, "max_cost_usd": 12.0, "cost_per_trial_usd": 0.5},
    {"first": 8, "step": 4, "max_trials": 60, "reruns_per_task": 2},
    {"first": 8, "step": 4, "max_trials": 31, "reruns_per_task": 2, "stratum": "trial"},
])
def test_the_cap_is_never_exceeded(kwargs):
    design = Design(futility_z=-99.0, **kwargs)  # never stops early for consistency
    cap = design.trial_cap()
    rng = np.random.default_rng(3)
    for points in (0.0, 0.2):
        p, truth = _agents(0.3, 500, 1.5, rng)
        run = rd.simulate(design, rd.inflate(truth, points, rng), p, rng)
        assert run.trials.max() <= cap
        assert set(np.unique(run.status)) <= {1, 2}  # every replication decided
    assert design.looks(54)[-1] * design.reruns_per_task <= cap


def test_cost_cap_and_task_count_bound_the_looks():
    d = Design(first=16, step=6, max_trials=54, max_cost_usd=10.0, cost_per_trial_usd=0.4)
    assert d.trial_cap() == 25
    assert d.looks(54) == (16, 22, 25)
    assert d.looks(20) == (16, 20)
    assert d.looks(10) == (10,)
    assert Design(first=16, step=6, max_trials=54, max_cost_usd=1.0,
                  cost_per_trial_usd=2.0).looks(54) == ()


# --- the API a verification job drives -----------------------------------------------------------


def _candidates(claims: dict[str, list[bool]], seed: int = 0) -> list[Trial]:
    trials = [Trial(task, a, c) for task, outcomes in claims.items()
              for a, c in enumerate(outcomes)]
    order = np.random.default_rng(seed).permutation(len(trials))
    return [trials[i] for i in order]


def _drive(state: RerunState, rerun) -> tuple[dict, list[list[Trial]]]:
    stages = []
    while (stage := rd.next_stage(state)) is not None:
        stages.append(stage)
        state.results.update({t.key: rerun(t) for t in stage})
    return rd.decision(state), stages


def test_a_job_driven_stage_by_stage_stops_within_the_cap_and_covers_only_its_trials():
    claims = {f"t{i:02d}": [True, i % 2 == 0, False] for i in range(54)}
    design = Design(first=16, step=6, max_trials=54, futility_z=-99.0)
    state = RerunState(design, _candidates(claims))
    verdict, stages = _drive(state, lambda t: False)  # the site's re-runs all fail
    assert verdict["status"] == rd.INFLATED
    assert len(stages) == 1 and len(stages[0]) == 16  # rejected at the first look
    assert verdict["look"] == 1 and verdict["p_value"] <= verdict["alpha_spent"]
    # one trial per task, the first of that task in the secret order
    first = {}
    for t in state.candidates:
        first.setdefault(t.task, t)
    assert [tuple(k) for k in verdict["covered"]] == [first[t].key for t in list(first)[:16]]
    assert verdict["b"] == sum(1 for t in stages[0] if t.passed) and verdict["c"] == 0


def test_honest_reruns_end_consistent_and_next_stage_follows_the_looks():
    rng = np.random.default_rng(8)
    p = {f"t{i:02d}": float(rng.beta(1, 2)) for i in range(54)}
    claims = {t: list(rng.random(3) < q) for t, q in p.items()}
    design = Design(first=16, step=6, max_trials=54, futility_z=-99.0)  # run to the cap
    state = RerunState(design, _candidates(claims, seed=3))
    seen = []
    verdict, stages = _drive(state, lambda t: seen.append(t) or bool(rng.random() < p[t.task]))
    assert [len(s) for s in stages][:2] == [16, 6]
    assert len(seen) == len(set(seen)) <= 54
    assert verdict["status"] in (rd.CONSISTENT, rd.INFLATED)
    assert rd.next_stage(state) is None
    if verdict["status"] == rd.CONSISTENT:
        assert verdict["look"] == len(design.looks(54))


def test_decision_is_inconclusive_before_the_first_look_and_matches_the_exact_p_value():
    claims = {f"t{i}": [True, True, True] for i in range(6)}
    design = Design(first=4, step=2, max_trials=6, alpha=0.1)
    state = RerunState(design, _candidates(claims))
    queue = state.queue()
    state.results.update({queue[0][0].key: False, queue[1][0].key: False})
    assert rd.decision(state)["status"] == rd.INCONCLUSIVE
    assert rd.next_stage(state) == [queue[2][0], queue[3][0]]
    state.results.update({queue[2][0].key: True, queue[3][0].key: False})
    verdict = rd.decision(state)
    # four 3/3 tasks, re-runs 1/4 passed: P(S <= 1) with each re-run Bern(3/4) or 1 (m = 4)
    assert verdict["p_value"] == pytest.approx(rd.exact_p_value(
        [(3, 3, 0, 1), (3, 3, 0, 1), (3, 3, 1, 1), (3, 3, 0, 1)]))
    assert verdict["p_value"] == pytest.approx(1 / 4**3)
    assert verdict["status"] == rd.INFLATED  # 1/64 below the first look's spent alpha


def test_caps_that_allow_no_rerun_say_so():
    state = RerunState(Design(first=4, step=2, max_trials=0), _candidates({"a": [True]}))
    assert rd.next_stage(state) is None
    assert rd.decision(state)["status"] == rd.INCONCLUSIVE


def test_describe_power_states_what_the_design_detects_on_these_claims():
    rng = np.random.default_rng(2)
    p = expit(-0.3 + 1.5 * rng.standard_normal(54))
    claims = {f"t{i:02d}": list(rng.random(3) < p[i]) for i in range(54)}
    candidates = _candidates(claims)
    design = _site()
    power = rd.describe_power(candidates, design, reps=600, seed=1)
    points = power["points"]
    assert points is not None and 5 < points < 40 and power["power"] >= 0.8
    assert power["sentence"] == (f"An inflation of {points} points or more is detected with 80% "
                                 "power (at most 54 re-run trials); false-alarm rate at most 5%.")
    assert power["claimed_rate"] == pytest.approx(sum(map(sum, claims.values())) / 162)
    # an independent simulation (another seed) of an agent at the claimed rate minus that many
    # points, inflated by them: detected about 80% of the time; 4 points less, clearly less often
    def detected(pts, seed):
        sim = np.random.default_rng(seed)
        theta = rd.ability_for(power["claimed_rate"] - pts / 100, 1.5)
        p = expit(theta + 1.5 * sim.standard_normal((3000, 54)))
        truth = sim.random((3000, 54, 3)) < p[..., None]
        run = rd.simulate(design, rd.inflate(truth, pts / 100, sim), p, sim)
        return (run.status == 2).mean()

    se = math.sqrt(0.8 * 0.2 / 3000)
    assert detected(points, 99) >= 0.8 - 4 * se - 0.02
    assert detected(points - 4, 98) < 0.8
    # a larger budget detects smaller inflations
    more = rd.describe_power(candidates, Design(first=54, step=54, max_trials=108,
                                                reruns_per_task=2), reps=600, seed=1)
    assert more["points"] < points
    # no budget: no claim
    none = rd.describe_power(candidates, Design(first=4, step=2, max_trials=0))
    assert none["points"] is None and "no trial" in none["sentence"]


def test_ability_for_solves_the_rate():
    for rate, sd in [(0.05, 1.5), (0.3, 1.5), (0.45, 0.0), (0.6, 3.0)]:
        theta = rd.ability_for(rate, sd)
        z = np.random.default_rng(0).standard_normal(400_000)
        assert expit(theta + sd * z).mean() == pytest.approx(rate, abs=2e-3)


# --- the site's design: an honest last look, the power floor, the spreading attack ----------


def test_the_last_look_ends_inconclusive_when_the_reruns_fall_well_short():
    """Eight tasks whose three attempts all pass, one re-run each. Given a stratum's total, a
    re-run that passes is certain (m = 4) and one that fails had probability 1/4 (m = 3: C(3,3)
    / C(4,3)), so one failure has exact p = 1/4, expected passes 7.75 against 7, sd
    sqrt(3/16) and z = sqrt(3) = 1.73: not rejected, and yet not in line with the claims."""
    s, a, r = [[3] * 8], [[3] * 8], [[1] * 8]
    looks, spent = [8], Design(first=8, step=1, max_trials=8, alpha=0.05).spent([8])
    run = rd.run_design(s, a, r, [[1] * 8], looks, spent, 0.5, accept_z=1.5)
    assert run.statuses() == ["consistent"] and run.z[0] == 0
    y = [[1] * 7 + [0]]
    run = rd.run_design(s, a, r, y, looks, spent, 0.5, accept_z=1.5)
    assert run.statuses() == ["inconclusive"] and run.look[0] == 1
    assert run.p_value[0] == pytest.approx(1 / 4)
    assert run.expected[0] == pytest.approx(7.75) and run.z[0] == pytest.approx(math.sqrt(3))
    # with a laxer acceptance, or none (every non-rejection consistent), the same re-runs pass
    assert rd.run_design(s, a, r, y, looks, spent, 0.5, accept_z=2.0).statuses() == [
        "consistent"]
    assert rd.run_design(s, a, r, y, looks, spent, 0.5).statuses() == ["consistent"]


def test_decision_says_inconclusive_at_the_last_look_and_stops():
    claims = {f"t{i}": [True, True, True] for i in range(8)}
    design = Design(first=8, step=1, max_trials=8, alpha=0.05, accept_z=1.5)
    state = RerunState(design, _candidates(claims))
    fails = {t.key for group in state.queue()[:1] for t in group}
    verdict, _stages = _drive(state, lambda t: t.key not in fails)
    assert verdict["status"] == rd.INCONCLUSIVE and verdict["final"]
    assert "1.73 sd below what the site's outcomes predict" in verdict["reason"]
    assert rd.next_stage(state) is None


def test_inflate_spread_puts_one_fake_on_each_weakest_task_first():
    truth = np.zeros((1, 4, 3), dtype=bool)
    truth[0, 0] = [True, True, False]  # 2 passes
    truth[0, 1] = [True, False, False]  # 1
    # tasks 2 and 3: no pass (the weakest)
    out = rd.inflate_spread(truth, 3 / 12)  # three fakes
    assert (out.sum(axis=2)[0] - truth.sum(axis=2)[0]).tolist() == [0, 1, 1, 1]
    assert np.all(out >= truth)
    out = rd.inflate_spread(truth, 6 / 12)  # six fakes: a second round on the weakest
    assert (out.sum(axis=2)[0] - truth.sum(axis=2)[0]).tolist() == [1, 1, 2, 2]


def test_power_at_grows_with_the_inflation_and_spreading_is_harder_to_see():
    claims = {f"t{i:02d}": [i % 3 == 0, i % 2 == 0, False] for i in range(54)}
    cands = _candidates(claims)
    design = Design(first=16, step=6, max_trials=54, futility_z=0.5, accept_z=1.5)
    random_ = [rd.power_at(cands, design, pts, reps=1000) for pts in (5, 10, 20)]
    spread = [rd.power_at(cands, design, pts, reps=1000, spread=True) for pts in (5, 10, 20)]
    assert random_ == sorted(random_) and spread == sorted(spread)
    assert spread[1] < random_[1]
    assert rd.power_at(cands, design, 10, reps=1000) == random_[1]  # seeded: the same figure


def test_the_plan_adds_reruns_per_task_to_reach_the_floor_else_keeps_the_base():
    base = Design(first=16, step=6, max_trials=54, futility_z=0.5, accept_z=1.5)
    big = _candidates({f"t{i:02d}": [True, i % 2 == 0, False] for i in range(54)})
    plan = rd.plan(big, base, floor_points=15, floor_power=0.5)
    assert plan.powered and plan.design.reruns_per_task == 1 and plan.power >= 0.5
    assert plan.cap == 54
    small = _candidates({f"t{i}": [True, i % 2 == 0, False] for i in range(7)})
    plan = rd.plan(small, base, floor_points=15, floor_power=0.5)
    assert not plan.powered and plan.design == base  # no design on 7 tasks reaches it
    assert plan.sentence().startswith("detects a 15-point inflation")
    # no pass the site graded cannot hide an inflation: nothing for power to be short of
    none = _candidates({f"t{i}": [False] * 3 for i in range(54)})
    plan = rd.plan(none, base, floor_points=15, floor_power=0.5)
    assert plan.powered and plan.floor_points == 0 and plan.power == 0.0
