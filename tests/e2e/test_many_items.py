"""Real-world device data: many items per user, any item type, bad input handled without loss.

End to end on Beam's in-process runner (``run_discovery`` with no options, or
``triehh_beam.cli.dispatch``), each test on a small population written to ``tmp_path``:

1. A user with 10^5 records (Parquet, spread over 3 files with everybody else's records) is one
   user in the census and casts at most one vote per round; its unique item is never
   discovered although the frontier reaches it.
2. A user's items spread over several files and rows, with and without a count column: the local
   frequency is the sum over all rows (checked per user in the sample tables, and as an exact
   trie equality with the keyed simulation given the merged counts).
3. Unicode (Latin with accents, Cyrillic, CJK, emoji with ZWJ sequences and skin tones, Arabic,
   Hebrew) at unit sizes 1-4: the frequent words come back exactly in ``heavy_hitters.json``.
4. Integers through the CLI: a frequent value (and a negative one) and a frequent high-order
   prefix (a value range).
5. Bytes through the CLI: hex text in JSON Lines, binary in Parquet.
6. Items longer than L - 1 units: dropped and counted (default), or truncated to an L-unit
   frequent prefix.
7. ``--tokenize``: records are sentences; the words are the items.
8. Bad input through the CLI: counted exactly per kind, never echoed into the outputs, written
   raw to the dead-letter file; ``--max-bad-fraction`` refuses the job before any round and any
   ledger charge.
9. Recall with 5-20 words per user (a Zipf sentence generator over real English words): the
   pipeline equals the keyed simulation exactly, and its mean recall@10 over 5 seeds agrees with
   the independent numpy simulation over 100 seeds (Welch t-test and an absolute bound).

Unless a test is about sampling (2, 7, 9), theta and the batch size are fixed with
``allow_no_guarantee=True`` and m = n: every user is asked every round, so which prefixes are
kept does not depend on the seed. Such runs have NO privacy guarantee; they are experiments
only. Seeds are fixed (SHA-256 of a label), so every run is deterministic.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import pathlib
import unicodedata

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from scipy import stats

from tests.release_keys import keyed_identity
from triehh_beam.beam import SampleAllRounds, runners
from triehh_beam.beam.read import ReadRecordBatches
from triehh_beam.beam.samples import samples
from triehh_beam.cli import main
from triehh_beam.io.schema import RecordOptions
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import DiscoveryConfig, run_discovery
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.state.ledger import LEDGER_NAME
from triehh_beam.job.state.state_store import MANIFEST_NAME, StateStore
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.items.tokenize import TOKENIZER_ID, tokenize
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.metrics import ground_truth, recall_at_k
from triehh_beam.reference.simulation import simulate, simulate_many

pytestmark = pytest.mark.slow  # whole discoveries in subprocesses or many rounds: see README, Tests


# Targets the fixed-parameter runs record (they spend no guaranteed budget: no_guarantee).
EPSILON, DELTA = 4.0, 1e-6


def _seed(label: str) -> bytes:
    """A public 32-byte test seed (never for a real release)."""
    return hashlib.sha256(b"triehh-beam many-items tests: " + label.encode()).digest()


def _config(pattern, output_dir, seed: bytes, **fields) -> DiscoveryConfig:
    return DiscoveryConfig(
        input_pattern=str(pattern), output_dir=str(output_dir), seed=seed, epsilon=EPSILON, delta=DELTA, **{"protocol": "triehh", **fields}
    )


def _fixed(theta: int, batch_size: int) -> dict:
    return dict(theta=theta, batch_size=batch_size, allow_no_guarantee=True)


def _document(output_dir) -> dict:
    return json.loads(pathlib.Path(output_dir, "heavy_hitters.json").read_text(encoding="utf-8"))


def _report(output_dir) -> dict:
    """The private operator report (every count), in the job's state directory."""
    return json.loads(pathlib.Path(f"{output_dir}.state", "operator_report.json").read_text(encoding="utf-8"))


def _rounds(output_dir):
    """The committed per-round summaries (with each round's Beam counters)."""
    return StateStore(str(output_dir) + ".state").load().rounds


def _identity(output_dir) -> bytes:
    """The job identity the pipeline keyed its samples with, as its state records it (the keyed
    simulation needs the same (seed, identity) to draw the same samples)."""
    return keyed_identity(StateStore(str(output_dir) + ".state").load())


def _levels(output_dir):
    return Trie.from_bytes(pathlib.Path(output_dir, "trie.pb").read_bytes()).levels


def _assert_equals_keyed_simulation(output_dir, simulated):
    """The pipeline's trie and its per-round totals are the keyed simulation's, exactly."""
    assert _levels(output_dir) == simulated.levels
    rounds = _rounds(output_dir)
    # One round loop (protocol.rounds.loop): the same rounds, the same stop.
    assert len(rounds) == simulated.rounds_run
    assert StateStore(str(output_dir) + ".state").load().stop_reason == simulated.stop.describe()
    for summary, expected in zip(rounds, simulated.round_stats):
        assert summary.round_index == expected.round_index
        assert summary.counters["users_sampled"] == expected.users_sampled
        assert summary.counters.get("votes_cast", 0) == expected.votes_cast
        assert summary.prefixes_kept == expected.prefixes_kept


def _discover(capsys, *flags):
    """``triehh discover`` in-process: (exit code, stdout, stderr)."""
    code = main(["discover", "--protocol", "triehh", *flags])
    out, err = capsys.readouterr()
    return code, out, err


def _seed_file(tmp_path, label: str) -> str:
    path = tmp_path / f"seed-{label}.bin"
    path.write_bytes(_seed(label))
    return str(path)


@pytest.fixture(scope="module")
def short_words(english_words):
    """The 40 most frequent alphabetic English words of at most 4 letters (fit L = 5)."""
    return [w for w in english_words if len(w) <= 4][:40]


def _zipf_choices(rng, n_words: int, size: int, exponent: float = 1.0) -> np.ndarray:
    weights = 1.0 / np.arange(1, n_words + 1) ** exponent
    return rng.choice(n_words, size=size, p=weights / weights.sum())


# ---------------------------------------------------------------------------------------------
# 1. One user, 10^5 records: one user in the census, at most one vote per round.
# ---------------------------------------------------------------------------------------------

HEAVY_USER = 10**6  # an int id, like the population's (a Parquet column has one type)
HEAVY_RECORDS = 100_000
HEAVY_ITEM = "thez"  # held by the heavy user only; its prefix "the" is the most frequent word


def test_a_user_with_100k_records_casts_one_vote_per_round_and_its_item_is_not_discovered(
    tmp_path, make_population, grep_files
):
    population = make_population(300, max_chars=4, vocabulary=20, seed=1)
    assert "the" in population.words and HEAVY_ITEM not in population.words
    rows = population.rows() + [(HEAVY_USER, HEAVY_ITEM)] * HEAVY_RECORDS
    rows = [rows[i] for i in np.random.default_rng(2).permutation(len(rows))]
    for shard in range(3):  # every file holds a third of the heavy user's records, and others'
        write_records(str(tmp_path / f"records-{shard}.parquet"), rows[shard::3])
    n = len(population.users) + 1
    output = tmp_path / "out"
    seed = _seed("heavy user")
    # theta = 2 and m = n: the heavy user is asked every round; one vote is below theta, but
    # counting its records as votes would keep its item at once.
    result = run_discovery(_config(tmp_path / "records-*.parquet", output, seed, max_length=5, **_fixed(2, n)))

    assert result.plan.population == n  # the census counts the heavy user once
    state = StateStore(str(output) + ".state").load()
    assert state.census_counters["records_read"] == len(rows) == 300 + HEAVY_RECORDS
    assert state.census_counters["files_read"] == 3
    rounds = _rounds(output)
    assert len(rounds) == 5
    for summary in rounds:
        counters = summary.counters
        assert counters["records_ranked"] == len(rows)  # every record was read and ranked ...
        assert counters["users_sampled"] == n  # ... and the heavy user counted once
        assert counters.get("votes_cast", 0) <= counters["users_sampled"]
    # Round 1: every user holds an item of >= 1 unit, so every user votes, exactly once.
    assert rounds[0].counters["votes_cast"] == n

    levels = _levels(output)
    # The frontier reached the heavy item: "the" was kept in round 3, so in round 4 the heavy
    # user's vote went to "thez" (its only item) -- and one vote is below theta = 2.
    assert ("t", "h", "e") in levels[2]
    assert all(not prefix[:4] == tuple(HEAVY_ITEM) for level in levels for prefix in level)
    assert HEAVY_ITEM not in result.heavy_hitters
    assert not [p for p in result.frequent_prefixes if p.startswith(HEAVY_ITEM)]
    assert grep_files(output, HEAVY_ITEM.encode()) == []
    assert "the" in result.heavy_hitters  # not vacuous: the run discovered words

    # Exactly the keyed simulation where the heavy user holds the item with local count 10^5.
    users = dict(population.users)
    users[HEAVY_USER] = {HEAVY_ITEM: HEAVY_RECORDS}
    encoder = ItemEncoder(max_length=5)
    _assert_equals_keyed_simulation(
        output, simulate(users, encoder, 2, n, seed, sampling="keyed", identity=_identity(output)))
    # ... and theta = 2 is within reach: two distinct holders of the item would find it.
    users[HEAVY_USER + 1] = [HEAVY_ITEM]
    assert HEAVY_ITEM in simulate(users, encoder, 2, n + 1, seed, sampling="keyed",
                                  identity=_identity(output)).heavy_hitters


# ---------------------------------------------------------------------------------------------
# 2. Items split across files and rows, with and without a count column.
# ---------------------------------------------------------------------------------------------

SPLIT_USERS = 400
NUMERIC_IDS = 40  # the last 40 users have decimal ids, written as text in some files, ints in others


def _split_population(words, seed: int):
    """(merged counts per user, rows per file) for users whose items are spread over files.

    Every user holds 2-5 distinct words with total local counts 1-30; each total is cut into
    1-3 parts, and each part is written as one row with its count to ``counted.parquet`` or
    ``counted.jsonl``, or, if at most 4, as that many rows to ``plain.parquet`` (no count column:
    each row counts 1). Users with decimal ids are written as JSON integers in ``counted.jsonl``
    (which then mixes id types) and as int64 in ``numeric.parquet``, as text elsewhere: one user
    (``sampling.user_id_bytes``). Some users also get a row with count 0, which adds nothing, and
    two users have only such rows.
    """
    rng = np.random.default_rng(seed)
    merged = {}
    files = {"counted.parquet": [], "counted.jsonl": [], "plain.parquet": [], "numeric.parquet": []}
    for u in range(SPLIT_USERS):
        numeric = u >= SPLIT_USERS - NUMERIC_IDS
        user = str(9000 + u) if numeric else f"s{u:04d}"
        as_int = int(user) if numeric else user
        chosen = sorted(set(_zipf_choices(rng, len(words), int(rng.integers(2, 6)))))
        counts = collections.Counter()
        for index in chosen:
            word, total = words[index], int(rng.integers(1, 31))
            counts[word] += total
            pieces = min(total, int(rng.integers(1, 4)))
            cuts = rng.choice(np.arange(1, total), size=pieces - 1, replace=False).tolist() if pieces > 1 else []
            for part in np.diff([0, *sorted(cuts), total]).tolist():
                destination = ("counted.parquet", "counted.jsonl", "plain.parquet", "numeric.parquet")[
                    int(rng.integers(0, 4 if numeric else 3))]
                if destination == "plain.parquet" and part > 4:
                    destination = "counted.parquet"
                if destination == "plain.parquet":
                    files[destination].extend([(user, word)] * part)
                elif destination == "counted.parquet":
                    files[destination].append((user, word, part))
                else:
                    files[destination].append((as_int, word, part))
        if rng.random() < 0.2:
            files["counted.jsonl"].append((as_int, words[int(rng.integers(0, len(words)))], 0))
        merged[user] = dict(counts)
    # Two users whose only rows have count 0: users of the population (counted by the census,
    # sampled like anyone) who hold nothing and never vote.
    files["counted.jsonl"].append(("z0000", words[0], 0))
    files["counted.parquet"].append(("z0001", words[1], 0))
    merged["z0000"] = merged["z0001"] = {}
    for rows in files.values():
        order = rng.permutation(len(rows))
        rows[:] = [rows[i] for i in order]
    return merged, files



def _users_held(keyed):
    """A ``(round, sample table)``'s users, each as its sorted ``[(sequence, count), ...]``."""
    users, _ = samples.sequence_table(keyed[1])
    return [list(users.weighted(i)) for i in range(users.users)]


def test_local_frequency_is_the_sum_over_all_files_and_rows(tmp_path, short_words):
    words = short_words[:30]
    merged, files = _split_population(words, seed=3)
    directory = tmp_path / "split"
    directory.mkdir()
    for name, rows in files.items():
        write_records(str(directory / name), rows)
    pattern = str(directory / "*")
    # The split is real: most users have rows in several files, and many a word in several rows.
    files_per_user = collections.Counter()
    rows_per_user_word = collections.Counter()
    for name, rows in files.items():
        for user in {str(row[0]) for row in rows}:
            files_per_user[user] += 1
        for row in rows:
            rows_per_user_word[str(row[0]), row[1]] += 1
    assert sum(1 for c in files_per_user.values() if c >= 2) > SPLIT_USERS // 2
    assert sum(1 for c in rows_per_user_word.values() if c >= 2) > SPLIT_USERS
    assert {type(row[0]) for row in files["counted.jsonl"]} == {str, int}
    encoder = ItemEncoder(max_length=5)
    n = len(merged)

    # Per user, in the sample tables (everyone sampled): the local counts are the merged ones.
    expected = [sorted((encoder.encode(w), c) for w, c in counts.items()) for counts in merged.values()]
    pipeline = runners.make_pipeline(PipelineOptions([]))
    drawn = (
        pipeline
        | ReadRecordBatches(pattern, options=RecordOptions.for_encoder(encoder))
        | SampleAllRounds(Sampler(_seed("split")).pass_keys(1), [1], n, n, encoder)
    )
    assert_that(drawn["tables"] | beam.FlatMap(_users_held), equal_to(expected))
    pipeline.run().wait_until_finish()

    # The whole discovery, sampling half the users per round, equals the keyed simulation given
    # each user's merged counts.
    theta, m = 3, n // 2
    # The two users whose rows all count 0 can never vote, so they are not in the population
    # (docs/input.md): n counts the users a round can sample, as the simulation does.
    voting = {u: c for u, c in merged.items() if c}
    # Not vacuous: had the pipeline read only the count-column files, or counted each row once
    # whatever its count, it would have found another trie. The job's identity (its canonical
    # paths, under this session's tmp_path) keys its samples with the seed, so the seed is the
    # first of a fixed list for which both wrong readings give another trie than the right one.
    counted_only = collections.defaultdict(collections.Counter)
    rows_once = collections.defaultdict(collections.Counter)
    for name, rows in files.items():
        for row in rows:
            if len(row) == 3 and row[2]:
                counted_only[str(row[0])][row[1]] += row[2]
            if len(row) == 2 or row[2]:
                rows_once[str(row[0])][row[1]] += 1
    for wrong in (counted_only, rows_once):
        # The same population (a user whose counted rows are all gone holds one empty item).
        wrong.update({u: [""] for u in voting if not wrong.get(u)})
    output = tmp_path / "out"
    for attempt in range(20):
        seed = _seed(f"split discovery {attempt}")
        # A release whose keys are known before it runs (a fresh one draws its nonce when it starts).
        release = Release(seed, _config(str(directory / "*"), output, seed, max_length=5,
                                        **_fixed(theta, m)).sampling_identity(), bytes(16))
        identity = release.keyed_identity
        simulated = simulate(voting, encoder, theta, m, seed, sampling="keyed", identity=identity)
        if all(simulate(wrong, encoder, theta, m, seed, sampling="keyed", identity=identity).levels
               != simulated.levels for wrong in (counted_only, rows_once)):
            break
    else:
        pytest.fail("no seed of 20 tells the wrong readings apart from the right one")
    result = run_discovery(_config(str(directory / "*"), output, seed, max_length=5, **_fixed(theta, m)),
                           release=release)
    assert _identity(output) == identity
    assert len(voting) == n - 2
    assert result.plan.population == len(voting)
    _assert_equals_keyed_simulation(output, simulated)
    assert len(result.heavy_hitters) >= 5


# ---------------------------------------------------------------------------------------------
# 3. Unicode scripts, end to end, at unit sizes 1 to 4.
# ---------------------------------------------------------------------------------------------

UNICODE_WORDS = [
    "café",  # Latin with an accent; half of its holders write it decomposed (e + U+0301)
    "Ölçü",  # Latin with diaeresis and cedilla
    "привет",  # Cyrillic
    "東京",  # CJK (Han)
    "日本語",
    "😂",  # emoji
    "👨\u200d👩\u200d👧",  # an emoji ZWJ sequence (5 code points)
    "👍🏽",  # emoji with a skin-tone modifier
    "مرحبا",  # Arabic (RTL)
    "שלום",  # Hebrew (RTL)
]
# Rare items (one holder each) sharing prefixes with the frequent ones: never discovered.
UNICODE_NOISE = ["cafë", "приве", "東", "👨\u200d👩", "مرح", "של", "😂😂", "日本", "Öl"]
UNICODE_HOLDERS = 8


@pytest.mark.parametrize("unit_size", [1, 2, 3, 4])
def test_unicode_scripts_are_discovered_and_round_trip_exactly(tmp_path, unit_size):
    assert all(unicodedata.is_normalized("NFC", w) for w in UNICODE_WORDS)
    rows = []
    for word in UNICODE_WORDS:
        for holder in range(UNICODE_HOLDERS):
            written = unicodedata.normalize("NFD", word) if word == "café" and holder % 2 else word
            rows.append((f"x{len(rows):04d}", written))
    assert "cafe\u0301" in {item for _, item in rows}
    rows += [(f"x{len(rows) + i:04d}", noise) for i, noise in enumerate(UNICODE_NOISE)]
    records = tmp_path / "records.jsonl"
    write_records(str(records), rows)
    longest = max(len(w) for w in UNICODE_WORDS + UNICODE_NOISE)  # code points
    max_length = -(-longest // unit_size) + 1
    output = tmp_path / "out"
    result = run_discovery(
        _config(records, output, _seed("unicode"), max_length=max_length, unit_size=unit_size,
                **_fixed(4, len(rows)))
    )
    raw = (output / "heavy_hitters.json").read_bytes()
    document = json.loads(raw.decode("utf-8"))
    # Exactly the frequent words, as the same strings (NFC: the decomposed "café" merged in).
    assert sorted(document["heavy_hitters"]) == sorted(UNICODE_WORDS)
    assert sorted(result.heavy_hitters) == sorted(UNICODE_WORDS)
    assert document["frequent_prefixes"] == []
    assert document["encoding"]["unit_size"] == unit_size and document["encoding"]["kind"] == "text"
    for word in UNICODE_WORDS:  # written as UTF-8 text, not \u escapes
        assert json.dumps(word, ensure_ascii=False).encode("utf-8") in raw


# ---------------------------------------------------------------------------------------------
# 4. Integers through the CLI: a frequent value and a frequent range.
# ---------------------------------------------------------------------------------------------

INT_BITS, INT_UNIT = 16, 4  # 4 units of 4 bits, L = 5
FREQUENT_VALUE, NEGATIVE_VALUE = 1234, -5
# Offset binary puts value v at v + 2^15: the values whose top 4 bits are 1010.
DENSE_LOW, DENSE_HIGH = 0xA000 - 2**15, 0xAFFF - 2**15  # [8192, 12287]


def test_integers_through_the_cli_find_a_value_and_a_range(tmp_path, capsys):
    rng = np.random.default_rng(4)
    values = [FREQUENT_VALUE] * 12 + [NEGATIVE_VALUE] * 12
    # 40 distinct values spread over the whole dense range, ends included: 40 votes for its
    # 4-bit prefix, at most 3 for any 8-bit one.
    values += sorted({DENSE_LOW, DENSE_HIGH, *np.linspace(DENSE_LOW, DENSE_HIGH, 40).astype(int).tolist()})
    assert len(values) == 24 + 40
    # 30 scattered values outside the dense range's top bits, one holder each.
    noise = set()
    while len(noise) < 30:
        v = int(rng.integers(-(2**15), 2**15))
        if not DENSE_LOW <= v <= DENSE_HIGH and v not in (FREQUENT_VALUE, NEGATIVE_VALUE):
            noise.add(v)
    values += sorted(noise)
    # JSON numbers and decimal text (" -5", "+1234") are both integer items.
    items = [(f" {v}" if v < 0 else f"+{v}") if i % 3 == 0 else v for i, v in enumerate(values)]
    records = tmp_path / "ints.jsonl"
    write_records(str(records), [(user, item) for user, item in enumerate(items)])
    output = tmp_path / "out"
    code, out, err = _discover(
        capsys, "--input", str(records), "--output", str(output), "--epsilon", str(EPSILON),
        "--delta", str(DELTA), "--max-length", "5", "--item-type", "int", "--int-bits", str(INT_BITS),
        "--unit-size", str(INT_UNIT), "--theta", "6", "--batch-size", str(len(values)),
        "--allow-no-guarantee", "--seed-file", _seed_file(tmp_path, "ints"),
    )
    assert code == 0, err
    document = _document(output)
    assert document["encoding"]["kind"] == "int" and document["encoding"]["int_bits"] == INT_BITS
    assert _report(output)["input"]["dropped"] == {}
    assert sorted(document["heavy_hitters"]) == sorted([FREQUENT_VALUE, NEGATIVE_VALUE])
    assert all(type(v) is int for v in document["heavy_hitters"])  # JSON numbers
    covering = [
        p for p in document["frequent_prefixes"]
        if p["range"][0] <= DENSE_LOW and DENSE_HIGH <= p["range"][1]
    ]
    assert covering, document["frequent_prefixes"]
    for prefix in covering:  # a range of the value's top bits, not the whole domain
        assert set(prefix) == {"bits", "range"}
        assert 1 <= len(prefix["bits"]) < INT_BITS and set(prefix["bits"]) <= {"0", "1"}
        assert prefix["range"][1] - prefix["range"][0] + 1 == 2 ** (INT_BITS - len(prefix["bits"])) <= 2**12
    assert {"bits": "1010", "range": [DENSE_LOW, DENSE_HIGH]} in document["frequent_prefixes"]


# ---------------------------------------------------------------------------------------------
# 5. Bytes through the CLI: hex text in JSON Lines, binary columns in Parquet.
# ---------------------------------------------------------------------------------------------

PLANTED_BYTES = [b"\x00\xff\x10", b"\xde\xad\xbe\xef", b"\x00", b"\xc3\x28", b"\xff\xfe\xfd\xfc"]


@pytest.mark.parametrize("format", ["jsonl", "parquet"])
def test_byte_items_through_the_cli_come_back_as_the_planted_bytes(tmp_path, capsys, format):
    rng = np.random.default_rng(5)
    items = [item for item in PLANTED_BYTES for _ in range(8)]
    noise = set()
    while len(noise) < 20:  # one holder each; b"\xc3\x28" and b"\xff..." are not UTF-8
        candidate = rng.bytes(3)
        if candidate not in PLANTED_BYTES:
            noise.add(candidate)
    items += sorted(noise)
    records = tmp_path / f"bytes.{format}"
    if format == "jsonl":  # hex text, in either case
        written = [item.hex().upper() if i % 2 else item.hex() for i, item in enumerate(items)]
        encoding_flags = ["--bytes-encoding", "hex"]
    else:  # a binary column, taken as it is
        written = items
        encoding_flags = []
    write_records(str(records), [(f"b{i:03d}", item) for i, item in enumerate(written)])
    output = tmp_path / "out"
    code, out, err = _discover(
        capsys, "--input", str(records), "--output", str(output), "--epsilon", str(EPSILON),
        "--delta", str(DELTA), "--max-length", "5", "--item-type", "bytes", *encoding_flags,
        "--theta", "4", "--batch-size", str(len(items)), "--allow-no-guarantee",
        "--seed-file", _seed_file(tmp_path, "bytes"),
    )
    assert code == 0, err
    document = _document(output)
    assert document["encoding"]["kind"] == "bytes"
    assert _report(output)["input"]["dropped"] == {}
    discovered = document["heavy_hitters"]
    assert all(h == h.lower() for h in discovered)  # hex in the JSON
    assert sorted(bytes.fromhex(h) for h in discovered) == sorted(PLANTED_BYTES)
    assert document["frequent_prefixes"] == []


# ---------------------------------------------------------------------------------------------
# 6. Items longer than L - 1 units: dropped and counted, or truncated to a frequent prefix.
# ---------------------------------------------------------------------------------------------

LONG_ITEM = "thereafter"  # 10 letters; L = 5 allows 4
LONG_HOLDERS = 10


@pytest.mark.parametrize("truncate", [False, True], ids=["drop", "truncate"])
def test_long_items_are_dropped_and_counted_or_truncated_to_a_prefix(tmp_path, truncate):
    short = ["the", "to", "of", "and", "a", "in", "is"]  # no word starts with "ther"
    rows = [(f"w{i:03d}", short[i % len(short)]) for i in range(70)]
    rows += [(f"l{i:03d}", LONG_ITEM) for i in range(LONG_HOLDERS)]
    records = tmp_path / "records.parquet"
    write_records(str(records), rows)
    n, max_length, theta = len(rows), 5, 4
    output = tmp_path / "out"
    seed = _seed("long items")
    result = run_discovery(
        _config(records, output, seed, max_length=max_length, truncate_long_items=truncate, **_fixed(theta, n))
    )
    document = _document(output)
    rounds = _rounds(output)
    truncated = LONG_ITEM[:max_length]  # "there": L units, no terminator
    assert sorted(result.heavy_hitters) == sorted(short)
    assert LONG_ITEM not in result.heavy_hitters and truncated not in result.heavy_hitters
    assert document["heavy_hitters"] == result.heavy_hitters
    if truncate:
        assert document["encoding"]["long_items"] == "truncate"
        assert truncated in result.frequent_prefixes
        assert truncated in document["frequent_prefixes"]
        assert tuple(truncated) in _levels(output)[max_length - 1]
    else:
        assert document["encoding"]["long_items"] == "drop"
        assert not [p for p in result.frequent_prefixes + result.heavy_hitters if p.startswith("ther")]
        # Every round asks every user (m = n): each round meets the 10 long records, and their
        # holders, having nothing else, send nothing.
        for summary in rounds:
            assert summary.counters["items_too_long"] == LONG_HOLDERS
            assert summary.counters["users_without_items"] == LONG_HOLDERS
        # Counted per round among sampled users (operator metrics in the state) and by the
        # census (the operator report), never published: heavy_hitters.json carries no count.
        assert "input" not in document
        census = _report(output)["input"]
        assert census["items_too_long"] == census["users_without_usable_item"] == LONG_HOLDERS
    users = {user: [item] for user, item in rows}
    simulated = simulate(users, ItemEncoder(max_length=max_length), theta, n, seed,
                         too_long="truncate" if truncate else "drop", identity=_identity(output))
    _assert_equals_keyed_simulation(output, simulated)


# ---------------------------------------------------------------------------------------------
# 7. --tokenize: sentences in, words out.
# ---------------------------------------------------------------------------------------------

TOKENIZE_USERS = 600
TOKENLESS_TEXTS = ["?!", "... — ...", "#️⃣", "€ + $ = %", "\u200b", "' '"]


def _sentence(rng, words) -> str:
    """4-10 Zipf-drawn words, capitalised, with punctuation, a hyphenated pair and an emoji now
    and then: what a tokeniser has to take apart."""
    picked = [words[i] for i in _zipf_choices(rng, len(words), int(rng.integers(4, 11)))]
    text = picked[0].capitalize()
    for word in picked[1:]:
        text += str(rng.choice([" ", " ", " ", ", ", "; ", "-", " — "])) + word
    if rng.random() < 0.2:
        text += " 👍"
    if rng.random() < 0.05:
        text += " wonderful"  # a token longer than L - 1 = 4: dropped like any long item
    return text + str(rng.choice([".", "!", "?", "..."]))


def test_tokenize_discovers_the_frequent_words_of_sentences(tmp_path, capsys, short_words, monkeypatch):
    """What is asserted: with --tokenize every discovered item is a word token of the corpus
    (letters only, or the emoji token; never punctuation or white space); the trie is exactly the
    keyed simulation's on the population pre-tokenised with ``triehh_beam.protocol.items.tokenize`` (a record
    counts ``count`` for each of its tokens, a token twice in a sentence counts twice; case is
    kept, so "The" and "the" are different items); the two words held by most users are
    discovered; and without --tokenize the same records (whole sentences, all longer than L - 1)
    discover nothing."""
    rng = np.random.default_rng(7)
    words = short_words[:40]
    rows = []
    for u in range(TOKENIZE_USERS):
        for _ in range(int(rng.integers(1, 4))):
            rows.append((f"t{u:04d}", _sentence(rng, words), int(rng.integers(1, 4))))
    # Users whose only text holds no token at all: members of the population that never vote.
    rows += [(f"q{u:03d}", text, 1) for u, text in enumerate(TOKENLESS_TEXTS)]
    records = tmp_path / "sentences.jsonl"
    write_records(str(records), rows)
    users = collections.defaultdict(collections.Counter)
    for user, text, count in rows:
        for token in tokenize(text):
            users[user][token] += count
    assert not any(users[f"q{u:03d}"] for u in range(len(TOKENLESS_TEXTS)))
    # Given to the simulation as one empty item each (a record with nothing to discover).
    population = {user: counts or [""] for user, counts in users.items()}
    max_length, theta, m = 5, 8, TOKENIZE_USERS // 2
    seed_file = _seed_file(tmp_path, "tokenize")
    # Relative paths, as typed at a prompt (the job's identity records them canonical).
    monkeypatch.chdir(tmp_path)
    records = pathlib.Path(records.name)
    common = ["--input", str(records), "--epsilon", str(EPSILON), "--delta", str(DELTA),
              "--max-length", str(max_length), "--theta", str(theta), "--batch-size", str(m),
              "--allow-no-guarantee", "--seed-file", seed_file]

    output = pathlib.Path("out")
    code, out, err = _discover(capsys, *common, "--output", str(output), "--tokenize")
    assert code == 0, err
    document = _document(output)
    assert document["encoding"]["tokenizer"] == TOKENIZER_ID
    discovered = set(document["heavy_hitters"])
    all_tokens = set().union(*users.values())
    assert discovered <= all_tokens
    assert all(item.isalpha() or item == "👍" for item in discovered), discovered
    encoder = ItemEncoder(max_length=max_length, tokenize=True)
    simulated = simulate(population, encoder, theta, m, _seed("tokenize"), sampling="keyed",
                         identity=_identity(output))
    assert _report(output)["privacy"]["population"] == TOKENIZE_USERS + len(TOKENLESS_TEXTS)
    _assert_equals_keyed_simulation(output, simulated)
    assert discovered == set(simulated.heavy_hitters)
    # The job's identity holds this run's tmp path (canonical paths), so its sample is in effect
    # a random one: over 1,000 random identities the keyed simulation found "the" (545 holders)
    # and "to" (435) every time and the third, "of" (355), 997 times; the two most held words
    # are asserted (the sample itself is checked exactly above, against the simulation).
    holders = ground_truth(population, encoder).user_counts
    top2 = [word for word, _ in holders.most_common(2)]
    assert set(top2) <= discovered, (top2, sorted(discovered))
    # Case is kept: "the" and "The" are two items of the population the pipeline read (whether
    # this seed's sample finds "The" too depends on the job's identity, which keys the sample).
    assert holders["the"] and holders["The"] and "the" in discovered

    # Without --tokenize the sentences are items far longer than L: refused before any budget
    # (most users would hold no usable item), or, told to run anyway, nothing is found.
    plain = tmp_path / "plain"
    code, out, err = _discover(capsys, *common, "--output", str(plain))
    assert code == 2 and "hold no usable item" in err, err
    code, out, err = _discover(capsys, *common, "--output", str(plain), "--max-unusable-fraction", "1")
    assert code == 0, err
    assert _document(plain)["heavy_hitters"] == [] and _document(plain)["encoding"]["tokenizer"] is None
    assert _rounds(plain)[0].counters["items_too_long"] > 0


# ---------------------------------------------------------------------------------------------
# 8. Bad input through the CLI: counted exactly, never echoed, dead letters raw, max fraction.
# ---------------------------------------------------------------------------------------------

BAD_LINES = {  # reason -> raw lines; every line holds a marker that must not reach any output
    "malformed": [
        b'{"user_id": "BADUSER_OPEN_a1", "item": "MALFORMED_OPEN_7f3a"',
        b"NOT JSON AT ALL MALFORMED_TEXT_91c2",
        b'["MALFORMED_ARRAY_5d1e"]',
    ],
    "invalid_utf8": [
        b'{"user_id": "BADUSER_LATIN1_b2", "item": "caf\xe9 LATIN1_ITEM_2b7c"}',
        b'{"user_id": "\xff\xfeBADUSER_BYTES_88d0", "item": "tea"}',
    ],
    "missing_user": [
        b'{"item": "NO_USER_KEY_4e6f"}',
        b'{"user_id": null, "item": "NULL_USER_0a9b"}',
        b'{"user_id": "", "item": "EMPTY_USER_c3d5"}',
    ],
    "bad_count": [
        b'{"user_id": "BADUSER_NEG_c3", "item": "NEGATIVE_COUNT_77aa", "count": -3}',
        b'{"user_id": "BADUSER_NEG_d4", "item": "NEG_ONE_COUNT_19be", "count": -1}',
    ],
}
MARKERS = [
    b"BADUSER", b"MALFORMED_OPEN_7f3a", b"MALFORMED_TEXT_91c2", b"MALFORMED_ARRAY_5d1e", b"LATIN1_ITEM_2b7c",
    b"NO_USER_KEY_4e6f", b"NULL_USER_0a9b", b"EMPTY_USER_c3d5", b"NEGATIVE_COUNT_77aa", b"NEG_ONE_COUNT_19be",
]
GOOD_WORDS = ["cat", "dog", "sun", "sky", "tea"]
GOOD_USERS = 600  # 10 bad lines of 610: 1.64% bad


@pytest.fixture(scope="module")
def bad_records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bad-input")
    good = [
        json.dumps({"user_id": f"g{u:04d}", "item": GOOD_WORDS[u % len(GOOD_WORDS)], "count": 1 + u % 3}).encode()
        for u in range(GOOD_USERS)
    ]
    bad = [line for lines in BAD_LINES.values() for line in lines]
    assert all(any(marker in line for marker in MARKERS) for line in bad)
    assert not [line for line in good if any(marker in line for marker in MARKERS)]
    lines = list(good)
    for i, line in enumerate(bad):  # spread over the file
        lines.insert(37 + i * 59, line)
    path = directory / "device-records.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _bad_input_flags(records, output, tmp_path):
    return ["--input", str(records), "--output", str(output), "--epsilon", str(EPSILON), "--delta", str(DELTA),
            "--max-length", "4", "--theta", "10", "--batch-size", str(GOOD_USERS), "--allow-no-guarantee",
            "--seed-file", _seed_file(tmp_path, "bad input")]


def test_bad_rows_are_counted_exactly_kept_out_of_outputs_and_dead_lettered_raw(
    bad_records, tmp_path, capsys, grep_files
):
    output = tmp_path / "out"
    dead_letter = tmp_path / "private" / "rejected.jsonl"
    code, out, err = _discover(capsys, *_bad_input_flags(bad_records, output, tmp_path),
                               "--dead-letter", str(dead_letter), "--max-bad-fraction", "0.5")
    assert code == 0, err
    document = _document(output)
    assert sorted(document["heavy_hitters"]) == sorted(GOOD_WORDS)
    expected = {reason: len(lines) for reason, lines in BAD_LINES.items()}
    report = _report(output)
    assert report["input"]["dropped"] == expected
    bad = sum(expected.values())
    assert report["input"]["records_read"] == GOOD_USERS + bad
    assert report["input"]["bad_fraction"] == pytest.approx(bad / (GOOD_USERS + bad))
    assert report["privacy"]["population"] == GOOD_USERS
    # No offending content anywhere in the output directory (state included) or in the logs.
    assert grep_files(output, b"cat")  # the search works
    for marker in MARKERS:
        assert grep_files(output, marker) == [], marker
        assert marker.decode() not in out + err
    # The dead letters are the exact raw lines (text when UTF-8), each with its file, line and reason.
    letters = [json.loads(line) for line in dead_letter.read_text(encoding="utf-8").splitlines()]
    raw = [letter["raw"].encode() if "raw" in letter else base64.b64decode(letter["raw_base64"]) for letter in letters]
    assert collections.Counter(zip((letter["reason"] for letter in letters), raw)) == (
        collections.Counter((reason, line) for reason, lines in BAD_LINES.items() for line in lines)
    )
    assert sum("raw_base64" in letter for letter in letters) == len(BAD_LINES["invalid_utf8"])
    file_lines = bad_records.read_bytes().split(b"\n")
    assert all(file_lines[letter["line"] - 1] == line for letter, line in zip(letters, raw))
    assert {pathlib.Path(letter["file"]).name for letter in letters} == {bad_records.name}


def test_too_many_bad_rows_refuse_the_job_before_any_round_or_charge(bad_records, tmp_path, capsys, grep_files):
    output = tmp_path / "out"
    code, out, err = _discover(capsys, *_bad_input_flags(bad_records, output, tmp_path), "--max-bad-fraction", "0.01")
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("triehh: error: "), err
    assert "--max-bad-fraction" in lines[0] and "no round was run" in lines[0]
    assert "Traceback" not in err
    for marker in MARKERS:
        assert marker.decode() not in out + err
    state_dir = pathlib.Path(str(output) + ".state")
    objects = [state_pb2.JobState.FromString(p.read_bytes()) for p in state_dir.rglob("state-*.pb")]
    assert not [s for s in objects if s.rounds_completed >= 1 or s.rounds]
    assert not (state_dir / MANIFEST_NAME).exists()
    ledger = state_dir / LEDGER_NAME
    assert not ledger.exists() or not ledger.read_text().strip()
    assert not (output / "heavy_hitters.json").exists()
    for marker in MARKERS:
        assert grep_files(tmp_path, marker) == [], marker


# ---------------------------------------------------------------------------------------------
# 9. Recall with many words per user: pipeline vs simulation.
# ---------------------------------------------------------------------------------------------

RECALL_USERS = 6000
RECALL_L = 5
RECALL_K = 10  # recall@10 is ~0.5 here (sd ~0.09 over seeds): neither saturated nor zero
RECALL_PIPELINE_SEEDS = [_seed(f"recall pipeline {i}") for i in range(5)]
RECALL_NUMPY_SEEDS = range(100)
RECALL_ALPHA = 1e-3  # a correct pipeline fails the t-test at a random choice of seeds with odds 1e-3
# |mean difference| bound: ~3.5 standard errors of the 5-seed pipeline mean (sd ~0.09 / sqrt 5).
RECALL_ABSOLUTE = 0.15


def sentence_population(words, n_users: int, seed: int, min_words: int = 5, max_words: int = 20,
                        exponent: float = 1.0):
    """user id -> word counts: each user writes one 'sentence' of ``min_words``-``max_words``
    words drawn independently with Zipf weights (rank^-exponent) over ``words``; repeats are
    kept as counts."""
    rng = np.random.default_rng(seed)
    users = {}
    for u in range(n_users):
        length = int(rng.integers(min_words, max_words + 1))
        users[f"r{u:05d}"] = dict(collections.Counter(words[i] for i in _zipf_choices(rng, len(words), length, exponent)))
    return users


@pytest.fixture(scope="module")
def recall_runs(tmp_path_factory, english_words):
    words = [w for w in english_words if len(w) <= RECALL_L - 1][:150]
    users = sentence_population(words, RECALL_USERS, seed=9)
    directory = tmp_path_factory.mktemp("recall")
    ids = sorted(users)
    # Half the users as one row per word occurrence (no count column), half as counted rows.
    write_records(str(directory / "words-0.parquet"),
                  [(u, w) for u in ids[::2] for w, c in users[u].items() for _ in range(c)])
    write_records(str(directory / "words-1.parquet"),
                  [(u, w, c) for u in ids[1::2] for w, c in users[u].items()])
    runs = []
    for i, seed in enumerate(RECALL_PIPELINE_SEEDS):
        output = directory / f"run-{i}"
        result = run_discovery(_config(directory / "words-*.parquet", output, seed, max_length=RECALL_L))
        runs.append((seed, output, result))
    return users, runs


def test_many_words_per_user_pipeline_equals_the_keyed_simulation(recall_runs):
    users, runs = recall_runs
    plan = planner.plan(RECALL_USERS, EPSILON, DELTA, RECALL_L)
    assert plan.feasible
    encoder = ItemEncoder(max_length=RECALL_L)
    for seed, output, result in runs:
        assert (result.plan.theta, result.plan.batch_size, result.plan.population) == (
            plan.theta, plan.batch_size, RECALL_USERS)
        assert not result.plan.no_guarantee
        simulated = simulate(users, encoder, plan.theta, plan.batch_size, seed, sampling="keyed",
                             identity=_identity(output))
        _assert_equals_keyed_simulation(output, simulated)
        assert set(result.heavy_hitters) == set(simulated.heavy_hitters)


def test_many_words_per_user_mean_recall_agrees_with_the_numpy_simulation(recall_runs):
    users, runs = recall_runs
    encoder = ItemEncoder(max_length=RECALL_L)
    theta, m = runs[0][2].plan.theta, runs[0][2].plan.batch_size
    truth = ground_truth(users, encoder).user_counts  # distinct holders per word
    pipeline = np.array([recall_at_k(result.heavy_hitters, truth, RECALL_K) for _, _, result in runs])
    reference = np.array([
        recall_at_k(r.heavy_hitters, truth, RECALL_K)
        for r in simulate_many(users, encoder, theta, m, RECALL_NUMPY_SEEDS, sampling="numpy")
    ])
    assert len(pipeline) >= 5 and len(reference) >= 30
    # Not vacuous: recall@10 varies between runs and is far from 0 and 1.
    assert 0.2 < reference.mean() < 0.9 and reference.std() > 0.02
    test = stats.ttest_ind(pipeline, reference, equal_var=False)
    message = (f"mean recall@{RECALL_K}: pipeline {pipeline.mean():.3f} over {len(pipeline)} seeds "
               f"{pipeline.round(2).tolist()}, numpy simulation {reference.mean():.3f} over {len(reference)} "
               f"seeds (Welch p = {test.pvalue:.3g})")
    assert test.pvalue > RECALL_ALPHA, message
    assert abs(pipeline.mean() - reference.mean()) < RECALL_ABSOLUTE, message
