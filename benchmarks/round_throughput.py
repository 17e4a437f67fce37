#!/usr/bin/env python
"""Round throughput of triehh-beam against the cost of reading and hashing the records.

For each population size this measures, each in a fresh child process (so peak RSS figures do
not mix):

  baseline   read the Parquet files with pyarrow (``ParquetFile.iter_batches`` over user_id and
             item), cast the user ids to canonical bytes as the reader (``triehh_beam.io``) does and hash them with
             ``Sampler.ranks_packed`` on ``binary_buffers``: the floor a round is held against.
  reader     the product's own reader without Beam (``triehh_beam.io.iter_record_batches``, which
             also validates and normalises every batch) plus the same hashing: how much of the
             gap is normalisation rather than Beam.
  beam_read  a Beam pipeline on the default runner that only reads (``ReadRecordBatches``) and
             counts rows: the runner's fixed and per-batch cost.
  round      one TrieHH round on the default (in-process) runner: ``ReadRecordBatches |
             RunRound(sampler, 1, m, theta, encoder, frontier={()}, population=n)`` writing its
             small output, with m and theta from ``planner.plan(n, epsilon, delta, L)``.
  discovery  ``run_discovery(DiscoveryConfig(...))``: census plus every round that runs.

Usage (from the repository root)::

  python benchmarks/round_throughput.py --records 100000 1000000 10000000 --out results.json
  python benchmarks/round_throughput.py --records 1000000 --items-per-user 10

The populations are generated once and cached under ``--workdir`` (default ``./bench-data``):
int64 user ids (a bijective scramble of 0..users-1, so ids are 18-19 decimal digits like real
64-bit ids), ``records / items_per_user`` users, items drawn Zipf(s) from a vocabulary of
deterministic pseudo-words of 3-9 letters, 64k-row row groups, 8 files.

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

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

RESULT_MARK = "BENCH_RESULT "
DATA_VERSION = 1  # bump when the generator changes, so stale caches are not reused
KINDS = ("baseline", "reader", "beam_read", "round", "discovery")
SEED = b"triehh-beam benchmark seed 0001"  # fixed: every run samples the same users
ROW_GROUP = 65536
ID_MULTIPLIER = 0x9E3779B97F4A7C15  # odd, so u -> (a*u + c) mod 2^63 is a bijection
ID_OFFSET = 0x2545F4914F6CDD1D


# ---------------------------------------------------------------------------------------------
# Population generation (parent process only).


def _vocabulary(size: int, rng) -> List[str]:
    """``size`` distinct pronounceable pseudo-words of 3 to 9 letters, deterministic in rng."""
    consonants = "bcdfghjklmnprstvwz"
    vowels = "aeiou"
    words, seen = [], set()
    while len(words) < size:
        syllables = int(rng.integers(2, 5))
        word = "".join(
            consonants[int(rng.integers(len(consonants)))] + vowels[int(rng.integers(len(vowels)))]
            for _ in range(syllables)
        )
        if rng.random() < 0.3:
            word += consonants[int(rng.integers(len(consonants)))]
        word = word[:9]
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def dataset_dir(workdir: str, records: int, items_per_user: int, files: int, vocab: int, zipf: float) -> str:
    name = f"records-{records}-ipu{items_per_user}-f{files}-v{vocab}-s{zipf:g}-d{DATA_VERSION}"
    return os.path.join(workdir, name)


def ensure_dataset(
    workdir: str, records: int, items_per_user: int, files: int, vocab: int, zipf: float, log
) -> Dict:
    """Generates the population (once) and returns its manifest."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = dataset_dir(workdir, records, items_per_user, files, vocab, zipf)
    manifest_path = os.path.join(directory, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            return json.load(f)
    users = max(1, records // items_per_user)
    log(f"generating {records:,} records of {users:,} users in {directory}")
    started = time.monotonic()
    if os.path.exists(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    rng = np.random.default_rng(12345)
    words = _vocabulary(vocab, rng)
    weights = 1.0 / np.arange(1, vocab + 1, dtype=np.float64) ** zipf
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    word_array = pa.array(words, pa.string())
    schema = pa.schema([pa.field("user_id", pa.int64()), pa.field("item", pa.string())])
    paths = []
    chunk = ROW_GROUP * 4
    for f in range(files):
        start, stop = records * f // files, records * (f + 1) // files
        path = os.path.join(directory, f"part-{f:05d}-of-{files:05d}.parquet")
        with pq.ParquetWriter(path, schema) as writer:
            for lo in range(start, stop, chunk):
                hi = min(stop, lo + chunk)
                index = np.arange(lo, hi, dtype=np.uint64)
                user = index % np.uint64(users)  # a user's records are spread over the files
                ids = (user * np.uint64(ID_MULTIPLIER) + np.uint64(ID_OFFSET)) & np.uint64(2**63 - 1)
                picks = np.searchsorted(cdf, rng.random(hi - lo), side="right")
                table = pa.table(
                    {"user_id": pa.array(ids.astype(np.int64)), "item": word_array.take(pa.array(picks))},
                    schema=schema,
                )
                writer.write_table(table, row_group_size=ROW_GROUP)
        paths.append(path)
    manifest = {
        "records": records,
        "users": users,
        "items_per_user": items_per_user,
        "files": files,
        "vocabulary": vocab,
        "zipf": zipf,
        "row_group": ROW_GROUP,
        "bytes": sum(os.path.getsize(p) for p in paths),
        "pattern": os.path.join(os.path.abspath(directory), "part-*.parquet"),
        "generated_seconds": round(time.monotonic() - started, 2),
        "data_version": DATA_VERSION,
    }
    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=2)
    os.replace(manifest_path + ".tmp", manifest_path)  # the manifest marks a complete dataset
    return manifest


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


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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


def _files(manifest: Dict) -> List[str]:
    import glob

    return sorted(glob.glob(manifest["pattern"]))


def _plan(manifest: Dict, args) -> Dict:
    from triehh_beam.protocol import planner

    n = manifest["users"]
    delta = args.delta if args.delta is not None else 1.0 / n**2
    plan = planner.plan(n, args.epsilon, delta, args.max_length)
    if not plan.feasible:
        raise SystemExit(f"infeasible privacy target for n={n}: {plan.reason}")
    return {"n": n, "epsilon": args.epsilon, "delta": delta, "m": plan.batch_size, "theta": plan.theta}


def measure_baseline(manifest: Dict, args) -> Dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from triehh_beam.io import binary_buffers
    from triehh_beam.protocol.sampling import Sampler

    sampler = Sampler(SEED)
    t0 = time.perf_counter()
    rows, read_s, hash_s, checksum = 0, 0.0, 0.0, 0
    for path in _files(manifest):
        batches = pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["user_id", "item"])
        while True:
            r0 = time.perf_counter()
            batch = next(batches, None)
            r1 = time.perf_counter()
            read_s += r1 - r0
            if batch is None:
                break
            # The canonical bytes, as triehh_beam.io.normalise._normalise_users does for an integer column.
            users = pc.cast(pc.cast(batch.column("user_id"), pa.string()), pa.binary())
            ranks = sampler.ranks_packed(1, *binary_buffers(users))
            checksum ^= int(np.bitwise_xor.reduce(ranks))
            rows += batch.num_rows
            hash_s += time.perf_counter() - r1
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "rows": rows, "read_seconds": read_s, "cast_hash_seconds": hash_s,
            "checksum": checksum}


def measure_reader(manifest: Dict, args) -> Dict:
    import numpy as np

    from triehh_beam.io import binary_buffers, iter_record_batches
    from triehh_beam.protocol.sampling import Sampler

    sampler = Sampler(SEED)
    t0 = time.perf_counter()
    rows, checksum = 0, 0
    for path in _files(manifest):
        for batch, _ in iter_record_batches(path, "parquet"):
            ranks = sampler.ranks_packed(1, *binary_buffers(batch.column("user_id")))
            checksum ^= int(np.bitwise_xor.reduce(ranks))
            rows += batch.num_rows
    return {"seconds": time.perf_counter() - t0, "rows": rows, "checksum": checksum}


def _counters(result) -> Dict[str, int]:
    from apache_beam.metrics.metric import MetricsFilter

    counters: Dict[str, int] = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace("triehh"))["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + int(value or 0)
    return counters


def _run_pipeline(build, args) -> Dict:
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.beam import runners

    t0 = time.perf_counter()
    pipeline = runners.make_pipeline(PipelineOptions(args.pipeline_args))
    out = build(pipeline)
    t1 = time.perf_counter()
    result = pipeline.run()
    result.wait_until_finish()
    t2 = time.perf_counter()
    return {"seconds": t2 - t0, "construct_seconds": t1 - t0, "run_seconds": t2 - t1,
            "counters": _counters(result), "output": out}


def measure_beam_read(manifest: Dict, args) -> Dict:
    import apache_beam as beam

    from triehh_beam.beam.read import ReadRecordBatches

    out_path = os.path.join(args.scratch, "beam-read.txt")

    def build(p):
        (
            p
            | "Read" >> ReadRecordBatches(manifest["pattern"], format="parquet")
            | "Rows" >> beam.Map(lambda batch: batch.num_rows)
            | "Sum" >> beam.CombineGlobally(sum)
            | "Write" >> beam.io.WriteToText(out_path, num_shards=1, shard_name_template="")
        )
        return out_path

    timing = _run_pipeline(build, args)
    with open(out_path) as f:
        timing["rows"] = int(f.read().strip())
    del timing["output"]
    return timing


def measure_round(manifest: Dict, args) -> Dict:
    import apache_beam as beam

    from triehh_beam.beam import transforms
    from triehh_beam.beam.read import ReadRecordBatches
    from triehh_beam.protocol.encoding import ItemEncoder
    from triehh_beam.protocol.sampling import Sampler

    plan = _plan(manifest, args)
    sampler = Sampler(SEED)
    encoder = ItemEncoder(max_length=args.max_length)
    out_path = os.path.join(args.scratch, "round-kept.json")

    def build(p):
        (
            p
            | "Read" >> ReadRecordBatches(manifest["pattern"], format="parquet")
            | "Round" >> transforms.RunRound(
                sampler, 1, plan["m"], plan["theta"], encoder, frontier={()}, population=plan["n"]
            )
            | "ToJson" >> beam.Map(lambda result: json.dumps(len(result.kept)))
            | "Write" >> beam.io.WriteToText(out_path, num_shards=1, shard_name_template="")
        )
        return out_path

    timing = _run_pipeline(build, args)
    with open(out_path) as f:
        timing["prefixes_kept"] = json.loads(f.read())
    del timing["output"]
    timing["rows"] = timing["counters"].get("records_read", 0)
    timing["plan"] = plan
    return timing


def measure_discovery(manifest: Dict, args) -> Dict:
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.job.driver import DiscoveryConfig, run_discovery

    plan = _plan(manifest, args)
    output_dir = os.path.join(args.scratch, "discovery")
    events = []
    t0 = time.perf_counter()

    c0 = _cpu_seconds()

    def progress(line: str) -> None:
        events.append((time.perf_counter() - t0, _cpu_seconds() - c0, line))

    config = DiscoveryConfig(
        input_pattern=manifest["pattern"],
        output_dir=output_dir,
        epsilon=args.epsilon,
        delta=plan["delta"],
        max_length=args.max_length,
        input_format="parquet",
        seed=SEED,
    )
    result = run_discovery(config, PipelineOptions(args.pipeline_args), progress=progress)
    seconds = time.perf_counter() - t0
    census = next(((t, c) for t, c, line in events if line.startswith("census:") and "users" in line
                   and "counting" not in line), (None, None))
    round_seconds, round_cpu_seconds, last_cpu = [], [], census[1]
    for _, cpu, line in events:
        if line.startswith("round ") and line.rstrip().endswith(" s"):
            round_seconds.append(float(line.rsplit(",", 1)[1].strip()[:-2]))
            if last_cpu is not None:
                round_cpu_seconds.append(round(cpu - last_cpu, 3))  # includes the state commit
            last_cpu = cpu
    return {
        "seconds": seconds,
        "census_seconds": census[0],
        "census_cpu_seconds": census[1],
        "round_seconds": round_seconds,
        "round_cpu_seconds": round_cpu_seconds,
        "rounds_run": result.rounds_run,
        "stop_reason": result.stop_reason,
        "heavy_hitters": len(result.heavy_hitters),
        "plan": {"n": result.plan.population, "m": result.plan.batch_size, "theta": result.plan.theta},
        "rows": manifest["records"],
    }


MEASURES = {
    "baseline": measure_baseline,
    "reader": measure_reader,
    "beam_read": measure_beam_read,
    "round": measure_round,
    "discovery": measure_discovery,
}


def run_measurement(args) -> Dict:
    """The child: imports first (not timed), then one measurement, then its peak RSS."""
    i0 = time.perf_counter()
    import apache_beam  # noqa: F401  (import costs are process start-up, not throughput)
    import numpy  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import scipy.stats  # noqa: F401  (rank_prefilter_bound imports it lazily)

    import triehh_beam.beam.transforms  # noqa: F401
    import triehh_beam.job.driver  # noqa: F401

    import_seconds = time.perf_counter() - i0
    manifest = ensure_dataset(args.workdir, args.records[0], args.items_per_user, args.files,
                              args.vocabulary, args.zipf, log=lambda s: print(s, file=sys.stderr))
    rss_before = _rss_now_mb()
    args.scratch = tempfile.mkdtemp(prefix=f"scratch-{args._measure}-", dir=args.workdir)
    measure = MEASURES[args._measure]
    load_before, busy_before, cpu_before = os.getloadavg()[0], _system_busy(), _cpu_seconds()
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
    result["cpu_seconds"] = _cpu_seconds() - cpu_before
    busy_after = _system_busy()
    elapsed_ticks = busy_after[1] - busy_before[1]
    if elapsed_ticks > 0:
        cores = (os.cpu_count() or 1)
        busy_cores = (busy_after[0] - busy_before[0]) / elapsed_ticks * cores
        result["other_busy_cores"] = max(0.0, busy_cores - result["cpu_seconds"] / result["seconds"])
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
        command += ["--pipeline-arg", extra]
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


def markdown_tables(rows: List[Dict]) -> str:
    def get(row, kind, key):
        r = row["measurements"].get(kind)
        return None if r is None or "error" in r else r.get(key)

    out = [
        "| records | users | items/user | m | theta | baseline s (cpu) | baseline rec/s | reader s"
        " | beam read s | round s (cpu) | round rec/s | round / baseline: wall (cpu) | discovery s"
        " | rounds | census s | mean round s | heavy hitters | other load, cores |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        n = row["records"]
        base, rnd = get(row, "baseline", "seconds"), get(row, "round", "seconds")
        base_cpu, rnd_cpu = get(row, "baseline", "cpu_seconds"), get(row, "round", "cpu_seconds")
        disc = row["measurements"].get("discovery") or {}
        rounds = disc.get("round_seconds") or []
        loads = [r.get("other_busy_cores") for r in row["measurements"].values() if r.get("other_busy_cores") is not None]
        out.append(
            "| " + " | ".join([
                f"{n:,}", f"{row['users']:,}", str(row["items_per_user"]),
                f"{row['plan']['m']:,}", str(row["plan"]["theta"]),
                _fmt(base, ".2f") + (f" ({base_cpu:.2f})" if base_cpu is not None else ""),
                _fmt(n / base if base else None, ",.0f"),
                _fmt(get(row, "reader", "seconds"), ".2f"),
                _fmt(get(row, "beam_read", "seconds"), ".2f"),
                _fmt(rnd, ".2f") + (f" ({rnd_cpu:.2f})" if rnd_cpu is not None else ""),
                _fmt(n / rnd if rnd else None, ",.0f"),
                (f"{rnd / base:.2f}x" if rnd and base else "-")
                + (f" ({rnd_cpu / base_cpu:.2f}x)" if rnd_cpu and base_cpu else ""),
                _fmt(get(row, "discovery", "seconds"), ".1f"),
                _fmt(get(row, "discovery", "rounds_run"), "d"),
                _fmt(get(row, "discovery", "census_seconds"), ".1f"),
                _fmt(sum(rounds) / len(rounds) if rounds else None, ".2f"),
                _fmt(get(row, "discovery", "heavy_hitters"), "d"),
                _fmt(max(loads) if loads else None, ".1f"),
            ]) + " |"
        )
    out += [
        "",
        "Peak RSS (MB, `ru_maxrss` of a fresh process per measurement; the interpreter with Beam, "
        "pyarrow and scipy imported is the `after imports` column):",
        "",
        "| records | items/user | after imports | baseline | reader | beam read | round | discovery |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        after = get(row, "round", "rss_after_imports_mb") or get(row, "baseline", "rss_after_imports_mb")
        out.append(
            "| " + " | ".join([f"{row['records']:,}", str(row["items_per_user"]), _fmt(after, ".0f")]
                             + [_fmt(get(row, k, "peak_rss_mb"), ".0f") for k in KINDS]) + " |"
        )
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
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated measurements (default all: {','.join(KINDS)})")
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
        from triehh_beam.protocol import planner

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
            # Discovery runs census + up to L rounds already, so it is measured once.
            repeat = 1 if kind == "discovery" else args.repeat
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
