"""Regenerate the checked-in protobuf modules from the .proto files under protos/.

The .proto files are laid out by package path (``protos/triehh_beam/proto/trie.proto``), so
that ``protoc -I protos`` writes ``triehh_beam/proto/trie_pb2.py`` (and its ``.pyi`` stub) with
imports of the form ``from triehh_beam.proto import trie_pb2``.

Usage:
  python protos/generate.py            # rewrite the checked-in modules
  python protos/generate.py --check    # exit 1, listing the files that differ, if any is stale

The output depends only on the .proto files and the protoc version: run it with the pinned
grpcio-tools (see setup.py, extras "test"), or ``--check`` will report every file as different.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile
from typing import Dict, List

PROTOS = pathlib.Path(__file__).resolve().parent
ROOT = PROTOS.parent
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi")


def proto_files() -> List[pathlib.Path]:
    """The .proto files, relative to protos/, in a stable order."""
    return sorted(path.relative_to(PROTOS) for path in PROTOS.rglob("*.proto"))


def protoc_version() -> str:
    result = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "--version"],
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip()


def run_protoc(out_dir: pathlib.Path) -> Dict[pathlib.Path, bytes]:
    """Generates every module into ``out_dir``; returns {path relative to out_dir: content}."""
    protos = proto_files()
    if not protos:
        raise SystemExit(f"no .proto files under {PROTOS}")
    # Relative paths with cwd=protos/: the descriptors embedded in the modules name the files
    # by their path under the include dir, whatever the checkout's location.
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        "-I.",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(path.as_posix() for path in protos),
    ]
    result = subprocess.run(command, cwd=PROTOS, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"protoc failed:\n{result.stderr}")
    return {
        path.relative_to(out_dir): path.read_bytes()
        for path in sorted(out_dir.rglob("*"))
        if path.is_file() and path.name.endswith(GENERATED_SUFFIXES)
    }


def checked_in(target: pathlib.Path) -> Dict[pathlib.Path, bytes]:
    """The generated modules present under ``target``, in the directories protoc writes to."""
    found = {}
    for directory in sorted({path.parent for path in proto_files()}):
        for suffix in GENERATED_SUFFIXES:
            for path in sorted((target / directory).glob(f"*{suffix}")):
                found[path.relative_to(target)] = path.read_bytes()
    return found


def differences(
    generated: Dict[pathlib.Path, bytes], existing: Dict[pathlib.Path, bytes]
) -> List[str]:
    lines = []
    for path in sorted(set(generated) | set(existing)):
        if path not in existing:
            lines.append(f"missing: {path}")
        elif path not in generated:
            lines.append(f"no .proto generates it: {path}")
        elif generated[path] != existing[path]:
            lines.append(f"differs: {path}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="regenerate into a temporary directory and fail if the checked-in files differ",
    )
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=ROOT,
        help="the tree that holds the generated modules (default: the repository root)",
    )
    args = parser.parse_args(argv)
    target = args.out.resolve()

    with tempfile.TemporaryDirectory() as tmp:
        generated = run_protoc(pathlib.Path(tmp))
    existing = checked_in(target)
    lines = differences(generated, existing)

    if args.check:
        if lines:
            print(
                f"Generated protobuf modules under {target} are stale "
                f"(regenerated with {protoc_version()}):",
                file=sys.stderr,
            )
            for line in lines:
                print(f"  {line}", file=sys.stderr)
            print("Run: python protos/generate.py", file=sys.stderr)
            return 1
        print(f"{len(generated)} generated files up to date")
        return 0

    for path, content in generated.items():
        if existing.get(path) != content:
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            (target / path).write_bytes(content)
            print(f"wrote {path}")
    for path in sorted(set(existing) - set(generated)):
        (target / path).unlink()
        print(f"removed {path} (no .proto generates it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
