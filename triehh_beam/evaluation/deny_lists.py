"""Deny lists across runs measured (docs/evaluation.md, "Deny lists across runs"): a schedule of
R runs on the same population, each with its own secret seed (as scheduled runs draw), once with
no deny list and once with each run denying the union of the earlier runs' heavy hitters
(``triehh scheduled``'s ``deny_earlier_runs``); the figure is the number of DISTINCT items
discovered over the schedule. Runs are the keyed simulation, vectorised (``keyed_runs``, equal to
``simulation.simulate`` seed by seed) on the population with the denied sequences' rows removed
(``restrict``: the samples are the same, a user draws among its other items with the same
uniform, exactly ``vote.client_vote``'s ``denied``). Two populations: the bundled one (one word
per user: a user whose word is denied abstains) and a multi-item one built from it
(``several_words``). ``python -m triehh_beam.evaluation.deny_lists`` prints the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Collection, Dict, List, Mapping, Optional, Sequence

import numpy as np

from triehh_beam.evaluation.run_keys import run_seed
from triehh_beam.protocol.items.encoding import ItemEncoder, Units
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness.sampling import UserId
from triehh_beam.protocol.rounds import columnar
from triehh_beam.reference.keyed_runs import EncodedPopulation, encode_population, run_keyed
from triehh_beam.reference.metrics import UserItems, user_records
from triehh_beam.reference.simulation import sampler_for_seed

__all__ = ["heavy_hitters", "main", "restrict", "schedule", "several_words"]


def restrict(population: EncodedPopulation, denied: Collection[Units]) -> EncodedPopulation:
    """``population`` with the rows of ``denied`` sequences removed: the same users (so the same
    samples), prefixes and numbering; a user left with nothing abstains."""
    table = columnar.without_sequences(population.table, denied)
    if table is population.table:
        return population
    sizes = np.diff(table.offsets)
    only_code = np.where(sizes == 0, -1, -2).astype(np.int64)
    single = np.flatnonzero(sizes == 1)
    only_code[single] = table.codes[table.offsets[single]]
    return dataclasses.replace(population, table=table, only_code=only_code,
                               single_items=not np.any(only_code == -2))


def heavy_hitters(population: EncodedPopulation, trie: np.ndarray) -> frozenset:
    """The complete items (terminated sequences) of a run's trie mask."""
    return frozenset(population.prefixes[i] for i in np.flatnonzero(trie & population.terminated).tolist())


def schedule(population: EncodedPopulation, theta: int, m: int, seeds: Sequence[bytes], deny: bool) -> List[frozenset]:
    """The heavy hitters of each run of a schedule (one seed per run); with ``deny``, run ``k``
    denies the union of runs ``1..k-1``'s."""
    members = population.members()
    found: List[frozenset] = []
    denied: frozenset = frozenset()
    for seed in seeds:
        run_population = restrict(population, denied) if deny else population
        trie = run_keyed(run_population, members, theta, m, sampler_for_seed(seed))
        found.append(heavy_hitters(population, trie))
        denied = denied | found[-1]
    return found


def several_words(users: Mapping[UserId, UserItems], per_user: int = 4, count: int = 200_000,
                  seed: int = 14) -> Dict[str, Dict[str, int]]:
    """A multi-item population drawn from ``users``' item frequencies: ``count`` users, each
    holding 1 to ``per_user`` distinct items (uniform), drawn with replacement by their share of
    ``users``'s records, each with a local count of 1 to 3 (``numpy.random.default_rng(seed)``)."""
    totals: Dict = {}
    for counts in user_records(users).values():
        for item, c in counts.items():
            totals[item] = totals.get(item, 0) + c
    items = sorted(totals, key=lambda i: (-totals[i], str(i)))
    weights = np.array([totals[i] for i in items], dtype=np.float64)
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, per_user + 1, size=count)
    draws = rng.choice(len(items), size=int(sizes.sum()), p=weights / weights.sum())
    local = rng.integers(1, 4, size=len(draws))
    population: Dict[str, Dict[str, int]] = {}
    start = 0
    for user, size in enumerate(sizes.tolist()):
        held: Dict[str, int] = {}
        for j in range(start, start + size):
            held[items[draws[j]]] = held.get(items[draws[j]], 0) + int(local[j])
        population[f"multi-{user}"] = held
        start += size
    return population


def measure(users: Mapping[UserId, UserItems], encoder: ItemEncoder, epsilon: float, delta: float, runs: int,
            repetitions: int, seed: int = 0) -> dict:
    """Distinct items over a ``runs``-run schedule, with and without deny lists, ``repetitions``
    schedules (public seeds ``run_seed(seed + repetition, run)``). Returns the figures."""
    records = user_records(users)
    plan = planner.plan(len(records), epsilon, delta, encoder.max_length)
    if not plan.feasible:
        raise ValueError(plan.reason)
    population = encode_population(records, encoder)
    started = time.monotonic()
    figures: Dict[str, np.ndarray] = {}
    for deny in (False, True):
        cumulative = np.zeros((repetitions, runs))
        per_run = np.zeros((repetitions, runs))
        for rep in range(repetitions):
            found = schedule(population, plan.theta, plan.batch_size,
                             [run_seed(seed + rep, r) for r in range(runs)], deny)
            union: frozenset = frozenset()
            for r, items in enumerate(found):
                union = union | items
                cumulative[rep, r] = len(union)
                per_run[rep, r] = len(items)
        figures["deny" if deny else "plain"] = cumulative
        figures["deny_per_run" if deny else "plain_per_run"] = per_run
    return {"n": len(records), "theta": plan.theta, "m": plan.batch_size, "epsilon": epsilon, "delta": delta,
            "runs": runs, "repetitions": repetitions, "seconds": time.monotonic() - started, **figures}


def format_table(name: str, result: dict) -> str:
    """One population's figures as a Markdown table: per run, mean (sd) over the repetitions."""
    lines = [f"{name}: n={result['n']:,} theta={result['theta']} m={result['m']:,} epsilon={result['epsilon']:g} "
             f"delta={result['delta']:g}, {result['repetitions']} schedules of {result['runs']} runs "
             f"({result['seconds']:.0f} s)", "",
             "| run | found, no list | distinct so far, no list | found, deny list | distinct so far, deny list |",
             "|---:|---:|---:|---:|---:|"]
    for r in range(result["runs"]):
        cells = []
        for key in ("plain_per_run", "plain", "deny_per_run", "deny"):
            column = result[key][:, r]
            cells.append(f"{column.mean():.1f} ({column.std(ddof=1) if len(column) > 1 else 0:.1f})")
        lines.append(f"| {r + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from triehh_beam.evaluation.demo import demo_population_path
    from triehh_beam.evaluation.population import load_population

    parser = argparse.ArgumentParser(prog="python -m triehh_beam.evaluation.deny_lists",
                                     description="Distinct items over a schedule, with and without deny lists.")
    parser.add_argument("--input", default=None, help="records (default: the bundled demo population)")
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--delta", type=float, default=1e-10)
    parser.add_argument("--max-length", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--per-user", type=int, default=4, help="the multi-item population's most items per user")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    users = load_population(args.input or demo_population_path()).users
    encoder = ItemEncoder(max_length=args.max_length)
    for name, population in (("one item per user (the input)", users),
                             (f"1 to {args.per_user} items per user (drawn from the input's frequencies)",
                              several_words(users, args.per_user, count=len(users)))):
        result = measure(population, encoder, args.epsilon, args.delta, args.runs, args.repetitions, args.seed)
        print(format_table(name, result))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
