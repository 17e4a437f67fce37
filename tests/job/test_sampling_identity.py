"""One seed file, many jobs (README: Sampling and the seed; docs/protocol.md §1): every key is
derived from (secret seed, job identity), so two jobs given the same seed file draw independent
samples, while the same job (re-run, retried, resumed) draws the same; the identity is recorded
in the state and a resume under another is refused.

How a round's sample is observed: user i holds one item, the single character chr(0x4E00 + i),
and theta = 1, L = 2. Round 1 then keeps exactly the first units of its sampled users' items, so
the trie's first level IS the round-1 sample, read from the published trie.pb.
"""

import hashlib
import json
import math
import pathlib
import shutil

import pytest

from tests.driver_events import StoppedAfterRound, stop_after_round
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import ConfigMismatchError, DiscoveryConfig, run_discovery
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.trie import Trie

SEED = hashlib.sha256(b"triehh-beam one seed file, many jobs").digest()  # public: tests only
N, M = 4000, 400
FIRST = 0x4E00  # CJK ideographs: 4,000 distinct one-character items


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Two copies of one population under two names (e.g. two dates' partitions)."""
    root = tmp_path_factory.mktemp("inputs")
    rows = [(f"u{i:05d}", chr(FIRST + i)) for i in range(N)]
    paths = []
    for day in ("day-1", "day-2"):
        path = root / f"{day}.jsonl"
        write_records(str(path), rows)
        paths.append(str(path))
    return paths


def _config(records, output, **overrides) -> DiscoveryConfig:
    fields = dict(input_pattern=records, output_dir=str(output), epsilon=1.0, delta=1e-6, max_length=2,
                  theta=1, batch_size=M, allow_no_guarantee=True, seed=SEED)
    fields.update(overrides)
    return DiscoveryConfig(**{"protocol": "triehh", **fields})


def _round_one_sample(output) -> frozenset:
    """The users sampled in round 1 (see the module docstring)."""
    level = Trie.from_bytes(pathlib.Path(output, "trie.pb").read_bytes()).level(1)
    return frozenset(ord(prefix[0]) - FIRST for prefix in level)


def _move_aside(output, name) -> pathlib.Path:
    aside = output.parent / name
    output.rename(aside)
    pathlib.Path(f"{output}.state").rename(f"{aside}.state")
    return aside


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_two_jobs_sharing_a_seed_file_draw_independent_samples(inputs, tmp_path):
    first, second = tmp_path / "runs" / "day-1", tmp_path / "runs" / "day-2"
    run_discovery(_config(inputs[0], first))
    run_discovery(_config(inputs[1], second))
    a, b = _round_one_sample(first), _round_one_sample(second)
    assert len(a) == len(b) == M  # every sampled user votes, theta = 1: the level is the sample
    # Independent uniform M-subsets of N overlap hypergeometrically: mean M^2/N = 40, sd ~5.7.
    # Tolerance: 5 sd (a correct implementation fails with odds ~1e-6). Identical or nested
    # samples (the shared-seed bug) overlap in all 400.
    mean = M * M / N
    sd = math.sqrt(M * (M / N) * (1 - M / N) * (N - M) / (N - 1))
    assert abs(len(a & b) - mean) <= 5 * sd, (len(a & b), mean, sd)
    # The same input under another output is another job too.
    third = tmp_path / "elsewhere" / "day-1"
    run_discovery(_config(inputs[0], third))
    assert abs(len(a & _round_one_sample(third)) - mean) <= 5 * sd


def test_the_same_job_twice_is_two_releases_with_independent_samples(inputs, tmp_path):
    """Issue 24, finding 1: the same command run again after its output and state were moved
    aside is another release, charged again: it must not redraw the first release's sample (the
    difference of two releases sharing keys shows exactly what changed in the data)."""
    output, ledger_dir = tmp_path / "out", str(tmp_path / "population-ledger")
    config = _config(inputs[0], output, ledger_dir=ledger_dir)
    run_discovery(config)
    state = StateStore(f"{output}.state").load()
    assert state.sampling_identity.encode() == config.sampling_identity()
    assert len(state.release_nonce) == 16 and state.ledger_record.endswith(state.release_nonce.hex())
    first = _round_one_sample(output)
    # The keys are (seed, recorded identity, nonce): the protocol's Sampler names exactly this sample.
    expected = Release.of_state(state).sampler().sample(1, [f"u{i:05d}" for i in range(N)], M)
    assert first == frozenset(int(u[1:]) for u in expected)
    _move_aside(output, "first-run")
    run_discovery(_config(inputs[0], tmp_path / "out/", ledger_dir=ledger_dir))  # spelled with a slash
    again = StateStore(f"{output}.state").load()
    assert again.sampling_identity == state.sampling_identity  # canonical paths: one identity
    assert again.release_nonce != state.release_nonce
    # Two independent uniform M-subsets of N (the tolerance of the test above, 5 sd).
    mean = M * M / N
    sd = math.sqrt(M * (M / N) * (1 - M / N) * (N - M) / (N - 1))
    assert abs(len(first & _round_one_sample(output)) - mean) <= 5 * sd
    ledger = Ledger(config.resolved_ledger_dir).records()
    assert [r["record_id"] for r in ledger] == [state.ledger_record, again.ledger_record]


def test_a_resumed_job_draws_what_an_unbroken_one_does(inputs, tmp_path):
    output = tmp_path / "out"
    run_discovery(_config(inputs[0], output))
    release = Release.of_state(StateStore(f"{output}.state").load())  # the same release, broken below
    unbroken = _move_aside(output, "unbroken")
    with pytest.raises(StoppedAfterRound):
        run_discovery(_config(inputs[0], output), events=stop_after_round(1), release=release)
    assert StateStore(f"{output}.state").load().rounds_completed == 1
    result = run_discovery(_config(inputs[0], output))
    assert result.resumed_from_round == 1
    assert (output / "trie.pb").read_bytes() == (unbroken / "trie.pb").read_bytes()


def test_a_resume_under_another_identity_is_refused(inputs, tmp_path):
    state_dir = tmp_path / "private" / "state"
    run_discovery(_config(inputs[0], tmp_path / "out", state_dir=str(state_dir)))
    # Another output on the same state would key the remaining rounds differently.
    with pytest.raises(ConfigMismatchError, match=r"job identity \(output_dir"):
        run_discovery(_config(inputs[0], tmp_path / "moved", state_dir=str(state_dir)))
    shutil.rmtree(tmp_path / "out")  # the same job again (outputs rewritten) still resumes
    assert run_discovery(_config(inputs[0], tmp_path / "out", state_dir=str(state_dir))).resumed_from_round


def test_a_job_recorded_before_a_setting_existed_still_resumes(inputs, tmp_path):
    """A state whose identity lacks a setting added since (``query``, at its default None, as in
    the demo's state of an earlier release) is the same job: it resumes, not "a different job
    identity" with no name."""
    output = tmp_path / "out"
    run_discovery(_config(inputs[0], output))
    store = StateStore(f"{output}.state")
    state = store.load()
    recorded = json.loads(state.sampling_identity)
    assert "query" in recorded and recorded["query"] is None
    del recorded["query"]
    state.sampling_identity = json.dumps(recorded, sort_keys=True, separators=(",", ":"))
    assert _config(inputs[0], output).resume_mismatches(state, Trie.from_proto(state.trie).encoder) == []
    recorded["epsilon"] = 99.0  # a real difference is still one
    state.sampling_identity = json.dumps(recorded, sort_keys=True, separators=(",", ":"))
    assert _config(inputs[0], output).resume_mismatches(state, Trie.from_proto(state.trie).encoder)


def test_a_protocol_s_own_settings_key_only_that_protocol():
    # The noisy rounds' --alphabet and --false-prefixes joined every protocol's identity when they
    # were added, so a state written before (the demo's, a scheduled run's) was refused on resume
    # and every protocol's keys changed; they key --protocol noisy-rounds alone.
    from triehh_beam.job.settings.identity import sampling_identity

    for protocol in ("triehh", "triehh++", "sample-threshold", "partition-selection"):
        keyed = json.loads(sampling_identity(_config("in.jsonl", "out", protocol=protocol,
                                                     **({} if protocol == "triehh" else
                                                        dict(theta=None, batch_size=None,
                                                             allow_no_guarantee=False)))))
        assert not {"alphabet", "false_prefixes"} & set(keyed), (protocol, keyed)
    noisy = DiscoveryConfig(input_pattern="in.jsonl", output_dir="out", epsilon=1.0, delta=1e-6, max_length=2,
                            seed=SEED, protocol="noisy-rounds", alphabet="ab")
    assert json.loads(sampling_identity(noisy))["alphabet"] == "ab"
