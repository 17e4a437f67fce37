"""A discovery on a BigQuery table (``--input bq://PROJECT.DATASET.TABLE``) or query (``--query``),
without BigQuery: no emulator serves Beam's Storage Read API here (tests/beam/test_bigquery.py
says why), so the settings, the pinning and the refusals are tested directly, and the jobs the
real driver builds (census, sampling pass, rounds) are translated to Dataflow jobs offline
(``DataflowRunner --dry_run=True``, network and credentials forbidden by the ``offline``
fixture) with the read-back of their outputs stood in for, as in tests/e2e/test_dataflow_dry_run.py.
What is checked there is the graph: the census and the sampling pass read the table with the
Storage Read API through one time-travel query, at the instant the job's state records, also
on a resume. That BigQuery returns the same rows for that query is BigQuery's guarantee, not
tested here.
"""

from __future__ import annotations

import dataclasses
import re
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_runner_api_pb2

from triehh_beam import cli
from triehh_beam.beam.bigquery import ReadBigQueryBatches
from triehh_beam.beam.read import ReadRecordBatches
from triehh_beam.cli import discover
from triehh_beam.io.bigquery import TIME_TRAVEL_DAYS, pinned_table_query, quote_identifier
from triehh_beam.job.batch import driver
from triehh_beam.job.batch import jobs as jobs_lib
from triehh_beam.job.release import outputs
from triehh_beam.job.settings import sources
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.settings.input_files import InputChangedError
from triehh_beam.job.settings.paths import canonical_pattern
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.rounds.trie import Trie
from tests.e2e.test_dataflow_dry_run import (  # noqa: F401 (offline is a fixture)
    DATAFLOW_DRY_RUN,
    DEFAULT_IMAGE,
    POPULATION,
    SEED,
    check_dataflow_job,
    offline,
    stand_in_outputs,
)

TABLE = "bq://my-proj.devices.records"
QUERY = "SELECT user_id, item FROM `my-proj.devices.records` WHERE day = '2026-03-04'"
MAX_LENGTH = 2
READ_STEP = "ReadRecords/ReadFromBigQuery/Read"


def _config(tmp_path, **fields) -> DiscoveryConfig:
    values = dict(input_pattern=TABLE, output_dir=str(tmp_path / "out"), epsilon=4.0, delta=1e-10,
                  max_length=MAX_LENGTH, seed=SEED)
    values.update(fields)
    return DiscoveryConfig(**{"protocol": "triehh", **values})


def _parse(argv):
    args, extra = cli.build_parser().parse_known_args(["discover", "--protocol", "triehh", "--output", "out", "--epsilon", "4",
                                                       "--delta", "1e-9", "--max-length", "5", *argv])
    assert extra == []
    return discover.config_from_args(args)


# ---- the settings ---------------------------------------------------------------------------------


def test_a_table_and_a_query_are_settings_of_discover():
    table = _parse(["--input", TABLE])
    assert (table.input_pattern, table.query, sources.is_table(table)) == (TABLE, None, True)
    query = _parse(["--query", QUERY])
    assert (query.input_pattern, query.query, sources.is_table(query)) == (None, QUERY, False)
    assert query.source == "the --query result" and table.source == TABLE
    files = _parse(["--input", "records/*.jsonl"])
    assert not sources.is_table(files) and files.query is None


@pytest.mark.parametrize("argv, message", [
    (["--input", TABLE, "--query", QUERY], "give --input (files, or a table bq://PROJECT.DATASET.TABLE) or --query, not both"),
    ([], "--input is required (files, or a table bq://PROJECT.DATASET.TABLE), or --query SQL"),
    (["--query", "  "], "--query is empty"),
    (["--input", "bq://devices.records"], "a BigQuery input is bq://PROJECT.DATASET.TABLE"),
    (["--input", "bq://p.d.t,bq://p.d.u"], "a BigQuery input is bq://PROJECT.DATASET.TABLE"),
    (["--input", TABLE, "--format", "csv"], "--format is for files"),
    (["--query", QUERY, "--window", "1h", "--timestamp-column", "ts"], "--timestamp-column is for files"),
    (["--input", TABLE, "--window", "1h"], "--window is for files"),
], ids=["both", "neither", "empty-query", "two-part-table", "two-tables", "format", "timestamps", "window"])
def test_conflicting_or_malformed_sources_are_refused_in_one_line_with_exit_2(tmp_path, capsys, argv, message):
    output = tmp_path / "out"
    code = cli.main(["discover", "--protocol", "triehh", "--output", str(output), "--epsilon", "4", "--delta", "1e-9",
                     "--max-length", "5", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("triehh: error: ") and message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not output.exists() and not (tmp_path / "out.state").exists()


def test_the_state_records_the_table_or_the_query_and_a_resume_with_another_is_refused(tmp_path):
    def state_of(config):
        return state_pb2.JobState(secret_seed=SEED, input=config.input_spec(),
                                  plan=state_pb2.PrivacyPlan(protocol="triehh", rule="authors", max_length=MAX_LENGTH,
                                                             target_epsilon=4.0, target_delta=1e-10),
                                  trie=Trie.empty(config.encoder).to_proto(), ledger=config.resolved_ledger_dir,
                                  sampling_identity=config.sampling_identity().decode())

    table, query = _config(tmp_path), _config(tmp_path, input_pattern=None, query=QUERY)
    assert table.input_spec().file_pattern == TABLE and table.input_spec().query == ""
    assert query.input_spec().file_pattern == "" and query.input_spec().query == QUERY
    encoder = table.encoder
    for config in (table, query):
        assert config.resume_mismatches(state_of(config), encoder) == []
    other_table = dataclasses.replace(table, input_pattern="bq://my-proj.devices.records_v2")
    other_query = dataclasses.replace(query, query=QUERY.replace("03-04", "03-05"))
    refused = [
        (other_table, state_of(table), f"input (state has {TABLE!r})"),
        (query, state_of(table), f"input (state has {TABLE!r})"),
        (other_query, state_of(query), f"input (state has --query {QUERY!r})"),
        (table, state_of(query), f"input (state has --query {QUERY!r})"),
    ]
    for config, state, message in refused:
        mismatches = config.resume_mismatches(state, encoder)
        assert mismatches and mismatches[0] == message, mismatches
    # Two jobs that share a seed file but read other tables or queries sample independently.
    identities = {c.sampling_identity() for c in (table, query, other_table, other_query)}
    assert len(identities) == 4


def test_a_table_name_is_not_a_path():
    assert canonical_pattern(" bq://My-Proj.devices.records ") == "bq://My-Proj.devices.records"
    assert canonical_pattern("bq://example.com:proj.d.t") == "bq://example.com:proj.d.t"


# ---- the time-travel query -----------------------------------------------------------------------


def test_the_pinned_query_reads_the_record_columns_as_of_one_instant():
    assert pinned_table_query(TABLE, ["user_id", "item", "count"], 1772582400000) == (
        "SELECT `user_id`, `item`, `count` FROM `my-proj.devices.records` "
        "FOR SYSTEM_TIME AS OF TIMESTAMP_MILLIS(1772582400000)")
    # A domain-scoped project (a dot and a colon) and a dash stay inside one quoted path.
    assert pinned_table_query("bq://example.com:my-proj.d.t", ["u", "i"], 5) == (
        "SELECT `u`, `i` FROM `example.com:my-proj.d.t` FOR SYSTEM_TIME AS OF TIMESTAMP_MILLIS(5)")
    assert quote_identifier("we`ird\\name") == "`we\\`ird\\\\name`"
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="as_of_millis must be a positive integer"):
            pinned_table_query(TABLE, ["u"], bad)
    with pytest.raises(ValueError, match="needs the columns"):
        pinned_table_query(TABLE, [], 5)


def test_the_read_transform_reads_a_table_only_pinned(tmp_path):
    table = _config(tmp_path, count_column="", user_column="device", item_column="select")
    read = sources.read_transform(table, as_of_millis=1234)
    assert isinstance(read, ReadBigQueryBatches)
    assert read.query == ("SELECT `device`, `select` FROM `my-proj.devices.records` "
                          "FOR SYSTEM_TIME AS OF TIMESTAMP_MILLIS(1234)")
    with pytest.raises(ValueError, match="read as of the instant its census pinned"):
        sources.read_transform(table)
    query = _config(tmp_path, input_pattern=None, query=QUERY)
    assert sources.read_transform(query).query == QUERY
    with pytest.raises(ValueError, match="only a table is"):
        sources.read_transform(query, as_of_millis=1234)
    files = _config(tmp_path, input_pattern=str(tmp_path / "r.jsonl"))
    assert isinstance(sources.read_transform(files), ReadRecordBatches)
    with pytest.raises(ValueError, match="not files"):
        sources.read_transform(files, as_of_millis=1234)


def test_the_census_pins_a_table_a_minute_before_it_starts_and_a_query_not_at_all(tmp_path):
    now = 1772582400.25
    assert sources.pin(_config(tmp_path), now=now).as_of_millis == int((now - 60) * 1000)
    assert sources.pin(_config(tmp_path), now=now).files == []
    assert sources.pin(_config(tmp_path, input_pattern=None, query=QUERY), now=now) == state_pb2.InputSnapshot()
    assert sources.pinned_at(state_pb2.InputSnapshot()) is None


def test_a_pin_older_than_the_time_travel_window_is_refused_before_a_pass_reads(tmp_path):
    config = _config(tmp_path)
    pinned = 1772582400000
    state = state_pb2.JobState(input_snapshot=state_pb2.InputSnapshot(as_of_millis=pinned, records=10))
    six_days = pinned / 1000 + 6 * 86400
    sources.check_readable(state, config, now=six_days)  # inside the window
    with pytest.raises(InputChangedError) as refused:
        sources.check_readable(state, config, now=pinned / 1000 + TIME_TRAVEL_DAYS * 86400)
    message = str(refused.value)
    assert TABLE in message and "2026-03-04T00:00:00Z" in message and "time travel" in message
    assert "7 days" in message and "start a new job" in message
    # Files and queries are not pinned by time.
    for other in (_config(tmp_path, input_pattern=None, query=QUERY), _config(tmp_path, input_pattern="r.jsonl")):
        sources.check_readable(state, other, now=pinned / 1000 + 30 * 86400)


def test_the_operator_report_says_what_was_read(tmp_path):
    table = state_pb2.JobState(input=_config(tmp_path).input_spec(), plan=state_pb2.PrivacyPlan(protocol="triehh"),
                               input_snapshot=state_pb2.InputSnapshot(as_of_millis=1772582400000))
    assert sources.input_document(table) == {"pattern": TABLE, "read_as_of": "2026-03-04T00:00:00Z"}
    assert outputs.operator_report(table, "out")["input"]["read_as_of"] == "2026-03-04T00:00:00Z"
    query = state_pb2.JobState(input=_config(tmp_path, input_pattern=None, query=QUERY).input_spec())
    assert sources.input_document(query) == {"pattern": "", "query": QUERY}


# ---- the CLI without credentials, and DataflowRunner's --dry_run ---------------------------------


@pytest.fixture
def no_credentials(monkeypatch):
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    asked = []

    def none_found(*args, **kwargs):
        asked.append(kwargs.get("scopes"))
        raise DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", none_found)
    return asked


@pytest.mark.parametrize("source", [["--input", TABLE], ["--query", QUERY]], ids=["table", "query"])
@pytest.mark.parametrize("plan_only", [False, True], ids=["run", "dry-run"])
def test_without_credentials_a_bigquery_job_is_refused_before_it_starts(tmp_path, capsys, no_credentials,
                                                                        source, plan_only):
    """Beam's BigQuery client, given no credentials, opens an interactive OAuth flow and waits
    for a browser: the job is refused before, in one line, leaving nothing behind."""
    output = tmp_path / "out"
    code = cli.main(["discover", "--protocol", "triehh", *source, "--output", str(output), "--epsilon", "4", "--delta", "1e-9",
                     "--max-length", "5", *(["--dry-run"] if plan_only else [])])
    err = capsys.readouterr().err
    assert code == 2 and no_credentials, err
    assert "needs Google Cloud credentials and none were found" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not output.exists() and not (tmp_path / "out.state").exists()


def test_dataflow_dry_run_option_is_refused_with_the_way_to_validate_graphs(tmp_path, capsys, offline):
    code = cli.main(["discover", "--protocol", "triehh", "--input", TABLE, "--output", str(tmp_path / "out"), "--epsilon", "4",
                     "--delta", "1e-9", "--max-length", "5", *DATAFLOW_DRY_RUN])
    err = capsys.readouterr().err
    assert code == 2 and "submit_job_graphs" in err and "Traceback" not in err
    assert offline == []


# ---- the jobs, translated to Dataflow offline ----------------------------------------------------


def _read_step(job) -> dict:
    """What the job's BigQuery read shows (its display data), by label."""
    transforms = {t.unique_name: t for t in job.proto_pipeline.components.transforms.values()}
    assert READ_STEP in transforms, sorted(transforms)
    shown = {}
    for item in transforms[READ_STEP].display_data:
        labelled = beam_runner_api_pb2.LabelledPayload.FromString(item.payload)
        shown[labelled.label] = labelled.string_value
    return shown


def _pinned_instant(job) -> int:
    shown = _read_step(job)
    assert shown["method"] == "DIRECT_READ" and shown["output_format"] == "ARROW"  # Storage Read API
    match = re.fullmatch(r"SELECT `user_id`, `item`, `count` FROM `my-proj\.devices\.records` "
                         r"FOR SYSTEM_TIME AS OF TIMESTAMP_MILLIS\((\d+)\)", shown["query"])
    assert match, shown["query"]
    return int(match.group(1))


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_submit_job_graphs_reads_a_table_pinned_once_in_the_first_read(tmp_path, offline):
    config = _config(tmp_path, output_dir="gs://triehh-test/out", state_dir="gs://triehh-test-private/state",
                     rounds_per_job="all")
    before = int(time.time() * 1000)
    results = driver.submit_job_graphs(config, PipelineOptions(DATAFLOW_DRY_RUN), population=POPULATION, seed=SEED)
    census, sampling = (result.job for result in results)
    for job in (census, sampling):
        check_dataflow_job(job, DEFAULT_IMAGE)
    # The one read pins the table; the cut of its candidates and the rounds never read it.
    instant = _pinned_instant(census)
    names = {t.unique_name for t in sampling.proto_pipeline.components.transforms.values()}
    assert "CutRounds/CutEachRound" in names and not any(n.startswith("ReadRecords") for n in names)
    assert before - 61_000 <= instant <= int(time.time() * 1000) - 60_000
    assert offline == []


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_query_job_reads_the_query_once_in_the_first_read(tmp_path, offline):
    config = _config(tmp_path, input_pattern=None, query=QUERY, output_dir="gs://triehh-test/out",
                     state_dir="gs://triehh-test-private/state", rounds_per_job="all")
    results = driver.submit_job_graphs(config, PipelineOptions(DATAFLOW_DRY_RUN), population=POPULATION, seed=SEED)
    shown = _read_step(results[0].job)  # the one read; the next job reads its candidates
    assert shown["query"] == QUERY and shown["method"] == "DIRECT_READ"
    assert offline == []


class _Clock:
    def __init__(self, now: float):
        self.now = now

    def time(self) -> float:
        return self.now


def _run(config, monkeypatch, die_reading: str = ""):
    """``run_discovery`` on DataflowRunner's dry run, its outputs stood in for, dying (None) when
    it reads back the output whose path holds ``die_reading``; (its result, the jobs built)."""
    jobs = []
    stand_in = stand_in_outputs(config.encoder, MAX_LENGTH)

    def read_back(path):
        if die_reading and die_reading in path:
            raise RuntimeError("the job died")
        return stand_in(path)

    def capture_job(result):
        jobs.append(result.job)
        return {}

    monkeypatch.setattr(jobs_lib, "read_single_output", read_back)
    monkeypatch.setattr(jobs_lib, "job_counters", capture_job)
    try:
        result = driver.run_discovery(config, PipelineOptions(DATAFLOW_DRY_RUN))
    except RuntimeError as e:
        assert die_reading and str(e) == "the job died"
        result = None
    return result, jobs


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_the_driver_reads_a_table_as_of_the_instant_its_state_records_also_on_resume(tmp_path, offline,
                                                                                     monkeypatch):
    """The census pins the table; the state records the instant; a run that died after the census
    resumes (two days later) reading the table as of the same instant, not a new one; the rounds
    read their samples, never the table."""
    config = _config(tmp_path, rounds_per_job="1")  # a job per round: the resume dies in round 1's
    started = time.time() - 2 * 86400
    monkeypatch.setattr(sources, "time", _Clock(started))
    result, jobs = _run(config, monkeypatch, die_reading="/census/sampling-")
    # The one read (census and candidates), and the cut of its candidates whose output never came.
    assert len(jobs) == 2
    state = StateStore(config.resolved_state_dir).load()
    pinned = state.input_snapshot.as_of_millis
    assert pinned == int((started - 60) * 1000)
    assert _pinned_instant(jobs[0]) == pinned
    names = {t.unique_name for t in jobs[1].proto_pipeline.components.transforms.values()}
    assert "CutRounds/CutEachRound" in names and not any(n.startswith("ReadRecords") for n in names)
    assert state.input.file_pattern == TABLE and not state.samples.complete

    monkeypatch.setattr(sources, "time", time)
    result, jobs = _run(config, monkeypatch, die_reading="/round-0001")
    assert len(jobs) == 2  # the sampling pass (a resume reads the table again), then round 1
    assert _pinned_instant(jobs[0]) == pinned
    names = {t.unique_name for t in jobs[1].proto_pipeline.components.transforms.values()}
    assert "ReadSample" in names and not any(n.startswith("ReadRecords") for n in names)
    assert StateStore(config.resolved_state_dir).load().samples.complete
    assert offline == []


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_resume_past_the_time_travel_window_is_refused_before_any_job(tmp_path, offline, monkeypatch):
    config = _config(tmp_path)
    monkeypatch.setattr(sources, "time", _Clock(time.time() - 8 * 86400))
    _run(config, monkeypatch, die_reading="/census/sampling-")
    monkeypatch.setattr(sources, "time", time)
    with pytest.raises(InputChangedError, match=r"BigQuery time travel\), 8\.0 days ago"):
        _run(config, monkeypatch)
    assert offline == []
