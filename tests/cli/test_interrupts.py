"""A Ctrl-C that something swallowed is raised again at the next check."""

import os
import signal

import pytest

from triehh_beam.cli import interrupts


def test_a_swallowed_sigint_is_raised_again_by_check():
    before = signal.getsignal(signal.SIGINT)  # Python's default; ignored in pytest-xdist's workers
    with interrupts.remembered():
        interrupts.check()  # nothing received yet
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes, soon after the signal
                pass
        except KeyboardInterrupt:
            pass  # what a library in between might do
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()
    interrupts.check()  # forgotten once the block ends
    assert signal.getsignal(signal.SIGINT) == before  # the handler is restored


def test_an_interrupt_python_cannot_raise_is_remembered_not_printed(monkeypatch):
    # A SIGINT landing in a weakref callback or a __del__ is "unraisable": Python's hook printed
    # "Exception ignored in ..." and a traceback where the one resume line belongs. Within the
    # block the hook passes it over (check raises it again); anything else still reaches it.
    import sys
    import types

    printed = []
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    interrupt = types.SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt(), object=None)
    other = types.SimpleNamespace(exc_type=ValueError, exc_value=ValueError("x"), object=None)
    with interrupts.remembered():
        sys.unraisablehook(interrupt)
        sys.unraisablehook(other)
    assert printed == [other]
    sys.unraisablehook(interrupt)  # outside the block: Python's own behaviour again
    assert printed == [other, interrupt]
