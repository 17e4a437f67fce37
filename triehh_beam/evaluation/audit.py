"""The empirical privacy audit (``triehh audit``): a lower confidence bound on the epsilon that
TrieHH actually delivers on a population, beside the epsilon its plan claims. The audited
population D0 is the input; each neighbour D1 adds one user holding only a canary item
(``canaries``: the given or a random one, and the worst case). The protocol runs R times on D0
and R times on each D1, every run with its own seed, with the plan the real job would make for
D0 (the same planner, theta and m) or with expert overrides of theta and m that the claim does
not cover (to show what a broken configuration looks like). The runs are the keyed simulation,
vectorised (``keyed_runs``: the pipeline's exact draws), cut after the round that decides the
longest canary. The events are "this prefix of a canary is in the trie" for each of the
canary's prefixes (its whole sequence last), and their negations, in both directions (D1 over
D0 and D0 over D1). The most telling one is chosen on the first half of the runs and its bound
computed on the second (``stats.epsilon_lower_bound``: one-sided 97.5% Clopper-Pearson bounds
on both probabilities, 95% jointly), so the choice costs no confidence. A bound above the
claimed epsilon means the configuration does not deliver its claim; TrieHH, whose threshold
hides a single user's vote, is expected to give a bound far below it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from typing import AbstractSet, Callable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from triehh_beam.evaluation import canaries as canaries_lib
from triehh_beam.evaluation.canaries import Canary
from triehh_beam.evaluation.keyed_runs import EncodedPopulation, Members, encode_population, run_keyed
from triehh_beam.evaluation.metrics import UserItems, ground_truth
from triehh_beam.evaluation.stats import EpsilonBound, epsilon_lower_bound
from triehh_beam.protocol import planner, privacy
from triehh_beam.protocol.encoding import ItemEncoder, Units, is_terminated
from triehh_beam.protocol.parameters import RULES
from triehh_beam.protocol.sampling import Sampler

__all__ = ["AuditConfig", "AuditError", "run_audit", "run_seed"]

FORMAT = "triehh-beam/audit/v1"
METHOD = ("the event is chosen on the first half of the runs and evaluated on the second; Clopper-Pearson "
          "one-sided bounds at 97.5% on each probability (the ends of two-sided 95% intervals), 95% jointly "
          "by the union bound; epsilon >= ln((p_numerator_lower - delta) / p_denominator_upper)")
FORWARD, BACKWARD = "D1 over D0", "D0 over D1"

Progress = Callable[[int, int], None]


class AuditError(ValueError):
    """The audit cannot run: an infeasible target, or nothing to audit; the message says why."""


@dataclasses.dataclass(frozen=True)
class AuditConfig:
    """What to audit.

    Attributes:
      epsilon, delta, max_length, rule: the target the plan is made for (as ``discover``'s).
      runs: R, runs on D0 and on each D1 (at least 2: half choose the event, half bound it).
      canary: the canary item; None: a random string nobody holds.
      seed: the public seed of the canary draw and of every run's secret seed.
      unit_size, case_fold, truncate_long_items: the item settings (as ``discover``'s).
      theta, batch_size: expert overrides of the plan's theta and m (each alone): the claim
        stays the plan's, which they may break (that is what they are for).
      confidence: of the bound (default 95%).

    Raises:
      AuditError: a value out of range; CanaryError: a canary that cannot be encoded;
      ValueError: an invalid encoding.
    """

    epsilon: float
    delta: float
    max_length: int
    runs: int = 1000
    canary: Optional[str] = None
    seed: int = 0
    unit_size: int = 1
    case_fold: bool = False
    truncate_long_items: bool = False
    rule: str = "authors"
    theta: Optional[int] = None
    batch_size: Optional[int] = None
    confidence: float = 0.95

    def __post_init__(self):
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 2:
            raise AuditError(f"runs must be an integer >= 2 (half choose the event, half bound it), got {self.runs!r}")
        if self.theta is not None and self.theta < 1:
            raise AuditError(f"theta must be >= 1, got {self.theta}")
        if self.batch_size is not None and self.batch_size < 1:
            raise AuditError(f"the batch size must be >= 1, got {self.batch_size}")
        if not 0 < self.confidence < 1:
            raise AuditError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.rule not in RULES:
            raise AuditError(f"rule must be one of {', '.join(RULES)}, got {self.rule!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise AuditError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.canary is not None:  # refused before any record is read
            canaries_lib.check_canary(self.canary, self.encoder)

    @property
    def encoder(self) -> ItemEncoder:
        return ItemEncoder(unit_size=self.unit_size, max_length=self.max_length, case_fold=self.case_fold)


def run_seed(seed: int, population: str, run: int) -> bytes:
    """The 32-byte secret seed of run ``run`` on ``population`` ("D0", "D1:<canary kind>") of
    an audit with public seed ``seed``: every run of every population draws independently."""
    return hashlib.blake2b(f"triehh-beam/audit/{seed}/{population}/{run}".encode(), digest_size=32).digest()


@dataclasses.dataclass(frozen=True)
class _Candidate:
    """A distinguishing event: the canary's length-``length`` prefix (negated: absent) in the
    trie, its probability on the numerator population bounded against the denominator's."""

    canary: int
    length: int
    column: int
    negated: bool
    forward: bool


def _spell(prefix: Units) -> str:
    return "".join(prefix[:-1] if is_terminated(prefix) else prefix) + ("$" if is_terminated(prefix) else "")


def _choose_canaries(config: AuditConfig, users: Mapping[bytes, object], ranking: Sequence[Tuple[str, int]],
                     held: AbstractSet[str], encoder: ItemEncoder) -> List[Canary]:
    """The given or random canary, then the worst case unless it is the same item."""
    chosen: List[Canary] = []
    if config.canary is not None:
        item, sequence = canaries_lib.check_canary(config.canary, encoder)
        note = "given (--canary); held by users of D0" if item in held else "given (--canary)"
        chosen.append(Canary(canaries_lib.GIVEN, item, sequence, canaries_lib.canary_user_id(users, "given"), note))
    else:
        item, sequence = canaries_lib.check_canary(canaries_lib.random_canary(held, encoder, config.seed), encoder)
        chosen.append(Canary(canaries_lib.RANDOM, item, sequence, canaries_lib.canary_user_id(users, "random"),
                             "random, held by no user of D0"))
    worst = canaries_lib.worst_case_canary(ranking, held, encoder)
    if worst is not None and worst[0] != chosen[0].item:
        item, sequence = canaries_lib.check_canary(worst[0], encoder)
        chosen.append(Canary(canaries_lib.WORST_CASE, item, sequence,
                             canaries_lib.canary_user_id(users, "worst-case"),
                             f"{worst[1]!r} (the most held item that can be cut) cut before its last unit: its prefix "
                             f"{_spell(sequence[:-1])!r} is among the most voted, only its last unit differs"))
    return chosen


def _outcomes(population: EncodedPopulation, members: Members, columns: np.ndarray, theta: int, m: int,
              rounds: int, seeds: Sequence[bytes], progress: Callable[[], None]) -> np.ndarray:
    """(runs, events): whether each event prefix is in each run's trie."""
    out = np.zeros((len(seeds), len(columns)), dtype=bool)
    for j, seed in enumerate(seeds):
        out[j] = run_keyed(population, members, theta, m, Sampler(seed), rounds)[columns]
        progress()
    return out


def _counts(candidate: _Candidate, d0: np.ndarray, d1: Sequence[np.ndarray], runs: slice) -> Tuple[int, int, int]:
    """(numerator hits, denominator hits, runs) of ``candidate`` over ``runs``."""
    hits1 = int(d1[candidate.canary][runs, candidate.column].sum())
    hits0 = int(d0[runs, candidate.column].sum())
    total = len(d0[runs])
    if candidate.negated:
        hits1, hits0 = total - hits1, total - hits0
    return (hits1, hits0, total) if candidate.forward else (hits0, hits1, total)


def _bound(counts: Tuple[int, int, int], delta: float, confidence: float) -> EpsilonBound:
    numerator, denominator, total = counts
    return epsilon_lower_bound(numerator, total, denominator, total, delta, confidence)


def _guarantee(n: int, theta: int, m: int, max_length: int) -> Optional[float]:
    """Theorem 1's epsilon for (theta, m), None when its conditions fail."""
    try:
        return privacy.theorem1(n, theta, max_length, batch_size=m).epsilon
    except privacy.PrivacyConditionError:
        return None


def run_audit(config: AuditConfig, users: Mapping[bytes, UserItems], progress: Optional[Progress] = None) -> dict:
    """Audits TrieHH on ``users`` (D0); returns the JSON-ready result (docs/evaluation.md).

    Args:
      config: what to audit.
      users: the population, user id -> items (``population.load_population(...).users``).
      progress: called as ``progress(runs done, runs in all)`` after every run.

    Raises:
      AuditError: no users, or a target the planner finds infeasible for them.
      CanaryError: a canary that cannot be encoded.
    """
    started = time.monotonic()
    encoder = config.encoder
    truth = ground_truth(users, encoder)
    n = truth.n_users
    if n == 0:
        raise AuditError("the input holds no user with a record: nothing to audit")
    plan = planner.plan(n, config.epsilon, config.delta, config.max_length, config.rule, with_alternatives=False)
    if not plan.feasible:
        raise AuditError(f"no plan to audit: {plan.reason}")
    theta = plan.theta if config.theta is None else config.theta
    m = plan.batch_size if config.batch_size is None else config.batch_size
    ranking = sorted(truth.user_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    held = frozenset(truth.user_counts)
    chosen = _choose_canaries(config, users, ranking, held, encoder)

    population = encode_population({**users, **{c.user_id: {c.item: 1} for c in chosen}}, encoder,
                                   "truncate" if config.truncate_long_items else "drop")
    canary_ids = {c.user_id for c in chosen}
    d0_ids = [u for u in population.user_ids if u not in canary_ids]
    # Events: each canary's prefixes, its whole sequence last; columns of the outcome arrays.
    events = [(i, j) for i, c in enumerate(chosen) for j in range(1, len(c.sequence) + 1)]
    columns = np.array([population.prefix_number(chosen[i].sequence[:j]) for i, j in events], dtype=np.int64)
    rounds = max(len(c.sequence) for c in chosen)
    total_runs = config.runs * (1 + len(chosen))
    done = [0]

    def advance() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total_runs)

    def runs_on(name: str, members: Members) -> np.ndarray:
        seeds = [run_seed(config.seed, name, j) for j in range(config.runs)]
        return _outcomes(population, members, columns, theta, m, rounds, seeds, advance)

    d0 = runs_on("D0", population.members(d0_ids))
    d1 = [runs_on(f"D1:{c.kind}", population.members(d0_ids + [c.user_id])) for c in chosen]

    half = config.runs // 2
    first, second = slice(0, half), slice(half, config.runs)
    candidates = [_Candidate(i, j, column, negated, forward)
                  for column, (i, j) in enumerate(events) for negated in (False, True) for forward in (True, False)]

    def score(candidate: _Candidate) -> Tuple[float, float]:
        numerator, denominator, _ = counts = _counts(candidate, d0, d1, first)
        return (_bound(counts, plan.delta, config.confidence).epsilon,
                math.log((numerator + 0.5) / (denominator + 0.5)))

    best = max(candidates, key=score)  # the first of equals: the enumeration order decides ties
    chosen_counts = _counts(best, d0, d1, first)
    evaluated = _counts(best, d0, d1, second)
    bound = _bound(evaluated, plan.delta, config.confidence)
    # An event in every held-out D1 run and in no D0 run: the largest bound these runs allow.
    most = _bound((evaluated[2], 0, evaluated[2]), plan.delta, config.confidence).epsilon
    overridden = [name for name, value in (("theta", config.theta), ("batch_size", config.batch_size))
                  if value is not None]
    return {
        "format": FORMAT,
        "epsilon_claimed": plan.epsilon,
        "delta_claimed": plan.delta,
        "epsilon_lower_bound": bound.epsilon,
        "violated": bound.epsilon > plan.epsilon,
        "epsilon_provable_max": most,
        "confidence": config.confidence,
        "method": METHOD,
        "target": {"epsilon": config.epsilon, "delta": config.delta, "max_length": config.max_length,
                   "rule": config.rule, "unit_size": config.unit_size},
        "plan": {"theta": plan.theta, "batch_size": plan.batch_size, "population": n,
                 "sampling_rate": plan.batch_size / n},
        "audited": {"theta": theta, "batch_size": m, "overridden": overridden,
                    "theorem1_epsilon": _guarantee(n, theta, m, config.max_length)},
        "runs": config.runs,
        "selection_runs": half,
        "evaluation_runs": config.runs - half,
        "rounds_per_run": rounds,
        "seed": config.seed,
        "canaries": [{"kind": c.kind, "item": c.item, "units": len(c.sequence), "note": c.note} for c in chosen],
        "events": [{"canary": chosen[i].kind, "prefix": _spell(chosen[i].sequence[:j]), "units": j,
                    "runs_d0": int(d0[:, column].sum()), "runs_d1": int(d1[i][:, column].sum())}
                   for column, (i, j) in enumerate(events)],
        "best_event": {
            "canary": chosen[best.canary].kind,
            "prefix": _spell(chosen[best.canary].sequence[:best.length]),
            "in_trie": not best.negated,
            "direction": FORWARD if best.forward else BACKWARD,
            "selection": {"numerator": chosen_counts[0], "denominator": chosen_counts[1], "runs": half},
            "evaluation": {"numerator": evaluated[0], "denominator": evaluated[1], "runs": evaluated[2],
                           "p_numerator_lower": bound.p_numerator_lower,
                           "p_denominator_upper": bound.p_denominator_upper},
        },
        "seconds": round(time.monotonic() - started, 3),
    }


def format_audit(result: dict) -> str:
    """The audit's result as the lines ``triehh audit`` prints."""
    plan, audited, best = result["plan"], result["audited"], result["best_event"]
    target = result["target"]
    lines = [
        f"TrieHH privacy audit (epsilon={target['epsilon']:g} delta={target['delta']:g} L={target['max_length']}, "
        f"rule {target['rule']}, unit size {target['unit_size']})",
        f"  population D0     {plan['population']:,} users; each D1 adds one user holding only a canary",
        f"  plan              theta={plan['theta']} m={plan['batch_size']:,} ({plan['sampling_rate']:.3%} of D0 "
        f"per round): claims epsilon={result['epsilon_claimed']:.4g} delta={result['delta_claimed']:.3g}",
    ]
    if audited["overridden"]:
        guarantee = audited["theorem1_epsilon"]
        flags = ", ".join("--" + name.replace("_", "-") for name in audited["overridden"])
        lines.append(f"  audited instead   theta={audited['theta']} m={audited['batch_size']:,} (expert {flags}: "
                     "Theorem 1 gives "
                     + ("no guarantee" if guarantee is None else f"epsilon={guarantee:.4g}") + ")")
    for canary in result["canaries"]:
        lines.append(f"  canary {canary['kind']:<10} {canary['item']!r} ({canary['units']} units): {canary['note']}")
    lines.append(f"  runs              {result['runs']:,} on D0 and on each D1, each with its own seed, "
                 f"{result['rounds_per_run']} rounds at most; {result['seconds']:.1f} s")
    lines.append("")
    lines.append(f"runs whose trie holds the prefix (of {result['runs']:,} per population):")
    width = max(len(e["prefix"]) for e in result["events"]) + 2
    lines.append(f"  {'canary':<11} {'prefix':<{width}} {'D0':>7} {'D1':>7}")
    for event in result["events"]:
        lines.append(f"  {event['canary']:<11} {event['prefix']:<{width}} {event['runs_d0']:>7,} {event['runs_d1']:>7,}")
    evaluation = best["evaluation"]
    where = "in" if best["in_trie"] else "not in"
    lines += [
        "",
        f"best event (chosen on runs 1-{result['selection_runs']:,}, bounded on the other "
        f"{result['evaluation_runs']:,}): {best['prefix']!r} {where} the trie ({best['canary']} canary), "
        f"{best['direction']}: {evaluation['numerator']:,} vs {evaluation['denominator']:,} runs",
        f"  p lower {evaluation['p_numerator_lower']:.4g}, p' upper {evaluation['p_denominator_upper']:.4g} "
        f"(Clopper-Pearson, 97.5% each, {result['confidence']:.0%} jointly)",
        f"epsilon lower bound   {result['epsilon_lower_bound']:.4g}",
        f"epsilon claimed       {result['epsilon_claimed']:.4g}",
        f"(the most {result['evaluation_runs']:,} held-out runs can prove is {result['epsilon_provable_max']:.4g}: "
        "an event in all of D1's and none of D0's; more --runs prove more)",
    ]
    if result["violated"]:
        lines.append("VIOLATED: the runs prove more privacy loss than the plan claims; this configuration does not "
                     "deliver its guarantee")
    else:
        lines.append("consistent: the runs prove no more privacy loss than the plan claims (a lower bound: far "
                     "below the claim is expected for TrieHH's threshold)")
    return "\n".join(lines)
