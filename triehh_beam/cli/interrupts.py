"""Ctrl-C that no library can lose: SIGINT raises ``KeyboardInterrupt`` as Python's default does
and is also remembered, so that when code in between swallows it (Beam's in-process runner can,
mid-bundle, and then finishes its job) or turns it into another error (Beam re-raises it from a
DoFn as ``RuntimeError``; a file write it cut short fails with ``OSError``), ``check`` raises it
again at the run's next progress line and ``received`` lets the tool report it as the interrupt it
was. Once a command's result is committed, ``finishing`` lets it print that result undisturbed."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

__all__ = ["check", "finishing", "ignore", "received", "record_only", "remembered"]

_received = threading.Event()
_raising = threading.Event()


def _on_sigint(signum, frame):
    _received.set()
    if _raising.is_set():
        raise KeyboardInterrupt


def record_only() -> None:
    """From now on SIGINT is remembered but raises nothing outside ``remembered`` (the ``triehh``
    executable's setting around its command, so that a Ctrl-C as it starts is not lost and one as
    it exits cannot turn a finished command into a killed one)."""
    signal.signal(signal.SIGINT, _on_sigint)


def ignore() -> None:
    """The command is done: SIGINT is ignored while the process shuts down. Beam's threads and
    channels can take a second to close, and Python restores the default handler for SIGINT (which
    kills the process by the signal) as it finalises unless SIGINT is ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def remembered():
    """Within the block, SIGINT is remembered as well as raised (in the main thread only: other
    threads cannot set signal handlers, and leave Python's own).

    Raises:
      KeyboardInterrupt: on entry, if SIGINT arrived since ``record_only``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _quiet_interrupts(previous_hook)
    _raising.set()
    try:
        if _received.is_set():
            raise KeyboardInterrupt
        yield
    finally:
        _raising.clear()
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook
        _received.clear()


def _quiet_interrupts(hook):
    """``sys.unraisablehook`` that keeps quiet about a ``KeyboardInterrupt`` raised where Python
    cannot propagate it (a weakref callback, a ``__del__``, mid garbage collection: it printed
    "Exception ignored in ..." and a traceback); it is remembered, and ``check`` raises it again
    at the run's next progress line. Anything else goes to ``hook``."""

    def unraisable(unraisable_args):
        if unraisable_args.exc_type is not None and issubclass(unraisable_args.exc_type, KeyboardInterrupt):
            return
        hook(unraisable_args)

    return unraisable


def received() -> bool:
    """Whether SIGINT arrived within ``remembered`` (whatever became of its ``KeyboardInterrupt``)."""
    return _received.is_set()


def finishing() -> None:
    """The command's result is committed: from here SIGINT no longer interrupts it (the rest is
    printing what is already done, and the command exits 0), and ``check`` raises nothing."""
    _raising.clear()


def check() -> None:
    """Raises ``KeyboardInterrupt`` if SIGINT arrived within ``remembered`` (and not ``finishing``).

    Raises:
      KeyboardInterrupt: Ctrl-C was pressed, even if whatever it interrupted swallowed it.
    """
    if _received.is_set() and _raising.is_set():
        raise KeyboardInterrupt
