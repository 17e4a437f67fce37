"""``examples/local_stream.py`` runs as its docstring says: the Pub/Sub emulator, a topic and a
subscription, ``triehh stream`` over two declared windows, one with 2,000 users' records and one
holding only empty messages (``[]``, which keep the local runner's watermark moving); both
windows close, are released and charged, and count toward ``--stop-after-windows 2``, so the
stream stops by itself. Skipped, in one line, where the emulator (or Java) is absent."""

import json
import pathlib
import subprocess
import sys

import pytest

from triehh_beam.io.pubsub.emulator import emulator_missing

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "local_stream.py"


@pytest.mark.slow
def test_the_local_stream_recipe_releases_both_windows_and_stops(tmp_path, subprocess_env):
    reason = emulator_missing()
    if reason:
        pytest.skip(reason)
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True,
                          env=subprocess_env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("$ PUBSUB_EMULATOR_HOST=127.0.0.1:") and " triehh stream --subscription " in lines[0]
    windows = sorted((tmp_path / "out").glob("window=*"))
    assert len(windows) == 2, done.stdout
    full, empty = (json.loads((w / "heavy_hitters.json").read_text()) for w in windows)
    assert full["heavy_hitters"] and "the" in full["heavy_hitters"]  # the most common word, held by ~1/3
    # The window of empty messages only: released (empty), and it counted toward the stop.
    assert empty["heavy_hitters"] == [] and empty["frequent_prefixes"] == []
    assert all((w / "_RELEASED").exists() for w in windows)
    assert f"window {windows[1].name.split('=', 1)[1]}: released 0 heavy hitters" in done.stdout
    assert "2 windows closed: stopping (--stop-after-windows)" in done.stdout
    # Each declared window is charged once, the empty one too (the release lifecycle).
    charges = [json.loads(line) for line in (tmp_path / "out.state" / "ledger.jsonl").read_text().splitlines()]
    assert sorted(c["record_id"].split("/")[1] for c in charges) == [w.name for w in windows]
