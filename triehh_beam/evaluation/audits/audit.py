"""The empirical privacy audit (``triehh audit``): runs the real pipeline (``job.batch.driver.
run_discovery``, or ``discover --window``'s replay, on the in-process runner) many times on two
neighbouring populations, D and D' (D plus one user holding only a target item; with
``target_holders`` F, D also has F users holding only the target, the worst case of a count's
other holders), reads what each release published (its privacy block: epsilon, delta and the
accounting), and tests the published (epsilon, delta) claim on one event
(``audit_stats``): "violated" when the runs refute it at the stated confidence, otherwise
"inconclusive", with the runs that would refute a violation of a given size. The event is the
target published (in the trie or the released items), its estimate or count at least ``t``, or,
with two releases per run (the same input, output and state paths, the output and state deleted
in between, as an operator re-runs a job), the second release's published file differing from the
first's: a release that reuses the first one's keys differs on D never and on D' whenever the user
moved a count. Every release writes a fresh output and state at the same paths of one temporary
workspace, with its own ledger (the reuse audit: one ledger), and reads the audit's one seed file
(``--seed``), as an operator's re-runs do: independence between runs comes from the pipeline's
own fresh release nonces, which is what the audit checks. A measurement, not a release: run it
on synthetic or public data.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import shutil
import tempfile
import time
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from triehh_beam.evaluation.audits.config import (AT_LEAST, DIFFERS, EVENTS, NOTHING, PUBLISHED,
                                                  AuditConfig, AuditError)
from triehh_beam.reference.audit_stats import ClaimTest, runs_to_refute, test_claim

__all__ = ["AuditConfig", "AuditError", "EVENTS", "Outcome", "format_audit", "run_audit", "synthetic_population"]

FORMAT = "triehh-beam/audit/v2"
TARGET_USER = "triehh-audit-target-user"
HOLDER_PREFIX = "triehh-audit-holder-"
PRIME = "D'"
WINDOW_SECONDS = 3600
_T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
_SYNTHETIC_WORDS = ("a", "b", "ab", "ba", "c")

Progress = Callable[[str], None]
Users = Mapping[str, Mapping[str, int]]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one release published, as the audit's events read it.

    Attributes:
      items: every published item and frequent prefix -> its count or estimate (None: none).
      document: the published file without what differs between any two releases (job id, time).
      epsilon, delta: the claim the release published (epsilon with the estimates' included).
      accounting: how the release says its delta was computed (``exact`` or ``bound``, the
        sample-and-threshold protocols), or None (TrieHH, or a window that released nothing).
    """

    items: Mapping[str, Optional[float]]
    document: str
    epsilon: float
    delta: float
    accounting: Optional[str] = None


def synthetic_population(users: int, seed: int = 0) -> Dict[str, Dict[str, int]]:
    """``users`` users each holding one of a few short words, Zipf-like (``--users``)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(_SYNTHETIC_WORDS) + 1)
    chosen = rng.choice(len(_SYNTHETIC_WORDS), size=users, p=weights / weights.sum())
    return {f"u{i}": {_SYNTHETIC_WORDS[int(w)]: 1} for i, w in enumerate(chosen)}


def _claim(privacy: Mapping, config: "AuditConfig") -> Tuple[float, float, Optional[str]]:
    """(epsilon with the estimates' added, delta, accounting) as a release's privacy block
    publishes them (the job's targets where it publishes none: a window withheld before planning)."""
    epsilon = privacy.get("epsilon", config.epsilon) + (privacy.get("estimate_epsilon") or 0.0)
    return epsilon, privacy.get("delta", config.delta), privacy.get("accounting")


def _read_outcome(document: dict, config: "AuditConfig") -> Outcome:
    """What one published ``heavy_hitters.json`` says: its items and the claim of its privacy block."""
    items: Dict[str, Optional[float]] = {}
    for entry in document.get("heavy_hitters", []):
        if isinstance(entry, dict):
            items[str(entry["item"])] = entry.get("estimate")
        else:
            items[str(entry)] = None
    for entry in document.get("released", []):  # whole items: the count, not count / p_s
        items[str(entry["item"])] = entry.get("count")
    for entry in document.get("frequent_prefixes", []):
        if isinstance(entry, dict):
            items.setdefault(str(entry.get("prefix", entry.get("item"))), entry.get("estimate"))
        else:
            items.setdefault(str(entry), None)
    kept = {k: v for k, v in document.items() if k not in ("job_id", "created_at")}
    return Outcome(items, json.dumps(kept, sort_keys=True), *_claim(document.get("privacy") or {}, config))


def _rows(users: Users) -> List[Tuple[str, str, int]]:
    return [(user, item, int(count)) for user, held in users.items() for item, count in held.items()]


class _Workspace:
    """One temporary directory whose input, output, state and ledger every release reuses (the
    output and state deleted between releases, as an operator re-running a job does)."""

    def __init__(self, root: str):
        self.root = root
        self.input = os.path.join(root, "input.parquet")
        self.windowed_input = os.path.join(root, "input.jsonl")
        self.output = os.path.join(root, "out")
        self.state = os.path.join(root, "out.state")
        self.ledger = os.path.join(root, "ledger")

    def clear(self, ledger: bool) -> None:
        for path in (self.output, self.state) + ((self.ledger,) if ledger else ()):
            shutil.rmtree(path, ignore_errors=True)


def _theorem1_claim(config: AuditConfig, users: int) -> Tuple[float, float, str]:
    """Theorem 1's (epsilon, delta) for the fixed values at D's n, over the rounds the event observes."""
    from triehh_beam.protocol.accounting.privacy import theorem1

    rounds = 1 if config.resolved_event == NOTHING else config.max_length
    claim = theorem1(users, config.theta, rounds, batch_size=config.batch_size)
    return claim.epsilon, claim.delta, (f"Theorem 1 at n = {users}, theta = {config.theta}, m = {config.batch_size}, "
                                        f"L = {rounds} (the rounds the event observes)")


def _config(config: AuditConfig, space: _Workspace, window: bool, windows: int = 0, population: int = 0):
    """The discovery of one release (``window``: of one replay of ``windows`` windows declared
    from ``_T0``; TrieHH windows planned for the declared ``population``, D's size, a lower bound
    of both populations' windows)."""
    from triehh_beam.job.settings.config import DiscoveryConfig

    first = int(_T0.timestamp()) * 1_000_000
    declared = dict(windows=(first, first + windows * WINDOW_SECONDS * 1_000_000),
                    population=None if config.protocol.samples_by_probability else population) if window else {}
    return DiscoveryConfig(**declared,
        input_pattern=space.windowed_input if window else space.input, output_dir=space.output,
        state_dir=space.state, ledger_dir=space.ledger, seed=config.secret_seed, protocol=config.protocol.value,
        epsilon=config.epsilon, delta=config.delta, max_length=config.max_length,
        estimate_frequencies=config.estimate_frequencies,
        **({} if config.theta is None else dict(theta=config.theta, batch_size=config.batch_size,
                                                allow_no_guarantee=True)),  # the claim is the audit's
        window=WINDOW_SECONDS if window else None, timestamp_column="ts" if window else None,
        **({} if config.selection_share is None else {"selection_share": config.selection_share}))


def _release(config: AuditConfig, space: _Workspace, users: Users) -> Outcome:
    """One batch release of ``users`` at the workspace's paths (its output and state fresh)."""
    from triehh_beam.io.write import write_records
    from triehh_beam.job.batch.driver import run_discovery

    space.clear(ledger=False)
    write_records(space.input, _rows(users))
    run_discovery(_config(config, space, window=False))
    with open(os.path.join(space.output, "heavy_hitters.json")) as f:
        return _read_outcome(json.load(f), config)


def _window_replay(config: AuditConfig, space: _Workspace, users: Users, windows: int, declared: int) -> List[Outcome]:
    """``windows`` releases in one replay: every window holds ``users``, each record at a random
    time in it; a window released nothing is an outcome with nothing published. ``declared``: the
    population TrieHH windows are planned for (``--population``, D's size for both populations)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.job.windows import stream

    space.clear(ledger=True)
    rng = np.random.default_rng(config.seed)
    with open(space.windowed_input, "w") as f:
        for w in range(windows):
            start = _T0 + datetime.timedelta(seconds=w * WINDOW_SECONDS)
            for user, item, count in _rows(users):
                at = start + datetime.timedelta(seconds=float(rng.uniform(0, WINDOW_SECONDS - 1)))
                f.write(json.dumps({"user_id": user, "item": item, "count": count,
                                    "ts": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}) + "\n")
    ran = stream.run_replay(_config(config, space, window=True, windows=windows, population=declared),
                            PipelineOptions([]), progress=lambda line: None)
    by_start = {r["window_start"]: r for r in ran.reports}
    outcomes = []
    for w in range(windows):
        start = (_T0 + datetime.timedelta(seconds=w * WINDOW_SECONDS)).strftime("%Y-%m-%dT%H:%M:%SZ")
        report = by_start.get(start)
        if report is None:
            raise RuntimeError(f"the replay reported no window starting {start}")
        if not report["released"]:
            outcomes.append(Outcome({}, json.dumps({"withheld": report.get("reason")}),
                                    *_claim(report.get("privacy") or {}, config)))
            continue
        with open(os.path.join(report["published_to"], "heavy_hitters.json")) as f:
            outcomes.append(_read_outcome(json.load(f), config))
    return outcomes


def _default_target(config: AuditConfig, users: Users) -> str:
    held: Dict[str, int] = {}
    for items in users.values():
        for item in items:
            held[item] = held.get(item, 0) + 1
    if config.releases == 2:
        if not held:
            raise AuditError("D holds no item: nothing for the reuse audit's target")
        return min(held, key=lambda item: (-held[item], item))
    used = {item[:1] for item in held}
    for unit in "zyxwvutsrqponmlkjihgfedcba0123456789":
        if unit not in used:
            return unit
    raise AuditError("every letter and digit starts some item of D: give --target")


def _hit(config: AuditConfig, target: str, outcome: Outcome, first: Optional[Outcome]) -> bool:
    event = config.resolved_event
    if event == DIFFERS:
        return outcome.document != first.document
    if event == PUBLISHED:
        return target in outcome.items
    if event == NOTHING:
        return not outcome.items
    value = outcome.items.get(target)
    return value is not None and value >= config.at_least


def _needed(test: ClaimTest, config: AuditConfig) -> List[dict]:
    """Per direction: the runs that would refute a violation of ``config.violation``."""
    needed = []
    for d in test.directions:
        p = d.hits_denominator / d.runs_denominator
        runs = runs_to_refute(p, config.violation, test.epsilon, test.delta, test.confidence)
        needed.append({"direction": f"{d.numerator} over {d.denominator}", "p_denominator": p,
                       "p_numerator": math.exp(test.epsilon) * p + test.delta + config.violation, "runs": runs})
    return needed


def _accounting(outcomes: List[Outcome]) -> Optional[str]:
    """The accounting the releases published (``exact``, ``bound``, several joined by ``+``), or None."""
    named = sorted({o.accounting for o in outcomes if o.accounting})
    return "+".join(named) or None


def run_audit(config: AuditConfig, users: Optional[Users] = None, progress: Optional[Progress] = None,
              workspace: Optional[str] = None) -> dict:
    """Audits the pipeline on ``users`` (D, with ``config.target_holders`` more users holding only
    the target) and D plus one user; returns the JSON-ready result.

    Args:
      config: what to audit.
      users: D, user id -> {item: records}; None: ``synthetic_population(500)``.
      progress: called with a line after each release (or window replay).
      workspace: where to keep the releases' files (default: a temporary directory, deleted).

    Raises:
      AuditError: nothing to audit, D already has the audit's extra user or one of its holders,
        or (default target) every letter and digit starts an item of D.
      Whatever ``run_discovery`` raises for the job (an infeasible target, for one).
    """
    started = time.monotonic()
    users = synthetic_population(500) if users is None else users
    if not users:
        raise AuditError("D holds no user: nothing to audit")
    if TARGET_USER in users:
        raise AuditError(f"D already has a user {TARGET_USER!r}, the audit's extra user")
    if config.target_holders and any(user.startswith(HOLDER_PREFIX) for user in users):
        raise AuditError(f"D already has users named {HOLDER_PREFIX}*, the audit's holders of the target")
    target = config.target if config.target is not None else _default_target(config, users)
    users = {**users, **{f"{HOLDER_PREFIX}{i}": {target: 1} for i in range(config.target_holders)}}
    neighbour = {**users, TARGET_USER: {target: 1}}
    say = progress or (lambda line: None)
    root = workspace or tempfile.mkdtemp(prefix="triehh-audit-")
    space = _Workspace(root)
    hits = {"D": 0, "D'": 0}
    outcomes: List[Outcome] = []
    releases = 0
    try:
        if config.window:
            # Two releases: window k of every replay is compared with window k of a first replay
            # of D (the pairs are independent across windows, as the runs of a batch audit are).
            firsts: List[Optional[Outcome]] = [None] * config.runs
            if config.releases == 2:
                firsts = _window_replay(config, space, users, config.runs, len(users))
                releases += len(firsts)
                say(f"audit: a first replay of D, {config.runs:,} windows")
            for name, population in (("D", users), ("D'", neighbour)):
                ran = _window_replay(config, space, population, config.runs, len(users))
                releases += len(ran)
                outcomes += ran
                hits[name] = sum(_hit(config, target, o, first) for o, first in zip(ran, firsts))
                say(f"audit: {name}: {config.runs:,} windows in one replay, event in {hits[name]:,}")
        else:
            # Two releases: one first release of D, then every run's second release compared with
            # it. A correct pipeline's releases are independent, so given the first one's file f
            # the claim holds for the event "not f"; a pipeline that reuses keys repeats f on D.
            first = _release(config, space, users) if config.releases == 2 else None
            releases += config.releases == 2
            for run in range(config.runs):
                for name, population in (("D", users), ("D'", neighbour)):
                    space.clear(ledger=config.releases == 1)
                    outcome = _release(config, space, population)
                    outcomes.append(outcome)
                    hits[name] += _hit(config, target, outcome, first)
                releases += 2
                say(f"audit: run {run + 1:,}/{config.runs:,}: event on D {hits['D']:,}, on D' {hits[PRIME]:,}")
    finally:
        if workspace is None:
            shutil.rmtree(root, ignore_errors=True)
    seconds = time.monotonic() - started
    if config.theta is not None:
        epsilon, delta, source = _theorem1_claim(config, len(users))
    else:
        epsilon, delta, source = max(o.epsilon for o in outcomes), max(o.delta for o in outcomes), None
    test = test_claim(hits["D'"], config.runs, hits["D"], config.runs, epsilon, delta, config.confidence)
    return {
        "format": FORMAT,
        "verdict": "violated" if test.violated else "inconclusive",
        "violated": test.violated,
        "job": {"protocol": config.protocol.value, "epsilon": config.epsilon, "delta": config.delta,
                "theta": config.theta, "batch_size": config.batch_size,
                "max_length": config.max_length, "estimate_frequencies": config.estimate_frequencies,
                "window": WINDOW_SECONDS if config.window else None, "releases_per_run": config.releases,
                "selection_share": config.selection_share},
        "claim": {"epsilon": epsilon, "delta": delta, "accounting": _accounting(outcomes),
                  **({"source": source} if source else {})},
        "population": {"users": len(users), "target": target, "target_user": TARGET_USER,
                       "target_holders": config.target_holders},
        "event": {"name": config.resolved_event, "at_least": config.at_least,
                  "runs_d": config.runs, "runs_d_prime": config.runs, "hits_d": hits["D"], "hits_d_prime": hits["D'"]},
        "confidence": config.confidence,
        "directions": [dataclasses.asdict(d) for d in test.directions],
        "violation": config.violation,
        "runs_to_refute": _needed(test, config),
        "releases": releases,
        "seed": config.seed,
        "seconds": round(seconds, 3),
        "seconds_per_release": round(seconds / max(1, releases), 3),
    }


_EVENT_TEXT = {
    PUBLISHED: "the target {target!r} is published (a heavy hitter or frequent prefix)",
    AT_LEAST: "the target {target!r}'s published estimate (or count) is at least {at_least:g}",
    DIFFERS: "the second release's published file differs from the first's (the same paths, released twice)",
    NOTHING: "nothing is published (round 1 keeps no prefix)",
}


def format_audit(result: dict) -> str:
    """The audit's result as the lines ``triehh audit`` prints."""
    job, event, claim = result["job"], result["event"], result["claim"]
    holders = result["population"].get("target_holders", 0)
    how = (f"one --window replay of {event['runs_d']:,} windows per population"
           + (", after a first replay of D (window k against its window k)" if job["releases_per_run"] == 2 else "")
           if job["window"]
           else f"{event['runs_d']:,} runs per population, one release each" if job["releases_per_run"] == 1
           else f"one first release of D, then {event['runs_d']:,} runs per population, the same paths")
    lines = [
        f"privacy audit of the real pipeline: discover --protocol {job['protocol']} --epsilon {job['epsilon']:g} "
        f"--delta {job['delta']:g} --max-length {job['max_length']}"
        + (f" --estimate-frequencies {job['estimate_frequencies']:g}" if job["estimate_frequencies"] else "")
        + (f" --selection-share {job['selection_share']:g}" if job.get("selection_share") else "")
        + (f" --theta {job['theta']} --batch-size {job['batch_size']} --allow-no-guarantee"
           if job.get("theta") is not None else "")
        + (" --window 1h" if job["window"] else ""),
        f"  populations   D: {result['population']['users']:,} users"
        + (f", {holders:,} of them holding only the target" if holders else "")
        + f"; D': D plus one user holding only {result['population']['target']!r}",
        f"  claim         epsilon={claim['epsilon']:.4g} delta={claim['delta']:.3g} "
        + (f"({claim['source']})" if claim.get("source") else "(as the releases published it"
           + (f", {claim['accounting']} accounting)" if claim.get("accounting") else ")")),
        f"  runs          {how}: {result['releases']:,} releases, {result['seconds']:.1f} s "
        f"({result['seconds_per_release']:.2f} s per release)",
        "  event         " + _EVENT_TEXT[event["name"]].format(target=result["population"]["target"],
                                                              at_least=event["at_least"] or 0),
        f"                on D {event['hits_d']:,}/{event['runs_d']:,}, on D' {event['hits_d_prime']:,}/"
        f"{event['runs_d_prime']:,}",
    ]
    for d in result["directions"]:
        lines.append(f"  {d['numerator']:>2} over {d['denominator']:<2}    P[E|{d['numerator']}] >= "
                     f"{d['p_numerator_lower']:.4g} vs allowed e^eps * {d['p_denominator_upper']:.4g} + delta = "
                     f"{d['allowed']:.4g}: " + ("REFUTED" if d["refuted"] else "not refuted"))
    lines.append(f"  (one-sided Clopper-Pearson bounds at {result['directions'][0]['bound_level']:.4g} each: "
                 f"{result['confidence']:.0%} for the verdict, both directions)")
    if result["violated"]:
        lines.append(f"violated: the runs refute the claimed (epsilon, delta) at {result['confidence']:.0%} confidence")
    else:
        lines.append("inconclusive: these runs cannot refute the claim (which does not show it holds)")
        for need in result["runs_to_refute"]:
            what = f"a violation of +{result['violation']:g} {need['direction']}"
            if need["p_numerator"] > 1:
                lines.append(f"  {what}: impossible (P[E] = {need['p_denominator']:.3g} lets the other be 1)")
                continue
            runs = need["runs"]
            lines.append(f"  {what} (P[E] = {need['p_denominator']:.3g} vs {need['p_numerator']:.3g}) needs "
                         + ("more than 10,000,000 runs" if runs is None else f"about {runs:,} runs per population"))
    return "\n".join(lines)
