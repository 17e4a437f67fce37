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
