"""Finding the Prism binary the product runs (Beam's portable runner in Go), never downloading
one: ``find_prism`` looks at ``$TRIEHH_PRISM``, then ``prism`` on ``PATH``, then the cache
directory ``.ci/run`` installs to, and otherwise refuses in one line naming the ``go install``
command; ``send_log_to`` sends Prism's own log lines to a file instead of the console."""

from __future__ import annotations

import logging
import os
import shutil

from apache_beam.version import __version__ as BEAM_VERSION

__all__ = ["PRISM_ENV", "PrismNotFoundError", "find_prism", "install_command", "install_dir", "send_log_to"]

# The environment variable naming a Prism binary; it wins over PATH and the cache.
PRISM_ENV = "TRIEHH_PRISM"
_PACKAGE = "github.com/apache/beam/sdks/v2/go/cmd/prism"
# The logger Beam's Prism job server writes the binary's output to (job_server.SubprocessJobServer).
_PRISM_LOGGER = "PrismJobServer"
_OURS = "_triehh_prism_log"  # marks the handler send_log_to installed


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
        f"with `{install_command()}` (Go 1.26 or later), or name one with ${PRISM_ENV} or --prism_location")


def send_log_to(path: str) -> None:
    """From now on, Prism's own log lines (Beam logs the binary's output, also after a job has
    ended) go to the file ``path`` (appended; created owner-only: workers' errors may quote
    records), not to the console where they would interleave with the product's lines; a later
    call with another path replaces it."""
    logger = logging.getLogger(_PRISM_LOGGER)
    path = os.path.abspath(path)
    ours = [h for h in logger.handlers if getattr(h, _OURS, False)]
    if any(h.baseFilename == path for h in ours):
        return
    for handler in ours:
        logger.removeHandler(handler)
        handler.close()
    os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))  # private: owner only
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    setattr(handler, _OURS, True)
    logger.addHandler(handler)
    logger.propagate = False
