"""What a discovery writes and reads back: the published ``heavy_hitters.json`` and ``trie.pb``
(each written atomically), the privacy plan as a line and as a document, and the one-line JSON a
round job writes for the driver (its ``RoundResult``, private state deleted once read)."""

from __future__ import annotations

import json
import uuid
from typing import List

from apache_beam.io.filesystems import FileSystems

from triehh_beam.io.drops import DROP_REASONS, bad_fraction
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.encoding import ItemEncoder, ItemKind, Units
from triehh_beam.protocol.rounds import RoundResult
from triehh_beam.protocol.trie import Trie

__all__ = [
    "describe_plan",
    "plan_document",
    "round_result_from_json",
    "round_result_to_json",
    "write_atomically",
    "write_outputs",
]


def write_atomically(path: str, data: bytes) -> None:
    """Writes a temporary object, then renames it over ``path``: readers see old or new."""
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    with FileSystems.create(temporary, compression_type="uncompressed") as f:
        f.write(data)
    FileSystems.rename([temporary], [path])


def json_value(value, encoder: ItemEncoder):
    """An item as JSON: text as is, integers as numbers, bytes as hex."""
    return value.hex() if isinstance(value, bytes) else value


def json_prefix(prefix: Units, encoder: ItemEncoder):
    """A frequent prefix as JSON; for integers, its bits and the value range it covers."""
    if encoder.kind is ItemKind.INT:
        low, high = encoder.prefix_range(prefix)
        return {"bits": b"".join(prefix).decode("ascii"), "range": [low, high]}
    return json_value(encoder.decode(prefix), encoder)


def units_to_json(units: Units, encoder: ItemEncoder) -> List[str]:
    return [encoder.unit_to_bytes(u).hex() for u in units]


def units_from_json(hex_units: List[str], encoder: ItemEncoder) -> Units:
    return tuple(encoder.unit_from_bytes(bytes.fromhex(u)) for u in hex_units)


def round_result_to_json(result: RoundResult, encoder: ItemEncoder) -> str:
    """A round job's one output line (private state: read back by the driver, then deleted)."""
    return json.dumps({
        "kept": [units_to_json(k, encoder) for k in result.kept],
        "users_sampled": result.users_sampled,
        "users_required": result.users_required,
        "records_ranked": result.records_ranked,
    })


def round_result_from_json(data: bytes, encoder: ItemEncoder) -> RoundResult:
    """The ``RoundResult`` a round job wrote (``round_result_to_json``)."""
    document = json.loads(data)
    return RoundResult(
        kept=tuple(units_from_json(k, encoder) for k in document["kept"]),
        users_sampled=document["users_sampled"],
        users_required=document["users_required"],
        records_ranked=document.get("records_ranked"),
    )


def describe_plan(plan: state_pb2.PrivacyPlan) -> str:
    """The plan in one line, for progress output."""
    guarantee = (
        "NO DP GUARANTEE (fixed parameters outside Theorem 1)"
        if plan.no_guarantee
        else f"epsilon={plan.epsilon:.4g} delta={plan.delta:.3g}"
    )
    return (
        f"n={plan.population:,} theta={plan.theta} m={plan.batch_size:,} L={plan.max_length} "
        f"rule={plan.rule}: {guarantee}"
    )


def plan_document(plan: state_pb2.PrivacyPlan) -> dict:
    """The plan as published in ``heavy_hitters.json`` (and reported by a dry run)."""
    guaranteed = not plan.no_guarantee
    return {
        "guarantee": (
            "(epsilon, delta)-DP with user-level adjacency (TrieHH Theorem 1), covering all "
            "max_length rounds"
            if guaranteed
            else "none: theta and batch size were fixed outside Theorem 1's conditions"
        ),
        "epsilon": plan.epsilon if guaranteed else None,
        "delta": plan.delta if guaranteed else None,
        "target_epsilon": plan.target_epsilon,
        "target_delta": plan.target_delta,
        "theta": plan.theta,
        "gamma": plan.gamma,
        "batch_size": plan.batch_size,
        "population": plan.population,
        "max_length": plan.max_length,
        "rule": plan.rule,
    }


def write_outputs(output_dir: str, state: state_pb2.JobState, trie: Trie) -> str:
    """Publishes ``heavy_hitters.json`` and ``trie.pb`` in ``output_dir`` (each written
    atomically, the JSON first); returns the JSON's path. Never the seed, never a count the
    guarantee does not cover, except the operator's input-quality section, marked as such."""
    encoder = trie.encoder
    if not FileSystems.exists(output_dir):
        FileSystems.mkdirs(output_dir)
    plan = state.plan
    document = {
        "heavy_hitters": [json_value(v, encoder) for v in trie.heavy_hitters()],
        "frequent_prefixes": [
            json_prefix(p, encoder) for p in trie.frequent_prefix_sequences()
        ],
        "rounds_run": len(state.rounds),
        "stop_reason": state.stop_reason,
        "privacy": plan_document(plan),
        "encoding": {
            "kind": encoder.kind.value,
            "unit_size": encoder.unit_size,
            "unit": {"text": "characters", "bytes": "bytes", "int": "bits"}[encoder.kind.value],
            "case_fold": encoder.case_fold,
            "int_bits": encoder.int_bits,
            "tokenizer": encoder.tokenizer_id or None,
            "bytes_encoding": state.input.bytes_encoding or None,
            "long_items": "truncate" if state.truncate_long_items else "drop",
        },
        "input": {
            "records_read": state.census_counters.get("records_read", 0),
            "dropped": {
                reason: state.census_counters.get(f"records_{reason}", 0)
                for reason in DROP_REASONS
                if state.census_counters.get(f"records_{reason}", 0)
            },
            "bad_fraction": bad_fraction(dict(state.census_counters)),
            "files_read": state.census_counters.get("files_read", 0),
            "files_empty": state.census_counters.get("files_empty", 0),
            "note": "input-quality counts for the operator, from the census over all records; "
            "not covered by the DP guarantee: remove this section before publishing",
        },
        "job_id": state.job_id,
        "created_at": state.created_at,
    }
    path = FileSystems.join(output_dir, "heavy_hitters.json")
    write_atomically(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    write_atomically(FileSystems.join(output_dir, "trie.pb"), trie.to_bytes())
    return path
