"""``triehh stream`` end to end through the Pub/Sub emulator (issue 12's "done when"): two
event-time windows of 5,000 users each, many users per message, read by the streaming job in a
subprocess; each released window equals the keyed simulation of its records with the keys of
the window's committed release (its nonce, in the window's state); a late record and malformed
messages are dead-lettered; a budget that fits one window releases one, publishes the other as
refused and stops the stream, saying why (that run with ``--estimate-frequencies``: its released
window's estimates equal the per-user reference with the same keys).

Beam's Python DirectRunner takes its watermark from the wall clock (docs/stream_input.md), so
the records' event times are set a few seconds ahead, in windows that close while the job
runs, and empty messages (``[]``) keep the watermark moving (a quiet pull waits 30 s)."""

from __future__ import annotations

import json
import math
import stat
import subprocess
import sys
import threading
import time

import pytest

from tests.e2e.stream_runs import StreamRun
from tests.windowed_jobs import SEED, one_word_population
from triehh_beam.evaluation.estimates_eval import simulate_estimates
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.job.windows import windowed
from triehh_beam.proto import stream_pb2 as pb
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate

WINDOW = 10  # seconds
LATENESS = 2
PER_MESSAGE = 250
# The common flags of the two streams.
FLAGS = ["--window", f"{WINDOW}s", "--allowed-lateness", f"{LATENESS}s", "--epsilon", "4",
         "--delta", "1e-5", "--max-length", "6"]


def _messages(windows, message_format):
    """(payload, event time in ms) per message: PER_MESSAGE records of one window each, the
    messages of a window spread over its first seconds."""
    out = []
    for start_ms, population in windows:
        records = [(user, item) for user, items in population.items() for item in items]
        for k, i in enumerate(range(0, len(records), PER_MESSAGE)):
            part = records[i:i + PER_MESSAGE]
            if message_format == "json":
                payload = json.dumps([{"user_id": u, "item": item} for u, item in part]).encode()
            else:
                payload = pb.DeviceRecords(records=[pb.DeviceRecord(user_id=u, text=item) for u, item in part]).SerializeToString()
            out.append((payload, start_ms + 137 * k))
    return out


class _Stream:
    """One ``triehh stream`` subprocess on its own topic, its output collected."""

    def __init__(self, emulator, tmp, name, env, message_format, extra=()):
        self.emulator, self.dir = emulator, tmp / name
        self.dir.mkdir()
        (self.dir / "seed.bin").write_bytes(SEED)
        self.paths = emulator.topic(name)
        command = [sys.executable, "-m", "triehh_beam.cli", "stream", "--protocol", "triehh", "--subscription", self.paths["subscription"],
                   "--output", str(self.dir / "out"), "--seed-file", str(self.dir / "seed.bin"),
                   "--timestamp-attribute", "ts", "--message-format", message_format,
                   "--dead-letter", str(self.dir / "dead"), "--stop-after-windows", "2", *FLAGS, *extra]
        run = StreamRun(command, env)
        self.process, self.output = run.process, run.output

    def publish(self, payload, event_ms):
        return self.emulator.publisher.publish(self.paths["topic"], payload, ts=str(event_ms))

    def tick(self):
        self.emulator.publisher.publish(self.paths["topic"], b"[]")

    def wait(self, timeout):
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("triehh stream did not end:\n" + "\n".join(self.output))
        time.sleep(0.2)  # the last lines
        return code

    def letters(self):
        found = {}
        for path in sorted((self.dir / "dead").rglob("*.jsonl")):
            found.setdefault(path.parent.name, []).extend(json.loads(line) for line in path.read_text().splitlines())
        return found


def _declared(base: int):
    """``--windows`` for the two windows from ``base`` (seconds), TrieHH planned for 5,000 users."""
    def instant(seconds):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
    return ["--windows", f"{instant(base)}..{instant(base + 2 * WINDOW)}", "--population", "5000"]


def _window_sampler(stream_dir, flags, start_micros):
    """The sampler of the committed release of a stream's window (its state's nonce)."""
    config = DiscoveryConfig(input_pattern="unused", output_dir=str(stream_dir / "out"), epsilon=4.0, delta=1e-5,
                             max_length=6, window=WINDOW, seed=SEED, **{"protocol": "triehh", **flags})
    state = StateStore(str(stream_dir / "out.state" / "windows" / windowed.window_dir_name(start_micros))).load()
    return config, Sampler(SEED, config.window_identity()).window_keys().sampler(start_micros, state.release_nonce)


@pytest.mark.slow
def test_two_windows_through_the_emulator_equal_their_keyed_simulation(pubsub_emulator, subprocess_env, tmp_path):
    env = dict(subprocess_env, PUBSUB_EMULATOR_HOST=pubsub_emulator.host, PUBSUB_PROJECT_ID=pubsub_emulator.project)
    base = math.ceil((time.time() + 10) / WINDOW) * WINDOW  # window A starts in 10-20 s, B after it
    first, second = one_word_population(5000, 1, "a"), one_word_population(5000, 2, "b")
    windows = [(base * 1000, first), ((base + WINDOW) * 1000, second)]
    declared = _declared(base)
    streams = {
        "all": _Stream(pubsub_emulator, tmp_path, "all", env, "json", declared),
        # The same records as DeviceRecords, with frequency estimates, and a lifetime budget that
        # fits one window's spend (epsilon 4 + epsilon_est 0.5), not two.
        "budget": _Stream(pubsub_emulator, tmp_path, "budget", env, "proto",
                          ["--ledger", str(tmp_path / "ledger"), "--budget-epsilon", "5",
                           "--estimate-frequencies", "0.5", *declared]),
    }
    futures = [s.publish(payload, ms) for name, s in streams.items()
               for payload, ms in _messages(windows, "json" if name == "all" else "proto")]
    rejected = {"not json": b"{not json", "a scalar": b"42"}
    all_ = streams["all"]
    futures += [all_.publish(payload, base * 1000 + 5) for payload in rejected.values()]
    futures.append(all_.emulator.publisher.publish(all_.paths["topic"], b'[{"user_id": "x", "item": "the"}]', ts="soon"))
    for future in futures:
        future.result(timeout=60)

    stop = threading.Event()

    def tick():
        while not stop.wait(0.5):
            for s in streams.values():
                s.tick()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    # A record for window A, sent once A has closed: late.
    late_ms = base * 1000 + 3
    while time.time() < base + WINDOW + LATENESS + 2:
        time.sleep(0.1)
    all_.publish(json.dumps([{"user_id": "late-1", "item": "the"}]).encode(), late_ms).result(timeout=30)
    try:
        codes = {name: s.wait(timeout=240) for name, s in streams.items()}
    finally:
        stop.set()
        ticker.join()
    for name, s in streams.items():
        assert codes[name] == 0, "\n".join(s.output)

    # Both windows released, each equal to the keyed simulation of its records with its release's
    # keys (the late one and the rejected messages are in neither).
    flags = dict(windows=(base * 1_000_000, (base + 2 * WINDOW) * 1_000_000), population=5000)
    plan = planner.plan(5000, 4.0, 1e-5, 6)
    names = [windowed.window_dir_name(start_ms * 1000) for start_ms, _ in windows]
    output = "\n".join(all_.output)
    for name, (start_ms, population) in zip(names, windows):
        streamed = all_.dir / "out" / name
        assert (streamed / windowed.RELEASED_MARKER).exists(), output
        config, sampler = _window_sampler(all_.dir, flags, start_ms * 1000)
        expected = simulate(population, config.encoder, plan.theta, plan.batch_size, sampler)
        trie = Trie.from_bytes((streamed / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels]
        hitters = json.loads((streamed / "heavy_hitters.json").read_text())["heavy_hitters"]
        assert sorted(hitters) == sorted(expected.heavy_hitters) and len(hitters) >= 3
        assert f"window {name.split('=', 1)[1]}: released" in output
    assert "2 windows closed, 2 released" in output
    assert "dead letters: malformed_message, bad_timestamp, late (private, in" in output

    # The late record and the rejected messages, in the dead letter.
    letters = all_.letters()
    assert [(e["reason"], e["row"]["user_id"]) for e in letters.get("late", [])] == [("late", "late-1")], output
    assert sorted(e["raw"] for e in letters["malformed_message"]) == sorted(p.decode() for p in rejected.values())
    assert [e["reason"] for e in letters["bad_timestamp"]] == ["bad_timestamp"]
    assert set(letters) == {"late", "malformed_message", "bad_timestamp"}
    # Its state and its dead letter owner-only: every folder 0700, every file 0600 (folders of
    # the dead letter were 0755 and its files 0644).
    private = [all_.dir / "out.state", all_.dir / "dead"]
    loose = [(str(p), oct(stat.S_IMODE(p.stat().st_mode))) for top in private for p in [top, *top.rglob("*")]
             if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)]
    assert loose == [] and len(list(private[1].rglob("*.jsonl"))) >= 3, loose

    # The budget: one window released, the other withheld, and the line says why; the released
    # one with the estimates of the per-user reference with its keys.
    budget = streams["budget"]
    released = [n for n in names if (budget.dir / "out" / n / windowed.RELEASED_MARKER).exists()]
    assert len(released) == 1, "\n".join(budget.output)
    (withheld,) = set(names) - set(released)
    streamed = budget.dir / "out" / released[0]
    start_ms, population = windows[names.index(released[0])]
    config, sampler = _window_sampler(budget.dir, dict(flags, estimate_frequencies=0.5), start_ms * 1000)
    expected = simulate(population, config.encoder, plan.theta, plan.batch_size, sampler)
    trie = Trie.from_bytes((streamed / "trie.pb").read_bytes())
    assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels]
    estimates = simulate_estimates(population, config.encoder, trie, sampler, 0.5).by_target()
    document = json.loads((streamed / "heavy_hitters.json").read_text())
    assert document["heavy_hitters"] and all(
        e["estimate"] == estimates[config.encoder.encode(e["item"])] for e in document["heavy_hitters"])
    from triehh_beam.job.state.ledger import Ledger

    (charge,) = Ledger(str(tmp_path / "ledger")).records()
    assert charge["estimate_epsilon"] == 0.5 and charge["window_start"] == released[0].split("=", 1)[1]
    assert sorted(p.name for p in (budget.dir / "out" / withheld).iterdir()) == [windowed.REFUSED_MARKER]
    # The budget refused the window while it was open: the stream stops once the window before it
    # is released, saying that no later window fits a lifetime budget.
    assert (f"the budget refuses window {withheld.split('=', 1)[1]}: stopping; no later window fits (change the "
            "budget to continue)") in budget.output, "\n".join(budget.output)
    assert "1 window closed, 1 released" in "\n".join(budget.output)
