"""Prism in the tests: whether it can run here (the binary, and a loopback-only network namespace
to run it in: Prism binds every interface and its data plane carries raw records), and the
command prefix that runs a process in such a namespace (``unshare -n``, ``ip link set lo up``).
Used by the tests marked ``prism`` and by ``pytest --runner prism``."""

import functools
import subprocess
from typing import List, Optional, Sequence

from triehh_beam.beam import prism

# Runs "$@" in a new network namespace whose only interface is loopback, brought up.
_IN_LOOPBACK_NAMESPACE = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def in_loopback_namespace(argv: Sequence[str]) -> List[str]:
    """``argv`` run inside a fresh network namespace with only loopback up."""
    return _IN_LOOPBACK_NAMESPACE + list(argv)


@functools.lru_cache(maxsize=None)
def skip_reason() -> Optional[str]:
    """None when Prism can run here in a loopback-only namespace, else why not, in one line."""
    try:
        prism.find_prism()
    except prism.PrismNotFoundError as e:
        return f"Prism is not installed (.ci/run builds it): {e}"
    try:
        probe = subprocess.run(in_loopback_namespace(["true"]), capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run unshare -n here ({e}): Prism runs only in a loopback-only network namespace"
    if probe.returncode != 0:
        first = (probe.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[0]
        return f"unshare -n is not permitted here ({first}): Prism runs only in a loopback-only network namespace"
    return None


def loopback_only() -> bool:
    """Whether this process's network namespace has no interface but loopback (``lo``)."""
    with open("/proc/net/dev") as f:
        names = [line.split(":", 1)[0].strip() for line in f.readlines()[2:]]
    return names == ["lo"]
