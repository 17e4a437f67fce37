"""TrieHH++'s Bernoulli samples in the one sampling pass (``SampleAllRounds(sample_probability=)``):
each round's tables hold exactly the users ``Sampler.bernoulli_sample`` draws (identified by their
keyed choice uniforms), whatever the shards and however a user's records are spread over batches;
each ``RoundSample`` is that size, never required (never short); the rounds on these tables with
tau keep exactly what ``simulate_sample_threshold`` keeps, round by round; p_s = 0 draws nobody."""

import glob

import pytest

import apache_beam as beam

from tests.pipeline_checks import check_outputs, run_pipeline
from tests.skewed_records import ENCODERS, population as skewed_population, record_batches
from triehh_beam.beam.rounds import sampled_rounds
from triehh_beam.beam.samples import sample_pass, samples
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.reference import simulation

TAU = 4


def _bernoulli_pass(batches, sampler, encoder, probability, tmp_path, shards, check):
    """The pass and the rounds on its samples: ``check({round: RoundSample}, {round: RoundResult})``
    inside the pipeline; returns the counters."""
    keys = sampler.pass_keys(encoder.max_length)

    def build(p):
        drawn = p | beam.Create(batches) | sample_pass.SampleAllRounds(
            keys, range(1, encoder.max_length + 1), None, 300, encoder, False, shards=shards,
            sample_probability=probability)
        drawn["tables"] | samples.WriteSampleTables(str(tmp_path))
        results = drawn["tables"] | sampled_rounds.RunAllRounds(
            1, encoder.max_length, TAU, frozenset({()}), sample_sizes=drawn["samples"])
        check_outputs({"sizes": drawn["samples"], "results": results},
                      lambda out: check(dict(out["sizes"]), dict(out["results"])))

    return run_pipeline(build)


def _drawn_uniforms(tmp_path, round_index):
    """The choice uniforms of every user in round ``round_index``'s written tables."""
    found = []
    for path in sorted(glob.glob(samples.round_pattern(str(tmp_path), round_index))):
        _, uniforms = samples.sequence_table(samples.read_sample_table(path))
        found.extend(uniforms.tolist())
    return sorted(found)


@pytest.mark.parametrize("shards", [1, 3])
def test_the_pass_draws_exactly_the_keyed_bernoulli_sample_and_the_rounds_equal_the_simulation(tmp_path, shards):
    encoder = ENCODERS["text"]
    population = skewed_population("text", 23)
    batches = record_batches(population, "text", size=41)  # a user's records spread over batches
    records = sum(b.num_rows for b in batches)
    sampler = Sampler(bytes(range(32)), b"bernoulli job")
    probability = 0.3
    expected = simulation.simulate_sample_threshold(population, encoder, TAU, probability, sampler)
    assert len(expected.levels) >= 2, "a population where little is kept would prove little"
    drawn = {r: sampler.bernoulli_sample(r, population, probability)
             for r in range(1, encoder.max_length + 1)}

    def check(sizes, results):
        assert sorted(sizes) == sorted(results) == list(range(1, encoder.max_length + 1))
        for r, users in drawn.items():
            assert sizes[r] == sample_pass.RoundSample(r, len(users), None, records)
            assert not sizes[r].sample_short and not results[r].sample_short
            if r <= expected.rounds_run:
                assert results[r].users_sampled == expected.round_stats[r - 1].users_sampled == len(users)
        levels = tuple(frozenset(results[r].kept) for r in range(1, expected.rounds_run + 1))
        assert tuple(level for level in levels if level) == expected.levels

    counters = _bernoulli_pass(batches, sampler, encoder, probability, tmp_path, shards, check)
    for r, users in drawn.items():
        keys = sampler.round_keys(r)
        assert _drawn_uniforms(tmp_path, r) == sorted(keys.choice_uniforms(users).tolist()), r
        if r <= expected.rounds_run:
            assert counters[f"round{r}.votes_cast"] == expected.round_stats[r - 1].votes_cast
    drawn_sizes = [len(users) for users in drawn.values()]
    assert len(set(drawn_sizes)) > 1, "a Bernoulli sample's size varies from round to round"
    # Sample sizes are Binomial(n, p): within 5 standard deviations of n p (n = 300, p = 0.3).
    n = len(population)
    assert all(abs(k - n * probability) < 5 * (n * probability * (1 - probability)) ** 0.5 for k in drawn_sizes)


def test_a_probability_below_two_to_the_minus_64_draws_nobody(tmp_path):
    encoder = ENCODERS["text"]
    population = skewed_population("text", 5, users=40)
    batches = record_batches(population, "text")

    def check(sizes, results):
        assert {r: s.users_sampled for r, s in sizes.items()} == {r: 0 for r in range(1, encoder.max_length + 1)}
        assert results and all(result.kept == () for result in results.values())

    _bernoulli_pass(batches, Sampler(bytes(32), b"nobody"), encoder, 0.0, tmp_path, None, check)
    assert glob.glob(str(tmp_path / "*" / "*")) == []


def test_a_sample_size_or_a_probability_not_both():
    keys = Sampler(bytes(32)).pass_keys(3)
    encoder = ENCODERS["text"]
    with pytest.raises(ValueError, match="not both"):
        sample_pass.SampleAllRounds(keys, [1], 5, 10, encoder, sample_probability=0.5)
    with pytest.raises(ValueError, match="not both"):
        sample_pass.SampleAllRounds(keys, [1], None, 10, encoder)
