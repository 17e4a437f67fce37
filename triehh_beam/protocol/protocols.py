"""The protocols a job can run, as one type, with what each implies (docs/protocol.md)."""

from __future__ import annotations

import enum

__all__ = ["DEFAULT_PROTOCOL", "Protocol"]


class Protocol(enum.StrEnum):
    """A discovery protocol; its value is the name the flags, states and outputs use.

    ``TRIEHH`` samples m of n users per round and keeps prefixes with at least theta votes
    (Theorem 1); ``TRIEHH_PP`` samples each user with probability p_s per round and keeps counts
    of at least tau (the slides' Lemmas 1-2); ``WHOLE_ITEMS`` is one such sample-and-threshold
    release of whole items, with no trie; ``PARTITION_SELECTION`` releases whole items at the
    central optimum: every user contributes up to k items, and an item with n contributing users
    is kept with the optimal probability pi(n) (docs/protocol.md §7), its count with noise;
    ``NOISY_ROUNDS`` grows the trie from every user's vote per round, each candidate's count
    noised (discrete Laplace) and kept at the round's threshold (docs/protocol.md §8).
    """

    TRIEHH = "triehh"
    TRIEHH_PP = "triehh++"
    WHOLE_ITEMS = "sample-threshold"
    PARTITION_SELECTION = "partition-selection"
    NOISY_ROUNDS = "noisy-rounds"

    @classmethod
    def parse(cls, value: str) -> Protocol:
        """The protocol named ``value``.

        Raises:
          ValueError: ``value`` names no protocol (the message lists the names).
        """
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(p.value for p in cls)
            raise ValueError(f"unknown protocol {value!r}; choose one of {names}") from None

    @property
    def samples_by_probability(self) -> bool:
        """Users are sampled independently with probability p_s and counts kept at tau: nothing
        in the plan depends on n. Partition selection counts as such a protocol with p_s = 1
        (every user contributes) and no tau (the keep probability replaces it), and so do noisy
        prefix rounds (every user votes; each round's threshold follows from its frontier)."""
        return self is not Protocol.TRIEHH

    @property
    def grows_trie(self) -> bool:
        """Rounds extend a trie of prefixes (False: one release of whole items)."""
        return self not in (Protocol.WHOLE_ITEMS, Protocol.PARTITION_SELECTION)

    @property
    def selects_partitions(self) -> bool:
        """Items kept by the optimal keep probability of their contributing users, not by a
        sample and a threshold: central only (the server reads every user's items)."""
        return self is Protocol.PARTITION_SELECTION

    @property
    def noises_rounds(self) -> bool:
        """Every user votes in every round and each candidate's count gets keyed noise before the
        round's threshold: central only (the server counts every user's vote)."""
        return self is Protocol.NOISY_ROUNDS

    @property
    def central_only(self) -> bool:
        """The server must read every user's items (partition selection, noisy rounds): no
        federated or streamed job runs it."""
        return self.selects_partitions or self.noises_rounds

    @property
    def threshold_name(self) -> str:
        """What the threshold is called in plans and outputs: "theta" or "tau"."""
        return "tau" if self.samples_by_probability else "theta"


#: The protocol every command runs when none is named: the one certified exactly (TrieHH++, its
#: exact accountant); TrieHH's Theorem 1 is the paper's bound, unproven for fixed-size sampling.
DEFAULT_PROTOCOL = Protocol.TRIEHH_PP
