"""The privacy ledger of a population: one record per release, appended by compare-and-swap with
the budget check (so two jobs racing for the last of a budget cannot both win) before anything of
the release is sampled or published, with the (epsilon, delta) it spends, its id and its plan's
parameters; spends add up (basic composition) against an optional lifetime budget, and a record
id already in the ledger is not charged again (a resume). A job checks its target against what
is left before it reads any record.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, List, NamedTuple, Optional

from triehh_beam.job import cas, record_log
from triehh_beam.protocol.protocols import Protocol

__all__ = ["Budget", "BudgetExceededError", "LEDGER_NAME", "Ledger", "Spend", "plan_spend", "remaining"]

LEDGER_NAME = "ledger.jsonl"


@dataclasses.dataclass(frozen=True)
class Budget:
    """A lifetime (epsilon, delta) budget for a population; None means unlimited."""

    epsilon: Optional[float] = None
    delta: Optional[float] = None

    def __post_init__(self):
        if self.epsilon is not None and not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"--budget-epsilon must be a positive number, got {self.epsilon}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise ValueError(f"--budget-delta must be in (0, 1), got {self.delta}")

    @property
    def limited(self) -> bool:
        return self.epsilon is not None or self.delta is not None


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
        epsilon = delta = 0.0
        for r in records:
            epsilon += math.inf if r.get("epsilon") is None else float(r["epsilon"])
            delta += math.inf if r.get("delta") is None else float(r["delta"])
        return Spend(epsilon, delta)

    def spent(self) -> Spend:
        return self.total(self.records())

    def _refusal(self, spend: Spend, records: List[dict], what: str) -> Optional[str]:
        left = remaining(self.budget, self.total(records))
        if spend.epsilon <= left.epsilon and spend.delta <= left.delta:
            return None
        return (
            f"{what} (epsilon {spend.epsilon:.6g}, delta {spend.delta:.3g}) exceeds the remaining "
            f"lifetime budget of this population ({_describe(left)}; ledger {self.path})"
        )

    def check(self, spend: Spend, job_id: Optional[str] = None) -> None:
        """Refuses, before anything is read, a job whose spend would not fit.

        A job already in the ledger (a resume) always passes: it has been charged.

        Raises:
          BudgetExceededError: with the remaining budget in the message.
        """
        records = self.records()
        if job_id is not None and any(r.get("record_id") == job_id for r in records):
            return
        refusal = self._refusal(spend, records, "this job's target")
        if refusal:
            raise BudgetExceededError(refusal)

    def charge(self, job_id: str, spend: Spend, details: dict) -> None:
        """Records the job's spend once, atomically with the budget check.

        Raises:
          BudgetExceededError: the spend no longer fits (another job took the budget).
        """

        def fits(records: List[dict]) -> None:
            refusal = self._refusal(spend, records, "this job's spend")
            if refusal:
                raise BudgetExceededError(refusal)

        record = {"record_id": job_id, "epsilon": spend.epsilon, "delta": spend.delta, **details}
        record_log.append_record(self._store, LEDGER_NAME, record, precondition=fits)

    def charge_unbounded(self, job_id: str, details: dict) -> None:
        """Records a job that has no DP guarantee (fixed parameters outside Theorem 1).

        Its spend is unbounded, so it is refused on a population with a budget, and recorded
        (null epsilon and delta) so that the ledger's total becomes infinite.

        Raises:
          BudgetExceededError: the population has a lifetime budget.
        """
        if self.budget.limited:
            raise BudgetExceededError(
                "a job without a DP guarantee cannot run on a population with a lifetime budget"
            )
        record = {"record_id": job_id, "epsilon": None, "delta": None, "no_guarantee": True, **details}
        record_log.append_record(self._store, LEDGER_NAME, record)

    def charge_plan(self, record_id: str, plan, details: dict) -> None:
        """Records a planned job's spend: its plan's (epsilon, delta), or unbounded for a plan
        without a guarantee (``charge``, ``charge_unbounded``), with the plan's parameters
        (population, theta, batch size, L, rule, target; for TrieHH++ and whole items the protocol, tau,
        alpha, p_s, the per-round (epsilon, delta) and the accounting, "exact" or "bound", instead of
        theta and m) after ``details``.
        With frequency estimates the charge is ``plan_spend``'s total, and the record names its
        parts: ``discovery_epsilon`` and ``estimate_epsilon``.

        Args:
          plan: the job's (or a window's) ``state_pb2.PrivacyPlan``.

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
            self.charge(record_id, plan_spend(plan), details)


def plan_spend(plan) -> Spend:
    """What a ``state_pb2.PrivacyPlan`` spends: the discovery's (epsilon, delta) plus, with
    frequency estimates, their epsilon (basic composition; they add no delta); infinite for a
    plan without a guarantee."""
    if plan.no_guarantee:
        return Spend(math.inf, math.inf)
    return Spend(plan.epsilon + plan.estimate_epsilon, plan.delta)


# What a ledger record tells of the plan behind its spend.
_PLAN_FIELDS = ("population", "theta", "batch_size", "max_length", "rule", "target_epsilon", "target_delta")
# TrieHH++'s (``theta`` recorded as ``tau``): its sample is a probability, not a size.
_SAMPLE_THRESHOLD_FIELDS = ("protocol", "population", "theta", "alpha", "sample_probability", "round_epsilon",
                            "round_delta", "max_length", "rule", "target_epsilon", "target_delta")
