"""`triehh stream` on your machine, end to end, with the Pub/Sub emulator (about a minute).

What it does, step by step (each step is what you would do by hand):
  1. starts the Google Cloud SDK's Pub/Sub emulator on 127.0.0.1 (Debian/Ubuntu package
     google-cloud-cli-pubsub-emulator, which needs Java);
  2. with PUBSUB_EMULATOR_HOST pointing at it, creates a topic and a subscription;
  3. starts `triehh stream` on the subscription: two declared 10-second windows, TrieHH planned
     for a public lower bound of 2,000 users per window, stopping once both have closed;
  4. publishes 2,000 users' records (JSON messages of 200 records, each message's event time in
     the attribute `ts`) into the first window only, and an empty message (`[]`) every half
     second: a quiet subscription's pull waits about 30 s, and Beam's local streaming runner
     moves its watermark (and so closes windows) only when a pull returns;
  5. waits for `triehh stream` to end, stops the emulator and prints where the results are.

The second window holds no record, only those empty messages: it closes and is released like
the first (an empty result, charged to the ledger as every declared window is), so the stream
stops after two windows. Run it with triehh-beam installed (or PYTHONPATH=. in a checkout):

    python examples/local_stream.py [WORKDIR]

WORKDIR (default: a new temporary directory) receives out/ (the published windows), out.state/
(private: seed, windows' states and operator reports, dead letters) and emulator.log.
"""

import json
import math
import os
import pathlib
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

EMULATOR = "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
PROJECT = "local-project"
WINDOW = 10  # seconds
WORDS = ["the", "of", "and", "to", "in", "is", "you", "that", "it", "he"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_emulator(workdir: pathlib.Path) -> tuple:
    """Step 1: the emulator on a free port; returns (process, host:port) once it answers."""
    port = free_port()
    log = open(workdir / "emulator.log", "ab")
    process = subprocess.Popen([EMULATOR, "--host=127.0.0.1", f"--port={port}"], stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    host = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{host}/", timeout=1):
                return process, host
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.2)
    stop(process)
    raise SystemExit(f"the Pub/Sub emulator did not start; see {workdir / 'emulator.log'}")


def stop(process: subprocess.Popen) -> None:
    """Stops a process and its children (the emulator's launcher starts java)."""
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


def rfc3339(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def main(workdir: pathlib.Path) -> int:
    if not os.access(EMULATOR, os.X_OK):
        print(f"the Pub/Sub emulator is not installed ({EMULATOR}): apt-get install google-cloud-cli-pubsub-emulator")
        return 1
    workdir.mkdir(parents=True, exist_ok=True)
    emulator, host = start_emulator(workdir)
    os.environ["PUBSUB_EMULATOR_HOST"] = host  # every Pub/Sub client below, and triehh stream's, use it
    os.environ["PUBSUB_PROJECT_ID"] = PROJECT
    stream = None
    try:
        from google.cloud import pubsub_v1

        # Step 2: a topic and a subscription to it.
        publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
        topic = publisher.topic_path(PROJECT, "records")
        subscription = subscriber.subscription_path(PROJECT, "records-triehh")
        publisher.create_topic(name=topic)
        subscriber.create_subscription(name=subscription, topic=topic)

        # Step 3: the stream. Its windows are on the wall clock (the local runner's watermark is
        # processing time): the first starts 10-20 s from now, the second right after it.
        first = math.ceil((time.time() + 10) / WINDOW) * WINDOW
        command = ["triehh", "stream", "--subscription", subscription, "--output", str(workdir / "out"),
                   "--window", f"{WINDOW}s", "--allowed-lateness", "2s",
                   "--windows", f"{rfc3339(first)}..{rfc3339(first + 2 * WINDOW)}", "--population", "2000",
                   "--epsilon", "4", "--delta", "1e-6", "--max-length", "4",
                   "--timestamp-attribute", "ts", "--stop-after-windows", "2"]
        print("$ PUBSUB_EMULATOR_HOST=" + host, " ".join(command), flush=True)
        stream = subprocess.Popen([sys.executable, "-m", "triehh_beam.cli", *command[1:]])  # `triehh`, this Python's

        # Step 4: 2,000 users, one word each (Zipf-like), in the first window.
        rng = random.Random(2026)
        records = [{"user_id": f"user-{i}", "item": rng.choices(WORDS, weights=[1 / (k + 1) for k in range(10)])[0]}
                   for i in range(2000)]
        for k in range(0, len(records), 200):
            event_ms = first * 1000 + 100 * k // 200
            publisher.publish(topic, json.dumps(records[k:k + 200]).encode(), ts=str(event_ms)).result(timeout=30)
        while stream.poll() is None:  # keep the watermark moving until the stream has stopped
            publisher.publish(topic, b"[]").result(timeout=30)
            time.sleep(0.5)
            if time.time() > first + 2 * WINDOW + 120:
                stream.terminate()
                print("the stream did not stop within two minutes of its last window's end")
                return 1
        code = stream.returncode
    finally:
        if stream is not None and stream.poll() is None:
            stream.terminate()
        stop(emulator)
    # Step 5: where the results are.
    print(f"published windows: {sorted(p.name for p in (workdir / 'out').glob('window=*'))}")
    print(f"see one: triehh show {workdir / 'out' / ('window=' + rfc3339(first))}")
    return code


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(tempfile.mkdtemp(prefix="triehh-stream-"))))
