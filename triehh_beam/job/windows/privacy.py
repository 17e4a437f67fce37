"""What a window's guarantee covers, published with every window: the privacy unit ("a user per
day" under a rolling budget, "a user over the population's lifetime" under a lifetime one, "a user
per window" without a budget), the budget, and what they mean for a user active on k periods."""

from __future__ import annotations

from typing import Optional

from triehh_beam.job.state import ledger as ledger_lib
from triehh_beam.proto import state_pb2

__all__ = ["privacy_unit"]


def privacy_unit(config, plan: state_pb2.PrivacyPlan) -> dict:
    """What a window's guarantee covers, published with it: the unit (``"a user per day"``),
    the budget, and what they mean for a user active on k periods (or windows).

    Args:
      config: the job's ``DiscoveryConfig``; plan: every window's ``state_pb2.PrivacyPlan``.
    """
    spend = ledger_lib.plan_spend(plan)
    budget = config.budget
    window = f"each window spends epsilon {spend.epsilon:.6g}, delta {spend.delta:.3g}"
    if budget.period is not None:
        period = ledger_lib.describe_period(budget.period)
        periods = f"{period}s" if " " not in period else f"periods of {period}"
        meaning = (f"{window}; the windows whose event-time intervals touch one {period} (UTC, from the epoch) "
                   f"spend at most epsilon {_amount(budget.epsilon)}, delta {_amount(budget.delta)} in all (the "
                   f"ledger refuses more), so a user active on k {periods} is covered by k times that (basic "
                   f"composition; a window across two {periods} counts in both)")
    elif budget.limited:
        meaning = (f"{window}; every release on this population spends at most epsilon {_amount(budget.epsilon)}, "
                   f"delta {_amount(budget.delta)} in all, however many windows a user is active in")
    else:
        meaning = (f"{window}, with no budget over them: a user active in k windows is covered by k times that "
                   "(basic composition)")
    unit = budget.unit if budget.limited else "a user per window"
    return {"unit": unit, "budget_epsilon": budget.epsilon, "budget_delta": budget.delta,
            "budget_period_seconds": budget.period, "meaning": meaning}


def _amount(value: Optional[float]) -> str:
    return "unlimited" if value is None else f"{value:.6g}"
