"""What a discovery writes and reads back, for two audiences kept apart: the publishable
``heavy_hitters.json`` and ``trie.pb`` (written atomically; only the trie, what is fixed before
any record is read, the noisy estimates with their intervals, and n-dependent figures only when
n is declared public) and the private operator report in the state directory (every count); and
the small JSON documents a round or an estimate pass writes for the driver. The plan's words and
documents are ``plan_documents``' (imported here for callers).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import List, Optional

from apache_beam.io.filesystems import FileSystems

from triehh_beam.beam.held import PEAK_METRIC
from triehh_beam.io.drops import DROP_REASONS, bad_fraction
from triehh_beam.job.settings import sources
from triehh_beam.job.state import cas
# The plan's words and documents, written into every output (and used from here by callers).
from triehh_beam.job.release.plan_documents import (ACCOUNTING_NOTES, CENTRAL_TRUST_MODEL, N_DEPENDENT,
                                                    describe_plan, describe_published_plan,
                                                    plan_accounting, plan_document, population_is_public,
                                                    published_plan_document, unit_advice_message)
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.estimates.count_intervals import LEVEL, noisy_count_intervals
from triehh_beam.protocol.estimates.frequency_estimates import FrequencyEstimates
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind, Units
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol.randomness.sampling import SCHEME_V2
from triehh_beam.protocol.rounds.loop import RoundResult
from triehh_beam.protocol.rounds.trie import Trie

__all__ = [
    "ACCOUNTING_NOTES",
    "CENTRAL_TRUST_MODEL",
    "N_DEPENDENT",
    "OPERATOR_REPORT_NAME",
    "plan_accounting",
    "unit_advice_message",
    "describe_plan",
    "describe_published_plan",
    "deny_list_report",
    "estimates_from_json",
    "estimates_to_json",
    "operator_report",
    "worker_peaks",
    "plan_document",
    "population_is_public",
    "published_document",
    "published_plan_document",
    "round_result_from_json",
    "round_result_to_json",
    "write_atomically",
    "write_operator_report",
    "write_outputs",
]

OPERATOR_REPORT_NAME = "operator_report.json"
PRIVATE_NOTE = (
    "PRIVATE operator data: exact counts (records, dropped rows, files, users, per-round "
    "counters) and the plan for the counted population are NOT covered by the DP guarantee; "
    "never publish this file (README, 'The privacy model')"
)


def write_atomically(path: str, data: bytes, private: bool = False) -> None:
    """Writes a temporary object, then renames it over ``path``: readers see old or new.

    ``private``: a local file is created owner-only (0600) whatever the umask; on GCS access is
    the bucket's IAM (README, Secrets and state)."""
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    if private and cas.is_local(path):
        cas.write_private_file(temporary, data)
        os.replace(temporary, path)
        return
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


def estimates_to_json(released: FrequencyEstimates, encoder: ItemEncoder) -> str:
    """The estimate job's one output line: the released (noisy) estimates, read back by the
    driver (``estimates_from_json``) and deleted; no exact count is in it."""
    return json.dumps({
        "epsilon": released.epsilon,
        "half_width": released.half_width,
        "items": [[units_to_json(t, encoder), e] for t, e in zip(released.targets.sequences, released.estimates)],
    })


def estimates_from_json(data: bytes, encoder: ItemEncoder) -> state_pb2.FrequencyEstimates:
    """The estimates an estimate job wrote (``estimates_to_json``), as the state records them."""
    document = json.loads(data)
    recorded = state_pb2.FrequencyEstimates(epsilon=document["epsilon"], half_width=document["half_width"])
    for units, estimate in document["items"]:
        recorded.items.add(units=[bytes.fromhex(u) for u in units], estimate=int(estimate))
    return recorded



def encoding_document(state: state_pb2.JobState, encoder: ItemEncoder) -> dict:
    return {
        "kind": encoder.kind.value,
        "unit_size": encoder.unit_size,
        "unit": {"text": "characters", "bytes": "bytes", "int": "bits"}[encoder.kind.value],
        "case_fold": encoder.case_fold,
        "int_bits": encoder.int_bits,
        "tokenizer": encoder.tokenizer_id or None,
        "bytes_encoding": state.input.bytes_encoding or None,
        "long_items": "truncate" if state.truncate_long_items else "drop",
    }


def published_document(state: state_pb2.JobState, trie: Trie, trust_model: str = CENTRAL_TRUST_MODEL) -> dict:
    """``heavy_hitters.json``: the trie's items and prefixes, and fields fixed before any record
    was read (rounds run and the stop reason are functions of the trie and L), n-dependent ones
    only when n is declared public. ``job_id`` and ``created_at`` are drawn at random and from
    the clock, independent of the records."""
    encoder = trie.encoder
    document = {
        "heavy_hitters": [json_value(v, encoder) for v in trie.heavy_hitters()],
        "frequent_prefixes": [json_prefix(p, encoder) for p in trie.frequent_prefix_sequences()],
        "rounds_run": len(state.rounds),
        "stop_reason": state.stop_reason,
        "privacy": published_plan_document(state.plan, trust_model),
        "encoding": encoding_document(state, encoder),
        "job_id": state.job_id,
        "created_at": state.created_at,
    }
    if state.HasField("estimates"):
        _add_estimates(document, state.estimates, trie)
    if state.HasField("deny_list"):
        document["deny_list"] = {
            "items": state.deny_list.items,
            "items_digest": state.deny_list.items_digest,
            "note": DENY_LIST_NOTE,
        }
    return document


DENY_LIST_NOTE = (
    "the rounds applied a deny list: these many heavy hitters of earlier releases (items_digest: "
    "SHA-256 of their sorted encoded units) were never voted for; a sampled user holding one voted "
    "among its other items, or abstained. The samples and the privacy spend are unchanged "
    "(post-processing of earlier releases; README, Deny lists across runs)"
)


#: What a frequency estimate estimates (``frequency_estimates.quantity``).
ESTIMATE_QUANTITY = (
    "weighted users: the sum over users of the share of each user's records on the discovered "
    "items and prefixes that fall on this entry (for a frequent prefix: on items that start with "
    "it). It is the number of users holding the entry when each holds one discovered entry, and "
    "less when holders spread their records over several (a user with 3 records of x and 1 of y, "
    "both discovered, counts 3/4 for x)"
)
#: How the published intervals are made (``frequency_estimates.interval_note``).
ESTIMATE_INTERVAL_NOTE = (
    "interval: holds the weighted users with probability at least level (95%), counting both "
    "what varies between releases: each user's draw of one entry and the noise. It inverts the "
    "tails of Poisson(f) plus the noise, Poisson(f) being the worst case of a sum of one draw per "
    "user with mean f, so no knowledge of the population is assumed; its coverage is checked "
    "exactly and by simulation (docs/protocol.md section 5). half_width and coverage "
    "are the noise's alone: estimate +- half_width holds this release's exact count with "
    "probability coverage, which is the weighted users themselves only when each user holds one "
    "discovered entry"
)
ESTIMATE_NOTE = (
    "estimate: each user counted once, for one of its discovered items and prefixes drawn by its "
    "share of the user's records on them (a user holding one counts 1 for it), plus two-sided "
    "geometric noise of parameter exp(-epsilon): unbiased for the weighted users (quantity), an "
    "integer, and possibly negative (kept raw: rounding negatives up to 0 is safe post-processing "
    "but biases the estimate). interval: 95% for the weighted users, never below 0 (interval_note)"
)


def _add_estimates(document: dict, estimates: state_pb2.FrequencyEstimates, trie: Trie) -> None:
    """Each heavy hitter and frequent prefix as an object with its estimate and the 95% interval
    of the weighted users it estimates (``{"item": ..., "estimate": e, "interval": [low, high]}``,
    a prefix's under ``"prefix"``; ``count_intervals.noisy_count_intervals``), and what they are
    under ``"frequency_estimates"``. Noisy numbers only: the state holds no exact count to
    publish, and the intervals are a function of the noisy estimates and epsilon."""
    encoder = trie.encoder
    recorded = [(tuple(encoder.unit_from_bytes(u) for u in item.units), item.estimate) for item in estimates.items]
    intervals = noisy_count_intervals([e for _, e in recorded], estimates.epsilon, LEVEL) if recorded else []
    by_sequence = {sequence: (e, list(interval)) for (sequence, e), interval in zip(recorded, intervals)}
    k = int(estimates.half_width)

    def entry(key: str, value, sequence: Units) -> dict:
        e, interval = by_sequence[sequence]
        return {key: value, "estimate": e, "interval": interval}

    items = sorted(((encoder.decode(s), s) for s in trie.heavy_hitter_sequences()), key=lambda pair: pair[0])
    document["heavy_hitters"] = [entry("item", json_value(v, encoder), s) for v, s in items]
    document["frequent_prefixes"] = [entry("prefix", json_prefix(p, encoder), p)
                                     for p in trie.frequent_prefix_sequences()]
    document["frequency_estimates"] = {
        "epsilon": estimates.epsilon,
        "mechanism": "two-sided geometric (discrete Laplace), L1 sensitivity 1, sampled exactly",
        "quantity": ESTIMATE_QUANTITY,
        "level": LEVEL,
        "interval_note": ESTIMATE_INTERVAL_NOTE,
        "half_width": k,
        "coverage": TwoSidedGeometric(estimates.epsilon).coverage(k),
        "note": ESTIMATE_NOTE,
    }


def worker_peaks(counters) -> dict:
    """``{worker: peak resident MB}`` from one job's counters (``beam.held``'s
    ``worker_peak_rss_mb.<host>:<pid>``)."""
    prefix = f"{PEAK_METRIC}."
    return {name[len(prefix):]: value for name, value in counters.items() if name.startswith(prefix)}


def _jobs_memory(state: state_pb2.JobState) -> dict:
    """Each Beam job's workers' peak memory: the first read (census), the sampling job (the cut,
    with every round in the default mode), and a job of rounds under the first round it ran."""
    memory = {"census": worker_peaks(state.census_counters), "sampling": worker_peaks(state.samples.counters)}
    rounds = {str(r.round_index): worker_peaks(r.counters) for r in state.rounds}
    memory["rounds"] = {r: peaks for r, peaks in rounds.items() if peaks}
    return memory


def operator_report(state: state_pb2.JobState, output_dir: str) -> dict:
    """The private operator report: every count the job made (see ``PRIVATE_NOTE``)."""
    counters = dict(state.census_counters)
    return {
        "private": PRIVATE_NOTE,
        "job_id": state.job_id,
        "created_at": state.created_at,
        "published_to": output_dir,
        "input": {
            **sources.input_document(state),
            "distinct_users": counters.get("distinct_users", state.plan.population),
            "records_read": counters.get("records_read", 0),
            "dropped": {
                reason: counters.get(f"records_{reason}", 0)
                for reason in DROP_REASONS
                if counters.get(f"records_{reason}", 0)
            },
            "bad_fraction": bad_fraction(counters),
            # Items too long for L (dropped, or cut with --truncate-long-items) or not encodable,
            # in records, and the users none of whose items is usable (sampled, never voting).
            "items_too_long": counters.get("items_too_long", 0),
            "items_unencodable": counters.get("items_unencodable", 0),
            "users_without_usable_item": counters.get("users_without_usable_item", 0),
            "files_read": counters.get("files_read", 0),
            "files_empty": counters.get("files_empty", 0),
            "census_counters": counters,
        },
        "privacy": plan_document(state.plan),
        "sampling": {
            "scheme": SCHEME_V2,
            "users_sampled_per_round": list(state.samples.users_sampled),
            "records_ranked": state.samples.records_ranked,
            "elapsed_seconds": state.samples.elapsed_seconds,
            "counters": dict(state.samples.counters),
            # The sampled users' items (raw data): where they were kept, or that they are gone.
            "samples": "deleted" if state.samples.deleted else state.samples.dir,
        },
        "rounds": [
            {
                "round": r.round_index,
                "frontier_size": r.frontier_size,
                "prefixes_kept": r.prefixes_kept,
                "elapsed_seconds": r.elapsed_seconds,
                "counters": dict(r.counters),
            }
            for r in state.rounds
        ],
        "rounds_run": len(state.rounds),
        # Per job, each worker process's peak resident memory in MB (``<host>:<pid>``: the
        # in-process runner's one process, or each of --direct_num_workers' processes): private,
        # like every duration (it depends on the records), never in the published document.
        "worker_peak_rss_mb": _jobs_memory(state),
        "stop_reason": state.stop_reason,
        **({"deny_list": deny_list_report(state)} if state.HasField("deny_list") else {}),
    }


def deny_list_report(state: state_pb2.JobState) -> dict:
    """The operator report's ``deny_list`` (a batch job's, a window's): its files (private) and
    digests."""
    deny = state.deny_list
    return {"files": list(deny.files), "items": deny.items, "digest": deny.digest, "items_digest": deny.items_digest}


def write_json(path: str, document: dict, private: bool) -> None:
    """Writes ``document`` as indented, key-sorted JSON to ``path`` atomically, creating its
    directory (``private``: owner-only, as everything in a state directory)."""
    directory = path.rsplit("/", 1)[0]
    if directory and not FileSystems.exists(directory):
        if private:
            cas.make_private_dir(directory)  # owner-only locally; remote paths: mkdirs below
        if not FileSystems.exists(directory):
            FileSystems.mkdirs(directory)
    write_atomically(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"), private=private)


def read_json(path: str) -> Optional[dict]:
    """The JSON document at ``path``, or None when there is none."""
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return json.loads(f.read().decode("utf-8"))


def write_operator_report(state_dir: str, state: state_pb2.JobState, output_dir: str) -> str:
    """Writes ``operator_report.json`` into the job's (private) state directory; its path."""
    path = FileSystems.join(state_dir, OPERATOR_REPORT_NAME)
    write_json(path, operator_report(state, output_dir), private=True)
    return path


def write_outputs(output_dir: str, state: state_pb2.JobState, trie: Trie, extra: Optional[dict] = None,
                  trust_model: str = CENTRAL_TRUST_MODEL) -> str:
    """Publishes ``heavy_hitters.json`` (``published_document``, its privacy block naming
    ``trust_model``, with the sections of ``extra`` added: a mode's own publishable facts, never
    a count) and ``trie.pb`` in ``output_dir``
    (each written atomically, the JSON first); returns the JSON's path. Never the seed, never a
    count: those are in the operator report (``write_operator_report``)."""
    if not FileSystems.exists(output_dir):
        FileSystems.mkdirs(output_dir)
    document = {**published_document(state, trie, trust_model), **(extra or {})}
    path = FileSystems.join(output_dir, "heavy_hitters.json")
    write_atomically(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    write_atomically(FileSystems.join(output_dir, "trie.pb"), trie.to_bytes())
    return path
