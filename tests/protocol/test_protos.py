"""The checked-in *_pb2 modules are what protos/generate.py makes from the .proto files."""

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
GENERATE = ROOT / "protos" / "generate.py"


def run_generate(*args):
    return subprocess.run(
        [sys.executable, str(GENERATE), *args], cwd=ROOT, capture_output=True, text=True
    )


def test_checked_in_modules_are_current():
    result = run_generate("--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_reports_a_stale_module(tmp_path):
    shutil.copytree(ROOT / "triehh_beam" / "proto", tmp_path / "triehh_beam" / "proto")
    stale = tmp_path / "triehh_beam" / "proto" / "trie_pb2.py"
    stale.write_text(stale.read_text() + "# edited by hand\n")
    (tmp_path / "triehh_beam" / "proto" / "vote_pb2.pyi").unlink()

    result = run_generate("--check", "--out", str(tmp_path))

    assert result.returncode == 1
    assert "differs: triehh_beam/proto/trie_pb2.py" in result.stderr
    assert "missing: triehh_beam/proto/vote_pb2.pyi" in result.stderr
    assert "vote_pb2.py\n" not in result.stderr


def test_generate_writes_the_modules_and_is_reproducible(tmp_path):
    first = run_generate("--out", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "triehh_beam" / "proto" / "trie_pb2.py").is_file()
    assert run_generate("--out", str(tmp_path)).stdout == ""  # nothing to rewrite
    assert run_generate("--check", "--out", str(tmp_path)).returncode == 0


def test_generated_modules_import_by_package_path():
    from triehh_beam.proto import trie_pb2, vote_pb2

    assert trie_pb2.DESCRIPTOR.name == "triehh_beam/proto/trie.proto"
    assert vote_pb2.DESCRIPTOR.package == "triehh_beam"
    assert vote_pb2.FrontierBroadcast.DESCRIPTOR.fields_by_name["encoding"].message_type is (
        trie_pb2.Encoding.DESCRIPTOR
    )
