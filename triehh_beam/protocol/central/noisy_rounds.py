"""The plan of noisy prefix rounds (central DP, docs/protocol.md §8): every user votes in every
round; each public candidate (a frontier prefix extended by a unit of the declared alphabet, or
by the end marker) gets its vote count plus discrete Laplace noise of parameter ``eps_r``
(``P(Z = z)`` proportional to ``exp(-eps_r |z|)``), and a candidate whose noisy count reaches
the round's threshold grows the trie.
One user's votes change one count by one per round (add/remove adjacency): each round is the
discrete Laplace mechanism on a histogram over a public domain, ``eps_r``-DP, and the threshold
and the dropped candidates are post-processing. The L rounds compose adaptively; ``plan_noisy_rounds``
chooses the largest ``eps_r`` whose L-fold composition is certified within (epsilon, delta),
by two accountants: dp_accounting's PLD of the discrete Laplace mechanism (tight up to its grid)
and zCDP (``eps_r``-DP is ``eps_r^2 / 2``-zCDP; L rounds ``L eps_r^2 / 2``, read at delta by
``rho + 2 sqrt(rho ln(1/delta))``); it keeps the one that certifies less epsilon, hence allows
less noise (PLD, in every case tried: zCDP's conversion is loose for pure-DP mechanisms).
The threshold is no privacy parameter: it bounds false prefixes. A candidate nobody voted for
is kept with probability ``q(T) = P(Z >= T) = a^T / (1 + a)``, ``a = e^-eps_r``; a round with C
candidates keeps ``C q(T)`` of them in expectation at most, so ``threshold(C)`` is the smallest
T with ``C q(T) <= false_prefixes / L``, which keeps the expected false prefixes of a whole
release below ``false_prefixes``. C is public (the frontier's size times the alphabet's units),
so T is too."""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence, Tuple

from triehh_beam.protocol.checks import check_int, check_real
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric

__all__ = ["ACCOUNTANTS", "DEFAULT_ALPHABET", "DEFAULT_FALSE_PREFIXES", "NoisyRoundsPlan", "at_least", "false_release_probability", "plan_noisy_rounds",
           "pld_epsilon", "zcdp_epsilon"]

ACCOUNTANTS = ("pld", "zcdp")
#: The candidates' characters when none are declared (discover's --alphabet).
DEFAULT_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
#: The expected false prefixes a release keeps at most when none is declared (--false-prefixes).
DEFAULT_FALSE_PREFIXES = 1.0
#: dp_accounting's grid of privacy-loss values (its default; pessimistic rounding).
_PLD_INTERVAL = 1e-4
_BISECTIONS = 40


def false_release_probability(round_epsilon: float, threshold: int) -> float:
    """``P(Z >= T)`` for discrete Laplace noise of parameter ``round_epsilon`` and ``T >= 1``:
    ``a^T / (1 + a)``, ``a = e^-round_epsilon``."""
    a = math.exp(-round_epsilon)
    return math.exp(-round_epsilon * threshold) / (1 + a)


def at_least(round_epsilon: float, k: int) -> float:
    """``P(Z >= k)`` for any integer k: ``a^k / (1 + a)`` for k >= 1, else, by symmetry,
    ``1 - P(Z >= 1 - k)``. A candidate with c votes is kept with ``at_least(eps_r, T - c)``."""
    return false_release_probability(round_epsilon, k) if k >= 1 else 1 - false_release_probability(round_epsilon, 1 - k)


def pld_epsilon(round_epsilon: float, rounds: int, delta: float) -> float:
    """The epsilon at ``delta`` of ``rounds`` discrete Laplace mechanisms of parameter
    ``round_epsilon`` (sensitivity 1), by dp_accounting's PLD (pessimistic)."""
    from dp_accounting.pld import privacy_loss_distribution  # local: optional at import

    one = privacy_loss_distribution.from_discrete_laplace_mechanism(
        round_epsilon, sensitivity=1, value_discretization_interval=_PLD_INTERVAL)
    composed = one.self_compose(rounds) if rounds > 1 else one
    return float(composed.get_epsilon_for_delta(delta))


def zcdp_epsilon(round_epsilon: float, rounds: int, delta: float) -> float:
    """The epsilon at ``delta`` of ``rounds`` ``round_epsilon``-DP rounds through zCDP (Bun &
    Steinke 2016: pure eps-DP is eps^2/2-zCDP; rho-zCDP is (rho + 2 sqrt(rho ln(1/delta)),
    delta)-DP), never above the basic ``rounds * round_epsilon``."""
    rho = rounds * round_epsilon ** 2 / 2
    return min(rounds * round_epsilon, rho + 2 * math.sqrt(rho * math.log(1 / delta)))


def _largest_round_epsilon(certify, epsilon: float, rounds: int, delta: float) -> float:
    """The largest eps_r (to 40 bisections) with ``certify(eps_r, rounds, delta) <= epsilon``;
    basic composition's ``epsilon / rounds`` is always certified, so it is the floor."""
    low, high = epsilon / rounds, epsilon
    if certify(high, rounds, delta) <= epsilon:
        return high
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        if certify(middle, rounds, delta) <= epsilon:
            low = middle
        else:
            high = middle
    return low


@dataclasses.dataclass(frozen=True)
class NoisyRoundsPlan:
    """What a noisy-rounds release spends and draws.

    Attributes:
      epsilon, delta: the target.
      rounds: L, the rounds composed (the encoding's maximum length, terminator included).
      round_epsilon: each round's discrete Laplace parameter ``eps_r``.
      accountant: "pld" or "zcdp", the one whose certificate ``eps_r`` is planned by.
      certified_epsilon: the epsilon that accountant certifies at delta (<= epsilon).
      false_prefixes: the expected false prefixes (candidates nobody voted for) one release keeps
        at most.

    Raises:
      ValueError: a value out of range (epsilon or eps_r not > 0, delta not in (0, 1), rounds
        < 1, an unknown accountant, a certificate above the target, false_prefixes not > 0).
    """

    epsilon: float
    delta: float
    rounds: int
    round_epsilon: float
    accountant: str
    certified_epsilon: float
    false_prefixes: float = 1.0

    def __post_init__(self):
        for name in ("epsilon", "round_epsilon", "false_prefixes", "certified_epsilon"):
            if not check_real(name, getattr(self, name)) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not 0 < check_real("delta", self.delta) < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        check_int("rounds", self.rounds, 1)
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {self.accountant!r}")
        if self.certified_epsilon > self.epsilon * (1 + 1e-12):
            raise ValueError(f"certified epsilon {self.certified_epsilon!r} is above the target {self.epsilon!r}")

    @property
    def noise(self) -> TwoSidedGeometric:
        """Each count's noise (exact sampling: ``TwoSidedGeometric.sample``)."""
        return TwoSidedGeometric(self.round_epsilon)

    def threshold(self, candidates: int) -> int:
        """The smallest T >= 1 with ``candidates * P(Z >= T) <= false_prefixes / rounds``.

        Raises:
          ValueError: candidates < 1.
        """
        candidates = check_int("candidates", candidates, 1)
        allowed = self.false_prefixes / self.rounds
        a = math.exp(-self.round_epsilon)
        guess = max(1, math.ceil(math.log(candidates / (allowed * (1 + a))) / self.round_epsilon))
        while guess > 1 and candidates * false_release_probability(self.round_epsilon, guess - 1) <= allowed:
            guess -= 1
        while candidates * false_release_probability(self.round_epsilon, guess) > allowed:
            guess += 1
        return guess

    def holders_needed(self, candidates: int, release_probability: float) -> int:
        """The votes a candidate needs to reach one round's threshold with probability at least
        ``release_probability``: ``holders_for`` of that round alone."""
        return self.holders_for(release_probability, [candidates])

    def holders_for(self, probability: float, candidates: Sequence[int]) -> int:
        """The holders an item needs to be released with probability at least ``probability``
        when nothing else shares its prefixes (the worst case): the smallest c with
        ``prod_r P(c + Z >= T_r) >= probability``, T_r the threshold of round r's
        ``candidates[r]`` (one per round the item needs, its end marker's included).

        Raises:
          ValueError: a probability outside (0, 1), or no rounds.
        """
        if not 0 < probability < 1:
            raise ValueError(f"a release probability is in (0, 1), got {probability!r}")
        if not candidates:
            raise ValueError("an item needs at least one round")
        thresholds = [self.threshold(c) for c in candidates]
        c = 0
        while math.prod(at_least(self.round_epsilon, t - c) for t in thresholds) < probability:
            c += 1
        return c


def plan_noisy_rounds(epsilon: float, delta: float, rounds: int, false_prefixes: float = 1.0,
                      accountant: str = "best") -> NoisyRoundsPlan:
    """The plan of a noisy-rounds release for the target (epsilon, delta) over ``rounds``.

    ``accountant``: "pld", "zcdp", or "best" (the one allowing the larger ``eps_r``, i.e. the
    one certifying less epsilon for the same noise).

    Raises:
      ValueError: a target or rounds out of range, or an unknown accountant.
    """
    epsilon, delta = check_real("epsilon", epsilon), check_real("delta", delta)
    rounds = check_int("rounds", rounds, 1)
    if not epsilon > 0 or not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if accountant not in ACCOUNTANTS + ("best",):
        raise ValueError(f"accountant must be pld, zcdp or best, got {accountant!r}")
    certifiers = {"pld": pld_epsilon, "zcdp": zcdp_epsilon}
    names = ACCOUNTANTS if accountant == "best" else (accountant,)
    found = {name: _largest_round_epsilon(certifiers[name], epsilon, rounds, delta) for name in names}
    best = max(names, key=lambda name: (found[name], name == "pld"))
    round_epsilon = found[best]
    return NoisyRoundsPlan(epsilon=epsilon, delta=delta, rounds=rounds, round_epsilon=round_epsilon,
                           accountant=best, certified_epsilon=min(epsilon, certifiers[best](round_epsilon, rounds, delta)),
                           false_prefixes=false_prefixes)
