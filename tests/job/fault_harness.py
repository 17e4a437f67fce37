"""Runs ``triehh <args>`` and SIGKILLs itself at a named point: the crash of a fault test.

    python tests/job/fault_harness.py POINT -- discover --input ... --output ...
    python tests/job/fault_harness.py --serve

The second form is a fork server (what the fault tests use): it imports Beam and triehh_beam
once, then for each request on its standard input (a JSON line: point, argv, log path) forks a
child that installs the point and runs ``triehh argv`` with its output in the log, waits for it
and answers with the child's status (a JSON line, ``subprocess``'s convention: -9 for a
SIGKILL). Every child is a fresh process, killed for real, that only skips the 2-4 s of
imports a new interpreter spends before its first job (the server runs nothing itself).

The points are places where a real crash hurts most (inside a job, between writing a state
object and publishing it, between the ledger charge and round 1, between the two output files).
They are reached by wrapping library functions from the outside, in this test-only script: the
product has no fault hooks. Exit status -9 means the point was reached and the process died
there; any other status means it was not reached.
"""

import functools
import os
import signal
import sys


def _die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _wrap(owner, name, *, before=None, after=None):
    """Replaces ``owner.name`` with a wrapper calling ``before(args)`` / ``after(args, result)``."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if before is not None:
            before(args, kwargs)
        result = original(*args, **kwargs)
        if after is not None:
            after(args, kwargs, result)
        return result

    setattr(owner, name, wrapper)


def _nth(n, condition=lambda args, kwargs: True):
    """A predicate true at the n-th call that satisfies ``condition`` (1-based)."""
    seen = [0]

    def check(args, kwargs, *result):
        if condition(args, kwargs):
            seen[0] += 1
            if seen[0] == n:
                _die()

    return check


def _install(point: str) -> None:
    from triehh_beam.beam import census
    from triehh_beam.beam.rounds import sampled_rounds
    from triehh_beam.beam.samples import samples
    from triehh_beam.job.batch import driver, levels
    from triehh_beam.job.release import outputs
    from triehh_beam.job.state import ledger, state_store

    def object_of_round(r):
        return lambda args, kwargs: f"state-{r:04d}-" in args[0]

    def of_round(r):  # vote_table(table, frontier, round_index, ...)
        return lambda args, kwargs: args[2] == r

    points = {
        # inside the first read, census and candidates, once the census has spilled its first
        # fingerprints file (the DoFn runs in this process on the in-process runner)
        "census_job": lambda: _wrap(census, "write_spill", after=_nth(1)),
        "after_census": lambda: _wrap(driver.Driver, "census", after=_nth(1)),
        # the plan and seed are committed, the ledger not yet charged
        "after_plan_commit": lambda: _wrap(state_store.StateStore, "commit", after=_nth(1)),
        "after_ledger_charge": lambda: _wrap(ledger.Ledger, "charge", after=_nth(1)),
        # inside the cut of the candidates to samples, one sample table written (charged: the
        # rerun draws the samples by reading the records again)
        "mid_cut": lambda: _wrap(samples, "write_sample_table", after=_nth(1)),
        # the samples are drawn and committed, no round has run
        "after_sampling_commit": lambda: _wrap(driver.Driver, "sample", after=_nth(1)),
        # inside a round's vote (its first table's), in a round's own job or the one job
        "mid_round_1": lambda: _wrap(sampled_rounds, "vote_table", before=_nth(1, of_round(1))),
        "mid_round_2": lambda: _wrap(sampled_rounds, "vote_table", before=_nth(1, of_round(2))),
        # --rounds-per-job all: rounds 1 and 2 written as levels, round 3 running, none committed
        "one_job_after_level_2": lambda: _wrap(levels, "write_level", after=_nth(2)),
        "one_job_mid_round_3": lambda: _wrap(sampled_rounds, "vote_table", before=_nth(1, of_round(3))),
        # a round's state object is written but the manifest does not name it yet
        "object_written_round_1": lambda: _wrap(state_store, "_write", after=_nth(1, object_of_round(1))),
        "object_written_round_2": lambda: _wrap(state_store, "_write", after=_nth(1, object_of_round(2))),
        "manifest_published_round_2": lambda: _wrap(
            state_store.StateStore, "commit", after=_nth(1, lambda args, kwargs: args[1].rounds_completed == 2)),
        "after_round_job_before_commit": lambda: _wrap(driver.Driver, "run_round", after=_nth(2)),
        "before_outputs": lambda: _wrap(driver.Driver, "_write_outputs", before=_nth(1)),
        # heavy_hitters.json is written, trie.pb is not
        "between_output_files": lambda: _wrap(outputs, "write_atomically", after=_nth(1)),
        "after_outputs": lambda: _wrap(driver.Driver, "_write_outputs", after=_nth(1)),
    }
    if point not in points:
        raise SystemExit(f"unknown point {point!r}; known: {', '.join(sorted(points))}")
    points[point]()


POINTS = (
    "census_job",
    "after_census",
    "after_plan_commit",
    "after_ledger_charge",
    "mid_cut",
    "after_sampling_commit",
    "mid_round_1",
    "mid_round_2",
    "one_job_after_level_2",
    "one_job_mid_round_3",
    "object_written_round_1",
    "object_written_round_2",
    "manifest_published_round_2",
    "after_round_job_before_commit",
    "before_outputs",
    "between_output_files",
    "after_outputs",
)


# The points reached only when every round runs in one job (``--rounds-per-job all``).
ONE_JOB_POINTS = ("one_job_after_level_2", "one_job_mid_round_3")


#: Every run of the harness draws this release nonce (instead of a fresh one): the unbroken run
#: and each killed-and-rerun one are then the same release, so their results compare byte for
#: byte. Patched from the outside, like the faults: the product always draws a fresh nonce.
FIXED_NONCE = bytes(range(16))


def _fix_the_nonce() -> None:
    from triehh_beam.job.release import lifecycle as release

    release.Release.fresh = classmethod(lambda cls, seed, identity: cls(seed, identity, FIXED_NONCE))


def _preload() -> None:
    """Imports what a discovery imports (Beam's in-process runner included), running nothing."""
    import apache_beam  # noqa: F401
    from apache_beam.runners.portability import fn_api_runner  # noqa: F401
    from apache_beam.runners.direct import direct_runner  # noqa: F401
    from apache_beam.runners.portability import local_job_service, portable_runner  # noqa: F401
    import pyarrow.dataset  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    from triehh_beam import cli  # noqa: F401
    from triehh_beam.job.batch import driver, levels  # noqa: F401
    from triehh_beam.job.state import ledger, state_store
    from triehh_beam.job.release import outputs
    from triehh_beam.beam import census  # noqa: F401
    from triehh_beam.beam.samples import sample_pass
    from triehh_beam.beam.rounds import sampled_rounds
    from triehh_beam.evaluation.audits import audit  # noqa: F401
    from triehh_beam.job.batch import dry_run  # noqa: F401


def _child(point: str, argv, log: str) -> None:
    """In the forked child: output to ``log``, the point installed, ``triehh argv``; never returns."""
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # the server's requests are not the child's to read
        os.close(null)
        if point != "none":
            _install(point)
        from triehh_beam import cli

        code = cli.main(argv)
        code = code if isinstance(code, int) else 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported in the log, as an interpreter would
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve() -> None:
    import json
    import threading

    _fix_the_nonce()
    _preload()
    # A fork copies one thread: the server must have no other, or a child could inherit a held lock.
    assert threading.active_count() == 1, threading.enumerate()
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request["point"], request["argv"], request["log"])
        _, status = os.waitpid(pid, 0)
        returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        sys.stdout.write(json.dumps({"returncode": returncode}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
        sys.exit(0)
    point, separator, *argv = sys.argv[1:]
    assert separator == "--", "usage: fault_harness.py POINT -- triehh arguments (POINT none: no fault)"
    _fix_the_nonce()
    if point != "none":
        _install(point)
    from triehh_beam import cli

    sys.exit(cli.main(argv))
