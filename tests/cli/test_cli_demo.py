"""``triehh demo``: where it writes (named in its first line, never silently the working
directory), and a re-run that says it shows an earlier result. One real demo run (the bundled
200,000 users, about 5 s) serves the module."""

import json
import os

import pytest

from triehh_beam.cli import demo as demo_cli
from triehh_beam.cli import main


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """``triehh demo`` with no flag, from an empty working directory, with a fresh cache home."""
    cache, cwd = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("cwd")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        patch.chdir(cwd)
        out, code = _run_capturing(["demo"])
    return cache, cwd, out, code


def _run_capturing(argv):
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(argv)
    return buffer.getvalue(), code


def test_the_first_line_names_where_the_demo_writes(first_run):
    cache, cwd, out, code = first_run
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (f"demo: writing under {cache / 'triehh-demo'}: the results in output/, the "
                        f"private state in output.state/ (--output DIR to choose)")
    assert sorted(os.listdir(cache / "triehh-demo")) == ["output", "output.state"]
    assert (cache / "triehh-demo" / "output" / "heavy_hitters.json").is_file()
    assert os.listdir(cwd) == []  # nothing in the working directory
    assert not any(line.startswith("demo: showing an earlier result") for line in lines)
    assert lines[-1].startswith("  recall of the true top 10: ")


def test_a_rerun_says_it_shows_the_earlier_result(first_run, monkeypatch):
    cache, cwd, first, _ = first_run
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    published = cache / "triehh-demo" / "output" / "heavy_hitters.json"
    document = json.loads(published.read_text(encoding="utf-8"))
    out, code = _run_capturing(["demo"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == first.splitlines()[0]
    assert lines[1].startswith(f"demo: showing an earlier result again (job {document['job_id'][:8]}, "
                               f"started {document['created_at'][:10]} ")
    assert lines[1].endswith(f"not a new discovery: to run anew, remove {published.parent} and "
                             f"{published.parent}.state, or give another --output")
    assert json.loads(published.read_text(encoding="utf-8"))["job_id"] == document["job_id"]
    # The same discovery, listed the same way.
    heavy = [line for line in out.splitlines() if line.startswith("  ") and " " not in line.strip()]
    assert heavy == [line for line in first.splitlines() if line.startswith("  ") and " " not in line.strip()]
    # As JSON lines: the first event says where, and which earlier job; the truth is an event.
    out, code = _run_capturing(["demo", "--log-format", "json"])
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0] == {"event": "demo", "output": str(published.parent), "state": f"{published.parent}.state",
                         "population": events[0]["population"], "earlier_job": document["job_id"]}
    assert events[-1]["event"] == "truth" and len(events[-1]["top"]) == 25


def test_a_demo_with_other_settings_on_the_earlier_result_is_refused(first_run, monkeypatch, capsys):
    cache, _, _, _ = first_run
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    assert main(["demo", "--epsilon", "2"]) == 2
    out, err = capsys.readouterr()
    assert "showing an earlier result" not in out
    assert "holds a job with a different epsilon (state has 4.0, asked 2.0)" in err


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_second_install_runs_its_own_demo_beside_the_first(first_run, monkeypatch, tmp_path):
    """Another venv's bundled file sits at another path, so its demo is another job: it writes to
    a sibling of the first install's output (named for its file), not refused the first one's."""
    import shutil

    from triehh_beam.evaluation import demo

    cache, _, _, _ = first_run
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    other = tmp_path / "other-venv" / "demo_words.parquet"
    other.parent.mkdir()
    shutil.copy(demo.demo_population_path(), other)
    monkeypatch.setattr(demo, "demo_population_path", lambda: str(other))
    sibling = demo_cli.output_for_install(str(other))
    assert os.path.dirname(sibling) == str(cache / "triehh-demo")
    assert os.path.basename(sibling).startswith("output-") and len(os.path.basename(sibling)) == len("output-") + 8
    out, code = _run_capturing(["demo"])
    assert code == 0, out
    name = os.path.basename(sibling)
    assert out.splitlines()[0] == (f"demo: writing under {cache / 'triehh-demo'}: the results in {name}/, the "
                                   f"private state in {name}.state/ (--output DIR to choose)")
    assert os.path.isfile(os.path.join(sibling, "heavy_hitters.json"))
    # The first install still finds its own result where it left it.
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    assert demo_cli.output_for_install(demo.demo_population_path()) == str(cache / "triehh-demo" / "output")


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_an_earlier_releases_demo_in_the_cache_is_left_and_the_demo_runs_beside_it(first_run, monkeypatch,
                                                                                     tmp_path):
    """A demo an earlier release left in the cache (a state this release cannot resume) must not
    turn `triehh demo` into a refusal after an upgrade: the demo writes to a sibling."""
    import shutil

    from tests.old_states import as_written_by_0_1_0

    cache = tmp_path / "cache"
    shutil.copytree(first_run[0], cache)  # the first run's cache, left as the other tests see it
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    base = cache / "triehh-demo" / "output"
    as_written_by_0_1_0(str(base) + ".state")
    out, code = _run_capturing(["demo"])
    assert code == 0, out
    from triehh_beam.evaluation.demo import demo_population_path

    sibling = demo_cli.output_for_install(demo_population_path())
    assert os.path.dirname(sibling) == str(cache / "triehh-demo") and sibling != str(base)
    assert f"the results in {os.path.basename(sibling)}/" in out.splitlines()[0]
    assert os.path.isfile(os.path.join(sibling, "heavy_hitters.json"))


def test_the_default_place_is_the_users_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert demo_cli.default_output() == str(tmp_path / "xdg" / "triehh-demo" / "output")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert demo_cli.default_output() == str(tmp_path / "home" / ".cache" / "triehh-demo" / "output")


def test_a_chosen_output_is_named_as_given_and_a_dry_run_plans_only(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--output", "here", "--state-dir", "private", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == f"demo: writing the results to {tmp_path / 'here'}, the private state to {tmp_path / 'private'}"
    assert any(line.startswith("dry run: 1 input file(s): ") for line in lines)
    assert "the truth" not in out and "Traceback" not in err  # no result to compare: none was made
    assert not (tmp_path / "here").exists()


def test_bad_arguments_stop_the_demo_before_its_first_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--output", "here", "--max-bad-fraction", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "triehh: error: --max-bad-fraction must be in [0, 1], got 2.0\n"
    assert os.listdir(tmp_path) == []
