"""Every job of a discovery translates to a Dataflow job, offline (``DataflowRunner --dry_run``).

What Beam 2.77's ``DataflowRunner.run_pipeline`` does with ``--dry_run=True`` (read from
apache_beam/runners/dataflow/dataflow_runner.py and internal/apiclient.py):

  * it does everything up to the submission: Dataflow's PTransform overrides, the Docker
    environment (``--sdk_container_image`` or Beam's default image for this Python and Beam
    version), the staged-artifact list computed locally by the ``Stager`` (a pickled main
    session and the submission environment's package list, as local temp files), the Runner API
    pipeline proto, combiner packing and stage sorting, and an ``apiclient.Job`` (job name, type
    BATCH, labels) holding that proto;
  * it returns *before* ``DataflowApplicationClient`` is created: no credentials are looked up
    (``get_service_credentials``), nothing is staged to ``--temp_location``/``--staging_location``
    (the pipeline proto, ``pipeline.pb``, and the artifacts are uploaded only by
    ``create_job``), and no API call is made. A valid ``gs://`` temp location is only checked
    and string-joined. The returned ``PipelineResult`` is DONE, has ``.job`` (the
    ``apiclient.Job``) and no metrics.
  * So no offline flags are needed beyond the five below: ``--sdk_location=container`` is a
    no-op in 2.77 (same as the default) and ``--no_auth`` matters only for the API client,
    which a dry run never builds. Two things do reach the network while a graph is built:
    Beam's option validation, when neither ``--temp_location`` nor ``--staging_location`` is a
    valid ``gs://`` path (it looks for or creates a default bucket; pinned by a test below), and
    our own ``ReadRecordBatches``, which expands its file patterns with ``FileSystems.match``,
    so a ``gs://`` input would be listed from GCS. The tests read a local file; in production
    the launcher needs read access to the input bucket.

A dry run writes no output, and ``run_discovery`` reads each job's output back (the census
count, the prefixes a round kept) before it builds the next job, so it cannot run on a dry run.
The driver's ``submit_job_graphs`` builds and submits the census and every round's graph
without reading anything back (with the plan for a given population and the round-1 frontier);
the first test checks every job it produces. The second drives the real ``run_discovery`` loop
(real, growing frontiers) and stands in for the outputs by patching the driver's two private
read-back helpers. The last tests check ``deploy/dataflow/flex_launcher.py``.

The whole module runs with the network forbidden (only loopback allowed) and with the Dataflow
API client and Google credential lookup replaced by functions that fail the test.
"""

import json
import os
import re
import socket
import sys

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.dataflow.internal import apiclient

from triehh_beam.io.write import write_records
from triehh_beam.job.batch import driver
from triehh_beam.job.batch import jobs as jobs_lib
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.planning import planner

pytestmark = pytest.mark.slow  # whole discoveries in subprocesses or many rounds: see README, Tests

DATAFLOW_DRY_RUN = [
    "--runner=DataflowRunner",
    "--dry_run=True",
    "--project=triehh-test",
    "--region=us-central1",
    "--temp_location=gs://triehh-test/tmp",
]
DEFAULT_IMAGE = (
    f"gcr.io/cloud-dataflow/v1beta3/beam_python{sys.version_info.major}.{sys.version_info.minor}"
    f"_sdk:{beam.__version__}"
)
CUSTOM_IMAGE = "us-central1-docker.pkg.dev/triehh-test/triehh/triehh-beam:0.1.0"
SEED = bytes(range(32))
POPULATION = 1_000_000  # what the stand-in census "counts"
RECORDS = 1_500_000  # ... and the records it read, which every stand-in round then ranks
MAX_LENGTH = 4
LOOPBACK = ("localhost", "127.0.0.1", "::1")

CENSUS_STEPS = {
    "ReadRecords",
    "ReadRecords/ListFiles",
    "ReadRecords/SpreadFiles",
    "ReadRecords/SplitFiles",
    "ReadRecords/SpreadShards",
    "ReadRecords/ReadShards",
    "ReadRecords/UnreadableFiles",
    "UnreadableToJson",
    "WriteUnreadable",
    "TakeCensus",
    "TakeCensus/FingerprintAndSpill",
    "TakeCensus/SpillFilesPerGroup",
    "TakeCensus/GroupCensuses",
    "TakeCensus/Total",
    "Format",
    "Write",
    "Write/Write/WriteImpl/WriteBundles",
}


# The first read: the census's steps, and in the same read every round's candidates.
FIRST_READ_STEPS = CENSUS_STEPS | {"DrawCandidates", "DrawCandidates/RankAllRounds", "WriteCandidates",
                                   "WriteCandidates/Write"}


def sampling_steps(rounds: int = 0):
    """The stable step names of the cut of the candidates to samples
    (``graphs.build_sampling_from_candidates``); with ``rounds``, the rounds it runs in the same
    job (``--rounds-per-job all``, the default). It reads the candidates, never the records."""
    names = {
        "CutRounds",
        "CutRounds/Rounds",
        "CutRounds/CutEachRound",
        "WriteSummary",
    }
    if rounds:  # each round's tables voted once, a combine per prefix pruned at theta, in order
        names |= {"RunRounds", "RunRounds/EachTableOnce", "RunRounds/FirstFrontier", "RunRounds/Results",
                  "WriteLevels"}
        for r in range(1, rounds + 1):
            names |= {f"RunRounds/Round{r}/Vote", f"RunRounds/Round{r}/PruneBelowTheta",
                      f"RunRounds/Round{r}/RoundResult", f"RunRounds/Round{r}NextFrontier"}
    return names


def round_steps(r: int, m: int, theta: int):
    """The stable step names of round r on its sample (``graphs.build_sampled_round``): it reads
    its sample, never the records."""
    return {
        "ReadSample",
        "ReadSample/ReadParts",
        f"RunSampledRound({r})",
        f"RunSampledRound({r})/Frontier",
        f"RunSampledRound({r})/Round({r})/Vote",
        f"RunSampledRound({r})/Round({r})/PruneBelowTheta",
        f"RunSampledRound({r})/Round({r})/RoundResult",
        "ToJson",
        "Write",
        "Write/Write/WriteImpl/WriteBundles",
    }


# ---- offline guards -------------------------------------------------------------------------------


class NetworkForbidden(BaseException):
    """A BaseException, so that client libraries' retry loops (which catch Exception/OSError)
    cannot swallow it and retry for minutes: the first attempt fails the test."""


@pytest.fixture
def offline(monkeypatch):
    """Forbids non-loopback name lookups and connections, Google credential lookups and the
    Dataflow API client; returns the list of attempts (the tests assert it stays empty)."""
    attempts = []
    getaddrinfo, connect = socket.getaddrinfo, socket.socket.connect

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host not in LOOPBACK:
            attempts.append(("getaddrinfo", host))
            raise NetworkForbidden(f"test forbids network access (getaddrinfo {host!r})")
        return getaddrinfo(host, *args, **kwargs)

    def guarded_connect(self, address):
        if not (isinstance(address, tuple) and address[0] in LOOPBACK):
            attempts.append(("connect", address))
            raise NetworkForbidden(f"test forbids network access (connect {address!r})")
        return connect(self, address)

    def forbidden(what):
        def refuse(*args, **kwargs):
            attempts.append((what, args[:1]))
            raise NetworkForbidden(f"a dry run must not call {what}")

        return refuse

    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(apiclient, "DataflowApplicationClient", forbidden("DataflowApplicationClient"))
    monkeypatch.setattr(apiclient, "get_service_credentials", forbidden("get_service_credentials"))
    import google.auth

    monkeypatch.setattr(google.auth, "default", forbidden("google.auth.default"))
    return attempts


@pytest.fixture
def records(tmp_path):
    path = str(tmp_path / "records.parquet")
    write_records(path, [(1, "aa"), (2, "ab"), (3, "b")])
    return path


# ---- inspecting a dry-run job -----------------------------------------------------------------------


def step_names(job):
    return {t.unique_name for t in job.proto_pipeline.components.transforms.values()}


def check_dataflow_job(job, image):
    """The job a dry run returns is a complete batch Dataflow job description."""
    assert isinstance(job, apiclient.Job)
    assert job.proto.name
    assert job.proto.type_ == apiclient.dataflow.JobType.JOB_TYPE_BATCH
    options = job.options.get_all_options()
    assert options["project"] == "triehh-test" and options["region"] == "us-central1"
    # the per-job staging and temp paths the submission would upload to (not touched here)
    assert job.google_cloud_options.staging_location.startswith(f"gs://triehh-test/tmp/{job.proto.name}.")
    pipeline = job.proto_pipeline
    # What create_job would stage as pipeline.pb: serialisable and complete.
    assert beam_runner_api_pb2.Pipeline.FromString(pipeline.SerializeToString()) == pipeline
    environments = pipeline.components.environments
    assert environments
    for environment in environments.values():
        assert environment.urn == common_urns.environments.DOCKER.urn
        payload = beam_runner_api_pb2.DockerPayload.FromString(environment.payload)
        assert payload.container_image == image
        # Artifacts are computed locally (files a real submission would upload); none is remote.
        for artifact in environment.dependencies:
            assert artifact.type_urn == common_urns.artifact_types.FILE.urn
    # Every user step's environment is one of those Docker environments.
    for transform in pipeline.components.transforms.values():
        if transform.environment_id:
            assert transform.environment_id in environments


def stand_in_outputs(encoder: ItemEncoder, max_length: int):
    """What the jobs would have written: the census count, then a trie one item deep per round
    ("a", "aa", ... and finally "aaa" + end of item), so that all max_length rounds run."""

    def read_single_output(path: str) -> bytes:
        if path.endswith(".unreadable.jsonl"):
            data = b""  # the census read every file
        elif "/census/sampling-" in path:  # the sampling pass: every round's sample complete
            data = json.dumps({"records": RECORDS,
                               "users_sampled": {str(r): POPULATION for r in range(1, max_length + 1)}}).encode()
        elif "/census/" in path:
            data = json.dumps({"users": POPULATION, "records": RECORDS}).encode()
        else:
            r = int(path.rsplit("/round-", 1)[1][:4])
            units = encoder.encode("a" * (max_length - 1))[:r]
            data = json.dumps({
                "kept": [[encoder.unit_to_bytes(u).hex() for u in units]],
                "users_sampled": POPULATION,  # everyone: never short of the plan's sample
                "users_required": POPULATION,
                "records_ranked": RECORDS,  # what the census counted: the input did not change
            }).encode()
        # The driver deletes the file after reading it: write what the job would have written.
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return data

    return read_single_output


# ---- the driver's graph builders: every job, nothing read back ------------------------------------


@pytest.mark.parametrize(
    "extra_flags, image",
    [([], DEFAULT_IMAGE), ([f"--sdk_container_image={CUSTOM_IMAGE}"], CUSTOM_IMAGE)],
    ids=["beam-default-image", "custom-image"],
)
def test_submit_job_graphs_translates_the_census_the_pass_and_every_round_offline(records, offline, extra_flags, image):
    config = driver.DiscoveryConfig(
        input_pattern=records,  # local: building a graph lists the input files
        output_dir="gs://triehh-test/out",  # state and job outputs on gs://, never touched
        state_dir="gs://triehh-test-private/state",
        epsilon=4.0,
        delta=1e-10,
        max_length=MAX_LENGTH,
        rounds_per_job="1",
    )
    results = driver.submit_job_graphs(
        config, PipelineOptions(DATAFLOW_DRY_RUN + extra_flags), population=POPULATION, seed=SEED
    )

    assert len(results) == 2 + MAX_LENGTH  # the first read, the cut, one job per round
    assert all(result.state == "DONE" for result in results)
    jobs = [result.job for result in results]
    for job in jobs:
        check_dataflow_job(job, image)
    assert FIRST_READ_STEPS <= step_names(jobs[0])
    planned = planner.plan(POPULATION, config.epsilon, config.delta, MAX_LENGTH)
    assert planned.feasible
    expected = sampling_steps()
    assert expected <= step_names(jobs[1]), sorted(expected - step_names(jobs[1]))
    assert not any(n.startswith(("RunAllRounds", "ReadRecords")) for n in step_names(jobs[1]))
    for r, job in enumerate(jobs[2:], start=1):
        names = step_names(job)
        expected = round_steps(r, planned.batch_size, planned.theta)
        assert expected <= names, sorted(expected - names)
        assert "ReadRecords" not in names  # a round reads its sample only
        assert not any(n.startswith("RunSampledRound(") and not n.startswith(f"RunSampledRound({r})") for n in names)
    # Each job its own default name (no --job_name: Dataflow refuses two active jobs of one name).
    assert all(job.proto.name.startswith("beamapp-") for job in jobs)
    assert len({job.proto.name for job in jobs}) == len(jobs)
    assert offline == []


def test_submit_job_graphs_by_default_translates_the_first_read_and_one_job_for_every_round(records, offline):
    config = driver.DiscoveryConfig(
        input_pattern=records, output_dir="gs://triehh-test/out", state_dir="gs://triehh-test-private/state",
        epsilon=4.0, delta=1e-10, max_length=MAX_LENGTH,
    )
    results = driver.submit_job_graphs(config, PipelineOptions(DATAFLOW_DRY_RUN), population=POPULATION, seed=SEED)
    assert len(results) == 2  # two job start-ups on Dataflow, whatever L is; one read of the records
    census, rounds = (result.job for result in results)
    check_dataflow_job(rounds, DEFAULT_IMAGE)
    assert FIRST_READ_STEPS <= step_names(census)
    assert not any(n.startswith("ReadRecords") for n in step_names(rounds))
    planned = planner.plan(POPULATION, config.epsilon, config.delta, MAX_LENGTH)
    expected = sampling_steps(rounds=MAX_LENGTH)
    assert expected <= step_names(rounds), sorted(expected - step_names(rounds))
    assert offline == []


def test_submit_job_graphs_translates_triehh_pp_and_the_whole_item_release(records, offline):
    """The graphs follow the job's protocol: TrieHH++'s Bernoulli pass and rounds (its tau), and
    sample-threshold's census and one release pass (no round)."""
    base = dict(input_pattern=records, output_dir="gs://triehh-test/out", state_dir="gs://triehh-test-private/state",
                epsilon=1.0, delta=1e-8, max_length=MAX_LENGTH)
    plus = driver.submit_job_graphs(driver.DiscoveryConfig(**base, protocol="triehh++", rounds_per_job="1"),
                                    PipelineOptions(DATAFLOW_DRY_RUN), population=POPULATION, seed=SEED)
    assert len(plus) == 2 + MAX_LENGTH and all(r.state == "DONE" for r in plus)
    assert "CutRounds/CutEachRound" in step_names(plus[1].job)  # its samples cut from the first read
    whole = driver.submit_job_graphs(driver.DiscoveryConfig(**base, protocol="sample-threshold"),
                                     PipelineOptions(DATAFLOW_DRY_RUN), population=POPULATION, seed=SEED)
    assert len(whole) == 2  # the census and the release pass
    names = step_names(whole[1].job)
    assert "ReadRecords" in names and any(n.startswith("ReleaseWholeItems") for n in names)
    assert not any(n.startswith("RunSampledRound") or n.startswith("RunAllRounds") for n in names)
    assert offline == []


def test_submit_job_graphs_refuses_a_runner_that_ignores_dry_run(records, tmp_path):
    """The DirectRunner accepts --dry_run=True and runs the graphs anyway: refused, nothing written."""
    config = driver.DiscoveryConfig(input_pattern=records, output_dir=str(tmp_path / "out"), epsilon=4.0,
                                    delta=1e-10, max_length=MAX_LENGTH)
    with pytest.raises(ValueError, match="DataflowRunner --dry_run=True"):
        driver.submit_job_graphs(config, PipelineOptions(["--dry_run=True"]), population=POPULATION, seed=SEED)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.state").exists()


def test_the_real_driver_loop_translates_every_job_with_stand_in_outputs(tmp_path, records, offline, monkeypatch):
    """``run_discovery`` itself, on DataflowRunner's dry run, through all L rounds with the real
    (growing) frontiers: only the read-back of each job's output is stood in for (the driver's
    ``jobs.read_single_output`` and ``jobs.job_counters``), since a dry run writes nothing."""
    config = driver.DiscoveryConfig(
        input_pattern=records,
        output_dir=str(tmp_path / "out"),
        epsilon=4.0,
        delta=1e-10,
        max_length=MAX_LENGTH,
        seed=SEED,
        rounds_per_job="1",  # a level per round's job: the stand-in outputs are per round
    )
    jobs = []

    def capture_job(result):  # a dry-run result has a job and no metrics
        jobs.append(result.job)
        return {}

    monkeypatch.setattr(jobs_lib, "read_single_output", stand_in_outputs(config.encoder, MAX_LENGTH))
    monkeypatch.setattr(jobs_lib, "job_counters", capture_job)

    result = driver.run_discovery(config, PipelineOptions(DATAFLOW_DRY_RUN))

    assert result.rounds_run == MAX_LENGTH and result.stop_reason == "reached max length"
    assert result.heavy_hitters == ["a" * (MAX_LENGTH - 1)]
    plan = result.plan
    assert plan.population == POPULATION and not plan.no_guarantee
    assert len(jobs) == 2 + MAX_LENGTH
    for job in jobs:
        check_dataflow_job(job, DEFAULT_IMAGE)
    assert FIRST_READ_STEPS <= step_names(jobs[0])
    assert sampling_steps() <= step_names(jobs[1])
    for r, job in enumerate(jobs[2:], start=1):
        assert round_steps(r, plan.batch_size, plan.theta) <= step_names(job)
    assert offline == []


def test_a_dry_run_result_has_a_job_and_no_metrics(records, offline):
    """Why ``run_discovery`` cannot do a dry run as is: ``jobs.job_counters`` queries metrics, which a
    dry-run result does not have, and no output file exists to read back."""
    from triehh_beam.beam import runners

    pipeline = runners.make_pipeline(PipelineOptions(DATAFLOW_DRY_RUN))
    _ = pipeline | beam.Create([1]) | beam.Map(str)
    result = pipeline.run()
    assert result.state == "DONE"
    check_dataflow_job(result.job, DEFAULT_IMAGE)
    with pytest.raises(NotImplementedError):
        result.metrics()
    assert offline == []


def test_an_invalid_temp_location_makes_even_a_dry_run_reach_for_gcs(offline):
    """The one offline pitfall: when neither --temp_location nor --staging_location is a valid
    gs:// path (here an upper-case bucket name), Beam's option validation tries to find or create
    a default staging bucket over the network, dry run or not."""
    from triehh_beam.beam import runners

    flags = [f for f in DATAFLOW_DRY_RUN if not f.startswith("--temp_location")]
    with pytest.raises(NetworkForbidden):  # at pipeline construction, where options are validated
        pipeline = runners.make_pipeline(PipelineOptions(flags + ["--temp_location=gs://NOT_A_BUCKET/tmp"]))
        _ = pipeline | beam.Create([1])
        pipeline.run()
    assert offline  # the attempt was recorded (the credential lookup of the GCS client)


# ---- the Flex Template launcher (deploy/dataflow/flex_launcher.py) --------------------------------


def _load_flex_launcher():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "dataflow" / "flex_launcher.py"
    spec = importlib.util.spec_from_file_location("flex_launcher", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LAUNCHER_ARGV = [  # what Dataflow's Python Flex Template launcher passes (parameters, then options)
    "--input=gs://data/records/dt=2026-01-01/*.parquet",
    "--output=gs://data/heavy-hitters/dt=2026-01-01",
    "--epsilon=4",
    "--delta=1e-10",
    "--max_length=10",
    "--unit_size=2",
    "--state_dir=gs://private/state/dt=2026-01-01",
    "--case_fold=true",
    "--truncate_long_items=false",
    "--ledger=gs://private/ledger/app-records",
    "--budget_epsilon=120",
    "--budget_delta=1e-8",
    "--runner=DataflowRunner",
    "--project=triehh-test",
    "--region=us-central1",
    "--staging_location=gs://private/staging",
    "--temp_location=gs://private/tmp",
    "--template_location=gs://private/staging/template_launches/2026-01-01_03_00_00-123/job_object",
    "--job_name=triehh-discover-20260101",
    "--labels={\"goog-dataflow-provided-template-type\": \"flex\"}",
]


def test_the_flex_launcher_turns_template_parameters_into_a_discover_command():
    from triehh_beam import cli
    from triehh_beam.cli.discover import config_from_args

    launcher = _load_flex_launcher()
    discover_args, beam_args, launch, wrapper = launcher.translate(
        LAUNCHER_ARGV, environ={"TRIEHH_SDK_CONTAINER_IMAGE": CUSTOM_IMAGE}
    )
    assert launch == {
        "template_location": "gs://private/staging/template_launches/2026-01-01_03_00_00-123/job_object",
        "job_name": "triehh-discover-20260101",
    }
    assert wrapper == {}
    assert beam_args == [
        "--runner=DataflowRunner",
        "--project=triehh-test",
        "--region=us-central1",
        "--staging_location=gs://private/staging",
        "--temp_location=gs://private/tmp",
        "--labels={\"goog-dataflow-provided-template-type\": \"flex\"}",
        f"--sdk_container_image={CUSTOM_IMAGE}",
    ]
    # The real `triehh discover` parser accepts the result: the flags are its flags, the rest
    # are passed to Beam unchanged.
    args, extra = cli.build_parser().parse_known_args(["discover", "--protocol", "triehh", *discover_args, *beam_args])
    assert extra == beam_args
    config = config_from_args(args)
    assert (config.input_pattern, config.output_dir, config.state_dir) == (
        "gs://data/records/dt=2026-01-01/*.parquet",
        "gs://data/heavy-hitters/dt=2026-01-01",
        "gs://private/state/dt=2026-01-01",
    )
    assert (config.epsilon, config.delta, config.max_length, config.unit_size) == (4.0, 1e-10, 10, 2)
    assert config.case_fold and not config.truncate_long_items
    assert (config.ledger_dir, config.budget_epsilon, config.budget_delta) == ("gs://private/ledger/app-records", 120.0, 1e-8)

    # An image given at launch wins over the one baked into the image.
    _, beam_args, _, _ = launcher.translate(
        LAUNCHER_ARGV + ["--sdk_container_image=other:1"], environ={"TRIEHH_SDK_CONTAINER_IMAGE": CUSTOM_IMAGE}
    )
    assert [a for a in beam_args if a.startswith("--sdk_container_image")] == ["--sdk_container_image=other:1"]


def test_every_flex_template_parameter_is_known_to_the_launcher():
    import pathlib

    launcher = _load_flex_launcher()
    path = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "dataflow" / "flex_template_metadata.json"
    metadata = json.loads(path.read_text())
    names = [p["name"] for p in metadata["parameters"]]
    known = set(launcher.VALUE_PARAMETERS) | set(launcher.SWITCH_PARAMETERS) | launcher.WRAPPER_PARAMETERS
    assert set(names) == known
    required = {p["name"] for p in metadata["parameters"] if not p.get("isOptional")}
    assert required == {"input", "output", "epsilon", "delta", "max_length", "state_dir"}
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", name) for name in names)  # no "-" in Flex names


def test_the_flex_launchers_marker_job_translates_offline(offline):
    launcher = _load_flex_launcher()
    pipeline = launcher.build_marker_pipeline(
        DATAFLOW_DRY_RUN,
        {"template_location": "gs://triehh-test/tmp/template_launches/1/job_object", "job_name": "triehh-launch-1"},
        "triehh discover finished; results in gs://data/out/heavy_hitters.json",
    )
    job = pipeline.run().job
    check_dataflow_job(job, DEFAULT_IMAGE)
    assert job.proto.name == "triehh-launch-1"
    assert {"Result", "Log"} <= step_names(job)
    assert offline == []
