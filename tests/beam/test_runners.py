"""The default runner is the in-process FnApiRunner and never reaches out to the network."""

import socket

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to

from triehh_beam.beam import runners


@pytest.mark.parametrize("flags", [[], ["--runner=DirectRunner"]])
def test_default_and_direct_mean_the_in_process_runner(flags):
    pipeline = runners.make_pipeline(PipelineOptions(flags))
    assert isinstance(pipeline.runner, FnApiRunner)


def test_other_runners_pass_through():
    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=localhost:1"])
    assert not runners.uses_in_process_runner(options)


def test_a_default_run_makes_no_network_connection_and_never_starts_prism(monkeypatch):
    # Beam's DirectRunner fails here at the name lookup of the Prism download host, before
    # any connect(): guard both.
    attempts = []

    def refuse(what):
        def guarded(*args, **kwargs):
            attempts.append((what, args[:2]))
            raise OSError(f"test forbids network access ({what} {args[:2]})")

        return guarded

    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    from apache_beam.runners.portability import prism_runner

    def no_prism(*args, **kwargs):
        raise AssertionError("the Prism runner (which downloads a binary) was started")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", no_prism)
    pipeline = runners.make_pipeline(PipelineOptions([]))
    squares = pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * x)
    assert_that(squares, equal_to([1, 4, 9]))
    pipeline.run().wait_until_finish()
    assert attempts == []


def test_unknown_pipeline_args_are_what_no_options_class_defines():
    argv = ["--runner", "DataflowRunner", "--project=p", "--direct_num_workers=2", "--ledger-dir", "x",
            "--budget_epsilon=3", "--no_use_public_ips"]
    assert runners.unknown_pipeline_args(argv) == ["--ledger-dir", "--budget_epsilon"]
    assert runners.unknown_pipeline_args(["--runner=FlinkRunner", "--flink_master=host:8081"]) == []
    assert runners.unknown_pipeline_args(["stray"]) == ["stray"]
