"""Published results made without a discovery: a TrieHH ``heavy_hitters.json`` holding given items,
as a deny list's file (``--deny-list``) must be."""

from triehh_beam.job.release import outputs
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.rounds.trie import Trie

__all__ = ["release_document"]


def release_document(items, kind="text", unit_size=1, max_length=6, int_bits=None, case_fold=False,
                     long_items="drop", population=None, m=4709, theta=14) -> dict:
    """A TrieHH ``heavy_hitters.json`` as a discovery publishes it (``outputs.published_document``
    on a state and a trie holding ``items``), its n published only with ``population``."""
    encoder = ItemEncoder(ItemKind(kind), unit_size=unit_size, max_length=max_length, case_fold=case_fold,
                          int_bits=int_bits)
    sequences = [encoder.encode(v) for v in items]
    depth = max((len(q) for q in sequences), default=0)
    trie = Trie(encoder, [{q[:r] for q in sequences if len(q) >= r} for r in range(1, depth + 1)])
    plan = state_pb2.PrivacyPlan(protocol="triehh", rule="authors", theta=theta, batch_size=m, gamma=2.0,
                                 population=population or 200_000, public_population=population or 0,
                                 max_length=max_length, target_epsilon=4.0, target_delta=1e-8,
                                 epsilon=3.9, delta=9e-9)
    state = state_pb2.JobState(job_id="0123abcd", created_at="2026-11-26T00:00:00Z", plan=plan,
                               truncate_long_items=long_items == "truncate", stop_reason="no prefix left to extend")
    state.rounds.extend(state_pb2.RoundSummary(round_index=r) for r in range(1, depth + 1))
    return outputs.published_document(state, trie)
