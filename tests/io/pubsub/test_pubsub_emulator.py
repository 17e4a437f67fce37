"""Tests of triehh_beam.io.pubsub.emulator: why it cannot run (one line), and a second server
that answers inside its context, in its own process group, and is gone, group and all, after
it."""

from __future__ import annotations

import os
import urllib.request

import pytest

from triehh_beam.io.pubsub.emulator import emulator_missing, start_pubsub_emulator


def test_it_says_in_one_line_why_it_cannot_run(tmp_path):
    binary = str(tmp_path / "cloud-pubsub-emulator")
    reason = emulator_missing(binary)
    assert "not installed" in reason and "google-cloud-cli-pubsub-emulator" in reason and "\n" not in reason
    with pytest.raises(RuntimeError, match="not installed"):
        with start_pubsub_emulator(binary=binary):
            pass


def _serving(port: str):
    """The pids whose command line holds ``--port=PORT`` (the launcher and its java child)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0") if entry.isdigit() else []
        except OSError:  # gone meanwhile
            continue
        if f"--port={port}".encode() in cmdline:
            pids.append(int(entry))
    return pids


def test_it_stops_with_its_context_process_group_and_all(pubsub_emulator_server, tmp_path):
    with start_pubsub_emulator(str(tmp_path / "emulator.log")) as host:
        assert host != pubsub_emulator_server and host.startswith("127.0.0.1:")
        with urllib.request.urlopen(f"http://{host}/", timeout=5) as response:
            assert response.status == 200
        pids = _serving(host.rsplit(":", 1)[1])
        assert pids  # the launcher execs java; a launcher that forks would show two
        groups = {os.getpgid(pid) for pid in pids}
        assert len(groups) == 1 and os.getpgrp() not in groups  # its own process group
        group = groups.pop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{host}/", timeout=5)
    assert _serving(host.rsplit(":", 1)[1]) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # nothing is left in the group
