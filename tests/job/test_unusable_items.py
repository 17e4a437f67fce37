"""Issue 15, items 2 and 3, through the driver: a population whose items are all too long for L
(URLs under ``max_length=8``) is refused after the census and before any budget is spent, with
the fixes named; the census counts the too-long items and the users without a usable item into
the private operator report (never the published output); ``--truncate-long-items`` runs the
same population and gives the keyed simulation's trie; and a mostly broken export stops by
default (``max_bad_fraction`` 0.05).
"""

import dataclasses
import hashlib
import json
import pathlib
import random

import pytest

from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import (BadInputError, DiscoveryConfig, UnusableItemsError,
                                          run_discovery)
from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate
from tests.release_keys import keyed_identity

SEED = hashlib.sha256(b"triehh-beam unusable items tests").digest()  # public: tests only
N = 3000
L = 8
PAGES = ["a", "b", "c", "news", "mail"]


@pytest.fixture(scope="module")
def urls(tmp_path_factory):
    """N users, each visiting one URL of 20+ characters (Zipf-like over a few pages), and 5% of
    them also a short path: 95% of the users have no item of at most L - 1 = 7 characters."""
    rng = random.Random(15)
    rows = []
    for u in range(N):
        page = PAGES[min(int(rng.expovariate(1.0)), len(PAGES) - 1)]
        rows.append((f"user-{u}", f"https://example.com/{page}"))
        if u % 20 == 0:
            rows.append((f"user-{u}", f"/{page}"))
    path = tmp_path_factory.mktemp("urls") / "visits.jsonl"
    write_records(str(path), rows)
    return path, rows


def _config(records, output, **overrides) -> DiscoveryConfig:
    fields = dict(epsilon=4.0, delta=1e-6, max_length=L, seed=SEED)
    fields.update(overrides)
    return DiscoveryConfig(input_pattern=str(records), output_dir=str(output), **{"protocol": "triehh", **fields})


def test_a_population_without_usable_items_is_refused_before_any_budget_is_spent(urls, tmp_path):
    records, _ = urls
    output = tmp_path / "out"
    lines = []
    with pytest.raises(UnusableItemsError) as refused:
        run_discovery(_config(records, output), progress=lines.append)
    message = str(refused.value)
    assert "2,850 of 3,000 users (95.0%) hold no usable item" in message
    assert "--truncate-long-items" in message and "--max-length 25" in message and "--unit-size 4" in message
    assert "no budget was spent" in message
    # Nothing committed, nothing charged, nothing published.
    state_dir = pathlib.Path(f"{output}.state")
    assert not state_dir.exists() or StateStore(str(state_dir)).load() is None
    assert not state_dir.exists() or Ledger(str(state_dir)).records() == []
    assert not output.exists()
    # The census says nothing of it unless verbose: whether any user holds no usable item is a
    # fact of the data (issue 24, finding 7: one user flipped the default line).
    assert not any("usable" in line or "2,850" in line for line in lines)
    verbose_lines = []
    with pytest.raises(UnusableItemsError):
        run_discovery(dataclasses.replace(_config(records, output), verbose=True), progress=verbose_lines.append)
    [line] = [line for line in verbose_lines if line.startswith("census: some users hold no usable item")]
    assert "[private:" in line


def test_the_census_counts_go_to_the_operator_report_only(urls, tmp_path):
    records, rows = urls
    output = tmp_path / "out"
    result = run_discovery(_config(records, output, max_unusable_fraction=1.0))
    report = json.loads(pathlib.Path(result.report_path).read_text())
    assert report["input"]["users_without_usable_item"] == 2850
    assert report["input"]["items_too_long"] == N  # every URL; the short paths fit
    published = (output / "heavy_hitters.json").read_text()
    assert "too_long" not in published and "2850" not in published and "usable" not in published


def test_truncating_the_same_population_runs_and_equals_the_keyed_simulation(urls, tmp_path):
    records, rows = urls
    output = tmp_path / "out"
    config = _config(records, output, truncate_long_items=True)
    result = run_discovery(config)
    users = {}
    for user, item in rows:
        users.setdefault(user, {}).setdefault(item, 0)
        users[user][item] += 1
    plan = result.plan
    expected = simulate(users, ItemEncoder(max_length=L), plan.theta, plan.batch_size, seed=SEED,
                        sampling="keyed", too_long="truncate", identity=keyed_identity(config))
    trie = Trie.from_bytes((output / "trie.pb").read_bytes())
    assert trie.levels == expected.levels and len(trie.levels) >= 2
    assert result.frequent_prefixes == ["https://"]  # cut to L units: a prefix, never an item


def test_a_mostly_broken_export_stops_by_default(tmp_path):
    # 40% of the rows have a negative count: bad rows (the 40%), refused by default.
    rows = [(f"u{i}", f"w{i % 30}", -1 if i % 5 < 2 else 1) for i in range(2000)]
    records = tmp_path / "records.jsonl"
    write_records(str(records), rows)
    output = tmp_path / "out"
    with pytest.raises(BadInputError, match=r"40\.00% of the records are bad, more than --max-bad-fraction 0\.05"):
        run_discovery(_config(records, output))
    state_dir = pathlib.Path(f"{output}.state")
    assert not state_dir.exists() or StateStore(str(state_dir)).load() is None
    # 1 disables the check: the job runs on the good rows.
    # (TrieHH++: on 1,200 good users TrieHH's crowding guard refuses the plan.)
    assert run_discovery(_config(records, output, max_bad_fraction=1.0, protocol="triehh++")).rounds_run >= 1
