"""What ``triehh discover`` prints when a discovery ends: the top heavy hitters (a screenful), how
many there are and where all of them are (``triehh show`` and the published JSON), the privacy
guarantee, where the outputs are, and, on stderr, a warning in words when a notable share of the
input could not be used (which flag to change; the exact counts stay in the operator report)."""

from __future__ import annotations

import json
import os
import sys
from typing import Callable, List, Mapping, Optional, Sequence

from triehh_beam.protocol.protocols import Protocol

__all__ = ["SCREENFUL", "input_warnings", "print_summary", "share_in_words"]

SCREENFUL = 20  # heavy hitters listed on the console; `triehh show` and the JSON hold every one

# (at least this share, how a person says it), largest first; below the last, no warning.
_SHARES = ((0.75, "more than three quarters"), (0.5, "more than half"), (0.25, "more than a quarter"),
           (0.1, "more than a tenth"), (0.05, "more than 1 in 20"))


# The reasons a row is rejected that its name alone does not explain to a new user, with the
# setting whose limit (in bytes) it broke.
_REJECTED = {"oversized_item": ("an item over --max-item-bytes", "max_item_bytes"),
             "oversized_user": ("a user id over --max-user-bytes", "max_user_bytes")}


# What a whole item's estimate counts, in docs/protocol.md's words (section 2, "The estimate").
_WEIGHTED_USERS = ("weighted users: the sum over users of the share of their records that are the "
                             "item, its holders when each holds one item and fewer when holders hold several")


def share_in_words(part: int, whole: int) -> Optional[str]:
    """``part / whole`` in words a person notices ("more than half"), or None below 1 in 20."""
    if whole <= 0:
        return None
    return next((words for share, words in _SHARES if part / whole > share), None)


_SEVERAL_RECORDS = (
    "note: the input holds more records than users (by more than 1 in 20), so users may hold several "
    "items: a sampled user votes for one of its items per round, drawn by its share of its records, so an "
    "item counts each holder of several for less than one (estimates are weighted users, fewer than the "
    "holders); triehh plan --items-per-user K plans for it")


def _reason(reason: str, count: int, limits: Mapping[str, int], verbose: bool) -> str:
    """A drop reason in words: its limit when it broke one (``limits``: setting -> bytes), and with
    ``verbose`` its count, marked private."""
    words = reason
    if reason in _REJECTED:
        what, setting = _REJECTED[reason]
        words += f": {what}" + (f" {limits[setting]}" if setting in limits else "")
    return words + (f" [private: {count:,} row{'' if count == 1 else 's'}]" if verbose else "")


def input_warnings(report: dict, max_length: int, unit_size: int, truncated: bool,
                   one_vote_per_user: bool = True, limits: Optional[Mapping[str, int]] = None,
                   verbose: bool = False) -> List[str]:
    """One warning line per notable share of the input that could not be used, from the private
    operator report's ``input`` block: items too long for the trie's depth (users left unable to
    vote) and rejected rows, each reason with the limit it broke (``limits``: ``max_item_bytes``,
    ``max_user_bytes``); and, for protocols where a user gives one item (``one_vote_per_user``),
    a note when records outnumber users (users may hold several items). Words, not counts: a
    count of the input is private (shown, marked so, only with ``verbose``)."""
    document = report.get("input", {})
    records, users = document.get("records_read", 0), document.get("distinct_users", 0)
    lines = []
    kept = records - sum(document.get("dropped", {}).values())
    if one_vote_per_user and share_in_words(kept - users, users):
        lines.append(_SEVERAL_RECORDS)
    too_long = share_in_words(document.get("items_too_long", 0), records)
    mute = share_in_words(document.get("users_without_usable_item", 0), users)
    if too_long or mute:
        what = []
        if too_long:
            what.append(f"{too_long} of the records hold items too long for --max-length {max_length} at "
                        f"--unit-size {unit_size} ({'cut short' if truncated else 'dropped'})")
        if mute:
            what.append(f"{mute} of the users hold no usable item and could not vote")
        lines.append(f"WARNING: {'; '.join(what)}: raise --max-length or --unit-size (triehh plan "
                     "--compare-units shows what each finds); exact counts in the operator report")
    dropped = {reason: count for reason, count in document.get("dropped", {}).items() if count}
    rejected = share_in_words(sum(dropped.values()), records)
    reasons = ", ".join(_reason(reason, dropped[reason], limits or {}, verbose) for reason in sorted(dropped))
    if rejected:
        lines.append(f"WARNING: {rejected} of the rows were rejected ({reasons}): "
                     "--dead-letter PATH writes them; check --format and the column flags; exact counts "
                     "in the operator report")
    elif dropped:  # a few rows: a note, never silence (a 50 MB item vanished without a line)
        lines.append(f"note: a few rows were rejected ({reasons}); --dead-letter PATH writes them; exact "
                     "counts in the operator report")
    return lines



def _protocol(plan) -> Protocol:
    return Protocol.parse(plan.protocol or Protocol.TRIEHH)  # a TrieHH plan may record none


def _population_note(plan, verbose: bool) -> str:
    """n where it may be shown: declared public, or with ``--verbose`` marked private."""
    from triehh_beam.job.release.outputs import population_is_public

    if population_is_public(plan):
        return f"; n={plan.population:,} (declared public)"
    return f" [private: n={plan.population:,}]" if verbose else ""


def _privacy_line(plan, verbose: bool) -> str:
    protocol = _protocol(plan)
    if protocol is Protocol.PARTITION_SELECTION:
        counts = f"counts epsilon {plan.estimate_epsilon:.4g}" if plan.estimate_epsilon else "no counts"
        return (f"privacy: ({plan.epsilon + plan.estimate_epsilon:.4g}, {plan.delta:.3g})-DP, user level, one "
                f"release (optimal partition selection: up to {plan.max_items_per_user} "
                f"item{'s' if plan.max_items_per_user > 1 else ''} per user, selection "
                f"epsilon {plan.epsilon:.4g}, {counts}){_population_note(plan, verbose)}")
    if protocol is Protocol.NOISY_ROUNDS:
        return (f"privacy: ({plan.epsilon:.4g}, {plan.delta:.3g})-DP, user level, for all {plan.max_length} rounds "
                f"(noisy prefix rounds: every user votes, discrete Laplace epsilon {plan.round_epsilon:.4g} per "
                f"round, {plan.accounting} composition){_population_note(plan, verbose)}")
    if protocol is Protocol.WHOLE_ITEMS:
        return (f"privacy: ({plan.epsilon:.4g}, {plan.delta:.3g})-DP, user level, one release (sample-and-threshold: "
                f"tau={plan.theta}, p_s={100 * plan.sample_probability:.6g}%, {plan.accounting or 'bound'} "
                f"accounting){_population_note(plan, verbose)}")
    if protocol is Protocol.TRIEHH_PP:  # nothing in its guarantee depends on n
        return (f"privacy: ({plan.epsilon:.4g}, {plan.delta:.3g})-DP, user level, for all {plan.max_length} "
                f"rounds (TrieHH++: tau={plan.theta}, p_s={100 * plan.sample_probability:.4g}% per round)"
                f"{_population_note(plan, verbose)}")
    if plan.no_guarantee:
        return "privacy: NO DP GUARANTEE (theta and batch size fixed outside Theorem 1)"
    if _population_note(plan, False):
        return (f"privacy: ({plan.epsilon:.4g}, {plan.delta:.3g})-DP, user level, for all {plan.max_length} rounds; "
                f"n={plan.population:,} (declared public), theta={plan.theta}, m={plan.batch_size:,} per round")
    line = (f"privacy: within the target ({plan.target_epsilon:.4g}, {plan.target_delta:.3g})-DP, "
            f"user level, for all {plan.max_length} rounds; theta={plan.theta}")
    if verbose:
        line += (f" [private: ({plan.epsilon:.4g}, {plan.delta:.3g}) achieved, "
                 f"n={plan.population:,}, m={plan.batch_size:,} per round]")
    return line


def _rest(say: Callable[[str], None], shown: int, total: int, prefixes: int, result) -> None:
    """How many are not listed, and where every one is."""
    frequent = (f"{prefixes:,} frequent prefix{'' if prefixes == 1 else 'es'} (starts of several items, "
                "none frequent alone)")
    if total > shown:
        more = f"... and {total - shown:,} more" + (f"; they and the {frequent}" if prefixes else "") + ", all"
    elif prefixes:
        more = f"and {frequent}"
    else:
        return
    say(f"  {more} in `triehh show {os.path.dirname(result.output_path)}` and {result.output_path}")


def _print_trie(result, elapsed: float, config, say: Callable[[str], None]) -> None:
    from triehh_beam.job.release.wording import counted
    from triehh_beam.present import result as published
    from triehh_beam.present.text import columns

    plan = result.plan
    entries = published.ordered_items(result.heavy_hitters, config.encoder)
    estimates = published.load_result(os.path.dirname(result.output_path)).estimates() if plan.estimate_epsilon else {}
    if estimates:  # the top by estimate; the published order (and `triehh show`) is by round
        entries.sort(key=lambda entry: -estimates[entry.sequence][0])
    top = entries[:SCREENFUL]
    which = ("" if len(entries) <= SCREENFUL else
             f"; the top {SCREENFUL} by estimate" if estimates else
             f"; the first {SCREENFUL} found (the rounds publish no counts; --estimate-frequencies adds them)")
    say("")
    say(f"discovered {counted(len(entries), 'heavy hitter')} in {counted(result.rounds_run, 'round')} "
        f"({result.stop_reason})"
        + (f", {elapsed:.1f} s (private: it depends on the records)" if config.verbose else "") + f"{which}:")
    if estimates and top:
        say(f"  (estimate: weighted users, each user counted once for one of its discovered entries, "
            f"by its share of its records: the holders when each holds one, fewer when holders hold "
            f"several; noise of epsilon_est={plan.estimate_epsilon:g}; beside it the 95% interval of the "
            f"weighted users, the users' draws and the noise both counted)")
        rows = []
        for entry in top:
            estimate, low, high = estimates[entry.sequence]
            rows.append((entry.text, f"{estimate:>9,}  ({low:,} to {high:,})"))
        for line in columns(rows, "<"):
            say(line)
    else:
        for entry in top:
            say(f"  {entry.text}")
    _rest(say, len(top), len(entries), len(result.frequent_prefixes), result)
    say(_privacy_line(plan, config.verbose))
    if plan.estimate_epsilon:
        say(f"frequency estimates: + epsilon_est={plan.estimate_epsilon:g}, spent on top of the discovery's "
            f"epsilon (the ledger holds the sum; delta unchanged)")


def _print_whole_items(result, elapsed: float, config, say: Callable[[str], None]) -> None:
    """A whole-item release (``--protocol sample-threshold``): each item with its count, count /
    p_s and the 95% interval of its weighted users, most reported first."""
    from triehh_beam.io.files import read_file
    from triehh_beam.present import result as published
    from triehh_beam.present.text import columns

    plan = result.plan
    released = json.loads(read_file(result.output_path))["released"]
    say("")
    say(f"released {len(released)} items (whole-item sample-and-threshold, one pass)"
        + (f", {elapsed:.1f} s (private: it depends on the records)" if config.verbose else "")
        + f"{f'; the {SCREENFUL} most reported' if len(released) > SCREENFUL else ''}:")
    if released:
        # result.heavy_hitters: the decoded items, in the published order (most reported first)
        texts = [published.ordered_items([value], config.encoder)[0].text for value in result.heavy_hitters[:SCREENFUL]]
        say(f"  (count: sampled users who reported it, >= tau={plan.theta}; estimate = count / p_s, of the "
            f"item's {_WEIGHTED_USERS}; the interval holds them given the release)")
        rows = [("item", f"{'count':>7}  {'estimate':>9}  95% interval")] + [
            (text, f"{entry['count']:>7,}  {entry['estimate']:>9,.0f}  {entry['interval'][0]:,} to {entry['interval'][1]:,}")
            for text, entry in zip(texts, released)]
        for line in columns(rows, "<"):
            say(line)
    _rest(say, min(len(released), SCREENFUL), len(released), 0, result)
    say(_privacy_line(plan, config.verbose))


def _print_partitions(result, elapsed: float, config, say: Callable[[str], None]) -> None:
    """A partition-selection release: its items, most counted first, with the noisy count and
    its 95% interval when it publishes counts (``present.show_release``'s table)."""
    from triehh_beam.io.files import read_file
    from triehh_beam.present.show_release import whole_item_lines

    document = json.loads(read_file(result.output_path))
    lines = whole_item_lines({**document, "released": document["released"][:SCREENFUL]}, config.encoder)
    say("")
    say(f"released {len(document['released'])} items (optimal partition selection, one pass), {elapsed:.1f} s"
        f"{f'; the first {SCREENFUL}' if len(document['released']) > SCREENFUL else ''}:")
    for line in lines[2:]:
        say(line)
    say(_privacy_line(result.plan, config.verbose))


def print_summary(result, elapsed: float, config, say: Callable[[str], None]) -> None:
    """The end of a discovery (``job.batch.driver.DiscoveryResult``) on the console, then the input
    warnings (``input_warnings``) on stderr, last, where they are seen."""
    if _protocol(result.plan) is Protocol.PARTITION_SELECTION:
        _print_partitions(result, elapsed, config, say)
    elif _protocol(result.plan) is Protocol.WHOLE_ITEMS:
        _print_whole_items(result, elapsed, config, say)
    else:
        _print_trie(result, elapsed, config, say)
    say(f"results (publishable): {result.output_path}")
    say(f"operator report (private, every count; never publish): {result.report_path}")
    say(f"see the result as tables and a tree: triehh show {os.path.dirname(result.output_path)}")
    for line in input_warnings_of(result, config):
        print(line, file=sys.stderr, flush=True)


def input_warnings_of(result, config) -> List[str]:
    """``input_warnings`` for a finished discovery, from its operator report ([] if unreadable)."""
    from triehh_beam.io.files import read_file

    try:
        report = json.loads(read_file(result.report_path))
    except (OSError, ValueError):
        return []
    limits = {"max_item_bytes": config.max_item_bytes, "max_user_bytes": config.max_user_bytes}
    return input_warnings(report, config.max_length, config.unit_size, config.truncate_long_items,
                          one_vote_per_user=not config.protocol.selects_partitions, limits=limits,
                          verbose=config.verbose)
