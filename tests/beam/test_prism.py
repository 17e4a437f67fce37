"""The product finds a local Prism binary itself ($TRIEHH_PRISM, then PATH, then the cache
directory .ci/run installs to) or refuses in one line naming the ``go install`` command: Beam never
downloads one. And which runners' workers run on this machine, and which can use a local state."""

import pathlib
import stat

import pytest
from apache_beam.options.pipeline_options import PipelineOptions, PrismRunnerOptions

from triehh_beam.beam import prism, runners


def _binary(directory, name="prism"):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def no_prism_anywhere(tmp_path, monkeypatch):
    """An environment with no Prism: no $TRIEHH_PRISM, an empty PATH, an empty cache."""
    monkeypatch.delenv(prism.PRISM_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def test_without_any_prism_the_lookup_refuses_in_one_line_naming_go_install(no_prism_anywhere):
    with pytest.raises(prism.PrismNotFoundError) as refused:
        prism.find_prism()
    message = str(refused.value)
    assert "\n" not in message
    assert "go install github.com/apache/beam/sdks/v2/go/cmd/prism@v2.77" in message
    assert f"GOBIN={no_prism_anywhere / 'cache' / 'triehh-beam' / 'prism'}" in message


def test_a_prism_pipeline_without_a_binary_is_refused_before_beam_could_download_one(no_prism_anywhere, monkeypatch):
    from apache_beam.runners.portability import prism_runner

    def no_download(*args, **kwargs):
        raise AssertionError("Beam was asked to download Prism")

    monkeypatch.setattr(prism_runner.PrismJobServer, "_download_to_local_path", no_download)
    with pytest.raises(prism.PrismNotFoundError):
        runners.make_pipeline(PipelineOptions(["--runner=PrismRunner"]))


def test_the_cache_then_path_then_the_environment_variable_win(no_prism_anywhere, monkeypatch):
    tmp = no_prism_anywhere
    cached = _binary(pathlib.Path(prism.install_dir()))
    assert prism.find_prism() == cached
    on_path = _binary(tmp / "bin")
    monkeypatch.setenv("PATH", str(tmp / "bin"))
    assert prism.find_prism() == on_path
    named = _binary(tmp / "elsewhere", "my-prism")
    monkeypatch.setenv(prism.PRISM_ENV, named)
    assert prism.find_prism() == named
    monkeypatch.setenv(prism.PRISM_ENV, str(tmp / "missing"))
    with pytest.raises(prism.PrismNotFoundError, match=r"\$TRIEHH_PRISM is .*missing, which is not an executable"):
        prism.find_prism()


def test_with_local_prism_names_the_binary_in_a_copy_and_keeps_an_explicit_location(no_prism_anywhere, monkeypatch):
    named = _binary(no_prism_anywhere / "bin")
    monkeypatch.setenv(prism.PRISM_ENV, named)
    options = PipelineOptions(["--runner=PrismRunner", "--prism_log_level=warn"])
    resolved = runners.with_local_prism(options)
    assert resolved.view_as(PrismRunnerOptions).prism_location == named
    assert resolved.view_as(PrismRunnerOptions).prism_log_level == "warn"
    assert options.view_as(PrismRunnerOptions).prism_location is None  # the caller's, untouched
    explicit = PipelineOptions(["--runner=prism", "--prism_location=/opt/prism"])
    assert runners.with_local_prism(explicit) is explicit
    other = PipelineOptions(["--runner=DataflowRunner"])
    assert runners.with_local_prism(other) is other


# (flags, workers on this machine, a local state directory allowed)
@pytest.mark.parametrize("flags, here, local_state", [
    ([], True, True),
    (["--runner=DirectRunner", "--direct_running_mode=multi_processing"], True, True),
    (["--runner=PrismRunner"], True, True),  # LOOPBACK: the workers are this process's threads
    (["--runner=prism", "--environment_type=PROCESS"], True, True),
    (["--runner=PrismRunner", "--environment_type=EXTERNAL", "--environment_config=localhost:5000"], True, True),
    # A worker pool elsewhere, run by the team, may mount the state at the same path (deploy/flink).
    (["--runner=PrismRunner", "--environment_type=EXTERNAL", "--environment_config=10.1.2.3:5000"], False, True),
    (["--runner=PrismRunner", "--environment_type=DOCKER"], False, False),
    (["--runner=PrismRunner", "--job_endpoint=prism.internal:8073", "--environment_type=PROCESS"], False, True),
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], False, False),  # DOCKER by default
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=LOOPBACK"], True, True),
    (["--runner=PortableRunner", "--job_endpoint=[::1]:8099", "--environment_type=EXTERNAL",
      "--environment_config=127.0.0.1:5000"], True, True),
    (["--runner=PortableRunner", "--job_endpoint=jobserver:8099", "--environment_type=EXTERNAL",
      "--environment_config=localhost:50000"], False, True),  # deploy/flink's compose
    (["--runner=FlinkRunner"], True, True),  # a local Flink master: LOOPBACK workers
    (["--runner=FlinkRunner", "--flink_master=flink:8081"], False, False),  # DOCKER workers
    (["--runner=DataflowRunner"], False, False),
    (["--runner=DataflowRunner", "--dry_run=True"], False, True),  # translated offline: no worker runs
    (["--runner=DataflowRunner", "--environment_type=EXTERNAL"], False, False),
    (["--runner=SparkRunner"], False, False),
    (["--runner=SamzaRunner"], False, False),
])
def test_which_runners_workers_run_here_and_which_reach_a_local_state(flags, here, local_state):
    options = PipelineOptions(flags)
    assert runners.workers_on_this_machine(options) is here
    assert runners.local_state_reachable(options) is local_state


def test_the_runner_kind_is_beams_name_resolution():
    for name in ("PrismRunner", "prism", "prismrunner", "apache_beam.runners.portability.prism_runner.PrismRunner"):
        assert runners.uses_prism(PipelineOptions([f"--runner={name}"]))
    assert not runners.uses_prism(PipelineOptions(["--runner=PortableRunner"]))
    assert runners.runner_kind(PipelineOptions([])) == ""
