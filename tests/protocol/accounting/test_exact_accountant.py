"""The exact accountant of one sample-and-threshold release (docs/protocol.md §2, "Exact
accounting") against an independent implementation (direct summation over every output at 60
digits), a brute force of the whole mechanism on small populations, the paper's bound, and the
properties the planner relies on."""

import functools
import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from triehh_beam.protocol.accounting import exact_accountant as ea
from triehh_beam.protocol.accounting import sample_threshold as st

# ---------------------------------------------------------------------------------------------
# The independent implementation: the two output distributions written out, output by output.
#
# Without the user the count is X ~ Binomial(f, p); with it, Y ~ Binomial(f + 1, p); each is
# published when >= tau, else the single output "nothing". The hockey-stick divergence is summed
# over every output (no closed form, no crossing point), at 60 digits, from the exact double p.


def _direct(epsilon, p, tau, f):
    """``(add, add_mass, remove, remove_mass)`` for one f: ``add = sum (Q - e^eps P)^+`` over
    every output and ``add_mass`` the Q-mass of the outputs where that is positive (``remove``
    the same with P and Q swapped)."""
    with mpmath.workdps(60):
        p = mpmath.mpf(p)
        scale = mpmath.exp(mpmath.mpf(epsilon))

        def pmf(n, k):
            return mpmath.binomial(n, k) * p**k * (1 - p) ** (n - k) if 0 <= k <= n else mpmath.mpf(0)

        outputs = [(mpmath.fsum(pmf(f, k) for k in range(tau)), mpmath.fsum(pmf(f + 1, k) for k in range(tau)))]
        outputs += [(pmf(f, k), pmf(f + 1, k)) for k in range(tau, f + 2)]
        add = [(q - scale * w, q) for w, q in outputs if q > scale * w]
        remove = [(w - scale * q, w) for w, q in outputs if w > scale * q]
        return (mpmath.fsum(x for x, _ in add), mpmath.fsum(m for _, m in add),
                mpmath.fsum(x for x, _ in remove), mpmath.fsum(m for _, m in remove))


_BITS = 640  # fixed point: probabilities are integers in units of 2^-640 (about 1e-193)


@functools.lru_cache(maxsize=None)
def _sweep(epsilon, p, tau, top):
    """``{f: delta(f)}`` for every ``f`` in ``tau - 1 .. top``, as Fractions, by the same direct
    summation in fixed point: the pmf of Binomial(f, p) is carried from f to f + 1 by
    ``b'(k) = p b(k - 1) + (1 - p) b(k)`` in integers (p a double is exactly ``m / 2^53``), so
    the only rounding is one unit of 2^-640 per step (at most ``top`` units in all, far below
    any delta compared here)."""
    m, d = p.as_integer_ratio()
    shift = d.bit_length() - 1
    one = 1 << _BITS
    with mpmath.workdps(250):
        scale = int(mpmath.floor(mpmath.exp(mpmath.mpf(epsilon)) * one))  # e^eps in the same units
    low, pmf = 0, [one]  # pmf[i] is P(X = low + i); entries that round to 0 are trimmed
    out = {}
    for f in range(top + 1):
        nxt = [0] * (len(pmf) + 1)
        for i, x in enumerate(pmf):
            nxt[i] += (d - m) * x
            nxt[i + 1] += m * x
        nxt = [x >> shift for x in nxt]
        if f >= tau - 1:
            # P: pmf (f others), Q: nxt (f + 1 reporters), both starting at count `low`.
            cut = max(0, tau - low)
            below_p, below_q = sum(pmf[:cut]), sum(nxt[:cut])
            add = max(below_q * one - scale * below_p, 0)
            remove = max(below_p * one - scale * below_q, 0)
            for i in range(cut, len(nxt)):
                w = pmf[i] if i < len(pmf) else 0
                add += max(nxt[i] * one - scale * w, 0)
                remove += max(w * one - scale * nxt[i], 0)
            out[f] = Fraction(max(add, remove), one * one)
        while nxt and nxt[-1] == 0:
            nxt.pop()
        zeros = next((i for i, x in enumerate(nxt) if x), len(nxt))
        low, pmf = low + zeros, nxt[zeros:]
    return out


def test_the_two_independent_implementations_agree():
    for epsilon, p, tau in [(1.0, 0.288242, 23), (0.3, 0.6, 2), (2.0, 0.05, 1)]:
        swept = _sweep(epsilon, p, tau, 120)
        for f in (tau - 1, tau + 4, 60, 120):
            add, _, remove, _ = _direct(epsilon, p, tau, f)
            with mpmath.workdps(60):
                want = max(add, remove)
                got = mpmath.mpf(swept[f].numerator) / swept[f].denominator
                assert want > 0 and abs(got - want) <= 1e-40 * want, (epsilon, p, tau, f)


# ---------------------------------------------------------------------------------------------
# count_delta, add_excess and remove_excess against the direct sums.


def _grid(count, seed):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        epsilon = float(rng.choice([0.05, 0.125, 0.25, 0.5, 1.0, 2.0, 3.0]))
        p = float(rng.uniform(0.01, 0.95))
        tau = int(rng.choice([1, 1, 2, 3, 5, 8, 13, 21, 30]))
        f = int(rng.integers(max(tau - 1, 0), 300))
        cases.append((epsilon, p, tau, f))
    return cases


def test_count_delta_equals_the_direct_sum_over_every_output():
    """Compared where delta > 1e-30: deeper tails are no privacy question and there scipy's
    pmf and sf, and the cancellation below, leave ~1e-11 relative (measured: 3.4e-11 at
    delta = 3e-193, f = 1000, eps = 1, p = 0.288).

    The closed forms are differences, ``p b(K - 1) - (e^eps - 1) S(K)`` and differences of cdfs,
    of numbers each at most the mass of the outputs where the excess is positive; scipy gives
    each to ~3e-14 relative, so the error is at most 1e-13 of that mass (measured: 2.2e-14).
    Where the mass is within a factor 10 of delta this is the 1e-12 relative agreement asked
    for; where the sum is mostly cancellation (mass ~100 delta, large f) the relative error
    reaches ~3e-12, which is this tolerance's second term and no privacy question."""
    compared = removes = tau_one = 0
    for epsilon, p, tau, f in _grid(130, 20261127):
        add, add_mass, remove, remove_mass = _direct(epsilon, p, tau, f)
        want = max(add, remove)
        if want <= 1e-30:
            continue
        compared += 1
        tau_one += tau == 1
        got_add = float(ea.add_excess(epsilon, p, tau, np.array([f]))[0])
        got_remove = float(ea.remove_excess(epsilon, p, tau, np.array([f]))[0])
        assert abs(got_add - add) <= 1e-12 * add + 1e-13 * add_mass, (epsilon, p, tau, f)
        assert abs(got_remove - remove) <= 1e-12 * remove + 1e-13 * remove_mass, (epsilon, p, tau, f)
        got = ea.count_delta(epsilon, p, tau, f)
        mass = add_mass if add >= remove else remove_mass
        assert abs(got - want) <= 1e-12 * want + 1e-13 * mass, (epsilon, p, tau, f, got, want)
        if mass <= 10 * want:
            assert got == pytest.approx(float(want), rel=1e-12, abs=0), (epsilon, p, tau, f)
        if p > -math.expm1(-epsilon):
            removes += remove > 1e-30  # the remove direction is active and was compared
        else:
            assert remove == 0 and got_remove == 0.0  # p <= 1 - e^-eps: the remove direction vanishes
    # The grid exercises what it claims to: many cases, the remove direction active, tau = 1.
    assert compared >= 60 and removes >= 5 and tau_one >= 5, (compared, removes, tau_one)


# Plan points (eps_r, p_s, tau) that the exact planner chooses: one release at eps = 1 and
# delta = 1e-8; eps = 2 over L = 4 rounds (delta_r = 2.5e-9); and eps_r = 0.125.
PLAN_POINTS = [(1.0, 0.288242, 23, 1000), (0.5, 0.218004, 32, 1000), (0.125, 0.0803756, 41, 2000)]


@pytest.mark.parametrize("epsilon, p, tau, top", PLAN_POINTS)
def test_release_delta_is_the_worst_case_over_every_f(epsilon, p, tau, top):
    swept = _sweep(epsilon, p, tau, top)
    worst_f = max(swept, key=swept.get)
    worst = swept[worst_f]
    # The range is wide enough: the excess has fallen 30 orders of magnitude by its end (beyond
    # it, test_tail_bound_bounds_every_larger_f), and below tau - 1 nothing is ever published.
    assert max(swept[f] for f in range(top - 10, top + 1)) < Fraction(1, 10**30) * worst
    found = ea.release_delta(epsilon, p, tau)
    assert found.delta == pytest.approx(float(worst), rel=1e-12, abs=0)
    assert found.worst_holders == worst_f
    assert found.tail <= 1e-6 * found.delta
    assert found.searched_to >= worst_f


# ---------------------------------------------------------------------------------------------
# The whole mechanism by brute force: every sample and every choice of a small population.


def _release_distribution(users, p, tau):
    """``{published: probability}`` of one release, exactly (Fractions): ``users`` is a list of
    tuples of items, each user choosing one of its items uniformly when sampled (probability
    ``p``). ``published`` is the set of (item, count) with count >= tau."""
    p = Fraction(p)
    outcomes = [[(None, 1 - p)] + [(item, p / len(items)) for item in items] for items in users]
    out = {}
    for combination in itertools.product(*outcomes):
        weight = Fraction(1)
        counts = {}
        for item, w in combination:
            weight *= w
            if item is not None:
                counts[item] = counts.get(item, 0) + 1
        published = frozenset((item, c) for item, c in counts.items() if c >= tau)
        out[published] = out.get(published, 0) + weight
    return out


def _hockey_stick_both_ways(without, with_user, epsilon):
    with mpmath.workdps(60):
        scale = mpmath.exp(mpmath.mpf(epsilon))
        directions = []
        for a, b in ((with_user, without), (without, with_user)):
            total = mpmath.mpf(0)
            for output in set(a) | set(b):
                x = mpmath.mpf(a.get(output, 0).numerator) / a.get(output, Fraction(1)).denominator
                y = mpmath.mpf(b.get(output, 0).numerator) / b.get(output, Fraction(1)).denominator
                total += max(x - scale * y, 0)
            directions.append(total)
        return max(directions)


@pytest.mark.parametrize("epsilon, p, tau", [
    (1.0, 0.3, 2),
    (0.5, 0.45, 3),   # p > 1 - e^-0.5 = 0.393: the remove direction is active
    (0.2, 0.6, 2),    # p > 1 - e^-0.2 = 0.181
    (1.0, 0.4, 1),    # tau = 1: every reported item is published
    (2.0, 0.8, 4),
])
def test_brute_force_one_item_users_is_count_delta(epsilon, p, tau):
    # The user holds "a"; f others hold "a", and other items are held by the rest (n <= 12).
    for f, others in [(tau - 1, {"b": 3, "c": 2}), (tau + 1, {"b": 4}), (5, {"b": 2, "c": 3})]:
        population = [("a",)] * f + [(item,) for item, n in others.items() for _ in range(n)]
        assert len(population) <= 12
        without = _release_distribution(population, p, tau)
        with_user = _release_distribution(population + [("a",)], p, tau)
        brute = _hockey_stick_both_ways(without, with_user, epsilon)
        assert ea.count_delta(epsilon, p, tau, f) == pytest.approx(float(brute), rel=1e-12, abs=1e-300)
        assert brute <= ea.release_delta(epsilon, p, tau).delta + 1e-15
        assert brute > 0  # a nontrivial case: with f >= tau - 1 the user can tip an item over tau


@pytest.mark.parametrize("epsilon, p, tau", [(1.0, 0.3, 2), (0.5, 0.45, 2), (0.2, 0.6, 1), (1.0, 0.7, 3)])
def test_brute_force_two_item_users_is_within_release_delta(epsilon, p, tau):
    # Users holding two items report one, each with probability 1/2; the added user holds two.
    population = [("a", "b")] * 3 + [("a", "c")] * 2 + [("b",)] * 2 + [("a",)]
    for target in [("a", "b"), ("a", "c"), ("c",)]:
        without = _release_distribution(population, p, tau)
        with_user = _release_distribution(population + [target], p, tau)
        brute = _hockey_stick_both_ways(without, with_user, epsilon)
        assert 0 < brute <= ea.release_delta(epsilon, p, tau).delta + 1e-15, (target, float(brute))


# ---------------------------------------------------------------------------------------------
# Against the paper's bound, and the number.


def test_exact_delta_is_within_the_papers_bound_wherever_it_applies():
    checked = 0
    for alpha, epsilon, tau in itertools.product([0.02, 0.1, 0.194, 0.3, 0.4, 0.5, 0.517],
                                                 [0.05, 0.25, 0.5, 1.0], [1, 2, 3, 5, 10, 23, 40]):
        if st.sample_threshold_violations(alpha, epsilon, tau):
            continue
        bound = st.sample_threshold(alpha, epsilon, tau).per_round.delta
        p = st.sampling_probability(alpha, epsilon)
        assert ea.release_delta(epsilon, p, tau).delta <= bound, (alpha, epsilon, tau)
        checked += 1
    assert checked == 7 * 4 * 7


def test_todays_epsilon_one_plan_spends_about_two_in_a_quadrillion():
    # alpha = 0.194, tau = 23 at eps = 1 claims exp(-C_alpha 23) <= 1e-8 by the paper's bound.
    p = st.sampling_probability(0.194, 1.0)
    assert st.sample_threshold(0.194, 1.0, 23).per_round.delta <= 1e-8
    assert ea.release_delta(1.0, p, 23).delta == pytest.approx(1.9e-15, rel=0.05)


# ---------------------------------------------------------------------------------------------
# The properties the planner uses.


def test_delta_is_nonincreasing_in_tau():
    # A larger threshold is post-processing of a smaller one, for every f and so for the worst.
    for epsilon, p in [(1.0, 0.288242), (0.5, 0.45), (0.125, 0.08), (2.0, 0.7)]:
        for tau in range(1, 40, 3):
            assert ea.release_delta(epsilon, p, tau + 1).delta <= ea.release_delta(epsilon, p, tau).delta * (1 + 1e-12)
            for f in (tau, 2 * tau + 5, 100):
                assert ea.count_delta(epsilon, p, tau + 1, f) <= ea.count_delta(epsilon, p, tau, f) * (1 + 1e-12) + 1e-300


def test_delta_is_nonincreasing_in_epsilon():
    for p, tau in [(0.288242, 23), (0.6, 5), (0.08, 41)]:
        deltas = [ea.release_delta(eps, p, tau).delta for eps in np.linspace(0.05, 3.0, 25)]
        assert all(b <= a * (1 + 1e-12) for a, b in zip(deltas, deltas[1:])), deltas
        assert deltas[-1] < deltas[0]


@pytest.mark.parametrize("delta, p, tau", [(1e-8, 0.288242, 23), (1e-6, 0.2, 10), (1e-10, 0.1, 30)])
def test_release_epsilon_inverts_release_delta(delta, p, tau):
    epsilon = ea.release_epsilon(delta, p, tau)
    assert 0 < epsilon < math.inf
    assert ea.release_delta(epsilon, p, tau).delta <= delta
    assert ea.release_delta(0.999999 * epsilon, p, tau).delta > delta


def test_release_epsilon_is_infinite_when_no_epsilon_reaches_delta():
    # f = tau - 1 others: only the user's report can reach tau, so delta >= p^tau at any epsilon.
    assert ea.release_epsilon(1e-3, 0.9, 2) == math.inf


def test_an_early_stop_answers_the_question_it_was_asked():
    # ``above`` only stops early when the answer exceeds it, so "<= above?" is answered exactly.
    full = ea.release_delta(1.0, 0.288242, 23).delta
    for above in (full * 0.999, full * 1.001):
        quick = ea.release_delta(1.0, 0.288242, 23, above=above)
        assert (quick.delta <= above) == (full <= above)


@pytest.mark.parametrize("epsilon, p, tau", [(1.0, 0.288242, 23), (0.5, 0.45, 3), (0.125, 0.08, 41),
                                             (0.2, 0.6, 1), (2.0, 0.9, 5)])
def test_tail_bound_bounds_every_larger_f(epsilon, p, tau):
    # At F well inside the range where the excess matters, so that the bound is not trivially
    # small, and at the release's own searched_to.
    release = ea.release_delta(epsilon, p, tau)
    informative = 0
    for big_f in sorted({tau + 5, 4 * tau, int(3 * tau / p), release.searched_to}):
        tail = ea.tail_bound(epsilon, p, tau, big_f)
        beyond = list(range(big_f + 1, big_f + 301)) + [2 * big_f, 10 * big_f, 100 * big_f]
        excess = np.maximum(ea.add_excess(epsilon, p, tau, np.array(beyond)),
                            ea.remove_excess(epsilon, p, tau, np.array(beyond)))
        assert excess.max() <= tail, (big_f, tail, excess.max())
        informative += 0 < excess.max() and tail < 1.0
    assert informative >= 1  # at least one F where both sides are nontrivial
    # What release_delta reports is the larger of the worst f it computed and the bound.
    assert release.tail == ea.tail_bound(epsilon, p, tau, release.searched_to)
    assert release.delta == max(ea.count_delta(epsilon, p, tau, release.worst_holders), release.tail)


def test_tail_bound_is_not_vacuous():
    # The search ends because the bound gets small: a millionth of delta at searched_to.
    for epsilon, p, tau in [(1.0, 0.288242, 23), (0.2, 0.6, 1), (2.0, 0.9, 5)]:
        release = ea.release_delta(epsilon, p, tau)
        assert 0 < release.tail <= 1e-6 * release.delta


# ---------------------------------------------------------------------------------------------
# Arguments out of range.


@pytest.mark.parametrize("call, message", [
    (lambda: ea.count_delta(-0.1, 0.3, 5, 10), "epsilon must be >= 0"),
    (lambda: ea.count_delta(math.nan, 0.3, 5, 10), "epsilon must be finite"),
    (lambda: ea.count_delta(1.0, 0.0, 5, 10), "sample_probability must be in (0, 1)"),
    (lambda: ea.count_delta(1.0, 1.0, 5, 10), "sample_probability must be in (0, 1)"),
    (lambda: ea.count_delta(1.0, 0.3, 0, 10), "tau must be >= 1"),
    (lambda: ea.count_delta(1.0, 0.3, 2.5, 10), "tau must be an integer"),
    (lambda: ea.count_delta(1.0, 0.3, True, 10), "tau must be an integer"),
    (lambda: ea.count_delta(1.0, 0.3, 5, -1), "holders must be >= 0"),
    (lambda: ea.count_delta("1", 0.3, 5, 10), "epsilon must be a number"),
    (lambda: ea.release_delta(1.0, 1.5, 5), "sample_probability must be in (0, 1)"),
    (lambda: ea.release_delta(1.0, 0.3, -2), "tau must be >= 1"),
    (lambda: ea.tail_bound(1.0, 0.3, 5, 0), "searched_to must be >= 1"),
    (lambda: ea.release_epsilon(0.0, 0.3, 5), "delta must be in (0, 1)"),
    (lambda: ea.release_epsilon(1.0, 0.3, 5), "delta must be in (0, 1)"),
    (lambda: ea.release_epsilon(1e-8, 0.0, 5), "sample_probability must be in (0, 1)"),
])
def test_arguments_out_of_range_are_refused(call, message):
    with pytest.raises(ValueError) as raised:
        call()
    assert message in str(raised.value)
