"""The round loop on small hand-computed tries: what runs next, and why a discovery stops."""

import pytest

from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.rounds.loop import NextRound, RoundResult, Stop, StopReason
from triehh_beam.protocol.rounds.trie import Trie

ENC = ItemEncoder(max_length=4)  # items of up to 3 characters, then the terminator ""


def _trie(*levels):
    return Trie(ENC, [set(level) for level in levels])


def test_round_one_extends_the_empty_prefix():
    assert rounds.next_round(Trie.empty(ENC)) == NextRound(1, frozenset({()}))


def test_the_frontier_leaves_out_complete_items():
    # "a" is complete at level 2 ("a" + terminator); "ab" goes on.
    trie = _trie({("a",)}, {("a", ""), ("a", "b")})
    assert rounds.next_round(trie) == NextRound(3, frozenset({("a", "b")}))


def test_no_round_runs_when_every_deepest_prefix_is_complete():
    trie = _trie({("a",), ("b",)}, {("a", ""), ("b", "")})
    assert rounds.next_round(trie) == Stop(StopReason.NOTHING_TO_EXTEND, 2)
    assert rounds.next_round(trie).describe() == "no prefix left to extend"


def test_l_rounds_is_the_limit_and_fewer_can_be_asked():
    full = _trie({("a",)}, {("a", "b")}, {("a", "b", "c")}, {("a", "b", "c", "")})
    assert rounds.next_round(full) == Stop(StopReason.MAX_ROUNDS, 4)
    assert rounds.next_round(full).describe() == "reached max length"
    two = _trie({("a",)}, {("a", "b")})
    assert rounds.next_round(two, max_rounds=2) == Stop(StopReason.MAX_ROUNDS, 2)
    assert rounds.next_round(two, max_rounds=3) == NextRound(3, frozenset({("a", "b")}))
    # A limit above L is L: no sequence is longer.
    assert rounds.next_round(full, max_rounds=9) == Stop(StopReason.MAX_ROUNDS, 4)
    with pytest.raises(ValueError):
        rounds.next_round(two, max_rounds=0)


def test_the_limit_is_checked_before_the_frontier():
    # Depth 2 of a 2-round limit, and every deepest prefix complete: the limit is the reason.
    trie = _trie({("a",)}, {("a", "")})
    assert rounds.next_round(trie, max_rounds=2) == Stop(StopReason.MAX_ROUNDS, 2)


def test_a_round_that_keeps_nothing_ends_the_discovery_and_is_counted():
    trie = _trie({("a",)})
    step = rounds.next_round(trie)
    grown, after = rounds.apply_round(trie, step, [])
    assert grown is trie
    assert after == Stop(StopReason.EMPTY_ROUND, 2)
    assert after.describe() == "round 2 added nothing"
    # Before any round: round 1 keeps nothing.
    assert rounds.apply_round(Trie.empty(ENC), NextRound(1, frozenset({()})), set())[1] == Stop(
        StopReason.EMPTY_ROUND, 1
    )


def test_a_whole_discovery_hand_computed():
    # Round 1 keeps a, b; round 2 keeps a$ (complete) and bc; round 3 keeps bc$; then nothing is
    # left to extend: three rounds, no fourth.
    trie = Trie.empty(ENC)
    kept_per_round = [
        {("a",), ("b",)},
        {("a", ""), ("b", "c")},
        {("b", "c", "")},
    ]
    frontiers = []
    step = rounds.next_round(trie)
    for kept in kept_per_round:
        assert isinstance(step, NextRound)
        frontiers.append(step.frontier)
        trie, step = rounds.apply_round(trie, step, kept)
    assert frontiers == [frozenset({()}), frozenset({("a",), ("b",)}), frozenset({("b", "c")})]
    assert step == Stop(StopReason.NOTHING_TO_EXTEND, 3)
    assert trie.heavy_hitters() == ["a", "bc"]


def test_apply_round_refuses_the_wrong_round_or_a_prefix_off_the_frontier():
    trie = _trie({("a",)})
    with pytest.raises(ValueError, match="round 2, not 3"):
        rounds.apply_round(trie, NextRound(3, frozenset()), [("a", "b", "c")])
    with pytest.raises(ValueError):
        rounds.apply_round(trie, rounds.next_round(trie), [("b", "c")])


def test_round_result_is_short_only_against_a_known_requirement():
    assert RoundResult((("a",),), users_sampled=5, users_required=5).sample_short is False
    assert RoundResult((), users_sampled=4, users_required=5).sample_short is True
    assert RoundResult((), users_sampled=4, users_required=None).sample_short is False
