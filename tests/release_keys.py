"""The keys a finished or resumed job's release drew with, as its committed state records them.

Every release draws a fresh nonce (``job.release.lifecycle``), so a test that recomputes a job's samples,
choices or noise (the keyed simulation, the estimates' reference) takes the release's keyed
identity from the job's state, never from its settings alone.
"""

from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.state_store import StateStore


def keyed_identity(where) -> bytes:
    """The keyed identity (identity and nonce) of the release whose state is in ``where``: a
    ``DiscoveryConfig`` (its resolved state directory), a state directory or a ``JobState``."""
    if isinstance(where, DiscoveryConfig):
        where = where.resolved_state_dir
    state = StateStore(str(where)).load() if isinstance(where, (str, bytes)) or hasattr(where, "__fspath__") else where
    if state is None:
        raise AssertionError(f"no committed state in {where}")
    return Release.of_state(state).keyed_identity
