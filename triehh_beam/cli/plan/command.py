"""``triehh plan``: theta and the batch size for a privacy target (``protocol.planning.planner``) and the
holders an item needs to be found (``protocol.planning.utility``), as aligned text or one JSON object,
optionally with plots; an infeasible target is still a plan (exit 0), with its alternatives.
``--protocol triehh++``/``sample-threshold`` and ``--compare-units`` are planned by
``plan_sample_threshold``, ``plan_whole_items`` and ``plan_units``. Invalid arguments exit 2."""

from __future__ import annotations

import argparse
import json
import math
import sys

from triehh_beam.cli import argtypes
from triehh_beam.cli.argtypes import UsageError
from triehh_beam.cli.plan.text import PROBABILITIES, header, holders_table, row, wrap
from triehh_beam.protocol.planning import parameters
from triehh_beam.protocol.protocols import DEFAULT_PROTOCOL, Protocol

__all__ = ["register_plan"]



def register_plan(subparsers) -> None:
    """Adds ``plan`` to the ``triehh`` tool."""
    parser = subparsers.add_parser(
        "plan",
        help="plan a privacy target: TrieHH++'s p_s and tau (default) or TrieHH's theta and m",
        description=(
            "Plan a discovery for a privacy target (epsilon, delta) over N users and show how many "
            "holders an item needs to be discovered. By default TrieHH++ (--protocol triehh++): the "
            "per-round sample p_s and threshold tau, certified exactly. With --protocol triehh: the "
            "vote threshold theta and the per-round batch size m of the paper's Theorem 1 (unproven "
            "for fixed-size sampling: plans whose crowding lower bound on delta exceeds a tenth of "
            "delta per round are refused) and the worst-case frequency of Proposition 1. Infeasible "
            "targets are reported as such, with the alternatives that exist."
        ),
    )
    parser.add_argument("--population", "-n", type=argtypes.population, required=True, metavar="N",
                        help="number of users (devices); 1e5 is accepted")
    parser.add_argument("--epsilon", type=argtypes.epsilon, required=True, metavar="E",
                        help="target epsilon for the whole run (all rounds), > 0")
    parser.add_argument("--delta", type=argtypes.delta, required=True, metavar="D",
                        help="target delta, in (0, 1); 1/N^2 or smaller is customary")
    parser.add_argument("--max-length", type=argtypes.positive_int, required=True, metavar="L",
                        help="L: the maximum item length in units, terminator included; "
                             "also the number of rounds")
    parser.add_argument("--unit-size", type=_unit_size, default=1, metavar="K",
                        help="characters (or bytes) per unit, recorded in the output: L counts "
                             "units of K characters, so items of up to (L-1)*K characters fit "
                             "(default 1); 'auto': compare unit sizes (as --compare-units, items "
                             "of up to L-1 characters)")
    parser.add_argument("--compare-units", action="store_true",
                        help="compare unit sizes 1-4 and the whole item (L = 2) for items of up to "
                             "(L-1)*K characters, under TrieHH and TrieHH++ (or --protocol's): L, "
                             "sample, threshold, holders for 50/90/99%% discovery, characters "
                             "revealed per round")
    parser.add_argument("--find-frequency", type=_frequency, default=None, metavar="F",
                        help="with --compare-units: recommend the smallest unit size that finds "
                             "items held by a share F of users (0.003 or 0.3%%) with 90%% "
                             "probability in the worst case")
    parser.add_argument("--rule", choices=parameters.RULES, default="authors",
                        help="'authors' (default): the smallest theta with delta(theta) <= D, "
                             "exactly; 'corollary1': the paper's Corollary 1 (theta >= 10)")
    parser.add_argument("--item-length", type=argtypes.positive_int, default=None, metavar="LEN",
                        help="item length in units, terminator included, for the discovery "
                             "table (default: L, the worst case)")
    parser.add_argument("--items-per-user", type=_items_per_user, default=1.0, metavar="K",
                        help="plan for users holding several items: each holder gives the item at "
                             "least 1/K of its records (K items in equal counts), and a sampled "
                             "user votes for one of its items, drawn by its share, so holders "
                             "count for less (default 1: one item per user)")
    parser.add_argument("--protocol", choices=[p.value for p in Protocol], type=Protocol.parse, default=None,
                        help="'triehh++' (default): sample-and-threshold (docs/protocol.md section 2), "
                             "tau and the per-round sample p_s, certified exactly; 'triehh': theta and m "
                             "by the paper's Theorem 1 (unproven for fixed-size sampling; plans the "
                             "crowding bound refutes are refused); with --compare-units both unless one "
                             "is named; 'sample-threshold': one release of whole items with their "
                             "counts, tau and p_s; 'partition-selection': one release of whole items at "
                             "the central optimum, beside what every protocol needs and the trust model "
                             "each fits; 'noisy-rounds': every user votes each round, discrete Laplace "
                             "noise per round and its thresholds (docs/protocol.md section 8), beside "
                             "the same table")
    parser.add_argument("--max-items-per-user", type=argtypes.positive_int, default=None, metavar="K",
                        help="with --protocol partition-selection: the distinct items each user contributes "
                             "(default 1)")
    parser.add_argument("--selection-share", type=argtypes.finite_float, default=None, metavar="F",
                        help="with --protocol partition-selection: the share of epsilon the selection spends, "
                             "in (0, 1]; the rest noises the counts (default 0.5)")
    parser.add_argument("--accounting", choices=("exact", "bound"), default=None,
                        help="for one plan of triehh++ or sample-threshold: 'exact' (default) certifies "
                             "each release by its exact delta (docs/protocol.md section 2, Exact "
                             "accounting); 'bound' by the paper's closed form (epsilon/L <= 1). The plan "
                             "shows the other beside it")
    parser.add_argument("--estimate-frequencies", type=argtypes.epsilon, default=None, metavar="EPSILON_EST",
                        help="also show the frequency estimates discover's --estimate-frequencies adds: "
                             "their 95%% interval (users) and the total epsilon spent (epsilon + "
                             "EPSILON_EST, delta unchanged)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--plot", metavar="DIR", default=None,
                        help="also write the planning plots (PNG) into DIR: worst-case discovery vs "
                             "frequency at epsilon/2, epsilon and 2*epsilon, vs population size, and "
                             "the population needed for 90%% discovery")
    parser.set_defaults(handler=lambda args, extra: _run_plan(args))


def _items_per_user(text: str) -> float:
    value = argtypes.finite_float(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _unit_size(text: str):
    return "auto" if text.strip().lower() == "auto" else argtypes.positive_int(text)


def _frequency(text: str) -> float:
    text = text.strip()
    value = argtypes.finite_float(text[:-1]) / 100 if text.endswith("%") else argtypes.finite_float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1] (or (0%, 100%]), got {text}")
    return value


def _plan_report(args) -> dict:
    """The plan and its discovery table, as one JSON-ready dict."""
    from triehh_beam.protocol.planning import planner, utility  # SciPy: only when a plan is made

    result = planner.plan(args.population, args.epsilon, args.delta, args.max_length, args.rule)
    item_length = args.max_length if args.item_length is None else args.item_length
    report = result.to_dict()
    report["population"] = result.n
    report["unit_size"] = args.unit_size
    report["max_item_characters"] = (args.max_length - 1) * args.unit_size
    report["item_length"] = item_length
    report["item_length_is_worst_case"] = item_length == args.max_length
    report["items_per_user"] = args.items_per_user
    report["item_share"] = share = 1 / args.items_per_user
    rows = []
    if result.feasible:
        for p in PROBABILITIES:
            need = utility.min_frequency_for_plan(result, p, item_length, share)
            rows.append({
                "probability": p,
                "count": None if need is None else need.count,
                "fraction": None if need is None else need.fraction,
                "user_equivalents": None if need is None else need.user_equivalents,
                "achieved_probability": None if need is None else need.probability,
            })
    report["discovery"] = rows
    return report


def _run_plan(args) -> int:
    if args.item_length is not None and args.item_length > args.max_length:
        raise UsageError(
            f"--item-length {args.item_length} exceeds --max-length {args.max_length}"
        )
    try:  # what the argument types cannot see alone (e.g. epsilon/L too large)
        parameters.PrivacyTarget(args.population, args.epsilon, args.delta, args.max_length)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.protocol is Protocol.PARTITION_SELECTION:
        return _run_partition_selection_plan(args)
    if args.protocol is Protocol.NOISY_ROUNDS:
        return _run_noisy_rounds_plan(args)
    for flag, given in (("--max-items-per-user", args.max_items_per_user), ("--selection-share", args.selection_share)):
        if given is not None:
            raise UsageError(f"{flag} is --protocol partition-selection's: add it, or leave {flag} out")
    _check_accounting(args)
    if args.protocol is Protocol.WHOLE_ITEMS:
        return _run_whole_items_plan(args)
    if args.compare_units or args.unit_size == "auto":
        if args.estimate_frequencies is not None:
            raise UsageError("--estimate-frequencies is shown for one plan: leave it out with --compare-units")
        return _run_compare_units(args)
    if args.find_frequency is not None:
        raise UsageError("--find-frequency recommends a unit size: use it with --compare-units "
                         "(or --unit-size auto)")
    if (args.protocol or DEFAULT_PROTOCOL) is Protocol.TRIEHH_PP:
        return _run_sample_threshold_plan(args)
    report = _plan_report(args)
    estimates = _estimates_report(args.epsilon, args.estimate_frequencies)
    if estimates is not None:
        report["frequency_estimates"] = estimates
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        print(_format_plan(report))
        if report["feasible"]:  # the variant that may need fewer holders, in one line
            from triehh_beam.cli.plan.sample_threshold import comparison_line

            nineties = [row["count"] for row in report["discovery"] if row["probability"] == 0.9]
            print("\n".join(wrap(comparison_line(
                args.population, args.epsilon, args.delta, args.max_length, args.item_length,
                report["item_share"], nineties[0]), "")))
        if estimates is not None:
            print(_format_estimates(estimates))
    if args.plot:
        from triehh_beam.present.planning_plots import write_planning_plots

        epsilons = sorted({args.epsilon / 2, args.epsilon, args.epsilon * 2})
        try:
            paths = write_planning_plots(args.plot, args.population, epsilons, args.delta,
                                         args.max_length, rule=args.rule, length=args.item_length)
        except ValueError as err:
            raise UsageError(str(err)) from None
        for path in paths:
            print(f"plot: {path}", file=sys.stderr)
    return 0


def _check_accounting(args) -> None:
    """Refuses ``--accounting`` where it would be ignored (a given flag is never dropped silently)."""
    if args.accounting is None:
        return
    if not (args.protocol or DEFAULT_PROTOCOL).samples_by_probability:
        raise UsageError("--accounting chooses how sample-and-threshold is certified; TrieHH's plan is "
                         "certified by Theorem 1: drop it, or add --protocol triehh++ or sample-threshold")
    if args.compare_units or args.unit_size == "auto":
        raise UsageError("--accounting is for one plan: --compare-units plans TrieHH++ with exact "
                         "accounting; leave it out, or plan one unit size")


def _run_compare_units(args) -> int:
    from triehh_beam.cli.plan import units as plan_units

    for flag, given in (("--plot", args.plot), ("--item-length", args.item_length is not None)):
        if given:
            raise UsageError(f"{flag} is for one unit size: leave it out with --compare-units")
    if args.max_length < 2:
        raise UsageError("--compare-units needs --max-length >= 2: one unit and the terminator")
    unit = 1 if args.unit_size == "auto" else args.unit_size
    protocols = (Protocol.TRIEHH, Protocol.TRIEHH_PP) if args.protocol is None else (args.protocol,)
    try:
        report = plan_units.units_report(args.population, args.epsilon, args.delta,
                                         (args.max_length - 1) * unit, protocols, args.rule,
                                         1 / args.items_per_user, args.find_frequency)
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(json.dumps(report, indent=2) if args.json else plan_units.format_units(report))
    return 0


def _run_sample_threshold_plan(args) -> int:
    from triehh_beam.cli.plan import sample_threshold as plan_sample_threshold

    if args.plot:
        raise UsageError("--plot draws TrieHH's plots only: leave it out with --protocol triehh++")
    if args.rule != "authors":
        raise UsageError("--rule chooses TrieHH's theta: it has no meaning with --protocol triehh++")
    report = plan_sample_threshold.plan_report(args.population, args.epsilon, args.delta, args.max_length,
                                               args.unit_size, args.item_length, 1 / args.items_per_user,
                                               args.accounting or "exact")
    estimates = _estimates_report(args.epsilon, args.estimate_frequencies)
    if estimates is not None:
        report["frequency_estimates"] = estimates
    print(json.dumps(report, indent=2) if args.json else plan_sample_threshold.format_plan(report))
    if estimates is not None and not args.json:
        print(_format_estimates(estimates))
    return 0


def _run_whole_items_plan(args) -> int:
    from triehh_beam.cli.plan import whole_items as plan_whole_items

    for flag, given in (("--plot", args.plot), ("--rule", args.rule != "authors"),
                        ("--compare-units", args.compare_units or args.unit_size == "auto"),
                        ("--item-length", args.item_length is not None),
                        ("--find-frequency", args.find_frequency is not None),
                        ("--estimate-frequencies", args.estimate_frequencies is not None)):
        if given:
            raise UsageError(f"{flag} is for a trie's plan: it has no meaning with --protocol sample-threshold "
                             "(one release of whole items, with their counts)")
    report = plan_whole_items.plan_report(args.population, args.epsilon, args.delta, args.max_length,
                                          args.unit_size, 1 / args.items_per_user, args.accounting or "exact")
    print(json.dumps(report, indent=2) if args.json else plan_whole_items.format_plan(report))
    return 0


def _run_noisy_rounds_plan(args) -> int:
    from triehh_beam.cli.plan import noisy_rounds as plan_noisy_rounds

    for flag, given in (("--plot", args.plot), ("--rule", args.rule != "authors"), ("--accounting", args.accounting),
                        ("--compare-units", args.compare_units or args.unit_size == "auto"),
                        ("--item-length", args.item_length is not None), ("--items-per-user", args.items_per_user != 1),
                        ("--find-frequency", args.find_frequency is not None),
                        ("--estimate-frequencies", args.estimate_frequencies is not None),
                        ("--max-items-per-user", args.max_items_per_user is not None),
                        ("--selection-share", args.selection_share is not None)):
        if given:
            raise UsageError(f"{flag} has no meaning with --protocol noisy-rounds (docs/protocol.md §8)")
    report = plan_noisy_rounds.plan_report(args.population, args.epsilon, args.delta, args.max_length, args.unit_size)
    print(json.dumps(report, indent=2) if args.json else plan_noisy_rounds.format_plan(report))
    return 0


def _run_partition_selection_plan(args) -> int:
    from triehh_beam.cli.plan import partition_selection as plan_partition_selection
    from triehh_beam.protocol.central.partition_selection import (DEFAULT_MAX_ITEMS,
                                                                  DEFAULT_SELECTION_SHARE)

    for flag, given in (("--plot", args.plot), ("--rule", args.rule != "authors"), ("--accounting", args.accounting),
                        ("--compare-units", args.compare_units or args.unit_size == "auto"),
                        ("--item-length", args.item_length is not None), ("--items-per-user", args.items_per_user != 1),
                        ("--find-frequency", args.find_frequency is not None),
                        ("--estimate-frequencies", args.estimate_frequencies is not None)):
        if given:
            raise UsageError(f"{flag} has no meaning with --protocol partition-selection (one release of whole "
                             "items at the central optimum: --max-items-per-user, --selection-share)")
    try:
        report = plan_partition_selection.plan_report(
            args.population, args.epsilon, args.delta, args.max_length, args.unit_size,
            args.max_items_per_user or DEFAULT_MAX_ITEMS,
            DEFAULT_SELECTION_SHARE if args.selection_share is None else args.selection_share)
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(json.dumps(report, indent=2) if args.json else plan_partition_selection.format_plan(report))
    return 0


#: Estimates whose published intervals the plan shows (the intervals depend on the estimate).
_EXAMPLE_ESTIMATES = (10, 100, 1_000, 10_000)


def _estimates_report(epsilon: float, estimate_epsilon):
    """What ``--estimate-frequencies`` adds to a plan (None without it): the noise's interval,
    the published interval at a few estimates, and the total spend (docs/protocol.md section 5).
    None of it depends on n."""
    if estimate_epsilon is None:
        return None
    from triehh_beam.protocol.estimates.count_intervals import noisy_count_intervals
    from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric

    noise = TwoSidedGeometric(estimate_epsilon)
    k = noise.half_width()
    examples = noisy_count_intervals(_EXAMPLE_ESTIMATES, estimate_epsilon)
    return {"estimate_epsilon": estimate_epsilon, "total_target_epsilon": epsilon + estimate_epsilon,
            "half_width": k, "coverage": noise.coverage(k), "standard_deviation": noise.variance ** 0.5,
            "intervals": {str(e): list(interval) for e, interval in zip(_EXAMPLE_ESTIMATES, examples)}}


def _format_estimates(r: dict) -> str:
    examples = ", ".join(f"{int(e):,}: {low:,} to {high:,}" for e, (low, high) in r["intervals"].items())
    lines = [
        "",
        "Frequency estimates (discover --estimate-frequencies; docs/protocol.md section 5):",
        row("estimate epsilon", _num(r["estimate_epsilon"], 6)),
        row("total target epsilon", f"{_num(r['total_target_epsilon'], 6)} (epsilon + estimate epsilon, basic "
                                    "composition; delta unchanged)"),
        row("noise alone", f"estimate +- {r['half_width']:,} (covers {100 * r['coverage']:.2f}%), "
                           f"standard deviation {r['standard_deviation']:.3g}"),
        row("95% interval", f"at an estimate of {examples}"),
    ]
    lines += wrap("Each discovered item and frequent prefix gets a noisy count of its weighted users: each "
                   "user counted once, for one of its discovered entries drawn by its share of its records "
                   "(the holders, when each holds one). The published 95% interval holds the weighted users: "
                   "it counts the users' draws as well as the noise, so it widens with the estimate; none of "
                   "it depends on n.", "  ", break_on_hyphens=True)
    return "\n".join(lines)


def _num(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}"


def _users(k: int) -> str:
    return f"{k:,}"


def _percent(x: float, digits: int = 3) -> str:
    return f"{100 * x:.{digits}g}%"


def _format_plan(r: dict) -> str:
    """The human report: aligned text for a design doc."""
    lines = header(f"TrieHH plan (Theorem 1; rule: {r['rule']})", r, f"{_users(r['n'])} users",
                   f"at most {r['max_length']} rounds", _num(r["target_epsilon"], 6))
    if r["feasible"]:
        m = _users(r["batch_size"])
        lines += [
            row("threshold theta", str(r["theta"])),
            row("gamma", f"{_num(r['gamma'])} (rule); m/sqrt(n) = "
                         f"{_num(r['effective_gamma'])} after flooring m"),
            row("batch size m", f"{m} users per round ({_percent(r['sampling_rate'])} of n), "
                                f"sampled fresh each round"),
            row("THETACEIL", f"{_num(r['theta_ceiling'])} (largest theta with gamma >= 1)"),
            row("achieved epsilon", f"{_num(r['epsilon'], 6)} (Theorem 1 at m = {m}; "
                                    f"target {_num(r['target_epsilon'], 6)})"),
            row("achieved delta", f"{_num(r['delta'])} (target {_num(r['target_delta'])})"),
            row("crowding bound", ("delta >= " + (_num(r["crowding_delta"]) if r["crowding_delta"] else "0 (below 1e-308)")
                                   + " for one round (the guard: at most a tenth of delta/L)")),
        ]
        lines += wrap(f"note: {r['theorem1']}", "  ", break_on_hyphens=True)
        for note in r["notes"]:
            lines += wrap(f"note: {note}", "  ", break_on_hyphens=True)
        worst = " = L, the worst case" if r["item_length_is_worst_case"] else ""
        k = r["items_per_user"]
        several = k > 1
        holders = f" (holders of {_num(k)} items)" if several else ""
        lines += [
            "",
            f"Worst-case discovery (Proposition 1) of an item of {r['item_length']} units"
            f"{worst}{holders}:",
        ]
        lines += holders_table(r["discovery"], (lambda entry: f"{_users(round(entry['user_equivalents'])):>20}")
                               if several else None, f"{'user-equivalents':>20}" if several else "")
        lines += wrap(
            "Assumes the item shares no prefix with any other item; real data, where items "
            "share prefixes, does better. Use --item-length for shorter items.",
            "  ", break_on_hyphens=True,
        )
        if several:
            lines += wrap(
                f"Each holder gives the item at least 1/{_num(k)} of its records, so a sampled "
                f"holder votes for it with probability {_num(1 / k, 3)} (it votes for one of "
                "its items, drawn by its share). User-equivalents (holders x share) are for "
                "reading only: the table counts holders, exactly, and needs more of them.",
                "  ",
            )
        else:
            lines += wrap(
                "Assumes one item per user: a user holding several votes for one of them, "
                "drawn by its share of the user's records, and so counts for less than one "
                "holder (plan for that with --items-per-user K).",
                "  ",
            )
        return "\n".join(lines)

    lines += [
        row("theta (for delta)", str(r["theta"])),
        row("THETACEIL", f"{_num(r['theta_ceiling'])} (largest theta with gamma >= 1)"),
        row("batch size m", f"{_users(r['batch_size'])} (m/sqrt(n) = "
                            f"{_num(r['effective_gamma'])})"),
        "",
        "Why:",
    ]
    lines += wrap(r["reason"], "  ", break_on_hyphens=True)
    lines += wrap(f"note: {r['theorem1']}", "  ", break_on_hyphens=True)
    lines += ["", "Alternatives (each certified by Theorem 1 and passing the crowding guard):"]
    if not r["alternatives"]:
        lines.append("  none")
    for i, alt in enumerate(r["alternatives"], 1):
        lines += wrap(alt["description"], f"  {i}. ", "     ", break_on_hyphens=True)
        effective_gamma = alt["batch_size"] / math.sqrt(alt["n"])
        lines += [
            f"     n = {_users(alt['n'])}, theta = {alt['theta']}, "
            f"m = {_users(alt['batch_size'])}, "
            f"gamma = {_num(alt['gamma'])} (m/sqrt(n) = {_num(effective_gamma)})",
            f"     Theorem 1 gives epsilon = {_num(alt['epsilon'], 6)}, "
            f"delta {'= ' + _num(alt['delta']) if alt['delta'] > 0 else '< 1e-308'}",
        ]
    for note in r["notes"]:
        lines += wrap(f"note: {note}", "  ", break_on_hyphens=True)
    return "\n".join(lines)
