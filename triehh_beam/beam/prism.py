"""Finding the Prism binary the product runs (Beam's portable runner in Go), never downloading
one: ``find_prism`` looks at ``$TRIEHH_PRISM``, then ``prism`` on ``PATH``, then the cache
directory ``.ci/run`` installs to, and otherwise refuses in one line naming the ``go install``
command; ``prism_log`` sends Prism's own log lines to a file instead of the console."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from typing import Iterator, Optional

from apache_beam.version import __version__ as BEAM_VERSION

__all__ = ["PRISM_ENV", "PrismNotFoundError", "find_prism", "install_command", "install_dir", "prism_log"]

# The environment variable naming a Prism binary; it wins over PATH and the cache.
PRISM_ENV = "TRIEHH_PRISM"
_PACKAGE = "github.com/apache/beam/sdks/v2/go/cmd/prism"
# The logger Beam's Prism job server writes the binary's output to (job_server.SubprocessJobServer).
_PRISM_LOGGER = "PrismJobServer"


class PrismNotFoundError(RuntimeError):
    """No local Prism binary: the message is one line naming the ``go install`` command."""


def install_dir() -> str:
    """Where ``.ci/run`` installs Prism (``GOBIN``): per Beam version, outside the repository."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "triehh-beam", "prism", f"v{BEAM_VERSION}")


def install_command() -> str:
    """The command that builds the Prism of this Beam version from the Go module proxy."""
    return f"GOBIN={install_dir()} go install {_PACKAGE}@v{BEAM_VERSION}"


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_prism() -> str:
    """The path of the local Prism binary a ``PrismRunner`` job runs.

    Looked for in order: the file ``$TRIEHH_PRISM`` names (it must exist when set), ``prism`` on
    ``PATH``, then ``install_dir()/prism``. Beam itself would download a release binary from
    GitHub when ``--prism_location`` is not given; the product never lets it.

    Raises:
      PrismNotFoundError: none found (or ``$TRIEHH_PRISM`` names no executable file).
    """
    named = os.environ.get(PRISM_ENV)
    if named:
        if not _executable(named):
            raise PrismNotFoundError(f"${PRISM_ENV} is {named}, which is not an executable file: "
                                     f"build Prism with `{install_command()}` or give --prism_location")
        return named
    on_path = shutil.which("prism")
    if on_path:
        return on_path
    cached = os.path.join(install_dir(), "prism")
    if _executable(cached):
        return cached
    raise PrismNotFoundError(
        f"--runner=PrismRunner needs a local Prism binary (the product never downloads one): build it "
        f"with `{install_command()}` (Go 1.21 or later), or name one with ${PRISM_ENV} or --prism_location")


@contextlib.contextmanager
def prism_log(path: Optional[str]) -> Iterator[None]:
    """While it is open, Prism's own log lines go to the file ``path`` (appended), not to the
    console where they would interleave with the product's lines; ``None``: unchanged."""
    if path is None:
        yield
        return
    logger = logging.getLogger(_PRISM_LOGGER)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        handler.close()
