"""discover's unit-size advice (issue 16 item 2) from a job's plan: the protocol layer's advice
for the plan's n, target and the user's unit size, its frequencies private unless n is declared
public, and no advice where the planners have nothing to compare (theta fixed by hand, integer
items in units of bits). One end-to-end run checks where the line goes."""

import pytest

from triehh_beam.cli import main
from triehh_beam.job.release import outputs
from triehh_beam.job.release.planning import plan_for_census
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.protocol.planning import unit_advice

SEED = bytes(range(32))


def _config(**fields) -> DiscoveryConfig:
    values = dict(input_pattern="in.jsonl", output_dir="out", epsilon=4.0, delta=1e-6,
                  max_length=10, seed=SEED)
    values.update(fields)
    return DiscoveryConfig(**{"protocol": "triehh", **values})


def test_a_private_population_keeps_the_frequencies_private():
    config = _config()
    plan = plan_for_census(config, 5000)
    line, private = outputs.unit_advice_message(plan, config)
    advice = unit_advice.discover_advice(5000, 4.0, 1e-6, 1, 10)
    assert advice is not None and advice.recommended.unit_size == 3
    assert line == advice.line(with_figures=False)
    assert "%" not in line.replace("90%", "") and "5,000" not in line
    assert private == (advice.detail(), advice.figures())
    assert unit_advice.percent(advice.recommended.fraction_for(0.9)) in private[0]


def test_a_public_population_shows_the_frequencies():
    config = _config(population=5000)
    plan = plan_for_census(config, 5000)
    line, private = outputs.unit_advice_message(plan, config)
    assert private is None
    assert line == unit_advice.discover_advice(5000, 4.0, 1e-6, 1, 10).line(with_figures=True)


def test_no_advice_when_the_choice_is_near_the_best():
    config = _config(max_length=4, unit_size=3)
    assert outputs.unit_advice_message(plan_for_census(config, 5000), config) is None


@pytest.mark.parametrize("fields", [
    dict(theta=10, batch_size=100),  # fixed by hand: rule "fixed", nothing planned to compare
    dict(item_kind="int", int_bits=8, max_length=9),  # units of bits, not characters
])
def test_no_advice_where_the_planners_compare_nothing(fields):
    config = _config(**fields)
    plan = plan_for_census(config, 5000)
    assert outputs.unit_advice_message(plan, config) is None


@pytest.fixture(scope="module")
def records(tmp_path_factory, make_population):
    directory = tmp_path_factory.mktemp("advice-records")
    return make_population(2000, max_chars=3, vocabulary=60, exponent=1.5).write(directory, name="users")


def test_discover_prints_the_advice_after_its_plan_marked_private(records, tmp_path, capsys):
    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    code = main(["discover", "--protocol", "triehh++", "--input", records, "--output", str(tmp_path / "out"), "--epsilon", "4",
                 "--delta", "1e-6", "--max-length", "10", "--seed-file", str(seed), "--verbose"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    advice = unit_advice.discover_advice(2000, 4.0, 1e-6, 1, 10, protocol="triehh++")
    assert lines[at + 1] == f"{advice.line(with_figures=False)} [private: {advice.detail()}]"


def test_a_triehh_plus_plus_job_gets_the_advice_of_its_own_protocol():
    # Its plan records "sample-and-threshold" as the rule: the advice still compares TrieHH++'s
    # unit sizes (it returned nothing before, silently).
    config = _config(protocol="triehh++", delta=1e-8)
    plan = plan_for_census(config, 100_000)
    line, _ = outputs.unit_advice_message(plan, config)
    advice = unit_advice.discover_advice(100_000, 4.0, 1e-8, 1, 10, protocol="triehh++")
    assert advice is not None and line == advice.line(with_figures=False)
