"""``python -m pipelines.discover`` (standard Beam options, in a subprocess; the checkout's wrapper of
the installed ``triehh-pipeline``, ``triehh_beam.cli.pipeline``) gives the same
heavy hitters, document and trie as ``triehh discover`` on the same input and seed, passes
Beam's own flags to the runner, and refuses a missing setting in one line."""

import json
import pathlib
import subprocess
import sys

import pytest

from triehh_beam import cli
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.state.state_store import StateStore

SEED = bytes(range(7, 39))


@pytest.fixture(scope="module")
def records(tmp_path_factory, make_population):
    directory = tmp_path_factory.mktemp("pipeline-records")
    return make_population(2000, max_chars=3, vocabulary=60, exponent=1.5).write(directory, name="users")


@pytest.fixture
def seed_file(tmp_path):
    path = tmp_path / "seed.bin"
    path.write_bytes(SEED)
    return str(path)


def _published(output) -> dict:
    document = json.loads((output / "heavy_hitters.json").read_text(encoding="utf-8"))
    for volatile in ("job_id", "created_at"):
        assert document.pop(volatile)
    return document


@pytest.mark.slow
def test_the_beam_entry_point_equals_triehh_discover(records, tmp_path, seed_file, subprocess_env, capsys,
                                                     monkeypatch):
    # The same job (one output: the job's identity keys its samples) run once each way, the
    # first run's output and state moved aside before the second, which runs the first's release
    # (the tool given its nonce from the outside: a run always draws a fresh one).
    by_beam, by_cli = tmp_path / "out", tmp_path / "cli"
    # Beam's spelling of the settings; --max-length (the tool's) is accepted too; a Beam flag
    # (--direct_num_workers) goes to the runner.
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.discover", f"--input={records}", f"--output={by_beam}",
         "--epsilon=4", "--delta=1e-6", "--max-length=4", f"--seed_file={seed_file}",
         "--direct_num_workers=1"],
        capture_output=True, text=True, env=subprocess_env, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.splitlines()[0].startswith(f"census: counting distinct users in {records}")
    nonce = StateStore(f"{by_beam}.state").load().release_nonce
    by_beam.rename(by_cli)
    pathlib.Path(f"{by_beam}.state").rename(f"{by_cli}.state")
    monkeypatch.setattr(Release, "fresh", classmethod(lambda cls, seed, identity: cls(seed, identity, nonce)))
    assert cli.main(["discover", "--input", records, "--output", str(by_beam), "--epsilon", "4",
                     "--delta", "1e-6", "--max-length", "4", "--seed-file", seed_file]) == 0
    capsys.readouterr()
    published = _published(by_beam)
    assert published["heavy_hitters"]
    assert published == _published(by_cli)
    assert (by_beam / "trie.pb").read_bytes() == (by_cli / "trie.pb").read_bytes()


def test_a_missing_setting_is_refused_in_one_line(tmp_path, subprocess_env):
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.discover", f"--output={tmp_path / 'out'}", "--epsilon=4",
         "--delta=1e-6", "--max_length=4"],
        capture_output=True, text=True, env=subprocess_env, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "pipelines.discover: error: --input is required (files, or a table bq://PROJECT.DATASET.TABLE), "
        "or --query SQL")
    assert not (tmp_path / "out").exists()


def test_an_argument_no_options_class_defines_is_refused_in_one_line(records, tmp_path, subprocess_env):
    # Beam dropped it with a warning and the job ran without a budget.
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.discover", f"--input={records}", f"--output={tmp_path / 'out'}",
         "--epsilon=4", "--delta=1e-6", "--max_length=4", "--ledger=ledger", "--budget-epsilon=9",
         "--ledger-dir=elsewhere"],
        capture_output=True, text=True, env=subprocess_env, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "pipelines.discover: error: unknown argument --ledger-dir: neither the discovery's settings "
        "nor Beam's pipeline options define it")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_the_library_never_imports_pipelines(subprocess_env, tmp_path):
    code = ("import sys, triehh_beam.cli, triehh_beam.job.batch.driver, triehh_beam.evaluation.experiment; "
            "assert not [m for m in sys.modules if m == 'pipelines' or m.startswith('pipelines.')]")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=subprocess_env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_installed_entry_point_is_the_same_module_under_the_product_s_name(tmp_path, subprocess_env):
    # `triehh-pipeline` (the console script) runs triehh_beam.cli.pipeline:main, which
    # `python -m pipelines.discover` wraps: one implementation, named for what is installed.
    import pipelines.discover
    from triehh_beam.cli import pipeline

    assert pipelines.discover.main is pipeline.main and pipelines.discover.DiscoveryOptions is pipeline.DiscoveryOptions
    done = subprocess.run(
        [sys.executable, "-m", "triehh_beam.cli.pipeline", f"--output={tmp_path / 'out'}", "--epsilon=4",
         "--delta=1e-6", "--max_length=4"],
        capture_output=True, text=True, env=subprocess_env, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("triehh-pipeline: error: --input is required")
