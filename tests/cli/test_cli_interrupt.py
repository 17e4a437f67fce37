"""Ctrl-C during ``triehh discover``: one line on stderr with the exact command that resumes, exit
code 130; that command resumes to the trie an uninterrupted run with the same seed finds. The
signal is sent after a progress line (a point in the run), not after a fixed sleep."""

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


def _lines_with_times(run) -> list:
    """(line, seconds since the first line) of each line ``run`` prints, until it exits."""
    lines = []
    for line in run.stdout:
        lines.append((line, time.monotonic()))
    return [(line, at - lines[0][1]) for line, at in lines]


def _ledger_records(output: pathlib.Path) -> list:
    return pathlib.Path(f"{output}.state", "ledger.jsonl").read_text().splitlines()


# Where the interrupts land, as (the progress line it follows, the share of the wait for the next
# line in an uninterrupted run, how many times Ctrl-C is pressed): inside the census's Beam job (twice,
# as an impatient user does), at the plan and the ledger's charge, inside the job that samples and
# runs the rounds, while the rounds are committed, and while the result prints (exit 0 there).
_POINTS = (("census: counting", 0.5, 2), ("plan: ", 0.0, 1), ("sampling: drawing", 0.5, 1),
           ("round 1/", 0.0, 1), ("discovered ", 0.0, 1))


@pytest.mark.slow
def test_ctrl_c_anywhere_gives_one_line_and_130_or_a_finished_run_and_0(tmp_path):
    # Wherever an interrupt lands, the command either stops with the one resume line and 130, or has
    # finished and exits 0 with its result: never a traceback, another error or a printed result
    # with 130. Each interrupted run then resumes to the uninterrupted run's trie, charged once.
    # Points follow progress lines, not fixed sleeps, so a slow machine moves them with the run.
    records = write_holders(str(tmp_path / "records.jsonl"), {"abcdef": 3000, "abcxyz": 2500, "qrstuv": 2000})
    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    flags = ["--input", str(records), "--epsilon", "4", "--delta", "1e-6", "--max-length", "8",
             "--seed-file", str(seed)]  # the default protocol, TrieHH++
    whole = _triehh(["discover", *flags, "--output", str(tmp_path / "fresh")])
    timed = _lines_with_times(whole)
    assert whole.wait(timeout=300) == 0, whole.stderr.read()
    assert len(_ledger_records(tmp_path / "fresh")) == 1

    def wait_after(prefix: str) -> float:
        at = next(k for k, (line, _) in enumerate(timed) if line.startswith(prefix))
        return timed[at + 1][1] - timed[at][1]

    outcomes = []
    for point, (prefix, share, presses) in enumerate(_POINTS):
        output = tmp_path / f"interrupted-{point}"
        run = _triehh(["discover", *flags, "--output", str(output)])
        out = ""
        for line in run.stdout:
            out += line
            if line.startswith(prefix):
                break
        time.sleep(share * wait_after(prefix))
        for _ in range(presses):
            run.send_signal(signal.SIGINT)
            time.sleep(0.2)
        rest, err = run.communicate(timeout=300)
        out += rest
        where = (point, prefix, share, presses)
        if run.returncode == 0:
            assert "interrupted" not in err and "Traceback" not in err, (where, err[-3000:])
            assert "discovered " in out, (where, out)
        else:
            assert run.returncode == 130, (where, run.returncode, err[-3000:])
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("triehh discover: interrupted; resume with: "), \
                (where, err[-3000:])
            assert "discovered " not in out, (where, out)  # a printed result is a finished run: exit 0
            resumed = _triehh(shlex.split(lines[0].split("resume with: ", 1)[1])[1:])
            _, err = resumed.communicate(timeout=300)
            assert resumed.returncode == 0, (where, err[-3000:])
        outcomes.append(run.returncode)
        assert _trie(output) == _trie(tmp_path / "fresh"), where
        assert len(_ledger_records(output)) == 1, where  # resumed under the same record: charged once
    assert outcomes[0] == 130 and outcomes[_POINTS.index(("discovered ", 0.0, 1))] == 0, outcomes


def test_a_ctrl_c_once_every_window_is_released_prints_the_windows_and_exits_0(tmp_path, capsys, monkeypatch):
    # A windowed discover's windows are all released and charged when run_replay returns: a Ctrl-C
    # from there on (here remembered as it returns, as when a Beam job swallowed it) must not turn
    # the printed result into an interrupted run (exit 130 after the windows' lines).
    import csv
    import os

    from triehh_beam.cli import main
    from triehh_beam.job.windows import stream

    records = tmp_path / "records.csv"
    with open(records, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["user_id", "item", "ts"])
        writer.writerows([f"u{user}", ("the", "to", "of")[user % 3], f"2026-11-01T00:{user % 60:02d}:00Z"]
                         for user in range(3000))
    release = stream.run_replay

    def released_then_interrupted(*args, **kwargs):
        ran = release(*args, **kwargs)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes, soon after the signal
                pass
        except KeyboardInterrupt:
            pass
        return ran

    monkeypatch.setattr(stream, "run_replay", released_then_interrupted)
    code = main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--window", "1h",
                 "--windows", "2026-11-01T00:00:00Z..2026-11-01T01:00:00Z", "--timestamp-column", "ts",
                 "--epsilon", "4", "--delta", "1e-6", "--max-length", "4"])
    captured = capsys.readouterr()
    assert code == 0 and "interrupted" not in captured.err, captured.err
    assert "1 window" in captured.out, captured.out  # the summary line, printed whole


# The executable as the console script runs it, with Ctrl-C delivered while ``module`` is being
# imported: a meta-path finder that sends the process SIGINT when the import system first looks
# for the module, then lets the import go on.
_WHILE_IMPORTING = """
import os, signal, sys

class CtrlCOnImport:
    def __init__(self, module):
        self.module = module

    def find_spec(self, name, path=None, target=None):
        if name == self.module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlCOnImport(sys.argv[1]))
sys.argv[1:] = sys.argv[2:]
from triehh_beam.cli import entry
entry()
"""


@pytest.mark.parametrize("module", ["triehh_beam.cli.dispatch", "triehh_beam.cli.discover",
                                    "triehh_beam.job.settings.fields", "scipy"])
def test_ctrl_c_while_the_commands_load_gives_the_one_line_and_130(tmp_path, module):
    # A Ctrl-C in the first second, while the tool imports its commands (about 0.3 s idle, 1 s
    # loaded), printed Python's KeyboardInterrupt traceback from inside an import.
    records = write_holders(str(tmp_path / "records.jsonl"), {"abc": 50})
    argv = ["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "1",
            "--delta", "1e-6", "--max-length", "4"]
    run = subprocess.run([sys.executable, "-c", _WHILE_IMPORTING, module, *argv], cwd=ROOT, text=True,
                         capture_output=True, timeout=120)
    assert run.returncode == 130, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines == [f"triehh discover: interrupted; resume with: {shlex.join(['triehh', *argv])}"]
    assert not (tmp_path / "out").exists()  # it stopped before the command began
