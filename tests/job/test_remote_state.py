"""A runner whose workers cannot reach a local path (Dataflow, DOCKER workers...) with a local
state directory is refused in one line before anything is written or charged: the
workers write into the state directory (the census spill, each round's tables, windows' state).
A gs:// state, runners whose workers run here (in-process, Prism's loopback workers, a loopback
worker pool) and a worker pool the team runs (which can mount the same path) pass."""

import hashlib

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.cli.dispatch import main
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import DiscoveryConfig, run_discovery
from triehh_beam.job.release.lifecycle import LocationError, check_locations

SEED = hashlib.sha256(b"triehh-beam remote state tests").digest()  # public: tests only
DATAFLOW = ["--runner=DataflowRunner", "--project=p", "--region=europe-west1", "--temp_location=gs://b/tmp"]


@pytest.fixture
def records(tmp_path):
    path = tmp_path / "in" / "records.jsonl"
    path.parent.mkdir()
    write_records(str(path), [(i, ["apple", "bread"][i % 2], 1) for i in range(400)])
    return path


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_dataflow_discovery_with_a_local_state_is_refused_before_anything_is_written(tmp_path, records):
    before = _files(tmp_path)
    config = DiscoveryConfig(input_pattern=str(records), output_dir=str(tmp_path / "out"), epsilon=3.0,
                             delta=1e-6, max_length=6, seed=SEED)
    with pytest.raises(LocationError, match=r"the state directory .*out\.state is on this machine, which the "
                                            r"workers of --runner=DataflowRunner cannot reach .*gs://"):
        run_discovery(config, PipelineOptions(DATAFLOW))
    assert _files(tmp_path) == before  # no state, no ledger, no output


@pytest.mark.parametrize("command", [[], ["--dry-run"]])
def test_the_command_refuses_it_in_one_line_with_exit_code_2(tmp_path, records, capsys, command):
    before = _files(tmp_path)
    code = main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "3",
                 "--delta", "1e-6", "--max-length", "6", *command, *DATAFLOW])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "\n" not in err and "cannot reach" in err and "--state-dir gs://" in err
    assert _files(tmp_path) == before


@pytest.mark.parametrize("flags", [
    [],
    ["--runner=PrismRunner"],
    ["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=EXTERNAL",
     "--environment_config=localhost:5000"],
    # deploy/flink's compose: the team's worker pool mounts the same volume at the same path
    ["--runner=PortableRunner", "--job_endpoint=jobserver:8099", "--environment_type=EXTERNAL",
     "--environment_config=localhost:50000"],
])
def test_runners_whose_workers_run_here_keep_a_local_state(tmp_path, flags):
    check_locations(str(tmp_path / "out"), str(tmp_path / "out.state"), PipelineOptions(flags))


def test_a_gs_state_directory_passes_on_dataflow(tmp_path):
    check_locations("gs://bucket/out", "gs://private/state", PipelineOptions(DATAFLOW))
    with pytest.raises(LocationError):
        check_locations("gs://bucket/out", str(tmp_path / "state"), PipelineOptions(DATAFLOW))
