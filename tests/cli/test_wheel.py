"""The built wheel installs the product under its own name: the package ``triehh_beam``, its
compiled keyed hash ``triehh_beam_siphash`` (this machine has a C compiler) and the commands
``triehh`` and ``triehh-pipeline``, and no top-level ``pipelines`` package (the checkout's
``pipelines/`` is a thin wrapper for ``python -m pipelines.discover``). Built offline from a copy
of the sources, so the checkout gets no build directories."""

import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import triehh_beam

ROOT = pathlib.Path(triehh_beam.__file__).parents[1]


@pytest.mark.slow
def test_the_wheel_holds_triehh_beam_and_its_commands_and_no_pipelines(tmp_path):
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("triehh_beam", "pipelines", "native"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(tmp_path / "dist"), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [wheel] = (tmp_path / "dist").glob("triehh_beam-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        commands = archive.read(entry_points).decode()
    # An extension's file is its module name, then its ABI tag: triehh_beam_siphash.cpython-...so.
    top_level = {name.split("/")[0].split(".")[0] for name in names
                 if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"triehh_beam", "triehh_beam_siphash"}
    assert "triehh_beam/cli/pipeline.py" in names and "triehh_beam/data/demo_words.parquet" in names
    assert "triehh = triehh_beam.cli:entry" in commands
    assert "triehh-pipeline = triehh_beam.cli.pipeline:main" in commands


@pytest.mark.slow
def test_the_sdist_that_workers_install_holds_the_c_source(tmp_path):
    # Dataflow and Flink workers build the package from the sdist (--setup_file): without
    # native/siphash.c there they would all hash with numpy.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("triehh_beam", "native"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")],
                          cwd=source, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [sdist] = (tmp_path / "dist").glob("triehh_beam-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"native/siphash.c", "setup.py", "triehh_beam/protocol/randomness/keyed_hash.py"} <= names
