"""The server's side of one cohort's secure aggregation: it routes keys and encrypted shares,
collects masked inputs, and from the survivors' unmasking shares recovers each survivor's
self-mask seed and each dropped device's mask key, removes every mask, and returns only the sum
over the survivors. At every phase fewer than the threshold of devices fails the cohort whole
(``CohortFailedError``, naming the phase): nothing of it is unmasked."""

from __future__ import annotations

import enum
from typing import Dict, Mapping, Tuple

import numpy as np

from triehh_beam.protocol.secagg import shamir
from triehh_beam.protocol.secagg.crypto import (
    KEY_BYTES, MASK_PURPOSE, CohortContext, SecAggCryptoError, agree, expand_mask, public_of)
from triehh_beam.protocol.secagg.device import PublicKeys, ShareKind, pair_sign

__all__ = ["CohortFailedError", "Phase", "SecAggCohort"]


class Phase(enum.IntEnum):
    """The four message rounds of a cohort, named for what the server collects."""

    KEYS = 0
    SHARES = 1
    MASKED = 2
    UNMASK = 3


class CohortFailedError(RuntimeError):
    """A cohort that cannot be unmasked: too few devices at ``phase`` (or shares that do not
    recover the advertised keys). The cohort is dropped whole and counted.

    Attributes:
      phase: the phase that failed.
      reason: why, without the cohort.
    """

    def __init__(self, context: CohortContext, phase: Phase, reason: str):
        super().__init__(f"cohort {context.cohort} of round {context.round_index}: {phase.name.lower()}: {reason}")
        self.phase = phase
        self.reason = reason


class SecAggCohort:
    """The server's state for one cohort of ``size`` devices (indices 1 to ``size``).

    Call ``keys``, ``shares``, ``masked`` and ``unmask`` in order, each with what reached the
    server by that phase's deadline (a device missing from one is a dropout from then on; a
    message from a device that dropped earlier is ignored).

    Raises:
      ValueError: a threshold outside [2, size] or a vector length below 1.
    """

    def __init__(self, context: CohortContext, size: int, threshold: int, length: int):
        if not 2 <= threshold <= size:
            raise ValueError(f"threshold {threshold} must be in [2, {size}]")
        if length < 1:
            raise ValueError("a vector has at least one entry")
        self.context, self.size, self.threshold, self.length = context, size, threshold, length
        self._phase = int(Phase.KEYS)  # the phase whose messages come next (4: done)
        self._roster: Dict[int, PublicKeys] = {}
        self._sharers: Tuple[int, ...] = ()
        self._survivors: Tuple[int, ...] = ()
        self._masked_sum = np.zeros(length, dtype=np.uint32)

    def _enter(self, phase: Phase, count: int) -> None:
        if self._phase != phase:
            raise RuntimeError(f"cohort {self.context.cohort}: {phase.name.lower()} called out of order")
        self._phase = phase + 1
        if count < self.threshold:
            raise CohortFailedError(self.context, phase, f"{count} devices, below the threshold {self.threshold}")

    @property
    def sharers(self) -> Tuple[int, ...]:
        """The devices whose shares were routed (those that may send a masked input)."""
        return self._sharers

    @property
    def survivors(self) -> Tuple[int, ...]:
        """The devices whose masked inputs are in the sum."""
        return self._survivors

    def keys(self, adverts: Mapping[int, PublicKeys]) -> Dict[int, PublicKeys]:
        """The roster every advertising device receives: index -> its two public keys.

        Raises:
          CohortFailedError: fewer than the threshold advertised (in the cohort, well formed).
        """
        roster = {i: (bytes(c), bytes(m)) for i, (c, m) in adverts.items()
                  if 1 <= i <= self.size and len(c) == KEY_BYTES and len(m) == KEY_BYTES}
        self._enter(Phase.KEYS, len(roster))
        self._roster = dict(sorted(roster.items()))
        return self._roster

    def shares(self, sent: Mapping[int, Mapping[int, bytes]]) -> Dict[int, Dict[int, bytes]]:
        """What each sharing device receives (receiver -> sender -> ciphertext), from each
        sender's ciphertexts: a sender counts only if it addressed every other advertised
        device exactly.

        Raises:
          CohortFailedError: fewer than the threshold shared.
        """
        sharers = sorted(s for s, out in sent.items()
                         if s in self._roster and set(out) == set(self._roster) - {s})
        self._enter(Phase.SHARES, len(sharers))
        self._sharers = tuple(sharers)
        return {r: {s: bytes(sent[s][r]) for s in sharers if s != r} for r in sharers}

    def masked(self, inputs: Mapping[int, np.ndarray]) -> Tuple[int, ...]:
        """Adds up the masked inputs of the devices that shared; returns the survivors, the
        list every survivor is asked to unmask against.

        Raises:
          CohortFailedError: fewer than the threshold sent a masked input of the right length.
        """
        arrived = sorted(i for i, v in inputs.items() if i in self._sharers and len(v) == self.length)
        self._enter(Phase.MASKED, len(arrived))
        self._survivors = tuple(arrived)
        total = np.zeros(self.length, dtype=np.uint32)
        for i in arrived:
            total += np.asarray(inputs[i], dtype=np.uint32)
        self._masked_sum = total
        return self._survivors

    def unmask(self, responses: Mapping[int, Mapping[int, Tuple[ShareKind, bytes]]]) -> np.ndarray:
        """The survivors' sum (uint32, modulo 2^32), from the unmasking shares of the survivors
        that answered: a response counts only if it gives, for every device that shared, the
        share its fate calls for.

        Raises:
          CohortFailedError: fewer than the threshold answered, or the shares do not recover a
            dropped device's advertised mask key.
        """
        survivors = set(self._survivors)
        expected = {s: ShareKind.SELF_MASK if s in survivors else ShareKind.MASK_KEY for s in self._sharers}
        answered = sorted(h for h, shares in responses.items() if h in survivors and _complete(shares, expected))
        self._enter(Phase.UNMASK, len(answered))
        holders = answered[:self.threshold]
        coefficients = shamir.lagrange_at_zero(holders)
        secrets = self._recover(responses, holders, coefficients)
        total = self._masked_sum.copy()
        for s in self._survivors:
            total -= expand_mask(secrets[s], self.length)
        for dropped in self._sharers:
            if dropped in survivors:
                continue
            if public_of(secrets[dropped]) != self._roster[dropped][1]:
                raise CohortFailedError(self.context, Phase.UNMASK,
                                        f"the shares do not recover device {dropped}'s mask key")
            for v in self._survivors:
                try:
                    seed = agree(secrets[dropped], self._roster[v][1], self.context, MASK_PURPOSE)
                except SecAggCryptoError as error:
                    raise CohortFailedError(self.context, Phase.UNMASK, str(error)) from None
                pairwise = expand_mask(seed, self.length)
                total = total - pairwise if pair_sign(v, dropped) > 0 else total + pairwise
        return total

    def _recover(self, responses, holders, coefficients) -> Dict[int, bytes]:
        secrets = {}
        for s in self._sharers:
            try:
                values = np.stack([shamir.parse_share(responses[h][s][1], KEY_BYTES) for h in holders])
                chunks = shamir.combine_values(values, coefficients)
                secrets[s] = shamir.chunks_to_bytes(chunks, KEY_BYTES)
            except shamir.ShamirError as error:
                raise CohortFailedError(self.context, Phase.UNMASK, f"device {s}: {error}") from None
        return secrets


def _complete(shares: Mapping[int, Tuple[ShareKind, bytes]], expected: Mapping[int, ShareKind]) -> bool:
    return set(shares) == set(expected) and all(shares[s][0] == kind for s, kind in expected.items())
