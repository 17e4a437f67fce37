"""The spilled census (``TakeCensus(spill_prefix=...)``, beam/census.py) against the independent
census of test_census (which asks the encoder item by item and counts users with Python sets).

Populations are small and drawn with fixed seeds; each user's records are spread over batches,
flushes and bundles (a user usable in one and unusable in another is usable), with batch sizes
from 3 rows to the whole input and spill budgets from one fingerprint (a flush per batch) to the
default (one per bundle). The bundles are Beam's (two worker threads, a replayed bundle whose
files are written but never emitted) or, in one test, drawn at random by driving the DoFn
itself. One test drops a group of spill files to show the comparison notices.
"""

import json
import pathlib
import random

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from triehh_beam.beam import census as census_lib
from triehh_beam.beam import census_spill
from triehh_beam.beam.census import GROUPS, SPILL_BUDGET, Census, TakeCensus
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness.sampling import Sampler
from tests.pipeline_factory import new_pipeline
from tests.census_oracle import CENSUS_SEED, census_batch, census_oracle, text_population


def _mixed_population(rng: random.Random, users: int = 400):
    """Every user with 2-6 records of which each is usable (a short word) with probability 1/3,
    else too long (11-40 characters) or empty: users usable in one batch and unusable in
    another, and unusable users whose shortest item is in any of their batches."""
    rows = []
    for u in range(users):
        for _ in range(rng.randint(2, 6)):
            kind = rng.random()
            item = "" if kind < 0.05 else "w" * (rng.randint(1, 9) if kind < 0.33 else rng.randint(11, 40))
            rows.append((f"m{u}", item))
    rng.shuffle(rows)
    return rows


def _batches(rows, batch):
    return [census_batch(rows[i:i + batch]) for i in range(0, len(rows), batch)]


def _run(rows, encoder, spill, tmp_path, batch=97, budget=SPILL_BUDGET, truncate=False, options=(), runner=None):
    """The census ``TakeCensus`` counts of ``rows`` in batches of ``batch`` rows (``spill``:
    its spill directory, None: in memory), read back from a file the job writes."""
    out = tmp_path / f"census-{random.getrandbits(64):016x}.json"
    options = PipelineOptions(list(options))
    pipeline = new_pipeline(options) if runner is None else beam.Pipeline(runner=runner, options=options)
    (
        pipeline
        | beam.Create(_batches(rows, batch))
        | TakeCensus(Sampler(CENSUS_SEED), encoder, truncate, spill_prefix=spill, spill_budget=budget)
        | beam.Map(lambda c: json.dumps([c.users, c.usable_users, sorted(c.unusable_lengths.items())]))
        | beam.io.WriteToText(str(out), shard_name_template="")
    )
    pipeline.run().wait_until_finish()
    users, usable, lengths = json.loads(out.read_text())
    return Census(users, usable, {length: n for length, n in lengths})


def _files(spill) -> list:
    return sorted(p for p in pathlib.Path(spill).rglob("*") if p.is_file())


@pytest.mark.parametrize("batch, budget", [(3, 1), (97, 1), (97, 200), (1000, 700), (10**6, SPILL_BUDGET)])
@pytest.mark.parametrize("truncate", [False, True])
def test_the_spilled_census_is_the_independent_census(tmp_path, batch, budget, truncate):
    rows = text_population(random.Random(batch + budget + truncate), users=500) + _mixed_population(random.Random(5))
    encoder = ItemEncoder(max_length=9)
    expected, _, _ = census_oracle(rows, encoder, truncate)
    assert 0 < expected.unusable_users < expected.users  # both kinds of user
    spill = tmp_path / "spill"
    assert _run(rows, encoder, str(spill), tmp_path, batch, budget, truncate) == expected
    assert _run(rows, encoder, None, tmp_path, batch, truncate=truncate) == expected  # the in-memory census
    per_group = [len(list(spill.glob(f"census-{g:02d}-*.bin"))) for g in range(GROUPS)]
    assert sum(per_group) == len(_files(spill))  # every file is one group's
    if budget < 1000 and batch < 1000:  # several flushes in the one bundle: several files a group
        assert min(per_group) >= 3
    elif batch >= len(rows):  # one batch, one bundle: one flush, a file per group
        assert per_group == [1] * GROUPS


def test_a_user_usable_in_any_flush_is_usable_and_the_shortest_length_is_kept(tmp_path):
    # Every user: unusable records of decreasing length in the first batches, then (for even
    # users) a usable one in the last: each batch its own flush and file.
    rows = [(f"u{u}", "z" * (40 - r)) for r in range(5) for u in range(300)]
    rows += [(f"u{u}", "ok") for u in range(0, 300, 2)]
    expected = Census(300, 150, {36: 150})
    assert census_oracle(rows, ItemEncoder(max_length=10))[0] == expected
    assert _run(rows, ItemEncoder(max_length=10), str(tmp_path / "spill"), tmp_path, batch=300, budget=1) == expected


@pytest.mark.in_process  # the in-process runner's multi-threaded bundles and bundle_repeat
def test_bundles_of_two_workers_and_a_replayed_bundle_count_each_user_once(tmp_path):
    rows = _mixed_population(random.Random(7), users=800)
    encoder = ItemEncoder(max_length=10)
    expected, _, _ = census_oracle(rows, encoder)
    two = ["--direct_num_workers=2", "--direct_running_mode=multi_threading"]
    # One flush a bundle: more files than groups say there were several bundles.
    assert _run(rows, encoder, str(tmp_path / "two"), tmp_path, batch=50, options=two) == expected
    assert len(_files(tmp_path / "two")) > GROUPS
    once, twice = tmp_path / "once", tmp_path / "twice"
    assert _run(rows, encoder, str(once), tmp_path, batch=50, budget=300) == expected
    # Each bundle is run once more first, its outputs discarded as a failed attempt's are: its
    # files stay behind, never emitted, never read.
    assert _run(rows, encoder, str(twice), tmp_path, batch=50, budget=300, runner=FnApiRunner(bundle_repeat=1)) == expected
    assert len(_files(twice)) == 2 * len(_files(once))


def test_any_bundling_of_the_batches_gives_the_same_census(tmp_path):
    # The DoFn driven by hand over bundles drawn at random, its (group, path) outputs grouped
    # as the GroupByKey would, each group merged and the groups added.
    rows = _mixed_population(random.Random(9), users=300) + text_population(random.Random(9), users=200)
    encoder = ItemEncoder(max_length=9)
    expected, _, _ = census_oracle(rows, encoder)
    rng = random.Random(13)
    for trial in range(4):
        batches = _batches(rows, rng.choice([5, 40, 300]))
        do_fn = census_lib._SpillCensusDoFn(Sampler(CENSUS_SEED).census_key(), encoder, False,
                                           str(tmp_path / f"spill-{trial}"), budget=rng.choice([1, 100, 10**6]))
        do_fn.setup()
        paths = {}
        cuts = sorted(rng.sample(range(1, len(batches)), rng.randint(0, min(5, len(batches) - 1))))
        for start, end in zip([0] + cuts, cuts + [len(batches)]):
            do_fn.start_bundle()
            outputs = [o for b in batches[start:end] for o in do_fn.process(b, GlobalWindow())]
            outputs += [o.value for o in do_fn.finish_bundle()]
            for group, path in outputs:
                paths.setdefault(group, []).append(path)
        for budget in (2, 7, 10**6):  # the k-way merge in steps of 1 to 3 fingerprints, and whole
            merged = [census_lib._merge_group(group_paths, budget) for group_paths in paths.values()]
            assert census_lib._add(merged) == expected


def test_a_dropped_group_of_spill_files_is_noticed(tmp_path, monkeypatch):
    # The comparison can fail: a census whose merge reads none of one group's files loses that
    # group's users (a group is a hash partition of users, so none of them is in another group's
    # files). One file alone may hold only users other files hold too, as one bundle order left
    # it: that once made this test flaky.
    rows = _mixed_population(random.Random(11))
    encoder = ItemEncoder(max_length=10)
    expected, _, _ = census_oracle(rows, encoder)
    opened = census_spill.SpillCursor.__init__
    dropped = []

    def drop_a_group(cursor, path):
        opened(cursor, path)
        group = pathlib.Path(path).name.split("-")[1]
        if not dropped:
            dropped.append(group)
        if group == dropped[0]:
            cursor._u = cursor._v = 0

    monkeypatch.setattr(census_spill.SpillCursor, "__init__", drop_a_group)
    counted = _run(rows, encoder, str(tmp_path / "spill"), tmp_path, batch=97, budget=100)
    assert dropped and counted.users < expected.users


def test_no_records_no_files_and_an_empty_census(tmp_path):
    spill = tmp_path / "spill"
    pipeline = new_pipeline()
    out = tmp_path / "census.json"
    (
        pipeline
        | beam.Create([census_batch([("a", "x")]).slice(0, 0)])
        | TakeCensus(Sampler(CENSUS_SEED), ItemEncoder(), spill_prefix=str(spill))
        | beam.Map(lambda c: json.dumps(list(c)))
        | beam.io.WriteToText(str(out), shard_name_template="")
    )
    pipeline.run().wait_until_finish()
    assert json.loads(out.read_text()) == [0, 0, {}]
    assert not spill.exists()


def test_a_spill_file_that_is_not_whole_is_refused(tmp_path):
    path = str(tmp_path / "part.bin")
    part = (np.array([1, 5, 9], np.uint64), np.array([7], np.uint64), np.array([12], np.int64))
    census_spill.write_spill(path, part)
    assert [a.tolist() for a in census_spill.SpillCursor(path).chunk(10)[:3]] == [[1, 5, 9], [7], [12]]
    data = pathlib.Path(path).read_bytes()
    for broken in (data[:-8], data + b"\0" * 8, b"XXXXXXXX" + data[8:], data[:10]):
        pathlib.Path(path).write_bytes(broken)
        with pytest.raises(ValueError, match="census spill file"):
            census_spill.SpillCursor(path)
