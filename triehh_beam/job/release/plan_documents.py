"""The privacy plan a job recorded, in words and as documents: the one line a run prints (what
may be published of it, ``describe_published_plan``, and all of it, ``describe_plan``, private
unless n is declared public), the operator's document (``plan_document``) and the one
``heavy_hitters.json`` publishes (``published_plan_document``: nothing that is a function of n
unless n is declared public), and discover's unit-size advice line.
"""

from __future__ import annotations

from typing import Optional, Tuple

from triehh_beam.job.state.ledger import plan_spend
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.accounting.composition import basic_composition
from triehh_beam.protocol.accounting.privacy import THEOREM1_STATUS
from triehh_beam.protocol.items.encoding import ItemKind
from triehh_beam.protocol.planning.unit_advice import discover_advice
from triehh_beam.protocol.protocols import Protocol

__all__ = [
    "ACCOUNTING_NOTES",
    "CENTRAL_TRUST_MODEL",
    "N_DEPENDENT",
    "describe_plan",
    "describe_published_plan",
    "plan_accounting",
    "plan_document",
    "population_is_public",
    "published_plan_document",
    "unit_advice_message",
]


def population_is_public(plan: state_pb2.PrivacyPlan) -> bool:
    """Whether the operator declared n public (``--population``): then n, m and the achieved
    epsilon, delta (all functions of n) may be published."""
    return plan.public_population > 0


def _samples_by_probability(plan: state_pb2.PrivacyPlan) -> bool:
    """TrieHH++'s plan or whole items': nothing in either depends on n."""
    return Protocol(plan.protocol).samples_by_probability


def _describe_sample_threshold(plan: state_pb2.PrivacyPlan, population: bool) -> str:
    """A TrieHH++ (or whole-item) plan in one line; n (private unless declared public) with
    ``population``."""
    n = f"n={plan.population:,} " if population else ""
    if plan.protocol == Protocol.PARTITION_SELECTION:
        counts = (f"counts epsilon={plan.estimate_epsilon:.4g}" if plan.estimate_epsilon else "no counts")
        return (f"partition selection, whole items, one release: {n}k={plan.max_items_per_user} items per user, "
                f"items up to L-1={plan.max_length - 1} units: selection epsilon={plan.epsilon:.4g} "
                f"delta={plan.delta:.3g}, {counts} (target {plan.target_epsilon:.4g}, {plan.target_delta:.3g})")
    if plan.protocol == Protocol.NOISY_ROUNDS:
        return (f"noisy prefix rounds: {n}every user votes, L={plan.max_length} rounds, discrete Laplace "
                f"per round (epsilon {plan.round_epsilon:.4g}), candidates of {len(plan.alphabet)} characters, "
                f"thresholds for {plan.false_prefixes:.3g} expected false prefixes: epsilon={plan.epsilon:.4g} "
                f"delta={plan.delta:.3g} ({plan.accounting} composition)")
    if plan.protocol == Protocol.WHOLE_ITEMS:
        return (f"sample-and-threshold, whole items, one release: {n}tau={plan.theta} "
                f"p_s={100 * plan.sample_probability:.6g}% items up to "
                f"L-1={plan.max_length - 1} units: epsilon={plan.epsilon:.4g} delta={plan.delta:.3g} "
                f"({plan_accounting(plan)} accounting; target {plan.target_epsilon:.4g}, {plan.target_delta:.3g})")
    return (f"TrieHH++ {n}tau={plan.theta} p_s={100 * plan.sample_probability:.6g}% "
            f"L={plan.max_length}: epsilon={plan.epsilon:.4g} delta={plan.delta:.3g} "
            f"(per round {plan.round_epsilon:.4g}, {plan.round_delta:.3g}; {plan_accounting(plan)} accounting; "
            f"target {plan.target_epsilon:.4g}, {plan.target_delta:.3g})")


def _estimates_part(plan: state_pb2.PrivacyPlan, achieved: bool) -> str:
    """The frequency estimates' spend, to append to a plan's line ("" without them): the total
    target epsilon (public), or with ``achieved`` the total achieved epsilon (a function of n
    for TrieHH)."""
    if not plan.estimate_epsilon or plan.protocol == Protocol.PARTITION_SELECTION:
        return ""  # (partition selection: its counts are part of its own line)
    if plan.no_guarantee:
        return f"; + frequency estimates epsilon_est={plan.estimate_epsilon:.4g}"
    total = (plan.epsilon if achieved else plan.target_epsilon) + plan.estimate_epsilon
    return (f"; + frequency estimates epsilon_est={plan.estimate_epsilon:.4g}: total "
            f"{'' if achieved else 'target '}epsilon={total:.4g} (basic composition, delta unchanged)")


def describe_published_plan(plan: state_pb2.PrivacyPlan) -> str:
    """The plan in one line, as much of it as may be published (progress output by default),
    the frequency estimates' spend included."""
    if population_is_public(plan) or _samples_by_probability(plan):
        return _describe_published_discovery(plan) + _estimates_part(plan, achieved=True)
    return _describe_published_discovery(plan) + _estimates_part(plan, achieved=False)


def _describe_published_discovery(plan: state_pb2.PrivacyPlan) -> str:
    if _samples_by_probability(plan):  # nothing in it depends on n, which is left out
        return _describe_sample_threshold(plan, False) + (" (n declared public)" if population_is_public(plan) else "")
    if population_is_public(plan):
        return _describe_discovery(plan) + " (n declared public)"
    target = (
        "NO DP GUARANTEE (fixed parameters outside Theorem 1)"
        if plan.no_guarantee
        else f"target epsilon={plan.target_epsilon:.4g} delta={plan.target_delta:.3g}"
    )
    return f"theta={plan.theta} L={plan.max_length} rule={plan.rule}: {target}"


def unit_advice_message(plan: state_pb2.PrivacyPlan, config) -> Optional[Tuple[str, Optional[Tuple[str, dict]]]]:
    """discover's ``advice:`` line when another unit size finds items ``FAR`` times rarer at the
    same target (``protocol/planning/unit_advice.py``), or None; it never changes what runs. Returns (the
    line, its private part): the frequencies are functions of n, so they are in the line only
    when n is declared public, else private (shown with ``--verbose``); without them the line
    names the unit size alone, which moves with n only where the 90% holders of two unit sizes
    cross a factor FAR. None for integer items (units of bits) and for theta and m fixed by
    hand."""
    if (plan.no_guarantee or config.encoder.kind == ItemKind.INT or not Protocol(plan.protocol).grows_trie
            or Protocol(plan.protocol).central_only):
        return None  # (whole items: no trie, no unit trade-off)
    advice = discover_advice(plan.population, plan.target_epsilon, plan.target_delta, config.unit_size,
                             plan.max_length, protocol=config.protocol,
                             # A TrieHH++ plan records "sample-and-threshold" as its rule; the
                             # advice's TrieHH rows use the job's rule. A TrieHH plan fixed by hand
                             # ("fixed") gets none.
                             rule=config.rule if _samples_by_probability(plan) else plan.rule)
    if advice is None:
        return None
    if population_is_public(plan):
        return advice.line(with_figures=True), None
    return advice.line(with_figures=False), (advice.detail(), advice.figures())


def describe_plan(plan: state_pb2.PrivacyPlan) -> str:
    """The whole plan in one line, n and m included (private unless n is declared public), the
    frequency estimates' spend included."""
    return _describe_discovery(plan) + _estimates_part(plan, achieved=True)


def _describe_discovery(plan: state_pb2.PrivacyPlan) -> str:
    if _samples_by_probability(plan):
        return _describe_sample_threshold(plan, True)
    guarantee = (
        "NO DP GUARANTEE (fixed parameters outside Theorem 1)"
        if plan.no_guarantee
        else f"epsilon={plan.epsilon:.4g} delta={plan.delta:.3g}"
    )
    return (
        f"n={plan.population:,} theta={plan.theta} m={plan.batch_size:,} L={plan.max_length} "
        f"rule={plan.rule}: {guarantee}"
    )


def plan_document(plan: state_pb2.PrivacyPlan) -> dict:
    """The whole plan, n and m included: the operator report's and a dry run's (private); with
    frequency estimates, their epsilon and the totals (basic composition)."""
    if plan.protocol == Protocol.PARTITION_SELECTION:
        return _partition_selection_document(plan)
    if plan.protocol == Protocol.NOISY_ROUNDS:
        return _noisy_rounds_document(plan)
    document = _sample_threshold_document(plan) if _samples_by_probability(plan) else _triehh_document(plan)
    if plan.estimate_epsilon:
        guaranteed = not plan.no_guarantee
        document.update(
            estimate_epsilon=plan.estimate_epsilon,
            total_epsilon=plan_spend(plan).epsilon if guaranteed else None,
            total_target_epsilon=basic_composition([(plan.target_epsilon, 0.0),
                                                    (plan.estimate_epsilon, 0.0)])[0],
            composition=("the discovery's (epsilon, delta) and the frequency estimates' "
                         "(estimate_epsilon, 0) add up (basic composition): (epsilon + estimate_epsilon, "
                         "delta), within (total_target_epsilon, target_delta)"),
        )
    return document


def _triehh_document(plan: state_pb2.PrivacyPlan) -> dict:
    guaranteed = not plan.no_guarantee
    return {
        "protocol": Protocol.TRIEHH.value,
        "guarantee": (
            "(epsilon, delta)-DP with user-level adjacency (TrieHH Theorem 1), covering all "
            "max_length rounds"
            if guaranteed
            else "none: theta and batch size were fixed outside Theorem 1's conditions"
        ),
        "theorem1": THEOREM1_STATUS,
        "epsilon": plan.epsilon if guaranteed else None,
        "delta": plan.delta if guaranteed else None,
        "target_epsilon": plan.target_epsilon,
        "target_delta": plan.target_delta,
        "theta": plan.theta,
        "gamma": plan.gamma,
        "batch_size": plan.batch_size,
        "population": plan.population,
        "max_length": plan.max_length,
        "rule": plan.rule,
        "population_public": population_is_public(plan),
    }


WHOLE_ITEMS_GUARANTEE = (
    "(epsilon, delta)-DP with user-level adjacency (sample-and-threshold, one release): each user "
    "kept with probability sample_probability, one whole item reported per kept user, the items with "
    "at least tau reports released with their counts"
)
TRIEHH_PP_GUARANTEE = (
    "(epsilon, delta)-DP with user-level adjacency (sample-and-threshold, TrieHH++): each round "
    "(round_epsilon, round_delta), composed over max_length rounds"
)
#: How each accounting computes delta, published with the plan (docs/protocol.md, section 2).
ACCOUNTING_NOTES = {
    "exact": (
        "exact: delta is the hockey-stick divergence of one count (Binomial(f, sample_probability) "
        "vs Binomial(f + 1, sample_probability), published when >= tau) at epsilon, worst case over "
        "f >= 0 other reporters, recomputable from (round_epsilon, sample_probability, tau) with "
        "triehh_beam.protocol.accounting.exact_accountant.release_delta; rounds composed by basic composition "
        "or dp-accounting's PLD, whichever is smaller (docs/protocol.md, section 2, Exact accounting)"
    ),
    "bound": (
        "bound: Bharadwaj & Cormode's theorem, sample_probability = alpha (1 - e^-round_epsilon), "
        "round_delta = exp(-C_alpha tau), C_alpha = ln(1/alpha) - 1/(1 + alpha), round_epsilon <= 1; "
        "rounds composed by basic composition (docs/protocol.md, section 2)"
    ),
}


def plan_accounting(plan: state_pb2.PrivacyPlan) -> str:
    """A sample-and-threshold plan's accounting: "exact" or "bound"."""
    return plan.accounting


def _sample_threshold_document(plan: state_pb2.PrivacyPlan) -> dict:
    """A TrieHH++ (or whole-item) plan as a document: every field but n is fixed before any
    record is read."""
    whole = plan.protocol == Protocol.WHOLE_ITEMS
    return {
        "protocol": plan.protocol,
        "guarantee": WHOLE_ITEMS_GUARANTEE if whole else TRIEHH_PP_GUARANTEE,
        "accounting": plan_accounting(plan),
        "accounting_note": ACCOUNTING_NOTES[plan_accounting(plan)],
        "epsilon": plan.epsilon,
        "delta": plan.delta,
        "basic_delta": plan.basic_delta or plan.delta,
        "pld_delta": plan.pld_delta or None,
        "composition": plan.composition or "basic",
        "target_epsilon": plan.target_epsilon,
        "target_delta": plan.target_delta,
        "round_epsilon": plan.round_epsilon,
        "round_delta": plan.round_delta,
        "alpha": plan.alpha,
        "tau": plan.theta,
        "sample_probability": plan.sample_probability,
        "population": plan.population,
        "max_length": plan.max_length,
        "rule": plan.rule,
        "population_public": population_is_public(plan),
    }


PARTITION_SELECTION_GUARANTEE = (
    "(epsilon, delta)-DP with user-level adjacency (optimal partition selection, one release; "
    "Desfontaines et al., PETS 2022): every user contributes up to max_items_per_user distinct items; "
    "an item with n contributing users is kept with probability pi(n), the optimal "
    "(item_epsilon, item_delta)-DP decision, item_epsilon = selection_epsilon / max_items_per_user, "
    "item_delta = delta / max_items_per_user; each kept item's count carries two-sided geometric noise "
    "of count_epsilon / max_items_per_user; selection and counts compose (basic) to "
    "(selection_epsilon + count_epsilon, delta)"
)


def _central_fields(plan: state_pb2.PrivacyPlan) -> dict:
    """What the documents of the central protocols' plans end with: the target, p_s, n, L."""
    return {"target_epsilon": plan.target_epsilon, "target_delta": plan.target_delta,
            "sample_probability": plan.sample_probability, "population": plan.population,
            "max_length": plan.max_length, "population_public": population_is_public(plan)}


def _partition_selection_document(plan: state_pb2.PrivacyPlan) -> dict:
    """A partition-selection plan as a document: nothing in it depends on n but n itself."""
    return {
        "protocol": plan.protocol,
        "guarantee": PARTITION_SELECTION_GUARANTEE,
        "accounting": plan.accounting,
        "epsilon": plan.epsilon + plan.estimate_epsilon,
        "delta": plan.delta,
        "selection_epsilon": plan.epsilon,
        "count_epsilon": plan.estimate_epsilon,
        "item_epsilon": plan.round_epsilon,
        "item_delta": plan.round_delta,
        "max_items_per_user": plan.max_items_per_user,
        "composition": "basic",
        **_central_fields(plan),
    }


NOISY_ROUNDS_GUARANTEE = (
    "(epsilon, delta)-DP with user-level adjacency (noisy prefix rounds, docs/protocol.md §8): every user "
    "votes for one extension of the frontier per round (one vote per user per round, sensitivity 1); each "
    "public candidate (a frontier prefix extended by a unit of alphabet, or by the end marker) gets its count "
    "plus discrete Laplace noise of parameter round_epsilon, the round's threshold and the dropped candidates "
    "being post-processing; the max_length rounds compose adaptively, certified by the accounting named "
    "(dp_accounting's PLD, or zCDP) within (epsilon, delta)"
)


def _noisy_rounds_document(plan: state_pb2.PrivacyPlan) -> dict:
    """A noisy-rounds plan as a document: nothing in it depends on n but n itself."""
    return {
        "protocol": plan.protocol,
        "guarantee": NOISY_ROUNDS_GUARANTEE,
        "accounting": plan.accounting,
        "epsilon": plan.epsilon,
        "delta": plan.delta,
        "round_epsilon": plan.round_epsilon,
        "alphabet": plan.alphabet,
        "false_prefixes": plan.false_prefixes,
        **_central_fields(plan),
    }


# The plan's fields that are functions of n (and of nothing fixed before the census): gamma is
# m / sqrt(n) or the rule's sqrt(n)-scaled design value, the achieved epsilon is Theorem 1's at
# m / n. Published only when n is declared public.
N_DEPENDENT = ("population", "batch_size", "gamma", "epsilon", "delta", "total_epsilon")


_PROTOCOL_NAMES = {Protocol.TRIEHH_PP: "TrieHH++", Protocol.PARTITION_SELECTION: "partition selection",
                   Protocol.NOISY_ROUNDS: "noisy rounds"}

#: Who the guarantee of a central job (discover, stream) trusts, published with every plan.
CENTRAL_TRUST_MODEL = (
    "central: the server that runs the job reads the raw records and is trusted (it holds the "
    "secret seed, the state and every exact count); the guarantee covers what is published "
    "(heavy_hitters.json, trie.pb), and each release is keyed and charged on its own"
)


def published_plan_document(plan: state_pb2.PrivacyPlan, trust_model: str = CENTRAL_TRUST_MODEL) -> dict:
    """The plan as ``heavy_hitters.json`` publishes it: n, m, gamma and the achieved epsilon,
    delta only when n is declared public (``--population``). TrieHH++'s: all but n, which is
    published only when declared public (nothing else in it is a function of n). With
    ``trust_model``: who the guarantee trusts (a federated job names its device assumption)."""
    document = {**plan_document(plan), "trust_model": trust_model}
    if population_is_public(plan):
        return document
    if _samples_by_probability(plan):
        del document["population"]
        document["note"] = ("n is not published (declare it public with --population to publish it); "
                            f"{_PROTOCOL_NAMES.get(plan.protocol, 'sample-and-threshold')}'s "
                            "parameters and guarantee do not depend on it")
        return document
    for name in N_DEPENDENT:
        document.pop(name, None)
    document["note"] = (
        "n, m and the achieved epsilon, delta (<= the target) are functions of the population "
        "size and are not published; declare n public with --population to publish them"
    )
    return document
