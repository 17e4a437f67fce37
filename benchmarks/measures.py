"""One benchmark measurement each, run in a fresh child process by ``round_throughput.py`` (so
peak RSS figures do not mix). Every measure takes the dataset's manifest and the parsed
arguments and returns a dict with at least ``seconds`` (wall) and ``rows``; the child adds CPU
seconds, peak RSS and the machine's other load around it.

  baseline       pyarrow read of user_id and item, the ids cast to canonical bytes as the reader
                 does, ONE SipHash-2-4 per record (the census fingerprint, ``fingerprints_packed``): the
                 issue's "read the file and hash every user id", the floor everything is held to.
  baseline_v2    the same with the sampling rank, ``ranks_packed`` (one SipHash plus one AES block).
  baseline_numpy the same with the numpy SipHash (``keyed_hash.siphash24_batch_numpy``): the cost of
                 reading and hashing before the compiled hash, the floor issue 27's ratios started from.
  reader         the product's reader without Beam (validates, normalises) plus one SipHash per record.
  beam_read      ``ReadRecordBatches`` counting rows on the default runner: Beam's fixed cost.
  first_pass     a fresh discovery's one read alone (``graphs.build_first_pass``): the census
                 and every round's candidates, written to a temporary directory.
  sampling_pass  a resume's sampling job alone (``graphs.build_sampling``, n known): one read
                 draws every round's sample and writes it to a temporary directory.
  sampled_round  round 1 (frontier {()}) on its sample alone (``graphs.build_sampled_round``),
                 the sample written beforehand by a ``sampling_pass`` child (not timed).
  discovery      ``run_discovery`` with ``--rounds-per-job 1``: the first read, the cut, one job
                 per round.
  discovery_all  the same with ``--rounds-per-job all`` (the default): the first read, then one
                 job cuts the samples and runs every round. Both report each job's worker
                 processes' peak RSS from the operator report (``worker_peak_rss_mb``; 2 workers
                 with ``--pipeline-arg=--direct_running_mode=multi_processing
                 --pipeline-arg=--direct_num_workers=2``).
  process        the whole ``triehh discover`` command in a new process (interpreter start-up
                 and imports included), default flags (``--rounds-per-job all``).
  startup        the same command on 1,000 records: its fixed cost.
  whole_items    ``run_discovery`` with ``--protocol sample-threshold`` at epsilon min(E, 1): census,
                 then ONE pass samples users and releases whole items with counts (no rounds).
  first_pass_mp1 / _mp2, sampling_pass_mp1 / _mp2   the first read / the sampling pass with ``--direct_running_mode=multi_processing``
                 and 1 / 2 workers (the workers' CPU and RSS are reported separately).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from typing import Callable, Dict, List

SEED = b"triehh-beam benchmark seed 0001"  # fixed: every run samples the same users
MULTI_PROCESSING = {
    "sampling_pass_mp1": ["--direct_running_mode=multi_processing", "--direct_num_workers=1"],
    "sampling_pass_mp2": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    "first_pass_mp1": ["--direct_running_mode=multi_processing", "--direct_num_workers=1"],
    "first_pass_mp2": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu_seconds() -> float:
    """CPU of this process's waited-for children (the multi-processing runner's workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _files(manifest: Dict) -> List[str]:
    return sorted(glob.glob(manifest["pattern"]))


def plan_for(manifest: Dict, args) -> Dict:
    from triehh_beam.protocol.planning import planner

    n = manifest["users"]
    delta = args.delta if args.delta is not None else 1.0 / n**2
    plan = planner.plan(n, args.epsilon, delta, args.max_length)
    if not plan.feasible:
        raise SystemExit(f"infeasible privacy target for n={n}: {plan.reason}")
    return {"n": n, "epsilon": args.epsilon, "delta": delta, "m": plan.batch_size, "theta": plan.theta}


def _read_and_hash(manifest: Dict, kind: str) -> Dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from triehh_beam.io import binary_buffers
    from triehh_beam.protocol.randomness.sampling import Sampler

    sampler = Sampler(SEED)
    # One SipHash per id (the census fingerprint), or the sampling rank (one SipHash plus one AES
    # block), or one SipHash by the numpy reference code (what every record cost before the
    # compiled hash: the baseline).
    if kind == "siphash":
        hash_ids = sampler.fingerprints_packed
    elif kind == "numpy":
        from triehh_beam.protocol.randomness import keyed_hash

        hash_ids = lambda data, offsets: keyed_hash.siphash24_batch_numpy((1, 2), data, offsets)  # noqa: E731
    else:
        hash_ids = lambda *ids: sampler.ranks_packed(1, *ids)  # noqa: E731
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
            # The canonical bytes, as triehh_beam.io.normalise does for an integer column.
            users = pc.cast(pc.cast(batch.column("user_id"), pa.string()), pa.binary())
            ranks = hash_ids(*binary_buffers(users))
            checksum ^= int(np.bitwise_xor.reduce(ranks))
            rows += batch.num_rows
            hash_s += time.perf_counter() - r1
    return {"seconds": time.perf_counter() - t0, "rows": rows, "read_seconds": read_s,
            "cast_hash_seconds": hash_s, "checksum": checksum, "hash": kind}


def measure_baseline(manifest: Dict, args) -> Dict:
    return _read_and_hash(manifest, "siphash")


def measure_baseline_v2(manifest: Dict, args) -> Dict:
    return _read_and_hash(manifest, "rank")


def measure_baseline_numpy(manifest: Dict, args) -> Dict:
    return _read_and_hash(manifest, "numpy")


def measure_reader(manifest: Dict, args) -> Dict:
    import numpy as np

    from triehh_beam.io import binary_buffers, iter_record_batches
    from triehh_beam.protocol.randomness.sampling import Sampler

    sampler = Sampler(SEED)
    t0 = time.perf_counter()
    rows, checksum = 0, 0
    for path in _files(manifest):
        for batch, _ in iter_record_batches(path, "parquet"):
            ranks = sampler.fingerprints_packed(*binary_buffers(batch.column("user_id")))  # one SipHash per id
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


def _run_pipeline(build: Callable, pipeline_args: List[str]) -> Dict:
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.beam import runners

    t0, c0 = time.perf_counter(), cpu_seconds()
    pipeline = runners.make_pipeline(PipelineOptions(pipeline_args))
    build(pipeline)
    t1 = time.perf_counter()
    result = pipeline.run()
    result.wait_until_finish()
    t2 = time.perf_counter()
    return {"seconds": t2 - t0, "cpu_seconds": cpu_seconds() - c0, "construct_seconds": t1 - t0, "run_seconds": t2 - t1,
            "counters": _counters(result)}


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

    timing = _run_pipeline(build, args.pipeline_args)
    with open(out_path) as f:
        timing["rows"] = int(f.read().strip())
    return timing


def output_dir(manifest: Dict) -> str:
    """ONE output path per dataset for every measurement: the output is part of the job's
    identity, which keys the samples, so the pass, the round and both discovery modes draw the
    same samples (and the digests compare). Measurements run one at a time."""
    return os.path.join(os.path.dirname(os.path.dirname(manifest["pattern"])), "bench-output")


def _config(manifest: Dict, plan: Dict, rounds_per_job: str = "1"):
    from triehh_beam.job.settings.config import DiscoveryConfig

    return DiscoveryConfig(
        input_pattern=manifest["pattern"], output_dir=output_dir(manifest), epsilon=plan["epsilon"],
        delta=plan["delta"], max_length=plan["max_length"], input_format="parquet", seed=SEED,
        rounds_per_job=rounds_per_job, protocol="triehh")


def _recorded_plan(plan: Dict):
    from triehh_beam.proto import state_pb2

    return state_pb2.PrivacyPlan(protocol="triehh", theta=plan["theta"], batch_size=plan["m"], population=plan["n"],
                                 max_length=plan["max_length"])


def samples_digest(samples_dir: str, rounds: int) -> Dict[str, str]:
    """Per round, a digest of its sample independent of how it was sharded: the rows (choice
    uniform, sequences, counts) sorted by their choice uniform, hashed."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    digests = {}
    for r in range(1, rounds + 1):
        parts = sorted(glob.glob(os.path.join(samples_dir, f"round-{r:04d}", "*.parquet")))
        if not parts:
            digests[str(r)] = "missing"
            continue
        table = pa.concat_tables([pq.read_table(p).replace_schema_metadata(None) for p in parts])
        table = table.take(pa.array(np.argsort(np.asarray(table.column("choice")), kind="stable")))
        h = hashlib.sha256()
        h.update(np.asarray(table.column("choice")).tobytes())
        for column in ("sequences", "counts"):
            lists = table.column(column).combine_chunks()
            h.update(np.asarray(lists.value_lengths()).tobytes())
            values = lists.flatten()
            if column == "counts":
                h.update(np.asarray(values).tobytes())
            else:
                h.update(np.asarray(pc.binary_length(values)).tobytes())
                h.update(b"".join(values.to_pylist()))
        digests[str(r)] = f"{table.num_rows}:{h.hexdigest()[:16]}"
    return digests


def _sampling_pass(manifest: Dict, args, samples_dir: str, pipeline_args: List[str]) -> Dict:
    from triehh_beam.job.batch import graphs
    from triehh_beam.protocol.randomness.sampling import Sampler

    plan = {**plan_for(manifest, args), "max_length": args.max_length}
    config = _config(manifest, plan)
    keys = Sampler(SEED, config.sampling_identity()).pass_keys(args.max_length)
    summary = os.path.join(args.scratch, "sampling.json")
    rounds = list(range(1, args.max_length + 1))
    c0 = children_cpu_seconds()
    candidates = os.path.join(args.scratch, "candidates", "part")
    timing = _run_pipeline(lambda p: graphs.build_sampling(
        p, config, keys, _recorded_plan(plan), rounds, plan["n"], samples_dir, summary, candidates), pipeline_args)
    timing["workers_cpu_seconds"] = children_cpu_seconds() - c0
    with open(summary) as f:
        document = json.loads(f.read())
    timing["rows"] = document["records"]
    timing["users_sampled"] = document["users_sampled"]
    timing["plan"] = plan
    timing["sample_bytes"] = sum(os.path.getsize(p) for p in glob.glob(os.path.join(samples_dir, "*", "*")))
    return timing


def measure_sampling_pass(manifest: Dict, args) -> Dict:
    samples_dir = args.samples_out or os.path.join(args.scratch, "samples")
    timing = _sampling_pass(manifest, args, samples_dir, args.pipeline_args + MULTI_PROCESSING.get(args._measure, []))
    timing["samples_digest"] = samples_digest(samples_dir, args.max_length)  # after the timing
    return timing


def measure_first_pass(manifest: Dict, args) -> Dict:
    from triehh_beam.job.batch import graphs
    from triehh_beam.job.batch.candidate_bounds import candidate_bounds
    from triehh_beam.protocol.randomness.sampling import Sampler

    plan = {**plan_for(manifest, args), "max_length": args.max_length}
    config = _config(manifest, plan)
    sampler = Sampler(SEED, config.sampling_identity())
    bounds = candidate_bounds(config)  # not timed: the driver computes them before the job
    census = os.path.join(args.scratch, "census.json")
    candidates = os.path.join(args.scratch, "candidates", "part")
    c0 = children_cpu_seconds()
    timing = _run_pipeline(lambda p: graphs.build_first_pass(
        p, config, sampler, sampler.pass_keys(args.max_length), bounds, census, candidates,
        census_spill=os.path.join(args.scratch, "census-spill")),  # as jobs.take_census spills
        args.pipeline_args + MULTI_PROCESSING.get(args._measure, []))
    timing["workers_cpu_seconds"] = children_cpu_seconds() - c0
    with open(census, "rb") as f:
        counted, records = graphs.census_from_json(f.read())
    parts = glob.glob(candidates + "-*.parquet")
    import pyarrow.parquet as pq

    timing.update(rows=records, users=counted.users, plan=plan, candidate_files=len(parts),
                  candidate_rows=sum(pq.ParquetFile(p).metadata.num_rows for p in parts),
                  candidate_bytes=sum(os.path.getsize(p) for p in parts),
                  bounds={"rate": bounds.rate_bound / 2**64, "bundle_keep": bounds.bundle_keep})
    return timing


def _cli_discover(pattern: str, out: str, args, plan: Dict) -> float:
    seed_file = out + ".seed"
    with open(seed_file, "wb") as f:
        f.write(SEED + b"\x00" * (32 - len(SEED)))
    command = [sys.executable, "-m", "triehh_beam.cli", "discover", "--input", pattern, "--format", "parquet",
               "--output", out, "--epsilon", str(plan["epsilon"]), "--delta", repr(plan["delta"]),
               "--max-length", str(args.max_length), "--seed-file", seed_file] + args.pipeline_args
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def measure_process(manifest: Dict, args) -> Dict:
    plan = plan_for(manifest, args)
    out = os.path.join(args.scratch, "out")
    seconds = _cli_discover(manifest["pattern"], out, args, plan)
    return {"seconds": seconds, "cpu_seconds": children_cpu_seconds(), "rows": manifest["records"], "plan": plan}


def measure_startup(manifest: Dict, args) -> Dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(args.scratch, "tiny.parquet")
    pq.write_table(pa.table({"user_id": [f"u{i}" for i in range(1000)], "item": ["hello", "help"] * 500}), path)
    plan = {"epsilon": 8.0, "delta": 1e-3}
    seconds = _cli_discover(path, os.path.join(args.scratch, "tiny-out"), args, plan)
    return {"seconds": seconds, "cpu_seconds": children_cpu_seconds(), "rows": 1000}


def samples_cache_dir(manifest: Dict, args) -> str:
    name = f"samples-L{args.max_length}-e{args.epsilon:g}" + (f"-d{args.delta:g}" if args.delta else "")
    return os.path.join(os.path.dirname(manifest["pattern"]), name)


def ensure_samples(manifest: Dict, args) -> None:
    """Draws the dataset's samples once, in a ``sampling_pass`` child: its own process, so it is
    neither timed nor part of the round's peak RSS; kept beside the dataset for later runs."""
    samples_dir = samples_cache_dir(manifest, args)
    if os.path.exists(os.path.join(samples_dir, "complete")):
        return
    shutil.rmtree(samples_dir + ".tmp", ignore_errors=True)
    command = [sys.executable, os.path.abspath(sys.argv[0])] + [
        a for a in sys.argv[1:] if a not in ("--_measure", "sampled_round")]
    command += ["--_measure", "sampling_pass", "--samples-out", samples_dir + ".tmp"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    os.replace(samples_dir + ".tmp", samples_dir)
    open(os.path.join(samples_dir, "complete"), "w").close()


def measure_sampled_round(manifest: Dict, args) -> Dict:
    from triehh_beam.job.batch import graphs
    from triehh_beam.job.release.outputs import round_result_from_json

    plan = {**plan_for(manifest, args), "max_length": args.max_length}
    samples_dir = samples_cache_dir(manifest, args)
    config = _config(manifest, plan)
    out_path = os.path.join(args.scratch, "round-1.json")
    timing = _run_pipeline(lambda p: graphs.build_sampled_round(
        p, config, samples_dir, _recorded_plan(plan), frozenset({()}), 1, out_path,
        users_required=min(plan["m"], plan["n"]), records_ranked=manifest["records"]), args.pipeline_args)
    with open(out_path, "rb") as f:
        result = round_result_from_json(f.read(), config.encoder)
    timing.update(prefixes_kept=len(result.kept), users_sampled=result.users_sampled,
                  sample_short=result.sample_short, rows=result.users_sampled, plan=plan)
    return timing


def _discovery(manifest: Dict, args, rounds_per_job: str) -> Dict:
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.job.batch.driver import run_discovery
    from triehh_beam.job.release.lifecycle import Release

    plan = {**plan_for(manifest, args), "max_length": args.max_length}
    config = _config(manifest, plan, rounds_per_job)
    for stale in (config.output_dir, config.resolved_state_dir):  # a fresh job, never a resume
        shutil.rmtree(stale, ignore_errors=True)
    marks = []  # (event, wall since start, CPU since start), as each progress event arrives
    t0, c0 = time.perf_counter(), cpu_seconds()

    def on_event(event: dict) -> None:
        marks.append((event["event"], time.perf_counter() - t0, cpu_seconds() - c0))

    # One release for every run (the nonce fixed too): both modes draw the same samples, and the
    # trie digests compare across modes, runs and versions.
    release = Release(SEED, config.sampling_identity(), b"benchmark-nonce!")
    result = run_discovery(config, PipelineOptions(args.pipeline_args), events=on_event, release=release)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    marks.append(("end", seconds, cpu))
    trie_digest = _file_digest(os.path.join(config.output_dir, "trie.pb"))
    with open(os.path.join(config.resolved_state_dir, "operator_report.json")) as f:
        workers = json.load(f)["worker_peak_rss_mb"]  # each job's worker processes, by host:pid
    for done in (config.output_dir, config.resolved_state_dir):
        shutil.rmtree(done, ignore_errors=True)

    def at(name: str, first: bool = True):
        hits = [(w, c) for e, w, c in marks if e == name]
        return (hits[0] if first else hits[-1]) if hits else (None, None)

    census, sampling = at("census_done"), at("sampling_done")
    phases = {"census": census}
    if sampling[0] is not None:
        phases["sampling"] = (sampling[0] - census[0], sampling[1] - census[1])
        phases["rounds"] = (seconds - sampling[0], cpu - sampling[1])
    return {
        "seconds": seconds,
        "rounds_per_job": rounds_per_job,
        "phases": {k: [round(v[0], 3), round(v[1], 3)] for k, v in phases.items()},
        "round_elapsed_seconds": [round(w, 3) for e, w, _ in marks if e == "round"],
        "events": [[e, round(w, 3), round(c, 3)] for e, w, c in marks],
        "rounds_run": result.rounds_run,
        "stop_reason": result.stop_reason,
        "heavy_hitters": len(result.heavy_hitters),
        "heavy_hitters_digest": hashlib.sha256("\n".join(result.heavy_hitters).encode()).hexdigest()[:16],
        "trie_digest": trie_digest,
        "worker_peak_rss_mb": workers,
        "plan": {"n": result.plan.population, "m": result.plan.batch_size, "theta": result.plan.theta},
        "rows": manifest["records"],
    }


def _file_digest(path: str) -> str:
    if not os.path.exists(path):
        return "missing"
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def measure_discovery(manifest: Dict, args) -> Dict:
    return _discovery(manifest, args, "1")


def measure_discovery_all(manifest: Dict, args) -> Dict:
    return _discovery(manifest, args, "all")


def measure_whole_items(manifest: Dict, args) -> Dict:
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.job.batch.driver import run_discovery
    from triehh_beam.job.settings.config import DiscoveryConfig

    plan = plan_for(manifest, args)
    config = DiscoveryConfig(
        input_pattern=manifest["pattern"], output_dir=output_dir(manifest) + "-whole-items",
        epsilon=min(args.epsilon, 1.0), delta=plan["delta"], max_length=args.max_length, input_format="parquet",
        seed=SEED, protocol="sample-threshold")
    for stale in (config.output_dir, config.resolved_state_dir):  # a fresh job, never a resume
        shutil.rmtree(stale, ignore_errors=True)
    marks = []
    t0, c0 = time.perf_counter(), cpu_seconds()
    result = run_discovery(config, PipelineOptions(args.pipeline_args),
                           events=lambda e: marks.append((e["event"], time.perf_counter() - t0, cpu_seconds() - c0)))
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    released = _file_digest(os.path.join(config.output_dir, "heavy_hitters.json"))
    for done in (config.output_dir, config.resolved_state_dir):
        shutil.rmtree(done, ignore_errors=True)
    census = next((w, c) for e, w, c in marks if e == "census_done")
    release = next((w, c) for e, w, c in marks if e == "release_done")
    return {
        "seconds": seconds,
        "phases": {"census": [round(census[0], 3), round(census[1], 3)],
                   "release": [round(release[0] - census[0], 3), round(release[1] - census[1], 3)]},
        "events": [[e, round(w, 3), round(c, 3)] for e, w, c in marks],
        "items_released": len(result.heavy_hitters),
        "plan": {"epsilon": result.plan.epsilon, "tau": result.plan.theta,
                 "sample_probability": result.plan.sample_probability},
        "heavy_hitters_json_digest": released,
        "rows": manifest["records"],
    }


MEASURES = {
    "baseline": measure_baseline,
    "baseline_v2": measure_baseline_v2,
    "baseline_numpy": measure_baseline_numpy,
    "reader": measure_reader,
    "beam_read": measure_beam_read,
    "sampling_pass": measure_sampling_pass,
    "sampled_round": measure_sampled_round,
    "discovery": measure_discovery,
    "discovery_all": measure_discovery_all,
    "whole_items": measure_whole_items,
    "sampling_pass_mp1": measure_sampling_pass,
    "sampling_pass_mp2": measure_sampling_pass,
    "first_pass": measure_first_pass,
    "first_pass_mp1": measure_first_pass,
    "first_pass_mp2": measure_first_pass,
    "process": measure_process,
    "startup": measure_startup,
}

PREPARE = {"sampled_round": ensure_samples}
