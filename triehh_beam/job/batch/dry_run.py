"""A dry run of a discovery: which files (or BigQuery table or query) it would read, how many users
they hold, the plan and the budget it would spend and what the population's ledger has left.
Nothing is committed and nothing is charged; an infeasible target is refused as by
``run_discovery``. An operator tool: its counts, n, m and the achieved epsilon are private
(labelled so), never to be published."""

from __future__ import annotations

import os
from typing import Callable, Optional

from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.io.drops import describe_drops
from triehh_beam.io.files import match_files
from triehh_beam.job.batch.discovery_job import DiscoveryJob
from triehh_beam.job.release.input_checks import describe_unusable
from triehh_beam.job.release.lifecycle import Release, check_locations
from triehh_beam.job.release.outputs import describe_plan, plan_document
from triehh_beam.job.release.planning import check_before_census, plan_for_census
from triehh_beam.job.settings import sources
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.settings.paths import canonical_path
from triehh_beam.job.state import ledger as ledger_lib
from triehh_beam.job.state import leftovers

__all__ = ["dry_run"]


def dry_run(
    config: DiscoveryConfig,
    options: Optional[PipelineOptions] = None,
    progress: Callable[[str], None] = lambda line: None,
    ticks: Optional[Callable[[Optional[str]], None]] = None,
) -> dict:
    """Plans a discovery without running any round: nothing is committed, nothing is charged.

    Lists the files the input matches, counts the users (a census job; a resumable job's state
    gives the count without reading), plans, and reports the budget the job would spend and
    what the ledger has left. Raises like ``run_discovery`` for an infeasible target, too many
    bad rows or users without a usable item. ``ticks``: as ``run_discovery``'s (the census's
    progress).
    """
    files = [] if config.query is not None or sources.is_table(config) else match_files(config.input_pattern)
    # (FileNotFoundError for a part of a pattern matching nothing)
    driver = DiscoveryJob(config, options or PipelineOptions([]), progress, None, ticks)
    driver.announce_deny_list()  # its files read and checked (refused like a run's)
    state = driver.store.load()
    if state is not None:
        driver.check_resumable(state)
        plan = state.plan
    else:
        root = config.resolved_state_dir
        before = leftovers.local_entries(root)
        try:
            plan = _census_plan(driver, config, progress)
        finally:
            # Nothing left behind: the directories the census wrote its output to, if empty.
            leftovers.remove_new(root, before, directories_only=True)
    return _report(config, driver, state, plan, files, progress)


def _census_plan(driver: DiscoveryJob, config: DiscoveryConfig, progress: Callable[[str], None]):
    """The census (refused as a job would be), then the plan for the users it counted."""
    # The census's workers write its spill into the state directory: refused where they cannot.
    check_locations(canonical_path(config.output_dir), config.resolved_state_dir, driver.options)
    driver.prepare_state_dir()
    check_before_census(config)  # TrieHH++: an infeasible target reads nothing
    counted, counters, _ = driver.census(
        Release.fresh(config.seed or os.urandom(32), config.sampling_identity()).sampler())
    progress(f"census [private]: {counted.users:,} users; {describe_drops(counters)}"
             + (f"; {describe_unusable(config, counted)}" if counted.unusable_users else ""))
    # Refused as the job would be: too many bad rows or users without a usable item.
    driver.check_census(counted, counters)
    return plan_for_census(config, counted.users)


def _report(config: DiscoveryConfig, driver: DiscoveryJob, state, plan, files, progress: Callable[[str], None]) -> dict:
    """The dry run's report, printed through ``progress`` and returned."""
    spent = driver.ledger.spent()
    left = ledger_lib.remaining(config.budget, spent)
    already_charged = state is not None and any(
        r.get("record_id") == state.job_id for r in driver.ledger.records()
    )
    spend = ledger_lib.plan_spend(plan)  # frequency estimates included
    fits = already_charged or (spend.epsilon <= left.epsilon and spend.delta <= left.delta)
    report = {
        "private": "operator data: the counts, n, m and the achieved epsilon, delta are not "
        "covered by the DP guarantee; never publish them",
        "input": config.source,
        "files": files,
        "resumes_job": state.job_id if state is not None else None,
        "rounds_completed": state.rounds_completed if state is not None else 0,
        "plan": plan_document(plan),
        "would_spend": None if plan.no_guarantee else {"epsilon": spend.epsilon, "delta": spend.delta},
        "already_charged": already_charged,
        "ledger": driver.ledger.path,
        "spent_so_far": {"epsilon": spent.epsilon, "delta": spent.delta},
        "budget": {"epsilon": config.budget_epsilon, "delta": config.budget_delta},
        "fits_budget": fits,
    }
    if files:
        progress(f"dry run: {len(files)} input file(s): {', '.join(files[:5])}{' ...' if len(files) > 5 else ''}")
    else:
        progress(f"dry run: input {config.source} (BigQuery)")
    progress(f"plan [private]: {describe_plan(plan)}")
    if plan.no_guarantee:
        progress("would spend: unbounded (no DP guarantee)")
    else:
        estimates = (f" (discovery {plan.epsilon:.6g} + frequency estimates {plan.estimate_epsilon:.6g})"
                     if plan.estimate_epsilon else "")
        progress(f"would spend [private]: epsilon {spend.epsilon:.6g}{estimates}, delta {spend.delta:.3g}"
                 + (" (already charged: a resume spends nothing more)" if already_charged else ""))
    progress(f"ledger {driver.ledger.path}: spent epsilon {spent.epsilon:.6g}, delta {spent.delta:.3g}; "
             f"budget {'fits' if fits else 'EXCEEDED'}")
    return report
