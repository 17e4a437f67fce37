"""Each window's release, decided by the windowed job's driver in window order before the window
closes, never in a step a runner may retry: its nonce derived from the job's committed base nonce
and the window (``release.derived_nonce``), then ``release.commit_then_charge`` commits its plan,
nonce and ledger record id, charges it for the window's event-time interval and commits it marked
charged; a window the budget refuses is recorded, published as refused (``_REFUSED``, charged
nothing) with the start of the next window the budget allows. The graph's ``PlanAndCharge`` step
only reads what was decided here.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from triehh_beam.beam.windows.windows import rfc3339
from triehh_beam.job.release import outputs, lifecycle as release
from triehh_beam.job.settings import deny_lists
from triehh_beam.job.state import cas
from triehh_beam.job.state import ledger as ledger_lib
from triehh_beam.job.state.clock import now_iso
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.job.windows.privacy import privacy_unit
from triehh_beam.job.windows.windowed import (REFUSED_MARKER, WITHHELD_NAME, WindowedJob,
                                              WindowStateMismatchError, window_dir_name)
from triehh_beam.proto import state_pb2

__all__ = ["BASE_NONCE_NAME", "Decision", "WindowReleases"]

#: The job's base nonce (``release.fresh_nonce``, created once), beside its windows' states.
BASE_NONCE_NAME = "base_nonce"
# How far past a refused window the driver looks for the next window the budget allows.
_LOOKAHEAD_PERIODS = 3


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the driver decided for one window.

    Attributes:
      start: the window's start (microseconds since the epoch, UTC).
      charged: its release is committed and charged: it is released when it closes.
      already_released: an earlier run released it (never again).
      refused_by_budget: the budget refused it (published as refused, nothing charged).
      reason: why it is not released (None when charged).
      next_allowed: refused: the start of the next window the budget allows now (None: none
        within a few periods, or a lifetime budget).
    """

    start: int
    charged: bool = False
    already_released: bool = False
    refused_by_budget: bool = False
    reason: Optional[str] = None
    next_allowed: Optional[int] = None


class WindowReleases:
    """The driver's side of a windowed job's releases.

    Args:
      job: the ``WindowedJob``.
      ledger: the population's ledger (default: ``release.open_ledger(job.settings.config)``), also
        ``self.ledger``.
    """

    def __init__(self, job: WindowedJob, ledger: Optional[ledger_lib.Ledger] = None):
        self._job = job
        self.ledger = ledger or release.open_ledger(job.config)
        if cas.is_local(job.state_root):
            cas.make_private_dir(job.state_root)
        self._base = cas.read_or_create(cas.cas_store_for(job.state_root), BASE_NONCE_NAME, release.fresh_nonce)
        self._plan = job.plan()
        self._deny_digest = job.config.deny.digest if job.config.deny is not None else ""

    def nonce(self, start: int) -> bytes:
        """The window's release nonce: the same on every retry and restart of this job."""
        return release.derived_nonce(self._base, window_dir_name(start))

    def record_id(self, start: int) -> str:
        return release.record_id_of(f"{self._job.stream_id}/{window_dir_name(start)}", self.nonce(start))

    def _interval(self, start: int):
        return start, start + self._job.windows.size_micros

    def decide(self, start: int) -> Decision:
        """Commits and charges the window's release, or finds it decided (a retry, a restart).

        Raises:
          WindowStateMismatchError: its committed state was planned with other settings.
          LedgerMismatchError: its state says charged, the ledger holds no such charge.
        """
        job = self._job
        withheld = outputs.read_json(FileSystems.join(job.window_state_dir(start), WITHHELD_NAME))
        if withheld is not None:
            return Decision(start, refused_by_budget=withheld.get("refused_by_budget", False),
                            reason=withheld["reason"], next_allowed=withheld.get("next_allowed_us"))
        store = StateStore(job.window_state_dir(start))
        state = store.load()
        if state is not None:
            if state.sampling_identity != job.config.window_identity().decode("ascii"):
                raise WindowStateMismatchError(
                    f"{job.window_state_dir(start)} holds window {rfc3339(start)} planned with other settings: "
                    "resume it with the settings it was planned with, or give another --state-dir and --output")
            if state.deny_list.digest != self._deny_digest:  # the list keys no sample: not in the identity
                raise WindowStateMismatchError(
                    f"{job.window_state_dir(start)} holds window {rfc3339(start)} planned with another deny list "
                    f"(the state's digest {state.deny_list.digest:.12}, this one's {self._deny_digest:.12}; empty: "
                    "none): resume it with the list it was planned with, or give another --state-dir and --output")
            if state.finished:
                return Decision(start, already_released=True, reason="released by an earlier run")
            return self._charge(store, state, start)
        if job.released(start):
            return self._withhold(start, "the output already holds a release of this window, whose state is gone: "
                                  "give another --output (nothing was charged)")
        record_id = self.record_id(start)
        if any(r.get("record_id") == record_id for r in self.ledger.records()):
            return self._withhold(start, "the ledger holds this window's charge but its state is gone: give another "
                                  "--state-dir and --output (a new release, with new keys)")
        if not self.ledger.fits(ledger_lib.plan_spend(self._plan), self._interval(start)):
            return self._refuse(start)
        config = job.config
        state = state_pb2.JobState(
            # created_at: the window's close in event time, public and the same on every run
            # (not a wall time, which a census's duration would follow).
            job_id=f"{job.stream_id}-{window_dir_name(start)}", created_at=rfc3339(job.windows.closes_at(start)),
            plan=self._plan,
            input=config.input_spec(), truncate_long_items=config.truncate_long_items,
            sampling_identity=config.window_identity().decode("ascii"), ledger=config.resolved_ledger_dir,
            release_nonce=self.nonce(start), ledger_record=record_id)
        if job.config.deny is not None:
            state.deny_list.CopyFrom(deny_lists.state_record(job.config.deny))
        store.commit(state)
        return self._charge(store, state, start)

    def _charge(self, store: StateStore, state: state_pb2.JobState, start: int) -> Decision:
        details = {"window_start": rfc3339(start), "window_end": rfc3339(self._interval(start)[1]),
                   "time": now_iso(), "mode": "window", "job_id": state.job_id,
                   "input": self._job.config.input_pattern, "state_dir": self._job.config.resolved_state_dir}
        try:
            release.charge_committed(store, state, self.ledger, details, self._interval(start))
        except ledger_lib.BudgetExceededError:  # another job took the budget since ``fits``
            return self._refuse(start)
        return Decision(start, charged=True)

    def _next_allowed(self, start: int) -> Optional[int]:
        period = self.ledger.budget.period
        if period is None:
            return None
        size = self._job.windows.size_micros
        spend = ledger_lib.plan_spend(self._plan)
        last = ledger_lib.periods_of(self._interval(start), period)[-1]
        for k in range(last + 1, last + 1 + _LOOKAHEAD_PERIODS):
            candidate = -(-k * period * 1_000_000 // size) * size  # the first window start in period k
            if self.ledger.fits(spend, self._interval(candidate)):
                return candidate
        return None

    def _refuse(self, start: int) -> Decision:
        job = self._job
        following = self._next_allowed(start)
        unit = privacy_unit(job.config, self._plan)
        when = (f"the next window the budget allows starts at {rfc3339(following)}" if following is not None
                else "no later window fits it (the budget or one window's spend would have to change)")
        reason = f"refused by the budget ({unit['unit']}): {when}"
        marker = {"window_start": rfc3339(start), "window_end": rfc3339(self._interval(start)[1]),
                  "refused_by": "budget", "privacy_unit": unit, "next_allowed_window":
                  None if following is None else rfc3339(following)}
        outputs.write_atomically(FileSystems.join(job.output_dir(start), REFUSED_MARKER),
                                 (json.dumps(marker, sort_keys=True) + "\n").encode("utf-8"))
        return self._withhold(start, reason, refused_by_budget=True, next_allowed=following)

    def _withhold(self, start: int, reason: str, refused_by_budget: bool = False,
                  next_allowed: Optional[int] = None) -> Decision:
        outputs.write_json(FileSystems.join(self._job.window_state_dir(start), WITHHELD_NAME),
                           {"window_start": rfc3339(start), "reason": reason, "refused_by_budget": refused_by_budget,
                            "next_allowed_us": next_allowed}, private=True)
        return Decision(start, refused_by_budget=refused_by_budget, reason=reason, next_allowed=next_allowed)
