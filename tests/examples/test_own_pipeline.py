"""``examples/own_pipeline.py`` runs as a user would run it (a subprocess, the in-process runner)
and finds exactly the library's own result for the same records, plan and keys: the keyed
simulation's rounds and heavy hitters (``reference.simulation``), which the pipeline is checked
to equal."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.reference.simulation import simulate

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "own_pipeline.py"


def _script_module():
    spec = importlib.util.spec_from_file_location("own_pipeline", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_finds_the_simulations_trie_for_the_same_records_plan_and_keys(tmp_path):
    users, population_seed, epsilon = 3000, 11, 4.0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--users", str(users), "--population-seed", str(population_seed),
         "--epsilon", str(epsilon), str(tmp_path / "work")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()

    script = _script_module()
    population = script.population(users, population_seed)
    encoder = ItemEncoder(max_length=6)
    plan = planner.plan(users, epsilon, 1.0 / users**2, encoder.max_length)
    expected = simulate(population, encoder, plan.theta, plan.batch_size, Sampler(script.DEMO_SEED, script.IDENTITY))

    assert f"m = {plan.batch_size} users per round, theta = {plan.theta} votes" in lines[0]
    rounds = re.findall(r"^round (\d+): (\d+) prefixes kept, (\d+) users sampled: ?(.*)$", run.stdout, re.MULTILINE)
    assert len(rounds) == expected.rounds_run
    # Each round's result kept in the work directory given, as the other examples take one.
    assert sorted(p.name for p in (tmp_path / "work").glob("round-*.json")) == sorted(
        f"round-{index}.json" for index, _, _, _ in rounds)
    for (index, kept, sampled, shown), stats in zip(rounds, expected.round_stats):
        assert (int(index), int(kept), int(sampled)) == (stats.round_index, stats.prefixes_kept, stats.users_sampled)
    levels = expected.levels + (frozenset(),) * (expected.rounds_run - len(expected.levels))
    for (_, _, _, shown), level in zip(rounds, levels):
        assert sorted(shown.split()) == sorted(script.show(encoder, p) for p in level)
    assert lines[-2] == f"stopped: {expected.stopped_because}"
    found = lines[-1].split(": ", 1)[1].split(", ")
    assert sorted(found) == sorted(expected.heavy_hitters)
    assert len(found) >= 2, "a run that finds almost nothing would prove little"
