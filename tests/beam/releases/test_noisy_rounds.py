"""One noisy prefix round on Beam (issue 41): on every user's tables from the sampling pass at
p_s = 1 (users' records spread over batches, two shards), ``ReleaseNoisyRound`` releases exactly
what the in-memory round loop (``simulate_noisy_rounds``, same seed, identity and keys) releases in
that round, candidates and noisy counts, round after round on the loop's frontiers; the only
counter it adds is the released total, and no counter of the job equals n."""

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter

from tests.pipeline_checks import check_outputs
from tests.pipeline_factory import new_pipeline
from tests.skewed_records import ENCODERS, population as skewed_population, record_batches
from triehh_beam.beam.releases.noisy_rounds import ReleaseNoisyRound
from triehh_beam.beam.samples import sample_pass
from triehh_beam.protocol.central.noisy_release import NoisyRoundKeys, candidate_units
from triehh_beam.protocol.central.noisy_rounds import plan_noisy_rounds
from triehh_beam.protocol.items.encoding import is_terminated
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.reference.keyed_runs import encode_population
from triehh_beam.reference.noisy_rounds import simulate_noisy_rounds

ALPHABET = "abc"


def test_each_round_equals_the_in_memory_loop_and_no_counter_is_n():
    encoder = ENCODERS["text"]
    population = skewed_population("text", 23)
    sampler = Sampler(bytes(range(32)), b"noisy rounds job")
    plan = plan_noisy_rounds(4.0, 1e-6, encoder.max_length)
    expected = simulate_noisy_rounds(encode_population(population, encoder), encoder, sampler, plan, ALPHABET)
    assert len(expected.levels) >= 3, "a population where little is kept would prove little"
    keys = NoisyRoundKeys.derive(sampler.seed, sampler.identity)
    units = candidate_units(ALPHABET, encoder.unit_size, encoder.eos)
    frontiers = [frozenset({()})] + [frozenset(p for p in level if not is_terminated(p))
                                     for level in expected.levels[:-1]]

    def check(out, r):
        [(released, users)] = out["released"]
        assert users == len(population)
        assert dict(released) == {p: c for p, c in expected.released.items() if len(p) == r}, r
        assert released and all(c >= expected.thresholds[r - 1] for _, c in released)

    pipeline = new_pipeline()
    drawn = pipeline | beam.Create(record_batches(population, "text", size=41)) | sample_pass.SampleAllRounds(
        sampler.pass_keys(encoder.max_length), range(1, len(frontiers) + 1), None, len(population), encoder,
        False, shards=2, sample_probability=1.0)
    for r, frontier in enumerate(frontiers, start=1):
        released = (drawn["tables"]
                    | f"Round{r}" >> beam.Filter(lambda keyed, r=r: keyed[0] == r)
                    | f"Release{r}" >> ReleaseNoisyRound(plan, keys, frontier, units, r))
        check_outputs({"released": released}, lambda out, r=r: check(out, r), label=f"CheckRound{r}")
    result = pipeline.run()
    result.wait_until_finish()
    counters = [(c.key.step, c.key.metric.name, c.committed)
                for c in result.metrics().query(MetricsFilter().with_namespace("triehh"))["counters"]]
    released_total = sum(value for step, name, value in counters if name == "items_released")
    assert released_total == len(expected.released)
    # the sampling pass's counters and the released totals; nothing per candidate, nothing equal to n
    assert {name for _, name, _ in counters} <= {"records_ranked", "items_released"} | {
        f"round{r}.items_{why}" for r in range(1, 6) for why in ("too_long", "unencodable")}, counters
    assert len(population) not in {value for _, _, value in counters}, counters
