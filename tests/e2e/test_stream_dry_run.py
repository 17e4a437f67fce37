"""``triehh stream`` on Dataflow, offline: the whole streaming graph (Pub/Sub read, the late-record
gate with its timer, per-window census, plan and charge, sampling pass, rounds and release, the
window's values meeting its records by key)
translates to a streaming Dataflow job with ``--dry_run=True``, reaching nothing off loopback."""

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.dataflow.internal import apiclient

from tests.e2e.test_dataflow_dry_run import DATAFLOW_DRY_RUN, offline, step_names  # noqa: F401 (fixture)
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.windows import stream

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("protocol", ["triehh", "triehh++"])
def test_the_streaming_graph_translates_to_a_streaming_dataflow_job(tmp_path, offline, protocol):  # noqa: F811
    config = DiscoveryConfig(input_pattern="pubsub", output_dir=str(tmp_path / "out"), epsilon=4.0, delta=1e-10,
                             max_length=4, window=3600, allowed_lateness=600, seed=bytes(range(32)),
                             state_dir=str(tmp_path / "state"), protocol=protocol, population=5000,
                             windows=(1_763_892_000_000_000, 1_763_892_000_000_000 + 24 * 3600 * 1_000_000))
    source = stream.StreamSource("projects/triehh-test/subscriptions/records", "json", "event_time")
    ran = stream.run_stream(config, source, PipelineOptions(DATAFLOW_DRY_RUN), progress=lambda line: None)
    job = ran.result.job
    assert job.proto.type_ == apiclient.dataflow.JobType.JOB_TYPE_STREAMING
    names = step_names(job)
    for step in ("ReadFromPubSub", "ParseMessages", "GateLateRecords/UntilClose", "GateLateRecords/Panes",
                 "KeepDeclaredWindows", "Census/DeclaredWindows", "PlanAndCharge", "SampleAllRounds/MeetPlan",
                 "SampleAllRounds/RankAllRounds", "Rounds/Vote", "ChainRounds", "Release", "WriteDeadLetters"):
        assert any(name == step or name.startswith(step + "/") for name in names), step
    # TrieHH's bottom-m per window, or TrieHH++'s Bernoulli sample (no bottom-m at all).
    sampled = "SampleAllRounds/UsersPerRound" if protocol == "triehh++" else "SampleAllRounds/BottomM"
    unused = "SampleAllRounds/BottomM" if protocol == "triehh++" else "SampleAllRounds/UsersPerRound"
    assert any(name.startswith(sampled) for name in names) and not any(name.startswith(unused) for name in names)
    assert ran.reports == [] and offline == []


def test_two_plans_give_a_streaming_graph_the_same_step_names(tmp_path, offline):  # noqa: F811
    """A running stream is updated in place (Dataflow's --update) only if its steps keep their
    names: a plan's values (theta, m, p_s) are never in them. Two plans of TrieHH++ (p_s and tau
    differ) and of TrieHH (m and theta differ) give the same names."""
    def names(protocol, epsilon, population, where):
        config = DiscoveryConfig(input_pattern="pubsub", output_dir=str(tmp_path / where / "out"), epsilon=epsilon,
                                 delta=1e-10, max_length=4, window=3600, seed=bytes(range(32)),
                                 state_dir=str(tmp_path / where / "state"), protocol=protocol, population=population,
                                 windows=(1_763_892_000_000_000, None))
        source = stream.StreamSource("projects/triehh-test/subscriptions/records", "json", "event_time")
        ran = stream.run_stream(config, source, PipelineOptions(DATAFLOW_DRY_RUN), progress=lambda line: None)
        return step_names(ran.result.job)

    for protocol in ("triehh", "triehh++"):
        first = names(protocol, 4.0, 5000, f"{protocol}-a")
        second = names(protocol, 2.0, 20000, f"{protocol}-b")
        assert first == second, sorted(first ^ second)
        assert any("PruneBelowTheta" in name for name in first)
    # A dry run charges nothing.
    assert offline == [] and not (tmp_path / "triehh-a" / "state" / "ledger.jsonl").exists()
