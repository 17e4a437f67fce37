"""Ctrl-C that no library can lose: SIGINT raises ``KeyboardInterrupt`` as Python's default does
and is also remembered, so that when code in between swallows it (Beam's in-process runner can,
mid-bundle, and then finishes its job) ``check`` raises it again at the run's next progress line."""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["check", "remembered"]

_received = threading.Event()


def _on_sigint(signum, frame):
    _received.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def remembered():
    """Within the block, SIGINT is remembered as well as raised (in the main thread only: other
    threads cannot set signal handlers, and leave Python's own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _received.clear()


def check() -> None:
    """Raises ``KeyboardInterrupt`` if SIGINT arrived within ``remembered``.

    Raises:
      KeyboardInterrupt: Ctrl-C was pressed, even if whatever it interrupted swallowed it.
    """
    if _received.is_set():
        raise KeyboardInterrupt
