"""The privacy ledger of a population: one record per release, appended by compare-and-swap with
the budget check (so two jobs racing for the last of a budget cannot both win) before anything of
the release is sampled or published, with the (epsilon, delta) it spends, its id, its plan's
parameters and the event-time interval of what it releases (a window's; a batch job's is the
instant it is charged); spends add up (basic composition) against an optional budget, over the
population's lifetime or, with a period, over each period of event time that a release's interval
touches (a record without an interval counts in every period), and a record id already in the
ledger is not charged again (a resume). A job checks its target against what is left before it
reads any record.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Iterable, List, NamedTuple, Optional, Tuple

from triehh_beam.job.state import cas, record_log
from triehh_beam.protocol.accounting.composition import basic_composition
from triehh_beam.protocol.protocols import Protocol

__all__ = ["Budget", "BudgetExceededError", "LEDGER_NAME", "Ledger", "Spend", "describe_period", "interval_of",
           "period_start", "periods_of", "plan_spend", "remaining"]

LEDGER_NAME = "ledger.jsonl"


@dataclasses.dataclass(frozen=True)
class Budget:
    """An (epsilon, delta) budget for a population; None means unlimited.

    Attributes:
      period: None, a lifetime budget; else seconds: the budget holds for every period of event
        time ``[k * period, (k + 1) * period)`` since the epoch (UTC; ``1d`` is a UTC day): the
        releases whose intervals touch one period spend at most the budget.
    """

    epsilon: Optional[float] = None
    delta: Optional[float] = None
    period: Optional[int] = None

    def __post_init__(self):
        if self.epsilon is not None and not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"--budget-epsilon must be a positive number, got {self.epsilon}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise ValueError(f"--budget-delta must be in (0, 1), got {self.delta}")
        if self.period is not None and (isinstance(self.period, bool) or not isinstance(self.period, int)
                                        or self.period < 1):
            raise ValueError(f"--budget-period must be a duration of at least 1 s, got {self.period!r}")
        if self.period is not None and not self.limited:
            raise ValueError("--budget-period needs --budget-epsilon or --budget-delta (the budget of each period)")

    @property
    def limited(self) -> bool:
        return self.epsilon is not None or self.delta is not None

    @property
    def unit(self) -> str:
        """The privacy unit the budget bounds: ``"a user per day"``, ``"a user over the
        population's lifetime"``."""
        if self.period is None:
            return "a user over the population's lifetime"
        return f"a user per {describe_period(self.period)}"


def describe_period(seconds: int) -> str:
    """``86400`` -> ``"day"``, ``3600`` -> ``"hour"``, ``172800`` -> ``"2 days"``, ``90`` -> ``"90 s"``."""
    for size, name in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds % size == 0:
            count = seconds // size
            return name if count == 1 else f"{count} {name}s"
    return f"{seconds} s"


def interval_of(record: dict) -> Optional[Tuple[int, int]]:
    """A record's event-time interval ``[start, end)`` in microseconds; None for a record
    written without one (it counts in every period)."""
    start, end = record.get("interval_start_us"), record.get("interval_end_us")
    if start is None or end is None:
        return None
    return int(start), int(end)


def period_start(k: int, period: int) -> str:
    """The start of period ``k`` of ``period`` seconds, RFC 3339 UTC (``2026-11-28T00:00:00Z``)."""
    return _rfc3339(k * period * 1_000_000)


def periods_of(interval: Tuple[int, int], period: int) -> range:
    """The indices ``k`` of the periods ``[k * period, (k + 1) * period)`` (seconds) that the
    interval ``[start, end)`` (microseconds; an instant when start == end) touches."""
    start, end = interval
    size = period * 1_000_000
    return range(start // size, max(start, end - 1) // size + 1)


class Spend(NamedTuple):
    """Spent or remaining (epsilon, delta); infinite for a job without a guarantee, or for what
    is left of an unlimited budget."""

    epsilon: float
    delta: float


class BudgetExceededError(ValueError):
    """A job would spend more than the population's remaining lifetime budget."""


def remaining(budget: Budget, spent: Spend) -> Spend:
    """What is left of ``budget`` after ``spent`` (infinite for an unlimited component)."""
    return Spend(
        math.inf if budget.epsilon is None else max(0.0, budget.epsilon - spent.epsilon),
        math.inf if budget.delta is None else max(0.0, budget.delta - spent.delta),
    )


def _describe(left: Spend) -> str:
    eps = "unlimited" if math.isinf(left.epsilon) else f"{left.epsilon:.6g}"
    delta = "unlimited" if math.isinf(left.delta) else f"{left.delta:.3g}"
    return f"epsilon {eps}, delta {delta}"


class Ledger:
    """The spend records of one population, in a compare-and-swap store.

    Args:
      location: a local directory or ``gs://bucket/prefix`` holding ``ledger.jsonl``.
      budget: the lifetime budget enforced on ``charge``.
      client: a ``google.cloud.storage.Client`` for ``gs://`` (default: the environment's).
    """

    def __init__(self, location: str, budget: Budget = Budget(), client=None):
        self.location = location
        self.budget = budget
        self._store = cas.cas_store_for(location, client=client)

    @property
    def path(self) -> str:
        return self._store.location(LEDGER_NAME)

    def records(self) -> List[dict]:
        """Every spend record, oldest first."""
        return record_log.read_records(self._store, LEDGER_NAME)

    @staticmethod
    def total(records: Iterable[dict]) -> Spend:
        """Basic sequential composition of the records; a job without a guarantee (recorded
        with null epsilon and delta) makes the total infinite."""
        return Spend(*basic_composition((_component(r, "epsilon"), _component(r, "delta")) for r in records))

    def spent(self) -> Spend:
        return self.total(self.records())

    def spent_per_period(self, records: Iterable[dict]) -> List[Tuple[int, Spend]]:
        """With a period budget: ``(k, spent)`` for every period ``k`` some record touches, oldest
        first (records without an interval count in each); without one, empty."""
        period = self.budget.period
        if period is None:
            return []
        records = list(records)
        touched = sorted({k for r in records if interval_of(r) for k in periods_of(interval_of(r), period)})
        return [(k, self.total(r for r in records if interval_of(r) is None or k in periods_of(interval_of(r), period)))
                for k in touched]

    def _refusal(self, spend: Spend, records: List[dict], what: str,
                 interval: Optional[Tuple[int, int]] = None) -> Optional[str]:
        period = self.budget.period
        if period is None:
            left = remaining(self.budget, self.total(records))
            if spend.epsilon <= left.epsilon and spend.delta <= left.delta:
                return None
            return (
                f"{what} (epsilon {spend.epsilon:.6g}, delta {spend.delta:.3g}) exceeds the remaining "
                f"lifetime budget of this population ({_describe(left)}; ledger {self.path})"
            )
        interval = interval or _now_interval()
        for k in periods_of(interval, period):
            touching = [r for r in records if interval_of(r) is None or k in periods_of(interval_of(r), period)]
            left = remaining(self.budget, self.total(touching))
            if spend.epsilon > left.epsilon or spend.delta > left.delta:
                return (f"{what} (epsilon {spend.epsilon:.6g}, delta {spend.delta:.3g}) exceeds what is left of "
                        f"the budget per {describe_period(period)} for the {describe_period(period)} from "
                        f"{period_start(k, period)} ({_describe(left)}; ledger {self.path})")
        return None

    def fits(self, spend: Spend, interval: Optional[Tuple[int, int]] = None) -> bool:
        """Whether ``spend`` over ``interval`` fits what is left now (a check, not a charge)."""
        return self._refusal(spend, self.records(), "", interval) is None

    def check(self, spend: Spend, job_id: Optional[str] = None, interval: Optional[Tuple[int, int]] = None) -> None:
        """Refuses, before anything is read, a job whose spend would not fit (over ``interval``,
        with a period budget; default: now).

        A job already in the ledger (a resume) always passes: it has been charged.

        Raises:
          BudgetExceededError: with the remaining budget in the message.
        """
        records = self.records()
        if job_id is not None and any(r.get("record_id") == job_id for r in records):
            return
        refusal = self._refusal(spend, records, "this job's target", interval)
        if refusal:
            raise BudgetExceededError(refusal)

    def charge(self, job_id: str, spend: Spend, details: dict, interval: Optional[Tuple[int, int]] = None) -> None:
        """Records the job's spend once, atomically with the budget check, with the event-time
        ``interval`` ``[start, end)`` (microseconds) of what it releases (default: the instant
        of the charge: a batch job's period is the one it runs in).

        Raises:
          BudgetExceededError: the spend no longer fits (another job took the budget).
        """
        interval = interval or _now_interval()

        def fits(records: List[dict]) -> None:
            refusal = self._refusal(spend, records, "this job's spend", interval)
            if refusal:
                raise BudgetExceededError(refusal)

        record = {"record_id": job_id, "epsilon": spend.epsilon, "delta": spend.delta, **details,
                  "interval_start_us": interval[0], "interval_end_us": interval[1]}
        record_log.append_record(self._store, LEDGER_NAME, record, precondition=fits)

    def charge_unbounded(self, job_id: str, details: dict) -> None:
        """Records a job that has no DP guarantee (fixed parameters outside Theorem 1).

        Its spend is unbounded, so it is refused on a population with a budget, and recorded
        (null epsilon and delta) so that the ledger's total becomes infinite.

        Raises:
          BudgetExceededError: the population has a budget.
        """
        if self.budget.limited:
            raise BudgetExceededError(
                "a job without a DP guarantee cannot run on a population with a budget"
            )
        record = {"record_id": job_id, "epsilon": None, "delta": None, "no_guarantee": True, **details}
        record_log.append_record(self._store, LEDGER_NAME, record)

    def charge_plan(self, record_id: str, plan, details: dict, interval: Optional[Tuple[int, int]] = None) -> None:
        """Records a planned job's spend: its plan's (epsilon, delta), or unbounded for a plan
        without a guarantee (``charge``, ``charge_unbounded``), with the plan's parameters
        (population, theta, batch size, L, rule, target; for TrieHH++ and whole items the protocol, tau,
        alpha, p_s, the per-round (epsilon, delta) and the accounting, "exact" or "bound", instead of
        theta and m) after ``details``.
        With frequency estimates the charge is ``plan_spend``'s total, and the record names its
        parts: ``discovery_epsilon`` and ``estimate_epsilon``.

        Args:
          plan: the job's (or a window's) ``state_pb2.PrivacyPlan``.
          interval: the event-time interval of what it releases (``charge``).

        Raises:
          BudgetExceededError: the spend does not fit the population's budget.
        """
        sample_threshold = Protocol(plan.protocol).samples_by_probability  # a probability, tau
        fields = _SAMPLE_THRESHOLD_FIELDS if sample_threshold else _PLAN_FIELDS
        details = {**details, **{name: getattr(plan, name) for name in fields}}
        if sample_threshold:
            details["tau"] = details.pop("theta")
            details["accounting"] = plan.accounting  # how the spend was certified: "exact" or "bound"
        if plan.estimate_epsilon:
            # Which part of the spend is the frequency estimates' (--estimate-frequencies).
            details.update(discovery_epsilon=None if plan.no_guarantee else plan.epsilon,
                           estimate_epsilon=plan.estimate_epsilon)
        if plan.no_guarantee:
            self.charge_unbounded(record_id, details)
        else:
            self.charge(record_id, plan_spend(plan), details, interval)


def _component(record: dict, name: str) -> float:
    """A ledger record's epsilon or delta; infinite when it is null (a job without a guarantee)."""
    return math.inf if record.get(name) is None else float(record[name])


def _now_interval() -> Tuple[int, int]:
    now = time.time_ns() // 1000
    return now, now


def _rfc3339(micros: int) -> str:
    import datetime

    instant = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=micros)
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def plan_spend(plan) -> Spend:
    """What a ``state_pb2.PrivacyPlan`` spends: the discovery's (epsilon, delta) plus, with
    frequency estimates, their epsilon (basic composition; they add no delta); infinite for a
    plan without a guarantee."""
    if plan.no_guarantee:
        return Spend(math.inf, math.inf)
    return Spend(*basic_composition([(plan.epsilon, plan.delta), (plan.estimate_epsilon, 0.0)]))


# What a ledger record tells of the plan behind its spend.
_PLAN_FIELDS = ("population", "theta", "batch_size", "max_length", "rule", "target_epsilon", "target_delta")
# TrieHH++'s (``theta`` recorded as ``tau``): its sample is a probability, not a size.
_SAMPLE_THRESHOLD_FIELDS = ("protocol", "population", "theta", "alpha", "sample_probability", "round_epsilon",
                            "round_delta", "max_length", "rule", "target_epsilon", "target_delta")
