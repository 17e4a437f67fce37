"""Rounds on written sample tables (``RunRoundsFromFiles``): once every round's tables are files
(``round_cut.CutRounds``), each round reads its own tables, each once, spread over workers, votes
them a table at a time (``sampled_rounds.vote_table``) and merges and prunes the votes at theta in a
combine per prefix (``prefix_combine.PruneByPrefix``: nothing below theta leaves it), its result
opening the next round's frontier. It is ``sampled_rounds.RunAllRounds`` on paths, so a worker holds
one table, or one group of a round's prefixes, at a time.
"""

from __future__ import annotations

from typing import Collection, FrozenSet, Mapping, Optional, Union

from triehh_beam.beam.rounds.sampled_rounds import RunAllRounds
from triehh_beam.protocol.items.encoding import Units

__all__ = ["RunRoundsFromFiles"]


class RunRoundsFromFiles(RunAllRounds):
    """Rounds ``first_round..last_round`` on their written sample tables.

    Args:
      first_round, last_round: the rounds, in order.
      theta: the threshold.
      frontier: ``first_round``'s frontier (``{()}`` for round 1).
      sample_sizes: a PCollection of ``(round, RoundSample)`` (the cut's): each result's users
        sampled and required and records ranked; a round short of its required users keeps
        nothing. None (a resume's rounds on samples drawn before): users sampled are the tables'
        rows, checked against ``users_required`` (one for every round, or per round), and
        ``records_ranked`` is reported.
      denied: the deny list's encoded sequences (none by default).
      prefix_groups: the groups of each round's combine per prefix
        (``prefix_combine.prefix_groups``), 1 by default.

    Input: ``(round, path)`` of every sample table (the cut's output; a path delivered twice is
    voted once). Output: one ``(round, RoundResult)`` per round. Counters: ``RunAllRounds``'s
    (``round{r}.users_sampled``, ``.votes_cast``, ``.prefixes_kept``, ...).
    """

    def __init__(self, first_round: int, last_round: int, theta: int, frontier: FrozenSet[Units], sample_sizes,
                 denied: Collection[Units] = frozenset(), users_required: Union[None, int, Mapping[int, int]] = None,
                 records_ranked: Optional[int] = None, prefix_groups: int = 1):
        super().__init__(first_round, last_round, theta, frontier, sample_sizes=sample_sizes,
                         users_required=users_required, records_ranked=records_ranked, denied=denied,
                         from_paths=True, prefix_groups=prefix_groups)
