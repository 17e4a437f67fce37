"""``python -m tests.e2e.prism_child NONCE_SEED [--job-service] -- TRIEHH_ARGS...``: runs ``triehh``
with release nonces drawn from a fixed seed (one per release, as ``os.urandom``'s would be), so that
two runs of the same command on two runners draw the same samples; its exit code is triehh's.

With ``--job-service``, it first starts the local Prism binary as a standalone job service and a
Python SDK worker pool, and runs the discovery through Beam's ``PortableRunner`` against them
(``--environment_type=EXTERNAL``): the portable path Flink's runner takes, with Prism as the job
service. Run it inside a loopback-only network namespace (``tests/prism_runner.py``).
"""

import contextlib
import os
import socket
import subprocess
import sys
import time

import numpy as np

STARTUP_TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{process.args[0]} did not listen on {port} within {STARTUP_TIMEOUT_S} s")


@contextlib.contextmanager
def _services(log_dir: str):
    """Prism as a job service and a worker pool; yields the runner flags that use them."""
    from triehh_beam.beam.prism import find_prism

    job_port, pool_port = _free_port(), _free_port()
    commands = [[find_prism(), "--job_port", str(job_port), "--serve_http=false"],
                [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main", "--service_port", str(pool_port)]]
    processes = []
    try:
        for name, command, port in zip(("prism", "worker_pool"), commands, (job_port, pool_port)):
            with open(os.path.join(log_dir, f"{name}.log"), "ab") as log:
                # In this process's group: the test stops the group, the workers the pool started too.
                processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL))
            _wait_for(port, processes[-1])
        yield ["--runner=PortableRunner", f"--job_endpoint=localhost:{job_port}", "--environment_type=EXTERNAL",
               f"--environment_config=localhost:{pool_port}"]
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def main(argv) -> int:
    from triehh_beam.cli.dispatch import main as triehh
    from triehh_beam.job.release import lifecycle as release

    split = argv.index("--")
    head, args = argv[:split], argv[split + 1:]
    rng = np.random.default_rng(int(head[0]))
    release.fresh_nonce = lambda: rng.bytes(release.NONCE_BYTES)
    if "--job-service" not in head:
        return triehh(args)
    with _services(os.getcwd()) as flags:
        return triehh(args + flags)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
