"""Users whose rows all have count 0 hold nothing: they are not in the population. The census
does not count them in n and no round samples them, so that n is exactly the users a round can
sample and the pipeline equals the keyed simulation (whose ``user_records`` leaves them out)."""

import hashlib
import json

from triehh_beam.job.batch.driver import DiscoveryConfig, run_discovery
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate

SEED = hashlib.sha256(b"triehh-beam zero count tests").digest()  # public: tests only
WORDS = ["hello", "hey", "hi", "ho", "hum"]


def test_users_with_only_zero_counts_are_not_counted_or_sampled(tmp_path):
    # 60 users hold a word (count >= 1); 60 more have only count-0 rows; 10 users have a
    # count-0 row and a counted one (they hold the counted word only).
    rows = [(u, WORDS[u % 5], 1 + u % 3) for u in range(60)]
    rows += [(1000 + u, WORDS[u % 5], 0) for u in range(60)]
    rows += [(u, "zzz", 0) for u in range(10)]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"user_id": u, "item": w, "count": c}) + "\n" for u, w, c in rows))
    config = DiscoveryConfig(input_pattern=str(records), output_dir=str(tmp_path / "out"), seed=SEED,
                             epsilon=1.0, delta=1e-6, max_length=6, theta=3, batch_size=40,
                             allow_no_guarantee=True, protocol="triehh")
    result = run_discovery(config)
    state = StateStore(config.resolved_state_dir).load()
    assert state.plan.population == 60  # n: the users who hold something
    assert state.input_snapshot.records == 60  # the count-0 rows are not census records
    assert state.census_counters["records_zero_count"] == 70
    for summary in state.rounds:
        assert summary.counters["users_sampled"] == 40
        assert summary.counters.get("users_without_items", 0) == 0

    users = {}
    for u, w, c in rows:
        users.setdefault(u, {})[w] = users.get(u, {}).get(w, 0) + c
    expected = simulate(users, ItemEncoder(max_length=6), theta=3, m=40, seed=SEED)
    assert expected.n_users == 60
    assert Trie.from_proto(state.trie).levels == expected.levels
    assert sorted(result.heavy_hitters) == sorted(expected.heavy_hitters)
