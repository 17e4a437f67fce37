"""The design for 10^10 users, from measurements: per stage of a discovery (the first read, the cut,
the rounds), the bytes read, shuffled and written, the largest per-worker memory, the workers a
1-hour discovery needs on Dataflow and its cost, at n = 10^8 (measured here) and 10^9, 10^10
(modelled from the per-record costs measured at 10^6-10^8).

  python benchmarks/scale_model.py                  # the table in docs/production.md
  python benchmarks/scale_model.py --budget 1000000 --overhead 4

Inputs and what they are:
- Measured (benchmarks/README.md, 2026-11-27, one item per user, epsilon = 4, delta = 1/n^2,
  L = 10, a quiet 2-core machine, the in-process runner): the first read's and the whole
  discovery's wall seconds at 10^7 and 10^8 and the input's bytes per record; peak RSS after
  imports and at 10^8. The per-record cost of the first read and the per-(user, round) cost of the
  cut and rounds are the slopes between 10^7 and 10^8 (fixed costs cancel).
- Measured by this script: the bytes per candidate row and per sampled user as Parquet
  (synthetic rows shaped like the benchmark's: 10-byte ids, Zipf words).
- Planned: m and theta from the product's planner for each n.
- Assumed (flags or constants): the worker budget (the product's default), the bytes a worker
  holds per candidate row (fitted at 10^8), that a cut split by rank buckets costs three times
  the whole cut (it reads the candidates about three times), that one table's votes reach at most
  10^4 prefixes (every round's partial counts are shuffled to its combine per prefix), Dataflow's
  slowdown against this machine's in-process runner (--overhead, default 3: the Python SDK
  harness, remote storage, no fused in-memory shuffle), n1-standard-4 workers (4 vCPU, 15 GB,
  250 GB disk), and the published Dataflow batch prices below.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
from typing import Dict, List

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from triehh_beam.beam.rounds.prefix_combine import prefix_groups

# Measured (benchmarks/README.md, "Latest figures" and "10^8 records", 2026-11-27).
MEASURED = {
    10**7: {"first_read_s": 4.67, "discovery_s": 9.23, "m": 193_929},
    10**8: {"first_read_s": 50.4, "discovery_s": 86.5, "m": 1_735_157, "peak_rss_mb": 516},
}
INPUT_BYTES_PER_RECORD = 1134.4 * 2**20 / 1e8  # the 10^8 Parquet input: 1,134.4 MiB
RSS_AFTER_IMPORTS_MB = 212
FIRST_READ_RSS_MB = 501  # the first read's peak at 10^8: a record batch, the census's 32 MiB buffer
PREFIXES_PER_TABLE = 10_000  # assumed: distinct prefixes one table's votes reach (16 bytes each)
ROUNDS = 10
EPSILON = 4.0

# Dataflow batch prices, us-central1, as published on https://cloud.google.com/dataflow/pricing
# (the figures of 2023-2024; not re-checked from this machine, which reaches no web page):
PRICES = {
    "vcpu_hour": 0.056,  # USD per vCPU-hour, batch worker
    "gb_hour": 0.003557,  # USD per GB-hour of worker memory
    "pd_gb_hour": 0.000054,  # USD per GB-hour of standard persistent disk
    "shuffle_gb": 0.011,  # USD per GB of Dataflow Shuffle data processed (batch)
}
WORKER_VCPUS, WORKER_GB, WORKER_DISK_GB = 4, 15, 250  # n1-standard-4, Dataflow's default disk


def parquet_bytes_per_row(rows: int = 200_000, sampled: bool = False) -> float:
    """Parquet bytes per candidate row (user_id, item, count, rank, round), or per sampled user's
    table row (a stored sequence, its count, a uniform), measured on synthetic rows."""
    rng = np.random.default_rng(0)
    words = np.array([f"w{i:04d}" for i in range(4096)])
    zipf = np.minimum(rng.zipf(1.1, rows), 4096) - 1
    if sampled:
        table = pa.table({"sequence": pa.array([w.encode() for w in words[zipf]], pa.binary()),
                          "count": pa.array(np.ones(rows, np.int64)),
                          "uniform": pa.array(rng.random(rows))})
    else:
        table = pa.table({"user_id": pa.array([b"u%09d" % i for i in rng.permutation(rows)], pa.binary()),
                          "item": pa.array(words[zipf]), "count": pa.array(np.ones(rows, np.int64)),
                          "rank": pa.array(rng.integers(0, 2**63, rows, dtype=np.uint64)),
                          "round": pa.array(np.full(rows, 3, np.int32))})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return len(buffer.getvalue()) / rows


def plan(n: int):
    from triehh_beam.protocol.planning import planner

    chosen = planner.plan(n, EPSILON, 1.0 / n**2, ROUNDS)
    return chosen.batch_size, chosen.theta


def costs() -> Dict[str, float]:
    """Per-record and per-(user, round) core-seconds: slopes between 10^7 and 10^8."""
    a, b = MEASURED[10**7], MEASURED[10**8]
    first = (b["first_read_s"] - a["first_read_s"]) / (10**8 - 10**7)
    rest_a, rest_b = a["discovery_s"] - a["first_read_s"], b["discovery_s"] - b["first_read_s"]
    per_user_round = (rest_b - rest_a) / (ROUNDS * (b["m"] - a["m"]))
    held_bytes = (b["peak_rss_mb"] - RSS_AFTER_IMPORTS_MB) * 2**20 / (1.1 * b["m"])  # a round's candidates
    return {"first_read_per_record": first, "cut_rounds_per_user_round": per_user_round, "held_bytes_per_row": held_bytes}


def model(n: int, budget: int, overhead: float, c: Dict[str, float], candidate_bytes: float,
          sample_bytes: float) -> List[Dict]:
    m, theta = plan(n)
    candidates_per_round = 1.1 * m  # the rate bound keeps about m/n of the data plus ~10% at these n
    split = candidates_per_round > budget  # the cut by rank buckets and groups of shards
    shards = max(min(256, math.ceil(m / 16384)), min(256, math.ceil(m / max(1, budget // 8))))

    # Every round: each table voted alone, its partial counts (at most PREFIXES_PER_TABLE distinct
    # prefixes, or its users) shuffled to the groups of prefix_combine.prefix_groups, each group
    # merged alone (its distinct prefixes at most its votes, within a quarter of the budget).
    groups = prefix_groups(m, budget)
    table_prefixes = min(PREFIXES_PER_TABLE, math.ceil(m / shards))
    group_prefixes = math.ceil(min(m, shards * table_prefixes) / groups)

    def held_mb(rows):
        return RSS_AFTER_IMPORTS_MB + min(rows, budget) * c["held_bytes_per_row"] / 2**20

    input_gb = n * INPUT_BYTES_PER_RECORD / 1e9
    cand_gb = ROUNDS * candidates_per_round * candidate_bytes / 1e9
    sample_gb = ROUNDS * m * sample_bytes / 1e9
    first_cpu = c["first_read_per_record"] * n * overhead
    cut_cpu = c["cut_rounds_per_user_round"] * ROUNDS * m * overhead * (3 if split else 1)
    stages = [
        {"stage": "first read (census + candidates)", "read_gb": input_gb,
         "shuffled_gb": 0.0, "written_gb": cand_gb + 8 * n / 1e9,  # candidates, census spill
         "worker_mb": FIRST_READ_RSS_MB, "cpu_s": first_cpu},
        {"stage": "cut (" + ("rank buckets, shard groups" if split else "a round per worker") + ")",
         # split: the rank column read once or twice, the rows split, counted, then built
         "read_gb": cand_gb * (3 if split else 2), "shuffled_gb": 0.0,
         "written_gb": sample_gb + (cand_gb if split else 0), "worker_mb": held_mb(candidates_per_round),
         "cpu_s": cut_cpu * 0.9},
        {"stage": f"rounds (tables over workers, a combine per prefix in {groups} group{'s' * (groups > 1)})",
         "read_gb": sample_gb, "shuffled_gb": ROUNDS * shards * table_prefixes * 16 / 1e9,
         "written_gb": 0.0, "worker_mb": held_mb(max(math.ceil(m / shards), group_prefixes)),
         "cpu_s": cut_cpu * 0.1},
    ]
    for s in stages:
        s.update(n=n, m=m, theta=theta)
    return stages


def summary(stages: List[Dict]) -> Dict:
    cpu = sum(s["cpu_s"] for s in stages)
    workers = max(1, math.ceil(cpu / 3600 / WORKER_VCPUS))
    hours = cpu / 3600 / (workers * WORKER_VCPUS)  # the hour the workers are paid for, at most 1
    cost = workers * max(hours, 1 / 60) * (WORKER_VCPUS * PRICES["vcpu_hour"] + WORKER_GB * PRICES["gb_hour"]
                                            + WORKER_DISK_GB * PRICES["pd_gb_hour"])
    cost += sum(s["shuffled_gb"] for s in stages) * PRICES["shuffle_gb"]
    return {"cpu_s": cpu, "workers": workers, "cost": cost}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=1 << 22, help="--worker-budget, rows (default 4 Mi)")
    parser.add_argument("--overhead", type=float, default=3.0,
                        help="Dataflow's slowdown against this machine's in-process runner (assumed, default 3)")
    args = parser.parse_args(argv)
    c = costs()
    candidate_bytes, sample_bytes = parquet_bytes_per_row(), parquet_bytes_per_row(sampled=True)
    print(f"per-record costs (slopes 10^7 -> 10^8): first read {c['first_read_per_record'] * 1e6:.3f} us/record, "
          f"cut + rounds {c['cut_rounds_per_user_round'] * 1e6:.3f} us per (user, round), "
          f"{c['held_bytes_per_row']:.0f} B held per candidate row; Parquet {candidate_bytes:.1f} B per candidate "
          f"row, {sample_bytes:.1f} B per sampled user; overhead x{args.overhead:g}; budget {args.budget:,} rows")
    print()
    print("| n | m (theta) | stage | read GB | shuffled GB | written GB | largest worker MB | core-hours |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    totals = []
    for n in (10**8, 10**9, 10**10):
        stages = model(n, args.budget, args.overhead, c, candidate_bytes, sample_bytes)
        for s in stages:
            label = "10^%d%s" % (round(math.log10(n)), " (time, memory measured)" if n == 10**8 else " (modelled)")
            print(f"| {label} | {s['m']:,} ({s['theta']}) | {s['stage']} | {s['read_gb']:.2f} | {s['shuffled_gb']:.3f} "
                  f"| {s['written_gb']:.2f} | {s['worker_mb']:.0f} | {s['cpu_s'] / 3600:.2f} |")
        totals.append((n, summary(stages)))
    print()
    print(f"| n | core-hours (x{args.overhead:g}) | n1-standard-4 workers for 1 hour | cost of the discovery, USD |")
    print("|---:|---:|---:|---:|")
    for n, t in totals:
        print(f"| 10^{round(math.log10(n))} | {t['cpu_s'] / 3600:.2f} | {t['workers']} | {t['cost']:.2f} |")
    print()
    print("Prices: Dataflow batch, us-central1, " + ", ".join(f"{k} ${v}" for k, v in PRICES.items())
          + " (cloud.google.com/dataflow/pricing, 2023-2024 figures, not re-checked here).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
