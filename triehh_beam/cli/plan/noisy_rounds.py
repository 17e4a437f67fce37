"""``triehh plan --protocol noisy-rounds``: the plan of noisy prefix rounds
(``protocol.central.noisy_rounds``: each round's discrete Laplace parameter, the accountant that certifies
the L rounds, the thresholds of the first round and of a frontier of 100 prefixes), the holders a
worst-case item of L - 1 units needs for a 50/90/99% release, and beside it what every protocol
needs at the same target (``plan_partition_selection.compare_protocols``), as text or a
JSON-ready dict. dp_accounting only when a plan is made."""

from __future__ import annotations

from triehh_beam.cli.plan.partition_selection import (NOISY_ALPHABET, NOISY_FRONTIER, TRUST_MODELS,
                                                      compare_protocols, release_lines)
from triehh_beam.cli.plan.text import PROBABILITIES, header, row
from triehh_beam.protocol.protocols import Protocol

__all__ = ["format_plan", "plan_report"]


def plan_report(population: int, epsilon: float, delta: float, max_length: int, unit_size: int) -> dict:
    """The noisy-rounds plan (alphabet a-z, a frontier of 100 after round 1), its release table
    and the protocols beside it."""
    from triehh_beam.protocol.central.noisy_release import candidate_units
    from triehh_beam.protocol.central.noisy_rounds import plan_noisy_rounds

    plan = plan_noisy_rounds(epsilon, delta, max_length)
    units = len(candidate_units(NOISY_ALPHABET, unit_size))
    candidates = [units - 1] + [NOISY_FRONTIER * units] * (max_length - 1)
    release = []
    for p in PROBABILITIES:
        count = plan.holders_for(p, candidates)
        release.append({"probability": p, "count": count, "fraction": count / population})
    return {
        "protocol": Protocol.NOISY_ROUNDS.value, "feasible": True, "population": population,
        "target_epsilon": epsilon, "target_delta": delta, "max_length": max_length, "unit_size": unit_size,
        "max_item_characters": (max_length - 1) * unit_size, "round_epsilon": plan.round_epsilon,
        "accountant": plan.accountant, "certified_epsilon": plan.certified_epsilon,
        "false_prefixes": plan.false_prefixes, "alphabet": NOISY_ALPHABET, "frontier": NOISY_FRONTIER,
        "first_threshold": plan.threshold(candidates[0]),
        "threshold": plan.threshold(candidates[-1]) if max_length > 1 else None,
        "release": release, "trust_model": TRUST_MODELS[Protocol.NOISY_ROUNDS],
        "protocols": compare_protocols(population, epsilon, delta, max_length, unit_size),
    }


def format_plan(r: dict) -> str:
    """The human report of ``plan_report``."""
    lines = header("Noisy prefix rounds: every user votes, discrete Laplace per round (docs/protocol.md §8)", r,
                   f"{r['population']:,} users (the guarantee does not depend on it)", "longer ones are dropped",
                   f"{r['target_epsilon']:.6g}")
    lines += [
        row("noise per round", f"discrete Laplace, epsilon {r['round_epsilon']:.6g} ({r['accountant']} "
                               f"composition certifies {r['certified_epsilon']:.6g} for {r['max_length']} rounds)"),
        row("thresholds", f"{r['first_threshold']} in round 1, "
            + (f"{r['threshold']} for a frontier of {r['frontier']}" if r["threshold"] is not None else "no later round")
            + f" (a-z units; at most {r['false_prefixes']:g} expected false prefixes per release)"),
        row("trust model", r["trust_model"] + ": the server counts every user's vote, so triehh federated "
                           "refuses it"),
        "",
        "Release of an item of L - 1 units (worst case: no prefix shared; holders, one item per user):",
    ]
    return "\n".join(lines + release_lines(r, "noisy-rounds runs it (--alphabet, --false-prefixes)."))
