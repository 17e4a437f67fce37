"""A nightly discovery with a lifetime budget: three nights run as cron would run them, the first
two charged to one shared privacy ledger, the third refused before it reads a record because its
spend no longer fits the budget; then the ledger is printed.

Run it from anywhere: ``python examples/schedule.py [WORKDIR]`` (default: a new temporary
directory). It writes a small synthetic population for each night under WORKDIR/records/, a
schedule file WORKDIR/nightly.toml, and runs ``triehh scheduled --config nightly.toml --date D``
for each night D, exactly what a crontab line would run (here through the Python running this
script, so it uses the same installation). Each night publishes WORKDIR/out/D/ and keeps its
private state in WORKDIR/out.state/D/; the ledger, shared by every night, is WORKDIR/ledger/.
"""

from __future__ import annotations

import json
import pathlib
import random
import subprocess
import sys
import tempfile

NIGHTS = ["2026-11-01", "2026-11-02", "2026-11-03"]
USERS = 3_000
# Each night spends epsilon = 2 (delta 1e-6); the population's lifetime budget is 5: two nights
# fit (4), a third would make 6.
SCHEDULE = """\
[discovery]
input = "records/{date}.jsonl"
output_root = "out"
epsilon = 2.0
delta = 1e-6
max_length = 4
rounds_per_job = "all"                 # the default: the samples and every round in one Beam job

[budget]
ledger = "ledger"
epsilon = 5.0
delta = 1e-5
"""
WORDS = ["the", "and", "you", "for", "was", "one", "all", "any", "had", "her", "his", "how"]


def write_night(path: pathlib.Path, night: str) -> None:
    """One night's records: each of USERS users holds one word, most of them one of three."""
    rng = random.Random(night)
    with path.open("w", encoding="utf-8") as out:
        for user in range(USERS):
            word = rng.choice(WORDS[:3]) if rng.random() < 0.6 else rng.choice(WORDS)
            out.write(json.dumps({"user_id": f"user-{user}", "item": word}) + "\n")


def triehh(*args: str, cwd: pathlib.Path) -> int:
    """Runs ``triehh ARGS`` in cwd, its output passed through; returns its exit code."""
    print(f"$ triehh {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "triehh_beam.cli", *args], cwd=cwd).returncode


def main(workdir: pathlib.Path) -> int:
    (workdir / "records").mkdir(parents=True, exist_ok=True)
    for night in NIGHTS:
        write_night(workdir / "records" / f"{night}.jsonl", night)
    (workdir / "nightly.toml").write_text(SCHEDULE, encoding="utf-8")
    codes = [triehh("scheduled", "--config", "nightly.toml", "--date", night, cwd=workdir) for night in NIGHTS]
    print(f"exit codes of the three nights: {codes}", flush=True)
    triehh("ledger", "--ledger", "ledger", "--budget-epsilon", "5", "--budget-delta", "1e-5", cwd=workdir)
    # Two nights released, the third refused (exit code 2: the budget does not fit).
    return 0 if codes == [0, 0, 2] else 1


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(tempfile.mkdtemp(prefix="triehh-schedule-"))))
