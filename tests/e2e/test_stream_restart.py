"""An open-ended stream (``--windows FROM..``) through the Pub/Sub emulator, killed with SIGKILL
and started again with the same command, then stopped with SIGTERM: every window from FROM to the
last one closed is released exactly once and charged once (none skipped, none twice), a window
charged when it opened but not yet closed at the stop is the only charge without a release, and
the stream says where it would resume. Records are published continuously, so every window holds
some, and the watermark (the wall clock on the streaming DirectRunner) moves."""

from __future__ import annotations

import json
import math
import signal
import sys
import threading
import time

import pytest

from tests.e2e.stream_runs import StreamRun
from tests.windowed_jobs import SEED
from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.job.windows import windowed

WINDOW = 2  # seconds


def _instant(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _released(out):
    return sorted(p.parent.name for p in out.glob("window=*/" + windowed.RELEASED_MARKER))


def _wait_for(predicate, timeout, run):
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline or run.process.poll() is not None:
            run.process.kill()
            raise AssertionError("the stream did not get there:\n" + "\n".join(run.output))
        time.sleep(0.2)


@pytest.mark.slow
def test_a_killed_open_ended_stream_restarts_at_the_first_unreleased_window(pubsub_emulator, subprocess_env, tmp_path):
    env = dict(subprocess_env, PUBSUB_EMULATOR_HOST=pubsub_emulator.host, PUBSUB_PROJECT_ID=pubsub_emulator.project)
    paths = pubsub_emulator.topic("restart")
    (tmp_path / "seed.bin").write_bytes(SEED)
    first = math.ceil((time.time() + 6) / WINDOW) * WINDOW
    out, ledger_dir = tmp_path / "out", tmp_path / "ledger"
    command = [sys.executable, "-m", "triehh_beam.cli", "stream", "--subscription", paths["subscription"],
               "--output", str(out), "--seed-file", str(tmp_path / "seed.bin"), "--timestamp-attribute", "ts",
               "--window", f"{WINDOW}s", "--allowed-lateness", "1s", "--windows", f"{_instant(first)}..",
               "--protocol", "triehh++", "--epsilon", "4", "--delta", "1e-5", "--max-length", "4",
               "--ledger", str(ledger_dir)]
    stop = threading.Event()

    def publish():  # 40 records every 0.2 s, stamped now: every window holds some
        k = 0
        while not stop.wait(0.2):
            records = [{"user_id": f"u{k}-{i}", "item": ("the", "and", "sky")[i % 3]} for i in range(40)]
            pubsub_emulator.publisher.publish(paths["topic"], json.dumps(records).encode(),
                                              ts=str(int(time.time() * 1000)))
            k += 1

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        killed = StreamRun(command, env)
        _wait_for(lambda: len(_released(out)) >= 3, 120, killed)
        killed.process.send_signal(signal.SIGKILL)
        killed.process.wait(timeout=30)
        time.sleep(2 * WINDOW)  # windows close while nothing runs
        restarted = StreamRun(command, env)
        _wait_for(lambda: sum(": released " in line for line in restarted.output) >= 4, 180, restarted)
        restarted.process.send_signal(signal.SIGTERM)
        code = restarted.process.wait(timeout=60)
    finally:
        stop.set()
        publisher.join()
    output = "\n".join(killed.output + ["--- restarted ---"] + restarted.output)
    assert code == 0, output
    released = _released(out)
    starts = [windowed.window_dir_name((first + WINDOW * i) * 1_000_000) for i in range(len(released))]
    assert released == starts, output  # from FROM on, none skipped
    lines = [line for line in killed.output + restarted.output if ": released " in line]
    assert len(lines) == len(set(lines)) and "already released" not in output  # none released twice
    charges = Ledger(str(ledger_dir)).records()
    charged = [f"window={r['window_start']}" for r in charges]
    assert len(charged) == len(set(charged)), output  # each charged once
    assert set(released) <= set(charged)
    unreleased = sorted(set(charged) - set(released))
    # Only windows open at the stop: charged when they opened, released by the next run.
    assert unreleased == starts[len(released):][:len(unreleased)] or all(
        name > released[-1] for name in unreleased), (unreleased, released)
    assert len(unreleased) <= 3, (unreleased, released)
    for name in released:
        state = StateStore(str(tmp_path / "out.state" / "windows" / name)).load()
        assert state.release_charged  # finished too, unless killed between its _RELEASED and its state commit
    # The stop names the first window its run had not seen released (one released as it stopped
    # may be the last on disk).
    stop_line = next(line for line in restarted.output if line.startswith("interrupted: "))
    resume = stop_line.rsplit("resume at window ", 1)[1]
    following = windowed.window_dir_name((first + WINDOW * len(released)) * 1_000_000)
    assert f"window={resume}" in released[-2:] + [following], output
    status = json.loads((out / "_STREAM.json").read_text())
    assert status["state"] == "cancelled" and status["last_released_window"] == released[-1].split("=", 1)[1]
    assert status["declared_windows"] == f"{_instant(first)}.."


@pytest.mark.slow
def test_an_open_ended_stream_stops_when_the_budget_refuses_the_window_now_open(pubsub_emulator, subprocess_env,
                                                                                 tmp_path):
    from triehh_beam.job.settings.config import DiscoveryConfig

    env = dict(subprocess_env, PUBSUB_EMULATOR_HOST=pubsub_emulator.host, PUBSUB_PROJECT_ID=pubsub_emulator.project)
    paths = pubsub_emulator.topic("budget")
    (tmp_path / "seed.bin").write_bytes(SEED)
    first = math.ceil((time.time() + 6) / WINDOW) * WINDOW
    plan = windowed.WindowedJob.for_config(DiscoveryConfig(
        input_pattern="unused", output_dir=str(tmp_path / "probe"), epsilon=4.0, delta=1e-5, max_length=4,
        window=WINDOW, windows=(first * 1_000_000, None), protocol="triehh++", seed=SEED), SEED).plan()
    budget = 3.5 * plan.epsilon  # room for three windows a day
    out = tmp_path / "out"
    command = [sys.executable, "-m", "triehh_beam.cli", "stream", "--subscription", paths["subscription"],
               "--output", str(out), "--seed-file", str(tmp_path / "seed.bin"), "--window", f"{WINDOW}s",
               "--windows", f"{_instant(first)}..", "--protocol", "triehh++", "--epsilon", "4", "--delta", "1e-5",
               "--max-length", "4", "--ledger", str(tmp_path / "ledger"), "--budget-epsilon", repr(budget),
               "--budget-period", "1d"]
    run = StreamRun(command, env)
    stop = threading.Event()

    def tick():  # empty messages keep the local runner's watermark moving
        while not stop.wait(0.5):
            pubsub_emulator.publisher.publish(paths["topic"], b"[]")

    threading.Thread(target=tick, daemon=True).start()
    try:
        code = run.process.wait(timeout=180)
    finally:
        stop.set()
    output = "\n".join(run.output)
    assert code == 0, output
    fourth = first + 3 * WINDOW
    day_after = (fourth // 86400 + 1) * 86400
    assert (f"the budget refuses window {_instant(fourth)}: stopping; the next window it allows starts at "
            f"{_instant(day_after)}: run the same command then") in output, output
    assert _released(out) == [windowed.window_dir_name((first + WINDOW * i) * 1_000_000) for i in range(3)]
    refused = json.loads((out / windowed.window_dir_name(fourth * 1_000_000) / windowed.REFUSED_MARKER).read_text())
    assert refused["refused_by"] == "budget" and refused["privacy_unit"]["unit"] == "a user per day"
    assert len(Ledger(str(tmp_path / "ledger")).records()) == 3
    status = json.loads((out / "_STREAM.json").read_text())
    outcomes = [w["outcome"] for w in status["windows"]]
    assert outcomes[:3] == ["empty"] * 3 and set(outcomes[3:]) <= {"refused by the budget"}, outcomes
    assert status["spend_per_period"][0]["epsilon"] == pytest.approx(3 * plan.epsilon)
