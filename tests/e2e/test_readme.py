"""The docs' "In your own Beam pipeline" example runs as written and finds the first letters.

The example is taken from docs/guides/beam.md itself (the first Python block of that section), so the
page cannot drift from the library without this test failing.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def _example() -> str:
    readme = (REPO / "docs" / "guides" / "beam.md").read_text(encoding="utf-8")
    section = readme.split("## In your own Beam pipeline", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the section has no python block"
    return match.group(1)


def test_the_beam_example_runs_and_keeps_the_common_first_letters():
    code = _example()
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    printed = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert len(printed) == 1, result.stdout
    kept = ast.literal_eval(printed[0])
    # Round 1 keeps one-character prefixes. The demo population (real English word
    # frequencies, 200,000 users) has "t" and "a" starting 16.4% and 12.3% of its words:
    # with m = 4,709 sampled users their expected votes are ~770 and ~580 against
    # theta = 14, so missing either has probability far below 1e-100 whatever the seed.
    # 23 of the 26 letters have an expected vote count of at least theta.
    assert all(len(prefix) == 1 for prefix in kept)
    assert {"t", "a"} <= set(kept)
    assert 5 <= len(kept) <= 26
