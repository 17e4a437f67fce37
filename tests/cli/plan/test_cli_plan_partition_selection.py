"""`triehh plan --protocol partition-selection` (issue 41): its split and the holders for 50/90/99%
(the optimal keep probability's), every protocol beside it at the same target with the trust model
each fits; the central-only protocol refused by the federated server; discover's advice line
naming it where it needs fewer holders."""

import contextlib
import io
import json

import pytest

from triehh_beam import cli
from triehh_beam.job.federated.server import FederatedServer
from triehh_beam.job.release.partition_outputs import central_advice
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.accounting import sample_threshold
from triehh_beam.protocol.central.noisy_rounds import plan_noisy_rounds
from triehh_beam.protocol.central.partition_selection import holders_for
from triehh_beam.protocol.central.whole_items import plan_whole_items

TARGET = ["--population", "1000000", "--epsilon", "1", "--delta", "1e-8", "--max-length", "10"]


def _plan(*extra):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["plan", *TARGET, "--protocol", "partition-selection", *extra])
    return code, out.getvalue(), err.getvalue()


def test_the_plan_shows_its_split_holders_and_every_protocol_beside_it():
    code, out, err = _plan("--json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["selection_epsilon"], report["count_epsilon"], report["item_delta"]) == (0.5, 0.5, 1e-8)
    assert [r["count"] for r in report["release"]] == [holders_for(p, 0.5, 1e-8) for p in (0.5, 0.9, 0.99)]
    assert [r["count"] for r in report["release"]][:2] == [35, 38]
    rows = {(r["protocol"], r["variant"]): r for r in report["protocols"]}
    assert (rows[("partition-selection", "items only")]["holders_90"]) == 20
    whole = plan_whole_items(1.0, 1e-8)
    assert rows[("sample-threshold", "with counts")]["holders_90"] == sample_threshold.min_holders(
        0.9, whole.sampling_probability, whole.tau, 1) == 98
    assert rows[("partition-selection", "items only")]["trust_model"] == "central only (discover)"
    assert rows[("triehh++", "10 rounds")]["trust_model"] == "central or federated"
    # noisy prefix rounds (unit size 1 here: 26 letters + the end marker; the root has no end marker)
    noisy = rows[("noisy-rounds", "10 rounds, a-z, frontier 100")]
    plan = plan_noisy_rounds(1.0, 1e-8, 10)
    assert noisy["holders_90"] == plan.holders_for(0.9, [26] + [2700] * 9) and noisy["holders_90"] > 0
    assert noisy["trust_model"].startswith("central only")
    code, text, err = _plan()
    assert code == 0 and "federated refuses it" in text and "Every protocol at this target" in text


@pytest.mark.parametrize("extra, needle", [(["--accounting", "exact"], "--accounting has no meaning"),
                                           (["--selection-share", "0"], "selection share must be in (0, 1]")])
def test_refusals(extra, needle):
    code, _, err = _plan(*extra)
    assert code == 2 and needle in err


def test_its_flags_are_refused_with_another_protocol():
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(["plan", *TARGET, "--max-items-per-user", "2"])
    assert code == 2 and "--max-items-per-user is --protocol partition-selection's" in err.getvalue()


def test_the_federated_server_refuses_the_central_only_protocol(tmp_path):
    config = DiscoveryConfig(input_pattern="unused", output_dir=str(tmp_path / "o"), epsilon=1.0, delta=1e-8,
                             max_length=9, protocol="partition-selection")
    with pytest.raises(ValueError, match="central only"):
        FederatedServer(config, None, b"\x00" * 32, None, print, None)


def _plan_of(protocol, **fields):
    return state_pb2.PrivacyPlan(protocol=protocol, target_epsilon=1.0, target_delta=1e-8, max_length=10, **fields)


def test_the_advice_names_the_central_protocol_where_it_needs_fewer_holders():
    whole = plan_whole_items(1.0, 1e-8)
    line = central_advice(_plan_of("sample-threshold", sample_probability=whole.sampling_probability, theta=whole.tau))
    assert "--protocol partition-selection" in line and "held by 38 users" in line and "needs 98" in line
    assert central_advice(_plan_of("partition-selection", sample_probability=1.0, theta=1)) is None
    assert central_advice(_plan_of("triehh", theta=12, batch_size=1000)) is None  # n-dependent: not advised
    # A plan that already needs fewer holders than the optimum with counts: no advice.
    assert central_advice(_plan_of("sample-threshold", sample_probability=1.0, theta=10)) is None
