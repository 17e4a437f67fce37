"""Why TrieHH's fixed batch has no one-count accountant (docs/protocol.md §2, "Exact accounting",
"TrieHH"): with exactly m seats, a user who joins the sample takes one from another prefix, so a
prefix the user never votes for can fall below theta. The populations below satisfy Theorem 1's
conditions and the round's exact delta exceeds Theorem 1's at every epsilon."""

import itertools
import math
from collections import Counter
from fractions import Fraction

from triehh_beam.protocol.accounting.privacy import theorem1_delta


def _enumerated(votes, m, theta):
    """``{published set: probability}`` of one round, every m-subset of the users enumerated."""
    published = Counter()
    for sample in itertools.combinations(range(len(votes)), m):
        counts = Counter(votes[i] for i in sample)
        published[frozenset(x for x, c in counts.items() if c >= theta)] += 1
    total = sum(published.values())
    return {o: Fraction(c, total) for o, c in published.items()}


def _two_prefixes(j_holders, y_holders, m, theta):
    """The same round for users voting j or y only, by counting the m-subsets with a j-votes:
    ``C(j, a) C(y, m - a) / C(j + y, m)``."""
    out = Counter()
    for a in range(0, min(j_holders, m) + 1):
        ways = math.comb(j_holders, a) * math.comb(y_holders, m - a)
        out[frozenset(x for x, c in (("j", a), ("y", m - a)) if c >= theta)] += ways
    total = math.comb(j_holders + y_holders, m)
    return {o: Fraction(c, total) for o, c in out.items() if c}


def _delta(without, with_user, epsilon):
    scale = math.exp(epsilon)
    outputs = set(without) | set(with_user)
    return max(sum(max(float(a.get(o, 0)) - scale * float(b.get(o, 0)), 0.0) for o in outputs)
               for a, b in ((with_user, without), (without, with_user)))


def test_the_counting_is_the_enumeration():
    # 26 users, 5 seats, theta = 4: every 5-subset (65,780 of them) against the counting formula.
    assert _enumerated(["j"] * 2 + ["y"] * 24, 5, 4) == _two_prefixes(2, 24, 5, 4)


def test_a_user_crowds_another_prefix_below_theta():
    for n, theta in [(36, 5), (121, 10)]:
        m = math.isqrt(n)  # gamma = m / sqrt(n) = 1 = sqrt(n) / (theta + 1): Theorem 1's conditions
        assert m * m == n and 4 <= theta <= m and m * (theta + 1) <= n
        epsilon = -math.log1p(-m * theta / n)  # Theorem 1's epsilon for one round
        # Without the user: 1 user starts with j, n - 1 with y; y always has >= m - 1 >= theta
        # votes. With the user (starting with j), both j holders are sampled with probability
        # C(n - 1, m - 2) / C(n + 1, m), and then y has m - 2 < theta votes: nothing is
        # published, which never happens without the user.
        without = _two_prefixes(1, n - 1, m, theta)
        with_user = _two_prefixes(2, n - 1, m, theta)
        assert without == {frozenset({"y"}): 1}
        crowded = Fraction(math.comb(n - 1, m - 2), math.comb(n + 1, m))
        assert with_user[frozenset()] == crowded
        assert _delta(without, with_user, epsilon) == float(crowded)
        assert float(crowded) > theorem1_delta(theta)
    assert Fraction(math.comb(35, 4), math.comb(37, 6)) == Fraction(5, 222)
