"""Every setting defined once (``job.settings.config.SETTINGS``): ``triehh discover`` and ``triehh scheduled``
accept each one and build the same configuration from it, unknown keys are refused in one line,
the recorded ``InputSpec`` matches the identity settings, and a resume refuses a change of
exactly the identity settings. Parametrised over the definitions: a new setting is covered."""

import dataclasses
import json

import pytest

from triehh_beam import cli
from triehh_beam.cli import discover, scheduled
from triehh_beam.job.settings import config as config_lib
from triehh_beam.job.settings.config import SETTINGS, DiscoveryConfig
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.rounds.trie import Trie

from tests.published_releases import release_document

DATE = "2026-03-04"
SEED = bytes(range(1, 33))
OTHER_SEED = bytes(range(50, 82))
# Settings that only mean something together with another one (validation refuses them alone,
# or the encoder ignores them for text items).
COMPANIONS = {
    "theta": {"batch_size": "300"},
    "batch_size": {"theta": "12"},
    "int_bits": {"item_kind": "int"},
    "bytes_encoding": {"item_kind": "bytes"},
    "budget_epsilon": {"ledger_dir": "private/ledger"},
    "budget_delta": {"ledger_dir": "private/ledger"},
    "budget_period": {"ledger_dir": "private/ledger", "budget_epsilon": "20"},
    "accounting": {"protocol": "triehh++"},  # TrieHH refuses it: Theorem 1 is its only accounting
    "max_items_per_user": {"protocol": "partition-selection"},  # the other protocols refuse them
    "selection_share": {"protocol": "partition-selection"},
    "alphabet": {"protocol": "noisy-rounds"},
    "false_prefixes": {"protocol": "noisy-rounds"},
}
# Settings given instead of another one (validation refuses both).
INSTEAD_OF = {"query": "input_pattern"}
# TrieHH, so that its own settings (theta, batch_size, rule) are accepted; not the default (TrieHH++).
BASE = {"input_pattern": "records/day.jsonl", "epsilon": "4", "delta": "1e-6", "max_length": "5", "protocol": "triehh"}
IDS = [item.name for item in SETTINGS]


def _flag(item, text):
    if item.is_switch:
        return [item.flag]
    return [item.flag, text]


def _toml_value(item, text):
    if item.is_switch:
        return "true"
    if item.parse in (int, float):
        return text
    return json.dumps(text)


def _values(item, tmp_path):
    """{setting name: text} for a run that sets ``item`` to its example value."""
    values = dict(BASE)
    values.pop(INSTEAD_OF.get(item.name), None)
    values.update(COMPANIONS.get(item.name, {}))
    example = item.example
    if item.name == "seed":
        seed_file = tmp_path / "seed.bin"
        seed_file.write_bytes(OTHER_SEED)
        example = str(seed_file)
    if item.name != "output_dir":  # given as --output DIR/DATE, and as output_root = DIR
        values[item.name] = example
    return values


def _from_discover(values, output) -> DiscoveryConfig:
    argv = ["discover", "--output", output]
    for name, text in values.items():
        argv += _flag(config_lib.BY_NAME[name], text)
    args, extra = cli.build_parser().parse_known_args(argv)
    assert extra == []
    return discover.config_from_args(args)


def _from_scheduled(values, output_root, tmp_path) -> DiscoveryConfig:
    sections = {"discovery": [f"output_root = {json.dumps(output_root)}"], "budget": []}
    for name, text in values.items():
        item = config_lib.BY_NAME[name]
        sections[item.section].append(f"{item.key} = {_toml_value(item, text)}")
    path = tmp_path / "job.toml"
    path.write_text("".join(f"[{section}]\n" + "\n".join(lines) + "\n\n"
                            for section, lines in sections.items() if lines))
    return scheduled.run_config(scheduled.load_config(str(path)), DATE)


def test_every_field_of_the_config_is_a_setting_with_a_flag_and_an_example():
    assert [item.name for item in SETTINGS] == [f.name for f in dataclasses.fields(DiscoveryConfig)]
    assert len({item.flag for item in SETTINGS}) == len(SETTINGS)
    assert len({(item.section, item.key) for item in SETTINGS}) == len(SETTINGS)
    for item in SETTINGS:
        assert item.group in config_lib.GROUPS and item.help and item.example, item.name


@pytest.mark.parametrize("item", SETTINGS, ids=IDS)
def test_discover_and_scheduled_accept_every_setting_and_mean_the_same(item, tmp_path):
    values = _values(item, tmp_path)
    output_root = str(tmp_path / "runs")
    # Each date's state is its own directory, never inside output_root: state_dir/DATE, or
    # OUTPUT_ROOT.state/DATE by default; a discover run spells it out.
    flags = dict(values)
    flags["state_dir"] = f"{values.get('state_dir', output_root + '.state')}/{DATE}"
    from_flags = _from_discover(flags, f"{output_root}/{DATE}")
    from_file = _from_scheduled(values, output_root, tmp_path)
    assert from_file == from_flags
    # The example is not the default: the setting really reached the configuration.
    if item.name == "seed":
        assert from_file.seed == OTHER_SEED
    elif item.name == "output_dir":
        assert from_file.output_dir == f"{output_root}/{DATE}"
    elif item.name == "state_dir":
        assert from_file.state_dir == f"{item.example}/{DATE}"
    else:
        assert getattr(from_file, item.name) != item.default
        assert getattr(from_file, item.name) == item.field_value(
            True if item.is_switch else item.parse(values[item.name]))


@pytest.mark.parametrize("name", ["item_kind", "tokenize", "bytes_encoding", "dead_letter"])
def test_settings_the_allow_list_used_to_refuse_are_accepted(name, tmp_path):
    item = config_lib.BY_NAME[name]
    config = _from_scheduled(_values(item, tmp_path), str(tmp_path / "runs"), tmp_path)
    assert getattr(config, name) not in (None, False, item.default)


def test_date_is_substituted_in_every_text_value_of_discovery(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('[discovery]\ninput = "in/{date}/*.jsonl"\noutput_root = "runs"\nepsilon = 4\n'
                    'delta = 1e-6\nmax_length = 5\ndead_letter = "rejected/{date}.jsonl"\n')
    config = scheduled.run_config(scheduled.load_config(str(path)), DATE)
    assert (config.input_pattern, config.output_dir, config.dead_letter) == (
        f"in/{DATE}/*.jsonl", f"runs/{DATE}", f"rejected/{DATE}.jsonl")


@pytest.mark.parametrize(
    "text, message",
    [
        ("[discovery]\ncolour = 'blue'\n", "unknown [discovery] key(s) colour (accepted: "),
        ("[budget]\nepsilon = 1\nlifetime = 2\n",
         "unknown [budget] key(s) lifetime (accepted: delta, epsilon, ledger, period)"),
        ("[discovery]\nepsilon = 'lots'\n", "[discovery] epsilon: not a valid value 'lots'"),
        ("[discovery]\ntokenize = 'yes'\n", "[discovery] tokenize must be true or false"),
        ("[discovery]\nitem_type = 'float'\n", "[discovery] item_type must be one of text, bytes, int"),
        ("[discovery]\nmax_length = 5.5\n", "[discovery] max_length: not a valid value 5.5"),
    ],
    ids=["unknown-key", "unknown-budget-key", "bad-float", "bad-switch", "bad-choice", "bad-int"],
)
def test_bad_keys_and_values_are_refused_in_one_line(tmp_path, capsys, text, message):
    required = {"input": '"x"', "output_root": '"y"', "epsilon": "1", "delta": "1e-6", "max_length": "5"}
    lines = text.splitlines()
    if lines[0] == "[discovery]":
        given = {line.split(" = ")[0] for line in lines[1:]}
        lines += [f"{key} = {value}" for key, value in required.items() if key not in given]
    else:
        lines = ["[discovery]"] + [f"{key} = {value}" for key, value in required.items()] + lines
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    assert cli.main(["scheduled", "--config", str(path), "--date", DATE]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "y").exists()


def test_the_recorded_input_spec_is_exactly_the_input_identity_settings():
    recorded = {item.identity.split(".", 1)[1] for item in SETTINGS
                if item.identity and item.identity.startswith("input.")}
    assert recorded == {field.name for field in state_pb2.InputSpec.DESCRIPTOR.fields}


def _state_of(config: DiscoveryConfig) -> state_pb2.JobState:
    """The identity a new job records, as the driver's ``new_state`` writes it."""
    plan = state_pb2.PrivacyPlan(rule=config.recorded(config_lib.BY_NAME["rule"]), population=1000,
                                 max_length=config.max_length, target_epsilon=config.epsilon,
                                 target_delta=config.delta, theta=config.theta or 7,
                                 batch_size=config.batch_size or 99,
                                 protocol=config.recorded(config_lib.BY_NAME["protocol"]),
                                 accounting=config.recorded(config_lib.BY_NAME["accounting"]),
                                 estimate_epsilon=config.recorded(config_lib.BY_NAME["estimate_frequencies"]),
                                 max_items_per_user=config.recorded(config_lib.BY_NAME["max_items_per_user"]),
                                 selection_share=config.recorded(config_lib.BY_NAME["selection_share"]),
                                 alphabet=config.recorded(config_lib.BY_NAME["alphabet"]),
                                 false_prefixes=config.recorded(config_lib.BY_NAME["false_prefixes"]))
    return state_pb2.JobState(
        secret_seed=config.seed, input=config.input_spec(), plan=plan,
        truncate_long_items=config.truncate_long_items, trie=Trie.empty(config.encoder).to_proto(),
        ledger=config.resolved_ledger_dir, sampling_identity=config.sampling_identity().decode(),
    )


@pytest.mark.parametrize("item", SETTINGS, ids=IDS)
def test_a_resume_refuses_a_change_of_exactly_the_identity_settings(item, tmp_path):
    base = dict(input_pattern="records/day.jsonl", output_dir="out", epsilon=4.0, delta=1e-6,
                max_length=5, seed=SEED, ledger_dir="ledger")
    if item.name in INSTEAD_OF:  # started with another value of it instead
        base[INSTEAD_OF[item.name]] = None
        base[item.name] = "SELECT user_id, item FROM `my-proj.devices.records` WHERE day = '2026-03-03'"
    if item.name in ("int_bits", "bytes_encoding"):
        base["item_kind"] = COMPANIONS[item.name]["item_kind"]
    if item.name in ("theta", "batch_size"):
        base.update(theta=7, batch_size=99, allow_no_guarantee=True)
    if item.name == "budget_period":  # a period is of a budget
        base["budget_epsilon"] = 20.0
    if item.name in ("accounting", "max_items_per_user", "selection_share", "alphabet", "false_prefixes"):
        base["protocol"] = COMPANIONS[item.name]["protocol"]
    # Started as TrieHH (its settings apply), or under the default when the protocol is what changes.
    started = DiscoveryConfig(**{"protocol": "triehh++" if item.name == "protocol" else "triehh", **base})
    if item.name == "seed":
        changed_value = OTHER_SEED
    elif item.name == "deny_list":  # its value names a file the job reads
        released = tmp_path / "heavy_hitters.json"
        released.write_text(json.dumps(release_document(["to"])))
        changed_value = (str(released),)
    else:
        changed_value = item.field_value(True if item.is_switch else item.parse(item.example))
    changed = dataclasses.replace(started, **{item.name: changed_value})
    state = _state_of(started)
    encoder = Trie.from_proto(state.trie).encoder
    assert started.resume_mismatches(state, encoder) == []
    mismatches = changed.resume_mismatches(state, encoder)
    if item.identity is None:
        assert mismatches == [], item.name
    else:
        assert mismatches, item.name
        assert not any(OTHER_SEED.hex() in m or repr(OTHER_SEED) in m for m in mismatches)
