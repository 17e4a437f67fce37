"""The federated trust model (issue 24, findings 4, 5 and 7): what every published guarantee
says it assumes of devices and what the server sees, and a report goal below 1 refused while a
guarantee is claimed (an early close lets one device's report cut off another's). No Pub/Sub:
both are decided before anything is announced or charged."""

from __future__ import annotations

import json

import pytest

from triehh_beam.job.federated import serve as federated, outputs as federated_outputs
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.protocol.federated.selection import Registry

SEED = bytes(range(100, 132))


def _config(tmp_path, **changes) -> DiscoveryConfig:
    registry_path = tmp_path / "registry.txt"
    registry_path.write_bytes(b"".join(b"device-%d\n" % i for i in range(4000)))
    return DiscoveryConfig(input_pattern=str(registry_path), output_dir=str(tmp_path / "out"), epsilon=8.0,
                           delta=1e-6, max_length=8, seed=SEED, ledger_dir=str(tmp_path / "ledger"), **{"protocol": "triehh", **changes})


def _registry() -> Registry:
    return Registry.from_ids([b"device-%d" % i for i in range(4000)])


@pytest.mark.parametrize("goal", [0.9, 0.5])
def test_a_report_goal_below_one_is_refused_before_anything_is_charged(tmp_path, goal):
    config = _config(tmp_path)
    source = federated.FederatedSource(_registry(), "projects/p/topics/t", "projects/p/subscriptions/s",
                                       report_goal=goal)
    published = []
    with pytest.raises(ValueError, match="--report-goal .* cut off another's vote"):
        federated.run_federated(config, source, lambda topic, messages: published.append(topic),
                                progress=lambda line: None)
    assert published == [] and not (tmp_path / "ledger").exists()


@pytest.mark.parametrize("estimated", [False, True])
def test_the_published_section_names_the_device_assumption_and_what_the_server_sees(tmp_path, estimated):
    section = federated_outputs.published_section(_config(tmp_path), estimated)
    text = json.dumps(section)
    for said in ("honest, non-colluding devices", "theta - 1", "one enrolled device per person",
                 "linked to the token"):
        assert said in text, said
    assert "honest, non-colluding" in section["mode"] and "honest, non-colluding" in section["guarantee_with_dropouts"]
    assert ("chosen leaf, linked to its token" in section["mode"]) == estimated
    assert ("each reporting device's chosen leaf" in section["server_sees"]) == estimated
    assert "cut off another's vote" in section["guarantee_with_dropouts"]


def test_the_console_line_names_the_assumption():
    line = federated_outputs.console_guarantee(estimated=True)
    assert "honest, non-colluding devices" in line and "chosen leaf" in line and "linked to its token" in line
