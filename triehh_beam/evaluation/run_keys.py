"""The keys of one evaluation run (``triehh evaluate``), shared by its two engines: run ``j``'s
public, derived secret seed (``run_seed``), the same for every configuration so configurations
are compared on paired runs, and the fixed release (``evaluation_release``) the pipeline engine
runs under instead of a fresh nonce, so that the keyed simulation given the same job identity
redraws exactly the pipeline's samples. An evaluation run releases no one's data: its seed is
public, so its keys are its own whatever its nonce."""

from __future__ import annotations

import hashlib

from triehh_beam.job.release.lifecycle import NONCE_BYTES, Release

__all__ = ["evaluation_release", "run_seed"]

_EVALUATION_NONCE = b"\x00" * NONCE_BYTES


def run_seed(seed: int, run: int) -> bytes:
    """The 32-byte secret seed of TrieHH run ``run`` of an evaluation with public seed ``seed``."""
    return hashlib.blake2b(f"triehh-beam/evaluate/{seed}/{run}".encode(), digest_size=32).digest()


def evaluation_release(seed: bytes, identity: bytes) -> Release:
    """The release of the evaluation run with ``seed`` whose discovery has ``identity``
    (``DiscoveryConfig.sampling_identity``)."""
    return Release(seed, identity, _EVALUATION_NONCE)
