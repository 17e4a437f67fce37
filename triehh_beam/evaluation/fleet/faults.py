"""What happens to each invited device of a simulated fleet, drawn so that runs repeat: the
fleet's options (``FleetOptions``: the fault probabilities, the latency distribution, the
margins), the fate of one device in one round (``device_fate``: dropout, malformed, late,
duplicate or none; its latency), and the corrupt bytes a malformed device sends instead of its
report (``corrupt_report``). A fate is a function of (fleet seed, job, round, device) alone, drawn
from a numpy ``Generator`` seeded with them, so it does not depend on the order in which Pub/Sub
delivers invitations nor on who else is in the fleet. Pure: no Pub/Sub, no threads.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import math
from typing import Callable, Mapping, Optional

import numpy as np

from triehh_beam.protocol.federated.messages import FederatedFormatError, VoteReport
from triehh_beam.protocol.items.encoding import ItemEncoder

__all__ = ["FATES", "DeviceFate", "FleetOptions", "check_fate_probabilities", "corrupt_bytes", "corrupt_report",
           "device_fate"]

#: The fates of an invited device, in the order their probabilities are laid out on [0, 1).
FATES = ("dropout", "malformed", "late", "duplicate", "none")


def check_fate_probabilities(probabilities: Mapping[str, object], named: Callable[[str], str] = str) -> None:
    """Checks the probability of each fate but "none" (``FATES``), by name.

    Raises:
      ValueError: a value that is no probability in [0, 1], or values summing above 1 (the fates
        exclude one another); the message names each fate as ``named(name)``.
    """
    for name, value in probabilities.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{named(name)} is a probability in [0, 1], got {value!r}")
    total = sum(probabilities.values())
    if total > 1.0 + 1e-12:
        raise ValueError(f"{' + '.join(named(name) for name in probabilities)} is {total:g}: the fates exclude one "
                         "another, so the probabilities sum to at most 1")


@dataclasses.dataclass(frozen=True)
class FleetOptions:
    """How a simulated fleet behaves.

    Each fault probability is the fraction of invited devices that meet that fate, and the
    fates exclude one another (so the probabilities sum to at most 1), which keeps every report
    in exactly one of the server's counters:

    Attributes:
      dropout: the device never answers.
      malformed: it sends corrupt bytes instead of its report (``corrupt_report``: always bytes
        the report parser refuses).
      late: it answers ``late_margin_s`` plus its latency after the announcement's deadline.
      duplicate: it sends its report twice, the second ``duplicate_delay_s`` after the first.
      seed: the fleet's seed (faults and latencies; not the job's sampling seed).
      latency_median_s, latency_spread: a device answers after a lognormal latency, with this
        median and ``spread`` the standard deviation of its logarithm (0: always the median),
        counted from when it holds both its invitation and the announcement.
      latency_max_s: latencies are capped here (a lognormal's tail would otherwise reach past
        any deadline).
      duplicate_delay_s, late_margin_s: see ``duplicate`` and ``late``.
      announcement_timeout_s: an invitation whose announcement has not arrived this long after
        it is given up (counted ``unannounced``; never answered).

    Raises:
      ValueError: a probability outside [0, 1], probabilities summing above 1, a negative or
        non-finite time, a median or timeout that is not positive, a seed below 0.
    """

    dropout: float = 0.0
    malformed: float = 0.0
    late: float = 0.0
    duplicate: float = 0.0
    seed: int = 0
    latency_median_s: float = 0.05
    latency_spread: float = 0.5
    latency_max_s: float = 5.0
    duplicate_delay_s: float = 0.05
    late_margin_s: float = 0.5
    announcement_timeout_s: float = 30.0

    def __post_init__(self):
        check_fate_probabilities({name: getattr(self, name) for name in FATES[:-1]})
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"the fleet seed is an integer >= 0, got {self.seed!r}")
        for name in ("latency_spread", "latency_max_s", "duplicate_delay_s", "late_margin_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} is a finite number >= 0, got {value!r}")
        for name in ("latency_median_s", "announcement_timeout_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} is a finite number > 0, got {value!r}")

    @property
    def edges(self) -> tuple:
        """The fates' cumulative probabilities (``FATES`` but "none" lie left of each)."""
        return tuple(itertools.accumulate(float(getattr(self, name)) for name in FATES[:-1]))

    @property
    def probabilities(self) -> dict:
        """Each of ``FATES`` and its probability."""
        faults = {name: float(getattr(self, name)) for name in FATES[:-1]}
        return {**faults, "none": max(0.0, 1.0 - sum(faults.values()))}


@dataclasses.dataclass(frozen=True)
class DeviceFate:
    """What one invited device does in one round.

    Attributes:
      fate: one of ``FATES``.
      latency_s: how long after it can answer it sends (its first copy).
      corruption: for ``malformed``: a uniform in [0, 1) choosing the corruption (below 1/2:
        a truncation, else a bit flip) and a uniform choosing where.
    """

    fate: str
    latency_s: float
    corruption: tuple = (0.0, 0.0)


def _word(text: bytes) -> int:
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little")


def device_fate(options: FleetOptions, job_id: str, round_index: int, device_id: bytes,
                phase: Optional[int] = None) -> DeviceFate:
    """The fate of ``device_id`` invited to round ``round_index`` of ``job_id`` (under secure
    aggregation: asked in exchange ``phase``, 0 to 3, each drawn independently): a function of
    these and ``options`` only (a ``Generator`` seeded with the fleet seed, hashes of the job
    and device ids, the round and the exchange)."""
    words = [options.seed, _word(job_id.encode("utf-8")), round_index, _word(device_id)]
    rng = np.random.default_rng(words if phase is None else words + [phase + 1])
    u_fate, u_kind, u_where = rng.random(3).tolist()
    z = float(rng.standard_normal())
    fate = FATES[bisect.bisect_right(options.edges, u_fate)]
    latency = min(options.latency_median_s * math.exp(options.latency_spread * z), options.latency_max_s)
    return DeviceFate(fate, latency, (u_kind, u_where) if fate == "malformed" else (0.0, 0.0))


def _refused(data: bytes, encoder: ItemEncoder) -> bool:
    try:
        VoteReport.from_bytes(data, encoder, "<corrupt report>")
    except FederatedFormatError:
        return True
    return False


def corrupt_report(report: bytes, encoder: ItemEncoder, corruption: tuple) -> bytes:
    """Corrupt bytes in place of a serialized ``VoteReport`` (``corrupt_bytes`` with the report
    parser of the round's ``encoder``)."""
    return corrupt_bytes(report, corruption, lambda data: _refused(data, encoder))


def corrupt_bytes(report: bytes, corruption: tuple, refused: Callable[[bytes], bool]) -> bytes:
    """Corrupt bytes in place of a serialized report: truncated, or one bit flipped.

    A flip can leave a report that still parses (a flipped token byte, a unit flipped into
    another valid unit): the device would then send a valid report for a wrong token or prefix,
    which is another fault than a malformed message. Such a flip is replaced by the truncation
    at the same place, and every truncation is refused (a report's answer is its last field).

    Args:
      report: the serialized report.
      corruption: ``DeviceFate.corruption``.
      refused: whether the server's parser refuses given bytes.

    Raises:
      AssertionError: a corruption the parser accepts (never, for reports whose last field is
        their answer, as every federated report's is).
    """
    kind, where = corruption
    if kind >= 0.5:
        bit = int(where * 8 * len(report))
        flipped = bytearray(report)
        flipped[bit // 8] ^= 1 << (bit % 8)
        if refused(bytes(flipped)):
            return bytes(flipped)
    cut = report[:int(where * len(report))]  # 0 to len - 1 bytes
    if not refused(cut):
        raise AssertionError(f"a truncated report to {len(cut)} of {len(report)} bytes still parses")
    return cut
