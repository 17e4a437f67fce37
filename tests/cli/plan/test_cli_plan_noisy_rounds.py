"""`triehh plan --protocol noisy-rounds` (issue 41): its noise per round and accountant (the
protocol's plan), its thresholds for the first round and a frontier of 100, the holders of a
worst-case item for 50/90/99% (``holders_for`` over those rounds' candidates, and the same as the
comparison table's row), every protocol beside it; flags of other plans refused in one line; the
discover advice line naming it where a TrieHH++ plan needs more holders."""

import contextlib
import io
import json

import pytest

from triehh_beam import cli
from triehh_beam.job.release.partition_outputs import central_advice
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.accounting import sample_threshold
from triehh_beam.protocol.central.noisy_rounds import plan_noisy_rounds
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold

TARGET = ["--population", "100000", "--epsilon", "0.5", "--delta", "1e-8", "--max-length", "4", "--unit-size", "3"]


def _plan(*extra):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["plan", *TARGET, "--protocol", "noisy-rounds", *extra])
    return code, out.getvalue(), err.getvalue()


def test_the_plan_shows_its_noise_thresholds_holders_and_every_protocol():
    code, out, err = _plan("--json")
    assert code == 0, err
    report = json.loads(out)
    plan = plan_noisy_rounds(0.5, 1e-8, 4)
    assert (report["round_epsilon"], report["accountant"]) == (plan.round_epsilon, plan.accountant)
    units = 26 + 26**2 + 26**3  # a-z units of 1 to 3 letters (the root has no end marker)
    candidates = [units] + [100 * (units + 1)] * 3
    assert (report["first_threshold"], report["threshold"]) == (plan.threshold(units), plan.threshold(candidates[1]))
    assert (report["first_threshold"], report["threshold"]) == (85, 122)  # docs/protocol.md §8
    holders = [r["count"] for r in report["release"]]
    assert holders == [plan.holders_for(p, candidates) for p in (0.5, 0.9, 0.99)] and holders[1] == 143
    rows = {r["protocol"]: r for r in report["protocols"]}
    assert rows["noisy-rounds"]["holders_90"] == holders[1] and rows["triehh++"]["holders_90"] == 641
    code, text, err = _plan()
    assert code == 0 and "federated refuses it" in text and "discrete Laplace, epsilon 0.125" in text


@pytest.mark.parametrize("flag", [["--accounting", "exact"], ["--selection-share", "0.5"], ["--rule", "corollary1"]])
def test_other_plans_flags_are_refused_in_one_line(flag):
    code, _, err = _plan(*flag)
    assert code == 2 and "has no meaning with --protocol noisy-rounds" in err and len(err.strip().splitlines()) == 1


def test_the_advice_names_noisy_rounds_where_triehh_pp_needs_more_holders():
    st = plan_sample_threshold(0.5, 1e-8, 4)
    plan = state_pb2.PrivacyPlan(protocol="triehh++", target_epsilon=0.5, target_delta=1e-8, max_length=4,
                                 sample_probability=st.sampling_probability, theta=st.tau)
    line = central_advice(plan, unit_size=3)
    theirs = sample_threshold.min_holders(0.9, st.sampling_probability, st.tau, 4)
    assert "--protocol noisy-rounds releases it with 143" in line and f"needs {theirs:,}" in line
    noisy = state_pb2.PrivacyPlan(protocol="noisy-rounds", target_epsilon=0.5, target_delta=1e-8, max_length=4,
                                  sample_probability=1.0)
    assert central_advice(noisy, unit_size=3) is None  # central itself: no advice
