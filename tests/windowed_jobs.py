"""The windowed discovery tests' shared inputs and runs: a one-word Zipf population, its record
batches with event times in an hour (or one time a message), the configuration of two declared
windows, and the windowed graph run on the in-process and the streaming DirectRunner, each
window committed and charged first; with the release nonces from a fixed seed (``fixed_nonces``)."""

import os

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from triehh_beam.beam.runners import make_pipeline
from triehh_beam.beam.windows.windows import GateLateRecords, SplitIntoWindows
from triehh_beam.job.release import lifecycle as release
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.job.windows import windowed
from triehh_beam.job.windows.releases import WindowReleases
from triehh_beam.protocol.randomness.sampling import Sampler

__all__ = ["HOUR", "SEED", "T0", "WORDS", "committed_window", "decide_windows", "fixed_nonces",
           "hour_batches", "one_stamp_batches", "one_word_population", "run_streaming_windows", "run_windows",
           "window_sampler", "windowed_config"]

SEED = bytes(range(32))
WORDS = ["the", "and", "that", "have", "with", "this", "from", "they", "will", "would", "there",
         "their", "what", "about", "which", "when", "make", "like", "time", "just"]
HOUR = 3600 * 1_000_000
T0 = 1_763_892_000 * 1_000_000  # 2025-11-23T10:00:00Z


@pytest.fixture(autouse=True)
def fixed_nonces(monkeypatch):
    """Release nonces from a fixed seed (a new one per draw, as os.urandom's), so that every run
    of a test draws the same windows' samples. Modules that import it use it too."""
    rng = np.random.default_rng(24)
    monkeypatch.setattr(release, "fresh_nonce", lambda: rng.bytes(16))


def one_word_population(users: int, seed: int, prefix: str):
    """``prefix``+i -> [one word of ``WORDS``], word i (from 1) drawn with weight 1/i."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    words = rng.choice(len(WORDS), size=users, p=weights / weights.sum())
    return {f"{prefix}{i}": [WORDS[w]] for i, w in enumerate(words)}


def hour_batches(population, start_micros, rng):
    """Record batches of 500 rows of ``population``, event times in the hour from ``start_micros``."""
    ids = list(population)
    rows = [(u, item) for u in ids for item in population[u]]
    stamps = start_micros + rng.integers(0, HOUR // 1000, size=len(rows)) * 1000  # milliseconds
    batch = pa.RecordBatch.from_arrays(
        [pa.array([u.encode() for u, _ in rows], pa.binary()), pa.array([i for _, i in rows], pa.string()),
         pa.array(np.ones(len(rows), np.int64)), pa.array(stamps, pa.int64())],
        names=["user_id", "item", "count", "timestamp"])
    return [batch.slice(i, 500) for i in range(0, batch.num_rows, 500)]


def windowed_config(tmp_path, **overrides):
    """Two declared windows from T0; TrieHH's planned for a declared population of 2,000."""
    values = dict(input_pattern="unused", output_dir=str(tmp_path / "out"), epsilon=4.0, delta=1e-5,
                  max_length=6, window=3600, seed=SEED, state_dir=str(tmp_path / "state"),
                  windows=(T0, T0 + 2 * HOUR))
    if overrides.get("protocol") != "triehh++":
        values["population"] = 2000
    values.update(overrides)
    return DiscoveryConfig(**{"protocol": "triehh", **values})


def committed_window(job, start):
    """The window's committed state (its plan, release nonce and ledger record)."""
    return StateStore(job.window_state_dir(start)).load()


def window_sampler(job, start):
    """The sampler of the window's committed release."""
    return Sampler(SEED, job.config.window_identity()).window_keys().sampler(
        start, committed_window(job, start).release_nonce)


def decide_windows(job):
    """The driver's part: every declared window committed and charged (or refused), in order."""
    releases = WindowReleases(job)
    return [releases.decide(start) for start in job.declared_starts]


def run_windows(config, batches):
    """The windowed graph on the in-process runner over ``batches``, every window decided first."""
    job = windowed.WindowedJob.for_config(config, config.seed)
    decide_windows(job)
    sampler = Sampler(config.seed, config.window_identity())
    with make_pipeline(PipelineOptions([])) as p:
        records = (
            p
            | beam.Create(batches)
            | SplitIntoWindows(job.windows)
        )
        gated = records | GateLateRecords(job.windows)
        windowed.build_windowed_discovery(gated["records"], job, sampler.window_keys(), sampler.census_key())
        windowed.note_admitted(gated["admitted"], job)
    return job


def run_streaming_windows(config, events):
    """The windowed graph on Beam's streaming DirectRunner, fed by a ``TestStream``."""
    from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
    from apache_beam.testing.test_stream import TestStream

    job = windowed.WindowedJob.for_config(config, config.seed)
    decide_windows(job)
    sampler = Sampler(config.seed, config.window_identity())
    stream = TestStream()
    for event in events:
        if isinstance(event, int):
            stream = stream.advance_watermark_to(Timestamp(micros=event))
        else:
            stream = stream.add_elements(
                [TimestampedValue(b.drop_columns(["timestamp"]), Timestamp(micros=int(b.column("timestamp")[0].as_py())))
                 for b in event])
    stream = stream.advance_watermark_to_infinity()
    options = PipelineOptions([], streaming=True)
    with beam.Pipeline(runner=BundleBasedDirectRunner(), options=options) as p:
        gated = p | stream | GateLateRecords(job.windows)
        windowed.build_windowed_discovery(gated["records"], job, sampler.window_keys(), sampler.census_key())
        windowed.note_admitted(gated["admitted"], job)
        gated["late"] | beam.Map(lambda kv, out=str(job.state_root): _note_late(out, kv))
    return job


def _note_late(directory, keyed):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "late.txt"), "a") as f:
        f.write(f"{keyed[0]} {keyed[1].num_rows}\n")


def one_stamp_batches(population, start, rng, size=200):
    """Batches whose records share one event time (a Pub/Sub message's), within the window."""
    batches = []
    for b in hour_batches(population, start, rng):
        for i in range(0, b.num_rows, size):
            part = b.slice(i, size)
            stamp = int(part.column("timestamp")[0].as_py())
            batches.append(part.set_column(3, "timestamp", pa.array([stamp] * part.num_rows, pa.int64())))
    return batches

