"""Ctrl-C during ``triehh discover``: one line on stderr with the exact command that resumes, exit
code 130; that command resumes to the trie an uninterrupted run with the same seed finds. The
signal is sent once the first round has committed (its progress line), not after a fixed sleep."""

import json
import pathlib
import shlex
import signal
import subprocess
import sys
import time

import pytest

import triehh_beam
from tests.holders import write_holders

ROOT = pathlib.Path(triehh_beam.__file__).parents[1]
SEED = bytes(range(7, 39))


def _triehh(args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "triehh_beam.cli", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _trie(output: pathlib.Path) -> dict:
    document = json.loads((output / "heavy_hitters.json").read_text())
    return {key: document[key] for key in ("heavy_hitters", "frequent_prefixes")}


def test_ctrl_c_prints_one_line_with_the_command_that_resumes_to_the_same_trie(tmp_path):
    # Words of 6 letters over 8 rounds, held by enough users that every round keeps prefixes.
    records = write_holders(str(tmp_path / "records.jsonl"), {"abcdef": 3000, "abcxyz": 2500, "qrstuv": 2000,
                                                         "zzzzzz": 40})
    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    flags = ["--protocol", "triehh", "--input", str(records), "--epsilon", "4", "--delta", "1e-6",
             "--max-length", "8", "--seed-file", str(seed)]
    interrupted = tmp_path / "interrupted"
    run = _triehh(["discover", *flags, "--output", str(interrupted)])
    for line in run.stdout:
        if line.startswith("round 1/"):
            run.send_signal(signal.SIGINT)
            break
    else:
        raise AssertionError(f"no round line; stderr: {run.stderr.read()}")
    _, err = run.communicate(timeout=300)
    assert run.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    expected = shlex.join(["triehh", "discover", *flags, "--output", str(interrupted)])
    assert lines[0] == f"triehh discover: interrupted; resume with: {expected}"

    resumed = _triehh(shlex.split(lines[0].split("resume with: ", 1)[1])[1:])
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert "resum" in out  # the driver says it resumed rather than started anew

    fresh = tmp_path / "fresh"
    whole = _triehh(["discover", *flags, "--output", str(fresh)])
    _, err = whole.communicate(timeout=300)
    assert whole.returncode == 0, err
    assert _trie(interrupted) == _trie(fresh)
    assert "abcdef" in _trie(fresh)["heavy_hitters"]


@pytest.mark.slow
def test_ctrl_c_anywhere_gives_one_line_and_130_or_a_finished_run_and_0(tmp_path):
    # Interrupts spread over a whole run from its first line (before the first job, inside the Beam jobs' DoFns, during
    # commits and writes, while the summary prints): wherever one lands, the command either stops
    # with the one line and 130, or has finished and exits 0 with its result; never a traceback or
    # another error. Each interrupted run then resumes to the uninterrupted run's trie.
    records = write_holders(str(tmp_path / "records.jsonl"), {"abcdef": 3000, "abcxyz": 2500, "qrstuv": 2000})
    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    flags = ["--input", str(records), "--epsilon", "4", "--delta", "1e-6", "--max-length", "8",
             "--seed-file", str(seed), "--protocol", "triehh"]
    whole = _triehh(["discover", *flags, "--output", str(tmp_path / "fresh")])
    whole.stdout.readline()
    started = time.monotonic()
    _, err = whole.communicate(timeout=300)
    assert whole.returncode == 0, err
    duration = time.monotonic() - started  # from its first line to its exit
    outcomes = []
    for point in range(8):
        output = tmp_path / f"interrupted-{point}"
        run = _triehh(["discover", *flags, "--output", str(output)])
        first = run.stdout.readline()  # Python and the imports have started (a Ctrl-C before is Python's own)
        time.sleep(duration * (point + 0.5) / 8)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=300)
        out = first + out
        if run.returncode == 0:
            assert "interrupted" not in err and "Traceback" not in err, err
            assert "discovered " in out, out
        else:
            assert run.returncode == 130, (point, err[-3000:])
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("triehh discover: interrupted; resume with: "), \
                (point, err[-3000:])
            resumed = _triehh(["discover", *flags, "--output", str(output)])
            _, err = resumed.communicate(timeout=300)
            assert resumed.returncode == 0, err
        outcomes.append(run.returncode)
        assert _trie(output) == _trie(tmp_path / "fresh"), point
    assert 130 in outcomes, outcomes  # the early points land before the result exists
