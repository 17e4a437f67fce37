"""Shared fixtures of the end-to-end tests: synthetic Zipf populations written as record files,
the environment that subprocesses (the CLI, Beam's multi-process workers) need, and a way to
compute an expensive session fixture once even when pytest-xdist runs several workers; and the
Pub/Sub emulator's fixtures (``tests/pubsub_emulator.py``), defined here once so that each
worker starts one emulator for the session (imported into each test module, every module had
its own session fixture: one JVM per module and worker, all alive until the end).
"""

import contextlib
import fcntl
import json
import os
import pathlib
import shutil
from typing import Callable, Dict, List, Optional

import numpy as np
import pytest

from tests import pipeline_factory
from tests.pubsub_emulator import pubsub_emulator, pubsub_emulator_server  # noqa: F401 (fixtures)
from triehh_beam.evaluation import demo
from triehh_beam.io.write import write_records

REPO_ROOT = str(pathlib.Path(__file__).resolve().parents[1])


def pytest_addoption(parser):
    parser.addoption("--runner", choices=pipeline_factory.RUNNERS, default="in-process",
                     help="the runner of the pipelines tests build (tests/pipeline_factory.py); with prism, "
                          "run pytest inside a loopback-only network namespace (CONTRIBUTING.md)")


def pytest_configure(config):
    runner = config.getoption("--runner")
    if runner == "prism":
        from tests import prism_runner

        reason = prism_runner.skip_reason()
        if reason is None and not prism_runner.loopback_only():
            reason = "run pytest --runner prism inside a loopback-only network namespace (CONTRIBUTING.md)"
        if reason is not None:
            raise pytest.UsageError(f"--runner prism: {reason}")
    pipeline_factory.use_runner(runner)


def pytest_collection_modifyitems(config, items):
    runner = config.getoption("--runner")
    if runner == "in-process":
        return
    skip = pytest.mark.skip(reason=f"tests the in-process runner's own behaviour, not {runner}'s")
    for item in items:
        if item.get_closest_marker("in_process") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def subprocess_env() -> Dict[str, str]:
    """os.environ with the repository root first on PYTHONPATH, so that a child interpreter
    imports this checkout's triehh_beam and pipelines (in CI the package is installed anyway)."""
    paths = [REPO_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


@pytest.fixture(scope="session")
def english_words() -> List[str]:
    """Alphabetic English words, most frequent first (the bundled demo population's truth)."""
    return [word for word, _ in demo.truth(demo.demo_population_path()) if word.isalpha()]


class Population:
    """A population of users holding one word each, drawn with Zipf weights.

    Attributes:
      users: user id (int) -> [word], the form ``simulation.simulate`` and ``ground_truth`` take.
      words: the vocabulary, most probable first.
    """

    def __init__(self, words: List[str], n_users: int, seed: int, exponent: float = 1.0):
        weights = 1.0 / np.arange(1, len(words) + 1) ** exponent
        rng = np.random.default_rng(seed)
        choices = rng.choice(len(words), size=n_users, p=weights / weights.sum())
        self.words = list(words)
        self.users: Dict[int, List[str]] = {user: [words[c]] for user, c in enumerate(choices)}

    def rows(self):
        return [(user, items[0]) for user, items in self.users.items()]

    def write(self, directory: pathlib.Path, shards: int = 1, name: str = "records") -> str:
        """Writes the records as ``shards`` Parquet files; returns the glob that matches them."""
        directory.mkdir(parents=True, exist_ok=True)
        rows = self.rows()
        for shard in range(shards):
            write_records(str(directory / f"{name}-{shard:02d}.parquet"), rows[shard::shards])
        return str(directory / f"{name}-*.parquet")


@pytest.fixture(scope="session")
def make_population(english_words) -> Callable[..., Population]:
    """A factory: ``make_population(n_users, max_chars, vocabulary=200, seed=..., exponent=1.0)``
    draws ``n_users`` users over the ``vocabulary`` most frequent English words of at most
    ``max_chars`` letters (so that they fit L = max_chars + 1)."""

    def make(n_users: int, max_chars: int, vocabulary: int = 200, seed: int = 20240611,
             exponent: float = 1.0) -> Population:
        words = [w for w in english_words if len(w) <= max_chars][:vocabulary]
        assert len(words) == vocabulary, "not enough short words in the demo vocabulary"
        return Population(words, n_users, seed, exponent)

    return make


@pytest.fixture(scope="session")
def compute_once(tmp_path_factory, request):
    """``compute_once(name, compute)``: ``compute(directory)`` runs once per test session, even
    across pytest-xdist workers (the pattern of the xdist docs, with ``fcntl`` instead of the
    ``filelock`` package); its JSON-serialisable result is shared through a file. ``directory``
    is a fresh directory that outlives the workers, for files the result refers to."""
    if hasattr(request.config, "workerinput"):  # an xdist worker
        root: Optional[pathlib.Path] = tmp_path_factory.getbasetemp().parent  # shared by all
    else:  # no xdist: a plain per-session computation
        root = None

    def run(name: str, compute: Callable[[pathlib.Path], object]):
        if root is None:
            # Through JSON all the same, so that results have one shape with and without xdist.
            return json.loads(json.dumps(compute(tmp_path_factory.mktemp(name))))
        result_path = root / f"{name}.json"
        with open(root / f"{name}.lock", "w") as lock, _locked(lock):
            if not result_path.exists():
                directory = root / f"{name}-data"
                shutil.rmtree(directory, ignore_errors=True)  # left by a worker that died
                directory.mkdir()
                result_path.write_text(json.dumps(compute(directory)))
            return json.loads(result_path.read_text())

    return run


@contextlib.contextmanager
def _locked(handle):
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


def files_containing(root: pathlib.Path, needle: bytes, exclude: Optional[pathlib.Path] = None) -> List[str]:
    """Every file under ``root`` (outside ``exclude``) whose bytes contain ``needle``."""
    hits = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or (exclude is not None and exclude in path.parents):
            continue
        if needle in path.read_bytes():
            hits.append(str(path))
    return hits


@pytest.fixture(scope="session")
def grep_files():
    """``grep_files(root, needle, exclude=None)``: the files under root containing the bytes."""
    return files_containing
