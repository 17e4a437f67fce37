"""protocol.search: the planners' integer searches equal a linear scan for every threshold."""

from triehh_beam.protocol.search import first_true, first_true_doubling


def test_first_true_finds_every_threshold_of_a_range():
    for threshold in range(1, 65):
        calls = []

        def ok(x, t=threshold):
            calls.append(x)
            return x >= t

        assert first_true(ok, 0, 64) == threshold
        assert all(0 < x < 64 for x in calls)  # neither end is asked
        assert len(calls) <= 6  # log2(64)


def test_first_true_doubling_finds_it_or_says_none_past_the_cap():
    for threshold in (1, 2, 3, 17, 1000, 1024, 1025, 10**6):
        assert first_true_doubling(lambda x, t=threshold: x >= t, 0, 1, 10**7) == threshold
    assert first_true_doubling(lambda x: x >= 10**7 + 1, 0, 1, 10**7) is None
    assert first_true_doubling(lambda x: x >= 9, 4, 5, 100) == 9
