"""States as an earlier release wrote them, made from one this release published: for the tests
that a state of another version is refused (or, for the demo, left alone) with a clear line."""

import hashlib
import json
import os

from triehh_beam.job.state import cas
from triehh_beam.job.state.state_store import MANIFEST_NAME, StateStore

__all__ = ["as_written_by_0_1_0"]


def as_written_by_0_1_0(state_dir) -> None:
    """Rewrites the state published in ``state_dir`` as triehh-beam 0.1.0 wrote states (state
    schema 1, no ``written_by``), its manifest's checksum matching: only its version is at fault."""
    store = StateStore(str(state_dir))
    manifest = store.read_manifest()
    state = store.load()
    state.schema_version, state.written_by = 1, ""
    data = state.SerializeToString()
    with open(os.path.join(state_dir, manifest["state_object"]), "wb") as f:
        f.write(data)
    manifest["sha256"] = hashlib.sha256(data).hexdigest()
    objects = cas.LocalCasStore(str(state_dir))
    objects.replace(MANIFEST_NAME, json.dumps(manifest).encode(), objects.read(MANIFEST_NAME).generation)
