"""Whole items at the central optimum against PipelineDP (issue 41): on a population of one
English word per user (words drawn by their wordfreq frequency among the top 100,000), the items
``triehh discover --protocol partition-selection`` releases and its time, beside PipelineDP's
``select_partitions`` (truncated geometric, ``max_partitions_contributed=1``, ``LocalBackend``) on
the same records at the same (epsilon, delta). Each run is a child process timed from start to
exit (imports, reading the Parquet file, the release, writing the result), so neither side's
start-up is hidden; the in-process seconds of the work alone are printed beside.

    python benchmarks/partition_selection.py --users 1000000 --epsilon 1 --delta 1e-8

Needs the test extra (``wordfreq``, ``pipeline-dp``). Data goes to ``bench-data/``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))

# PipelineDP's run: the evaluate rival's own call (``pipelinedp_rival.select_partitions``: the
# LocalBackend, truncated geometric, one partition per user) on the Parquet file's rows.
_PIPELINEDP = r"""
import json, sys, time
import pyarrow.parquet as pq
import pipeline_dp
from triehh_beam.reference.pipelinedp_rival import select_partitions
path, epsilon, delta = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
imported = time.monotonic()
table = pq.read_table(path)
rows = list(zip(table.column("user_id").to_pylist(), table.column("item").to_pylist()))
items = sorted(select_partitions(rows, epsilon, delta))
print(json.dumps({"items": items, "work_seconds": time.monotonic() - imported}))
"""


def make_population(path: str, users: int, seed: int) -> None:
    """One word per user, drawn by wordfreq frequency among English's top 100,000 words."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import wordfreq

    words = wordfreq.top_n_list("en", 100_000)
    weights = np.array([wordfreq.word_frequency(w, "en") for w in words])
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(words), size=users, p=weights / weights.sum())
    with np.errstate(over="ignore"):  # a bijective scramble of 0..users-1 (odd multiplier mod 2^63)
        ids = ((np.arange(users, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x2545F4914F6CDD1D))
               & np.uint64(2**63 - 1)).astype(np.int64)
    table = pa.table({"user_id": pa.array(ids, pa.int64()),
                      "item": pa.array([words[i] for i in chosen.tolist()], pa.string())})
    pq.write_table(table, path, row_group_size=65536)


def truth(path: str):
    import collections

    import pyarrow.parquet as pq

    counts = collections.Counter(pq.read_table(path, columns=["item"]).column("item").to_pylist())
    return [w for w, _ in counts.most_common()]


def run_timed(command):
    """(wall seconds, CPU seconds of the child and its children, its stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def run_triehh(path: str, work: str, epsilon: float, delta: float, share: float, max_length: int, seed_file: str):
    output = os.path.join(work, f"out-{share:g}")
    command = [os.path.join(os.path.dirname(sys.executable), "triehh"), "discover", "--input", path,
               "--output", output, "--epsilon", str(epsilon), "--delta", str(delta), "--max-length",
               str(max_length), "--protocol", "partition-selection", "--selection-share", str(share),
               "--seed-file", seed_file, "--max-unusable-fraction", "1"]
    seconds, cpu, _ = run_timed(command)
    with open(os.path.join(output, "heavy_hitters.json"), encoding="utf-8") as f:
        document = json.load(f)
    with open(os.path.join(output + ".state", "operator_report.json"), encoding="utf-8") as f:
        report = json.load(f)
    return seconds, cpu, document["heavy_hitters"], report["release"]["elapsed_seconds"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-8)
    parser.add_argument("--max-length", type=int, default=40, help="units per item, terminator included")
    parser.add_argument("--workdir", default=os.path.join(os.path.dirname(_HERE), "bench-data"))
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each (fresh keys for ours each time)")
    args = parser.parse_args(argv)
    before_load = f"{os.getloadavg()[0]:.1f}"
    os.makedirs(args.workdir, exist_ok=True)
    path = os.path.join(args.workdir, f"one-word-{args.users}-s{args.seed}.parquet")
    if not os.path.exists(path):
        make_population(path + ".tmp", args.users, args.seed)
        os.replace(path + ".tmp", path)
    top = truth(path)
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        seed_file = os.path.join(work, "seed.bin")
        with open(seed_file, "wb") as f:
            f.write(bytes(range(32)))
        rows = []
        for share in (1.0, 0.5):
            for _ in range(args.repeats):
                seconds, cpu, items, work_seconds = run_triehh(path, work, args.epsilon, args.delta, share,
                                                               args.max_length, seed_file)
                for done in (f"out-{share:g}", f"out-{share:g}.state"):  # a fresh job, fresh keys, each time
                    shutil.rmtree(os.path.join(work, done))
                rows.append((f"triehh partition-selection, share {share:g}"
                             + (" (items only)" if share == 1 else " (+ counts)"), items, seconds, cpu, work_seconds))
        for _ in range(args.repeats):
            seconds, cpu, out = run_timed([sys.executable, "-c", _PIPELINEDP, path, str(args.epsilon), str(args.delta)])
            result = json.loads(out)
            rows.append(("PipelineDP select_partitions (trunc. geometric, k=1, Local)", result["items"], seconds, cpu,
                         result["work_seconds"]))
    print(f"{args.users:,} users, one word each ({len(top):,} distinct), epsilon={args.epsilon:g}, "
          f"delta={args.delta:g}")
    print(f"load average before: {before_load}, after: {os.getloadavg()[0]:.1f} (2 cores here)")
    print(f"{'what':<60} {'items':>7} {'top-1000 found':>15} {'process wall s':>15} {'process CPU s':>14} "
          f"{'work wall s':>12}")
    for name, items, seconds, cpu, work_seconds in rows:
        found = len(set(items) & set(top[:1000]))
        print(f"{name:<60} {len(items):>7,} {found:>15,} {seconds:>15.2f} {cpu:>14.2f} {work_seconds:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
