"""A whole-item sample-and-threshold job (``--protocol sample-threshold``) once its census and
plan are committed (``discovery_job``): the plan charged, ONE pass
(``graphs.build_whole_item_release``) keeps each user with probability p_s and releases the whole
items at least tau kept users reported, with their counts; the release is committed to the state
before anything is published (a re-run publishes it again without reading the input), then the
operator report and ``heavy_hitters.json`` (each item with its count and ``count / p_s``; no trie,
so no ``trie.pb``) are written.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import List, Tuple

from apache_beam.io.filesystems import FileSystems

from triehh_beam.job.batch import graphs, passes
from triehh_beam.job.batch.discovery_job import DiscoveryJob, copy_state
from triehh_beam.job.release import outputs, partition_outputs
from triehh_beam.job.release.planning import protocol_of, selection_plan
from triehh_beam.job.settings import sources
from triehh_beam.job.settings.paths import canonical_path
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.central.partition_release import SelectionKeys
from triehh_beam.protocol.central.whole_items import estimate, estimate_interval
from triehh_beam.protocol.estimates.count_intervals import LEVEL
from triehh_beam.protocol.items.encoding import ItemEncoder, Units

__all__ = ["ESTIMATE_INTERVAL_NOTE", "ESTIMATE_NOTE", "ESTIMATE_QUANTITY", "STOP_REASON", "published_document",
           "released", "run_release"]

STOP_REASON = "one release (whole-item sample-and-threshold: no rounds, no trie)"
#: What an estimate of a whole-item release estimates (``estimates.quantity``).
ESTIMATE_QUANTITY = (
    "weighted users: the sum over users of the share of each user's records that are this item "
    "(of its records of items up to L - 1 units, those the release could report). It is the number "
    "of users holding the item when each holds one item, and less when holders hold several (a user "
    "with 3 records of x and 1 of y counts 3/4 for x)"
)
#: How the published intervals are made (``estimates.interval_note``).
ESTIMATE_INTERVAL_NOTE = (
    "interval: holds the item's weighted users with probability at least level (95%) given that the "
    "item was released, counting both what varies between releases: which users are sampled and "
    "which item each reports. It inverts the tails of Poisson(p_s f) conditioned on reaching tau, "
    "Poisson being the worst case of a sum of one report per sampled user, divided by p_s; its "
    "low end is 0 for a count at tau, which even a rare item reaches by luck. Its coverage is "
    "checked exactly and by simulation (docs/protocol.md section 2)"
)
ESTIMATE_NOTE = (
    "count: the sampled users who reported the item (each kept user, with probability "
    "sample_probability, reports one item, drawn by its share of the user's records), at least tau. "
    "estimate = count / sample_probability: unbiased for the item's weighted users (estimates."
    "quantity: its number of holders when each holds one item) before the threshold; given that "
    "the item was released (count >= tau) it is biased upward, the more so the closer the item's "
    "expected count is to tau. interval: 95% for the weighted users given the release, which "
    "accounts for that bias (estimates.interval_note; docs/protocol.md, section 2)"
)


def released(state: state_pb2.JobState, encoder: ItemEncoder) -> List[Tuple[Units, int]]:
    """The committed release as (sequence, count), most reported first (ties: canonical order);
    partition selection's count is its noisy count (0 for each item when it publishes none)."""
    items = [(tuple(encoder.unit_from_bytes(u) for u in item.units),
              int(item.noisy_count) if item.HasField("noisy_count") else int(item.count))
             for item in state.release.items]
    return sorted(items, key=lambda pair: (-pair[1], pair[0]))


def published_document(state: state_pb2.JobState, encoder: ItemEncoder) -> dict:
    """``heavy_hitters.json`` of a whole-item job (``partition_outputs.published_document`` for
    partition selection)."""
    if protocol_of(state.plan).selects_partitions:
        return partition_outputs.published_document(state, released(state, encoder), encoder)
    return _sample_threshold_document(state, encoder)


def _sample_threshold_document(state: state_pb2.JobState, encoder: ItemEncoder) -> dict:
    """``heavy_hitters.json`` of a whole-item job: discover's top-level shape (``heavy_hitters``,
    an empty ``frequent_prefixes``, the privacy block, the encoding), plus ``released``: per
    item its ``count`` (>= tau), ``estimate`` and the 95% ``interval`` of its weighted users
    given the release, and ``estimates``: what they are. Nothing below tau: the state holds
    nothing else."""
    p_s, tau = state.plan.sample_probability, int(state.plan.theta)
    items = [(outputs.json_value(encoder.decode(s), encoder), count) for s, count in released(state, encoder)]
    return {
        "heavy_hitters": [value for value, _ in items],
        "released": [{"item": value, "count": count, "estimate": estimate(count, p_s),
                      "interval": list(estimate_interval(count, p_s, tau))} for value, count in items],
        "frequent_prefixes": [],
        "rounds_run": 1,
        "stop_reason": state.stop_reason,
        "privacy": outputs.published_plan_document(state.plan),
        "estimates": {"quantity": ESTIMATE_QUANTITY, "level": LEVEL, "interval_note": ESTIMATE_INTERVAL_NOTE},
        "estimate_note": ESTIMATE_NOTE,
        "encoding": outputs.encoding_document(state, encoder),
        "job_id": state.job_id,
        "created_at": state.created_at,
    }


def _release_pass(job: DiscoveryJob, state: state_pb2.JobState) -> state_pb2.WholeItemRelease:
    """Runs the one pass; returns the release as the state records it.

    Raises:
      InputChangedError: the pass did not read exactly the records the census counted, or the
        input changed meanwhile (nothing is committed; ``passes.run_checked_pass``).
    """
    config = job.config
    path = FileSystems.join(config.resolved_state_dir, "census", f"release-{uuid.uuid4().hex}.json")
    sampler = job.sampler(state)
    keys = sampler.pass_keys(1)  # round 1's keys: the sample and the choice
    selection = None
    if protocol_of(state.plan).selects_partitions:  # its coins and noise: the release's own keys
        selection = (selection_plan(state.plan), SelectionKeys.derive(sampler.seed, sampler.identity))
    population = job.population(state)
    started = time.monotonic()
    document, counters = passes.run_checked_pass(config, job.jobs, state, lambda p, reported: (
        graphs.build_whole_item_release(p, config, keys, state.plan, population, path, progress=reported,
                                        as_of_millis=sources.pinned_at(state.input_snapshot),
                                        selection=selection)),
        "release", path, passes.RELEASE)
    release = state_pb2.WholeItemRelease(users_sampled=document["users_sampled"], records_ranked=document["records"],
                                         elapsed_seconds=time.monotonic() - started)
    release.counters.update(counters)
    for units, count in document["released"]:
        item = release.items.add(units=[bytes.fromhex(u) for u in units])
        if selection is None:
            item.count = int(count)
        elif count is not None:  # partition selection: its noisy count, or none
            item.noisy_count = int(count)
            item.count = max(0, int(count))
    return release


def run_release(driver: DiscoveryJob, state: state_pb2.JobState) -> Tuple[state_pb2.JobState, str, str]:
    """Charges, releases (once) and publishes a whole-item job whose plan is committed in
    ``state``: (the final state, ``heavy_hitters.json``'s path, the operator report's path)."""
    driver.announce_plan(state.plan)
    advice = partition_outputs.central_advice(state.plan)  # never changes what runs
    if advice is not None:
        driver.say("advice", advice)
    # Budget before release: charged (once per job) before the pass can release anything.
    state = driver.charge(state)
    if not state.HasField("release"):
        sources.check_unchanged(state, driver.config, "(before the release)")
        driver.say("release_start", "release: every user contributing, items kept by their keyed coins, in one pass"
                   if protocol_of(state.plan).selects_partitions else
                   "release: sampling users and counting their whole items in one pass")
        release = _release_pass(driver, state)
        state = copy_state(state)
        state.release.CopyFrom(release)
        state.rounds_completed = 1
        state.finished = True
        state.stop_reason = (partition_outputs.STOP_REASON if protocol_of(state.plan).selects_partitions
                             else STOP_REASON)
        driver.store.commit(state)  # committed before anything is published
        driver.say("release_done", f"release: done, {len(release.items):,} items released",
                    items_released=len(release.items),  # the duration depends on the records: private
                    private=(f"{release.elapsed_seconds:.1f} s; users sampled {release.users_sampled:,}, reports "
                             f"{release.counters.get('whole_item_reports', 0):,}",
                             {"users_sampled": release.users_sampled, "metrics": dict(release.counters)}))
    output_dir = canonical_path(driver.config.output_dir)
    report = outputs.operator_report(state, output_dir)
    report["release"] = {"users_sampled": state.release.users_sampled, "records_ranked": state.release.records_ranked,
                         "items_released": len(state.release.items), "counters": dict(state.release.counters),
                         "elapsed_seconds": state.release.elapsed_seconds}
    report_path = FileSystems.join(driver.config.resolved_state_dir, outputs.OPERATOR_REPORT_NAME)
    outputs.write_atomically(report_path, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode("utf-8"),
                             private=True)
    if not FileSystems.exists(driver.config.output_dir):
        FileSystems.mkdirs(driver.config.output_dir)
    path = FileSystems.join(driver.config.output_dir, "heavy_hitters.json")
    document = published_document(state, driver.encoder)
    outputs.write_atomically(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return state, path, report_path
