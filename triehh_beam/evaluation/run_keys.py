"""The keys of one evaluation run (``triehh evaluate``), shared by its two engines.

An evaluation run is no release of anyone's data: its seed is public, derived per run
(``run_seed(seed, j)``), so its keys are its own whatever its nonce. The pipeline engine gives
``run_discovery`` this fixed release (instead of a fresh nonce) so that the keyed simulation,
given the same ``keyed_identity``, redraws exactly the pipeline's samples in the same work
directory: the two engines stay comparable run for run.
"""

from __future__ import annotations

from triehh_beam.job.release import NONCE_BYTES, Release

__all__ = ["evaluation_release"]

_EVALUATION_NONCE = b"\x00" * NONCE_BYTES


def evaluation_release(seed: bytes, identity: bytes) -> Release:
    """The release of the evaluation run with ``seed`` whose discovery has ``identity``
    (``DiscoveryConfig.sampling_identity``)."""
    return Release(seed, identity, _EVALUATION_NONCE)
