"""The audit figures of docs/evaluation.md ("Empirical privacy audit"): ``triehh audit``'s
epsilon lower bound for TrieHH on the bundled demo population at epsilon = 1, 4, 8 (delta 1e-10,
L = 10), for the planner's configuration and for two broken ones the audit must flag: theta = 1
(the plan's m), and every user sampled (m = n) with a canary that completes an item held by
theta - 1 users. Prints a markdown table and writes every audit's JSON to ``--out``.
``--users N`` audits the demo's first N users (ids 0 to N-1) instead of all 200,000: the
sampling rate m/n, and so the audit's power, hardly depends on n, while a run costs about n.

    python benchmarks/audit_figures.py --runs 1000 --out bench-data/audit.json
    python benchmarks/audit_figures.py --users 50000 --epsilon 1 --runs 10000 --canary th \
        --configurations theta1 --out bench-data/audit-50k-eps1.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

from triehh_beam.evaluation.audit import AuditConfig, run_audit
from triehh_beam.evaluation.demo import DEMO_POPULATION_PATH
from triehh_beam.evaluation.metrics import ground_truth
from triehh_beam.evaluation.population import load_population
from triehh_beam.protocol import planner
from triehh_beam.protocol.encoding import ItemEncoder

CONFIGURATIONS = ("planner", "theta1", "nosampling")


def _borderline_canary(counts, theta: int, max_length: int) -> str:
    """The first item (alphabetically) held by exactly theta - 1 users that fits in L units."""
    return min(item for item, holders in counts.items() if holders == theta - 1 and len(item) <= max_length - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", default=DEMO_POPULATION_PATH)
    parser.add_argument("--epsilon", default="1,4,8")
    parser.add_argument("--delta", type=float, default=1e-10)
    parser.add_argument("--max-length", type=int, default=10)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench-data/audit.json")
    parser.add_argument("--canary", default=None, help="the canary of the planner and theta1 audits")
    parser.add_argument("--users", type=int, default=None, help="audit the first N users (by id) only")
    parser.add_argument("--configurations", default=",".join(CONFIGURATIONS),
                        help=f"some of {','.join(CONFIGURATIONS)}")
    args = parser.parse_args()
    wanted = args.configurations.split(",")

    users = load_population(args.input).users
    if args.users is not None:
        users = {u: items for u, items in users.items() if int(u) < args.users}
    counts = ground_truth(users, ItemEncoder(max_length=args.max_length)).user_counts
    n = len(users)
    results = []
    for epsilon in (float(e) for e in args.epsilon.split(",")):
        plan = planner.plan(n, epsilon, args.delta, args.max_length)
        base = dict(epsilon=epsilon, delta=args.delta, max_length=args.max_length, runs=args.runs, seed=args.seed)
        configurations = {
            "planner": ("the planner's", lambda: AuditConfig(**base, canary=args.canary)),
            "theta1": ("theta = 1", lambda: AuditConfig(**base, theta=1, canary=args.canary)),
            "nosampling": ("m = n, canary completing theta - 1 holders", lambda: AuditConfig(
                **base, batch_size=n + 1, canary=_borderline_canary(counts, plan.theta, args.max_length))),
        }
        for key in wanted:
            name, config = configurations[key][0], configurations[key][1]()
            started = time.process_time()
            result = run_audit(config, users)
            result["configuration"] = name
            result["users_audited"] = n
            result["cpu_seconds"] = round(time.process_time() - started, 1)
            results.append(result)
            print(f"epsilon={epsilon:g} {name}: bound {result['epsilon_lower_bound']:.3f}, "
                  f"{result['seconds']:.0f} s ({result['cpu_seconds']:.0f} s CPU)", flush=True)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print()
    print(f"| users | epsilon claimed | configuration | theta | m | canaries | best event | D1 vs D0 (held-out runs) "
          f"| epsilon lower bound | most {args.runs:,} runs can prove | wall s (CPU s) |")
    print("|---:|---:|---|---:|---:|---|---|---:|---:|---:|---:|")
    for r in results:
        best, evaluation = r["best_event"], r["best_event"]["evaluation"]
        canaries = ", ".join(f"{c['kind']} `{c['item']}`" for c in r["canaries"])
        event = f"`{best['prefix']}` {'in' if best['in_trie'] else 'not in'} the trie, {best['direction']}"
        print(f"| {r['users_audited']:,} | {r['epsilon_claimed']:.3f} | {r['configuration']} | {r['audited']['theta']} "
              f"| {r['audited']['batch_size']:,} | {canaries} | {event} "
              f"| {evaluation['numerator']} vs {evaluation['denominator']} of {evaluation['runs']} "
              f"| **{r['epsilon_lower_bound']:.2f}** | {r['epsilon_provable_max']:.2f} "
              f"| {r['seconds']:.0f} ({r['cpu_seconds']:.0f}) |")
    print(f"\n{args.runs:,} runs on D0 and on each D1; bound: Clopper-Pearson, 95% jointly, on the held-out half")


if __name__ == "__main__":
    main()
