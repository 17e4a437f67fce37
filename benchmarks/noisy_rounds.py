"""Noisy prefix rounds against TrieHH++ on prefixes (issue 41): on a population of one English
word per user (``partition_selection.make_population``: words drawn by their wordfreq frequency
among the top 100,000), recall@50 of the noisy rounds (every user votes, discrete Laplace per
round, L rounds composed by the PLD accountant) beside TrieHH++ (Bernoulli sample, threshold tau,
the exact accountant's plan) at the same (epsilon, delta), unit size and L, each over several
seeds, both through the keyed in-memory round loop with the same vote and keyed choice
(``reference.noisy_rounds``, ``reference.simulation.simulate_sample_threshold``). Words with a
character outside the alphabet, or longer than the units allow, are left in the truth: they
count as misses.

    python benchmarks/noisy_rounds.py --users 100000 --epsilon 0.5 --delta 1e-8 --seeds 5

Needs the test extra (``wordfreq``). Data goes to ``bench-data/``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

import partition_selection  # noqa: E402  (the population of benchmarks/partition_selection.py)

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--epsilon", type=float, default=0.5)
    parser.add_argument("--delta", type=float, default=1e-8)
    parser.add_argument("--unit-size", type=int, default=3)
    parser.add_argument("--max-chars", type=int, default=9, help="longest item, in characters")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--top", type=int, default=50)
    parser.add_argument("--false-prefixes", type=float, default=1.0,
                        help="expected false prefixes a whole release keeps at most")
    parser.add_argument("--workdir", default=os.path.join(os.path.dirname(_HERE), "bench-data"))
    parser.add_argument("--population-seed", type=int, default=41)
    args = parser.parse_args(argv)

    import pyarrow.parquet as pq

    from triehh_beam.protocol.central.noisy_rounds import plan_noisy_rounds
    from triehh_beam.protocol.items.encoding import ItemEncoder
    from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
    from triehh_beam.reference.keyed_runs import encode_population
    from triehh_beam.reference.noisy_rounds import simulate_noisy_rounds
    from triehh_beam.reference.simulation import simulate_sample_threshold

    load_before = os.getloadavg()[0]
    os.makedirs(args.workdir, exist_ok=True)
    path = os.path.join(args.workdir, f"one-word-{args.users}-s{args.population_seed}.parquet")
    if not os.path.exists(path):
        partition_selection.make_population(path + ".tmp", args.users, args.population_seed)
        os.replace(path + ".tmp", path)
    top = partition_selection.truth(path)[:args.top]
    table = pq.read_table(path)
    users = {u: [w] for u, w in zip(table.column("user_id").to_pylist(), table.column("item").to_pylist())}
    rounds = -(-args.max_chars // args.unit_size) + 1
    encoder = ItemEncoder(max_length=rounds, unit_size=args.unit_size)
    population = encode_population(users, encoder)
    known = frozenset(population.prefixes)  # a released prefix outside these is a false prefix

    noisy = plan_noisy_rounds(args.epsilon, args.delta, rounds, false_prefixes=args.false_prefixes)
    plus = plan_sample_threshold(args.epsilon, args.delta, rounds)
    print(f"{args.users:,} users, one word each; epsilon={args.epsilon:g}, delta={args.delta:g}, unit size "
          f"{args.unit_size}, items up to {args.max_chars} characters (L = {rounds}), {args.seeds} seeds")
    print(f"noisy rounds: eps_r = {noisy.round_epsilon:.4g} by {noisy.accountant} (certified epsilon "
          f"{noisy.certified_epsilon:.4g}), expected false prefixes <= {noisy.false_prefixes:g}")
    print(f"TrieHH++: p_s = {plus.sampling_probability:.4g}, tau = {plus.tau} ({plus.accounting} accounting)")
    rows = []
    for name in ("noisy rounds", "TrieHH++"):
        recalls, falses, wall, cpu = [], [], 0.0, 0.0
        for seed in range(args.seeds):
            started, cpu_started = time.monotonic(), _cpu()
            if name == "noisy rounds":
                result = simulate_noisy_rounds(population, encoder, seed, noisy, ALPHABET)
                found = set(result.heavy_hitters)
                falses.append(sum(1 for prefix in result.released if prefix not in known))
            else:
                found = set(simulate_sample_threshold(users, encoder, plus.tau, plus.sampling_probability,
                                                      seed).heavy_hitters)
            wall += time.monotonic() - started
            cpu += _cpu() - cpu_started
            recalls.append(sum(w in found for w in top) / len(top))
        rows.append((name, recalls, falses, wall / args.seeds, cpu / args.seeds))
    print(f"load average before: {load_before:.1f}, after: {os.getloadavg()[0]:.1f} (2 cores here)")
    print(f"{'protocol':<14} {'recall@' + str(args.top) + ' per seed':<40} {'mean':>6} {'false prefixes':>15} "
          f"{'wall s/run':>10} {'CPU s/run':>10}")
    for name, recalls, falses, wall, cpu in rows:
        print(f"{name:<14} {' '.join(f'{r:.2f}' for r in recalls):<40} {sum(recalls) / len(recalls):>6.3f} "
              f"{(' '.join(map(str, falses)) if falses else '-'):>15} {wall:>10.2f} {cpu:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
