#!/usr/bin/env python
"""The one-pass discovery against the cost of reading the records and hashing their user ids
(issue 11's targets): each measurement (``benchmarks/measures.py``: baseline, sampling pass, one
round on its sample, whole discoveries in both round modes, the pass on 1 and 2 worker
processes) in a fresh child process, side by side in one run, with wall and CPU seconds, peak
RSS and the machine's other load; the populations come from ``benchmarks/population.py``.

Usage (from the repository root)::

  python benchmarks/round_throughput.py --records 1000000 10000000 --out results.json
  python benchmarks/round_throughput.py --records 10000000 --items-per-user 10
  python benchmarks/round_throughput.py --_measure sampling_pass --records 1000000 --profile p.prof

Internal: ``--_measure KIND`` runs one measurement and prints one ``BENCH_RESULT {json}`` line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
for _path in (REPO_ROOT, BENCH_DIR):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from measures import MEASURES, PREPARE, children_cpu_seconds, cpu_seconds  # noqa: E402
from population import ensure_dataset  # noqa: E402

RESULT_MARK = "BENCH_RESULT "
KINDS = tuple(MEASURES)
DEFAULT_KINDS = ("baseline", "baseline_numpy", "first_pass", "sampled_round", "discovery", "discovery_all", "process", "startup",
                 "first_pass_mp1", "first_pass_mp2")


# ---------------------------------------------------------------------------------------------
# One measurement (child process).


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> Dict[str, float]:
    # Linux reports ru_maxrss in KiB.
    return {
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_rss_children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _system_busy():
    """(busy ticks, total ticks) of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user
    return total - idle, total


def wait_for_quiet(max_busy_cores: float, max_wait: float, log) -> float:
    """Waits until the machine's other load is below ``max_busy_cores`` (over 2 s windows).

    Returns the busy cores seen last. Gives up (with a note) after ``max_wait`` seconds.
    """
    cores = os.cpu_count() or 1
    deadline = time.monotonic() + max_wait
    noted = False
    while True:
        before = _system_busy()
        time.sleep(2.0)
        after = _system_busy()
        busy = (after[0] - before[0]) / max(1, after[1] - before[1]) * cores
        if busy <= max_busy_cores:
            return busy
        if time.monotonic() > deadline:
            log(f"  machine still busy ({busy:.1f} cores), measuring anyway")
            return busy
        if not noted:
            log(f"  waiting for the machine to quieten ({busy:.1f} cores busy)")
            noted = True


def run_measurement(args) -> Dict:
    """The child: imports first (not timed), then one measurement, then its peak RSS."""
    i0 = time.perf_counter()
    import apache_beam  # noqa: F401  (import costs are process start-up, not throughput)
    import numpy  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import scipy.special  # noqa: F401  (rank_prefilter_bound and the unit advice import it lazily)
    from cryptography.hazmat.primitives.ciphers import Cipher  # noqa: F401  (the sampling rank.s AES, lazily)

    import triehh_beam.beam.transforms  # noqa: F401
    import triehh_beam.job.batch.driver  # noqa: F401

    import_seconds = time.perf_counter() - i0
    manifest = ensure_dataset(args.workdir, args.records[0], args.items_per_user, args.files,
                              args.vocabulary, args.zipf, log=lambda s: print(s, file=sys.stderr))
    if args._measure in PREPARE:
        PREPARE[args._measure](manifest, args)  # not timed (e.g. the samples a round reads)
    rss_before = _rss_now_mb()
    args.scratch = tempfile.mkdtemp(prefix=f"scratch-{args._measure}-", dir=args.workdir)
    measure = MEASURES[args._measure]
    load_before, busy_before, cpu_before = os.getloadavg()[0], _system_busy(), cpu_seconds()
    children_before = children_cpu_seconds()
    try:
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile(time.process_time)  # CPU time: robust to a shared machine
            result = profiler.runcall(measure, manifest, args)
            profiler.dump_stats(args.profile)
            stats = pstats.Stats(profiler, stream=sys.stderr)
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(40)
        else:
            result = measure(manifest, args)
    finally:
        shutil.rmtree(args.scratch, ignore_errors=True)
    # CPU seconds of this process (all its threads) over the measurement: robust to other
    # load on the machine, unlike wall time. other_busy_cores: what everything else used.
    result["measure_cpu_seconds"] = cpu_seconds() - cpu_before  # checks after a job included
    result.setdefault("cpu_seconds", result["measure_cpu_seconds"])  # a Beam job's own CPU if it reports one
    # Worker processes (the multi-processing runner's), counted once they have exited.
    result["workers_cpu_seconds"] = children_cpu_seconds() - children_before
    busy_after = _system_busy()
    elapsed_ticks = busy_after[1] - busy_before[1]
    if elapsed_ticks > 0:
        cores = (os.cpu_count() or 1)
        busy_cores = (busy_after[0] - busy_before[0]) / elapsed_ticks * cores
        own = (result["cpu_seconds"] + result["workers_cpu_seconds"]) / result["seconds"]
        result["other_busy_cores"] = max(0.0, busy_cores - own)
    result["loadavg_1m"] = [load_before, os.getloadavg()[0]]
    result.update(_peak_rss_mb())
    result["rss_after_imports_mb"] = rss_before
    result["import_seconds"] = import_seconds
    result["kind"] = args._measure
    return result


# ---------------------------------------------------------------------------------------------
# The parent: generate, run children, tabulate.


def _child(kind: str, records: int, args, log) -> Dict:
    command = [
        sys.executable, os.path.abspath(__file__), "--_measure", kind,
        "--records", str(records), "--items-per-user", str(args.items_per_user),
        "--workdir", args.workdir, "--files", str(args.files), "--vocabulary", str(args.vocabulary),
        "--zipf", str(args.zipf), "--epsilon", str(args.epsilon), "--max-length", str(args.max_length),
    ]
    if args.delta is not None:
        command += ["--delta", repr(args.delta)]
    for extra in args.pipeline_args:
        command.append(f"--pipeline-arg={extra}")  # one token: a value starting with -- is not a flag
    log_dir = os.path.join(args.workdir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, f"{kind}-{records}-ipu{args.items_per_user}.log")
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if args.quiet_cores is not None:
        wait_for_quiet(args.quiet_cores, args.quiet_wait, log)
    started = time.monotonic()
    with open(log_path, "w") as stderr:
        try:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                  timeout=args.timeout, env=env)
        except subprocess.TimeoutExpired:
            log(f"  {kind}: timed out after {args.timeout} s (log: {log_path})")
            return {"kind": kind, "error": f"timeout after {args.timeout} s"}
    lines = [l for l in done.stdout.splitlines() if l.startswith(RESULT_MARK)]
    if done.returncode != 0 or not lines:
        log(f"  {kind}: failed with exit code {done.returncode} (log: {log_path})")
        return {"kind": kind, "error": f"exit code {done.returncode}, see {log_path}"}
    result = json.loads(lines[-1][len(RESULT_MARK):])
    result["wall_seconds_with_startup"] = time.monotonic() - started
    return result


def _best(results: List[Dict]) -> Dict:
    ok = [r for r in results if "error" not in r]
    if not ok:
        return results[-1]
    best = dict(min(ok, key=lambda r: r["seconds"]))
    best["all_seconds"] = [r["seconds"] for r in ok]
    best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in ok)
    return best


def _fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def _get(row: Dict, kind: str, key: str):
    r = row["measurements"].get(kind)
    return None if r is None or "error" in r else r.get(key)


def _wall_cpu(row: Dict, kind: str, cpu_key: str = "cpu_seconds") -> str:
    wall, cpu = _get(row, kind, "seconds"), _get(row, kind, cpu_key)
    if wall is None:
        return "-"
    return f"{wall:.2f} ({cpu:.2f})" if cpu is not None else f"{wall:.2f}"


def _ratio(row: Dict, kind: str, base: str = "baseline") -> str:
    """kind / base, wall (cpu)."""
    w, bw = _get(row, kind, "seconds"), _get(row, base, "seconds")
    c, bc = _get(row, kind, "cpu_seconds"), _get(row, base, "cpu_seconds")
    if not w or not bw:
        return "-"
    return f"{w / bw:.2f}x" + (f" ({c / bc:.2f}x)" if c and bc else "")


def markdown_tables(rows: List[Dict]) -> str:
    """The targets, the discovery phases, the worker processes and the peak RSS, as Markdown.
    Times are wall seconds with the process's CPU seconds in parentheses."""
    out = [
        "| records | users | items/user | m | theta | read+hash | read+hash (numpy hash) | first read | / r+h | one round | / r+h"
        " | discovery (all, default) | / r+h | discovery (1/job) | / r+h | whole process | / r+h | start-up"
        " | other load, cores |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        loads = [r.get("other_busy_cores") for r in row["measurements"].values()
                 if r.get("other_busy_cores") is not None]
        out.append("| " + " | ".join([
            f"{row['records']:,}", f"{row['users']:,}", str(row["items_per_user"]),
            f"{row['plan']['m']:,}", str(row["plan"]["theta"]),
            _wall_cpu(row, "baseline"), _wall_cpu(row, "baseline_numpy"),
            _wall_cpu(row, "first_pass"), _ratio(row, "first_pass"),
            _wall_cpu(row, "sampled_round"), _ratio(row, "sampled_round"),
            _wall_cpu(row, "discovery_all"), _ratio(row, "discovery_all"),
            _wall_cpu(row, "discovery"), _ratio(row, "discovery"),
            _wall_cpu(row, "process"), _ratio(row, "process"),
            _wall_cpu(row, "startup"),
            f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-",
        ]) + " |")

    out += ["", "Discovery phases, wall (CPU) seconds, from the progress events (census_done: the end "
            "of the first read, census and candidates; sampling_done: the cut, with every round in "
            "the default mode; rounds: from sampling_done to the end, outputs included):", "",
            "| records | items/user | mode | first read | cut | rounds | whole | rounds run "
            "| heavy hitters | trie.pb sha256 |",
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        for kind, mode in (("discovery", "1 per job"), ("discovery_all", "all in one")):
            phases = _get(row, kind, "phases")
            if phases is None:
                continue

            def phase(name):
                return f"{phases[name][0]:.2f} ({phases[name][1]:.2f})" if name in phases else "-"
            if kind == "discovery_all":
                mode += " (cut + rounds: one job)"
            out.append("| " + " | ".join([
                f"{row['records']:,}", str(row["items_per_user"]), mode, phase("census"), phase("sampling"),
                phase("rounds"), _wall_cpu(row, kind), str(_get(row, kind, "rounds_run")),
                str(_get(row, kind, "heavy_hitters")), f"`{_get(row, kind, 'trie_digest')}`",
            ]) + " |")

    out += ["", "The first read on worker processes (`--direct_running_mode=multi_processing`); "
            "CPU: the runner process + its workers:", "",
            "| records | in-process | 1 worker | 2 workers | 2 vs 1 worker, wall | 2 workers vs in-process, wall "
            "| candidate rows equal |",
            "|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        if not any(k in row["measurements"] for k in ("first_pass_mp1", "first_pass_mp2")):
            continue

        def mp(kind):
            w, c, wc = (_get(row, kind, k) for k in ("seconds", "cpu_seconds", "workers_cpu_seconds"))
            return "-" if w is None else f"{w:.2f} ({c:.2f} + {wc:.2f})"
        w1, w2, w0 = (_get(row, k, "seconds") for k in ("first_pass_mp1", "first_pass_mp2", "first_pass"))
        kept = [_get(row, k, "candidate_rows") for k in ("first_pass", "first_pass_mp1", "first_pass_mp2")]
        out.append("| " + " | ".join([
            f"{row['records']:,}", _wall_cpu(row, "first_pass"), mp("first_pass_mp1"), mp("first_pass_mp2"),
            f"{w1 / w2:.2f}x" if w1 and w2 else "-", f"{w0 / w2:.2f}x" if w0 and w2 else "-",
            ", ".join("-" if k is None else f"{k:,}" for k in kept),
        ]) + " |")

    kinds = [k for k in KINDS if any(k in row["measurements"] for row in rows)]
    out += ["", "Peak RSS, MB (`ru_maxrss` of a fresh process per measurement; workers' peak for "
            "the multi-process runs in brackets):", "",
            "| records | items/user | after imports | " + " | ".join(kinds) + " |",
            "|---:|---:|---:|" + "---:|" * len(kinds)]
    for row in rows:
        after = next((_get(row, k, "rss_after_imports_mb") for k in kinds if _get(row, k, "rss_after_imports_mb")), None)
        cells = []
        for k in kinds:
            peak = _fmt(_get(row, k, "peak_rss_mb"), ".0f")
            if ("_mp" in k or k in ("process", "startup")) and _get(row, k, "peak_rss_children_mb"):
                peak += f" [{_get(row, k, 'peak_rss_children_mb'):.0f}]"
            cells.append(peak)
        out.append("| " + " | ".join([f"{row['records']:,}", str(row["items_per_user"]), _fmt(after, ".0f")] + cells) + " |")
    workers = [(row, k, _get(row, k, "worker_peak_rss_mb")) for row in rows for k in ("discovery", "discovery_all")]
    if any(peaks for _, _, peaks in workers):
        out += ["", "Each Beam job's worker processes, peak RSS in MB (the operator report's "
                "`worker_peak_rss_mb`, one figure per process):", "",
                "| records | kind | first read | cut (and rounds) | round jobs |", "|---:|---|---|---|---|"]
        for row, kind, peaks in workers:
            if peaks:
                cells = [", ".join(str(mb) for mb in peaks.get(job, {}).values()) or "-" for job in ("census", "sampling")]
                rounds = "; ".join(f"{r}: " + ", ".join(map(str, p.values())) for r, p in peaks.get("rounds", {}).items())
                out.append(f"| {row['records']:,} | {kind} | " + " | ".join(cells) + f" | {rounds or '-'} |")
    return "\n".join(out)


def machine() -> Dict:
    import apache_beam
    import numpy
    import pyarrow

    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    def git(*command):
        try:
            return subprocess.run(["git", "-C", REPO_ROOT, *command], capture_output=True,
                                  text=True, timeout=30).stdout.rstrip()
        except (OSError, subprocess.SubprocessError):
            return None

    return {
        "git_head": git("rev-parse", "--short", "HEAD"),
        # Uncommitted product changes measured along with HEAD (the working tree is what runs).
        "git_dirty_product_files": (git("status", "--porcelain", "--", "triehh_beam") or "").splitlines(),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "apache_beam": apache_beam.__version__,
        "pyarrow": pyarrow.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, nargs="+", default=[100_000, 1_000_000],
                        help="population sizes, in records (default: 1e5 1e6)")
    parser.add_argument("--items-per-user", type=int, default=1,
                        help="records per user; users = records / items-per-user (default 1)")
    parser.add_argument("--workdir", default="bench-data", help="data cache and scratch (default ./bench-data)")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--kinds", default=",".join(DEFAULT_KINDS),
                        help=f"comma-separated measurements, of {','.join(KINDS)} "
                             f"(default: {','.join(DEFAULT_KINDS)})")
    parser.add_argument("--repeat", type=int, default=1,
                        help="children per measurement (discovery: always 1); the fastest time and the "
                             "largest peak RSS are reported")
    parser.add_argument("--timeout", type=float, default=None, help="seconds before a measurement is abandoned")
    parser.add_argument("--files", type=int, default=8, help="Parquet files per population (default 8)")
    parser.add_argument("--vocabulary", type=int, default=4096, help="distinct items (default 4096)")
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the items (default 1.1)")
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--delta", type=float, default=None, help="default 1 / users^2")
    parser.add_argument("--max-length", type=int, default=10)
    parser.add_argument("--pipeline-arg", dest="pipeline_args", action="append", default=[],
                        help="a Beam pipeline option for the Beam runs, repeatable "
                             "(e.g. --pipeline-arg=--direct_num_workers=2)")
    parser.add_argument("--quiet-cores", type=float, default=None,
                        help="before each measurement, wait until the rest of the machine uses at "
                             "most this many cores (a shared machine; e.g. 0.3)")
    parser.add_argument("--quiet-wait", type=float, default=600,
                        help="the longest wait for --quiet-cores, in seconds (default 600)")
    parser.add_argument("--_measure", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--samples-out", help=argparse.SUPPRESS)  # sampling_pass: keep the samples here
    parser.add_argument("--profile", help="with --_measure: write a cProfile dump here, print the top to stderr")
    args = parser.parse_args(argv)
    if args.items_per_user < 1:
        parser.error("--items-per-user must be >= 1")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; choose from {KINDS}")
    args.kinds = kinds
    if args._measure and len(args.records) != 1:
        parser.error("--_measure takes exactly one --records value")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    args.workdir = os.path.abspath(args.workdir)
    if args._measure:
        print(RESULT_MARK + json.dumps(run_measurement(args)), flush=True)
        return 0

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    at_start = machine()  # the product tree may move while a long run goes on
    rows = []
    for records in args.records:
        manifest = ensure_dataset(args.workdir, records, args.items_per_user, args.files,
                                  args.vocabulary, args.zipf, log)
        from triehh_beam.protocol.planning import planner

        n = manifest["users"]
        delta = args.delta if args.delta is not None else 1.0 / n**2
        plan = planner.plan(n, args.epsilon, delta, args.max_length)
        row = {
            "records": records,
            "users": n,
            "items_per_user": args.items_per_user,
            "dataset_bytes": manifest["bytes"],
            "plan": {"m": plan.batch_size, "theta": plan.theta, "delta": delta, "epsilon": args.epsilon},
            "measurements": {},
        }
        log(f"{records:,} records, {n:,} users, {manifest['bytes'] / 2**20:.1f} MiB: "
            f"m={plan.batch_size:,} theta={plan.theta}")
        for kind in args.kinds:
            # A discovery runs census + up to L rounds already, so it is measured once.
            repeat = 1 if kind.startswith("discovery") else args.repeat
            results = [_child(kind, records, args, log) for _ in range(repeat)]
            best = _best(results)
            row["measurements"][kind] = best
            if "error" not in best:
                log(f"  {kind}: {best['seconds']:.2f} s, {records / best['seconds']:,.0f} records/s, "
                    f"peak RSS {best['peak_rss_mb']:.0f} MB")
        rows.append(row)

    table = markdown_tables(rows)
    print(table)
    if args.out:
        document = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": at_start,
            "git_head_at_end": machine()["git_head"],
            "arguments": {k: v for k, v in vars(args).items() if not k.startswith("_")},
            "results": rows,
            "table": table,
        }
        with open(args.out, "w") as f:
            json.dump(document, f, indent=2)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
