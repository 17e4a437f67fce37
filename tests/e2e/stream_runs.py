"""A ``triehh stream`` subprocess against the Pub/Sub emulator for the stream end-to-end tests: its
command on a fresh topic, the process with its output collected, and what the tests wait for and
read of it (its dead-lettered late records, the records its windows accounted for)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from typing import Dict, List

from tests.windowed_jobs import SEED

__all__ = ["StreamRun", "accounted_settles", "instant", "late_per_window", "stream_command", "wait_for"]


class StreamRun:
    """One ``triehh stream`` process, its output lines collected as they come."""

    def __init__(self, command, env):
        # umask 022, a common default: what the stream keeps private it makes so by itself.
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        umask=0o022)
        self.output = []
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self):
        for line in self.process.stdout:
            self.output.append(line.rstrip("\n"))


def instant(seconds: int) -> str:
    """``seconds`` since the epoch as an RFC 3339 instant (UTC), as a ``--windows`` range takes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def stream_command(emulator, subprocess_env, tmp_path, name: str, window: int, lateness: int, windows: str,
                   *flags: str):
    """A fresh topic, and the ``triehh stream`` command reading its subscription (results in
    ``tmp_path/out``, dead letters in ``tmp_path/dead``, event times in the ``ts`` attribute);
    returns ``(env, topic, command)``."""
    env = dict(subprocess_env, PUBSUB_EMULATOR_HOST=emulator.host, PUBSUB_PROJECT_ID=emulator.project)
    paths = emulator.topic(name)
    (tmp_path / "seed.bin").write_bytes(SEED)
    command = [sys.executable, "-m", "triehh_beam.cli", "stream", "--subscription", paths["subscription"],
               "--output", str(tmp_path / "out"), "--seed-file", str(tmp_path / "seed.bin"),
               "--timestamp-attribute", "ts", "--window", f"{window}s", "--allowed-lateness", f"{lateness}s",
               "--windows", windows, "--dead-letter", str(tmp_path / "dead"), *flags]
    return env, paths["topic"], command


def wait_for(predicate, timeout: float, run: StreamRun) -> None:
    """Polls ``predicate`` until it holds; at ``timeout`` or ``run``'s exit, kills it and fails."""
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline or run.process.poll() is not None:
            run.process.kill()
            raise AssertionError("the stream did not get there:\n" + "\n".join(run.output[-40:]))
        time.sleep(0.2)


def late_per_window(dead) -> Dict[str, int]:
    """How many records the stream dead-lettered as late under ``dead``, by the window they were late for."""
    late: Dict[str, int] = {}
    for path in dead.glob("late/*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():  # the late record's window, named in the entry ("late for window=...")
                name = re.search(r"window=[0-9TZ:-]+", line).group(0)
                late[name] = late.get(name, 0) + 1
    return late


def accounted_settles(tmp_path):
    """A predicate: True once the records counted by the windows' reports and dead-lettered as
    late have not changed over three looks 2 s apart (the stream has read what it was behind on)."""
    seen: List[int] = []

    def settled() -> bool:
        total = sum(late_per_window(tmp_path / "dead").values())
        for path in (tmp_path / "out.state" / "windows").glob("window=*/operator_report.json"):
            try:
                total += json.loads(path.read_text())["input"]["records"]
            except (OSError, ValueError, KeyError):
                pass
        seen.append(total)
        time.sleep(2)
        return len(seen) >= 3 and len(set(seen[-3:])) == 1

    return settled
