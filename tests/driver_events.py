"""What a test learns from the driver's structured events (``run_discovery(events=...)``) rather
than from its progress text: stopping a discovery once a round is committed."""

from __future__ import annotations

from typing import Callable

__all__ = ["StoppedAfterRound", "stop_after_round"]


class StoppedAfterRound(Exception):
    """Raised by ``stop_after_round``'s callback: the discovery stopped there, as a kill would."""


def stop_after_round(round_index: int = 1) -> Callable[[dict], None]:
    """An ``events`` callback that raises ``StoppedAfterRound`` at the driver's ``round`` event of
    round ``round_index``, which the driver sends only once that round is committed."""
    def stop(event: dict) -> None:
        if event["event"] == "round" and event["round"] == round_index:
            raise StoppedAfterRound(event["message"])

    return stop
