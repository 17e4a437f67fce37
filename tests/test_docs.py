"""The docs site builds with ``mkdocs build --strict`` (a broken link, anchor, include or API
reference fails it), every relative link of README.md and docs/ resolves, with its anchor, as it
does on GitHub, and the README stays a front door."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys
import unicodedata
from typing import Dict, Iterator, Set, Tuple

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md",
         *sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)]

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HTML_SRC = re.compile(r"<(?:img|a)\s[^>]*(?:src|href)=\"([^\"]+)\"")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def github_slug(heading: str) -> str:
    """The anchor GitHub (and this site's toc, pymdownx's slugify) gives a heading: lower case,
    markup and punctuation dropped, each space a hyphen."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("`", "")
    text = unicodedata.normalize("NFC", text).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_" or unicodedata.category(c).startswith("M"))
    return text.replace(" ", "-")


def anchors(path: pathlib.Path) -> Set[str]:
    """The heading anchors of a Markdown file (GitHub numbers repeated ones -1, -2, ...)."""
    seen: Dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = github_slug(heading)
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def relative_links(path: pathlib.Path) -> Iterator[Tuple[str, pathlib.Path, str]]:
    """(link as written, the file it names, its anchor) for every relative link outside code."""
    text = _INLINE_CODE.sub("", _FENCE.sub("", path.read_text(encoding="utf-8")))
    for target in _LINK.findall(text) + _HTML_SRC.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        yield target, (path.parent / file_part).resolve() if file_part else path, anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    for target, resolved, anchor in relative_links(page):
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with that anchor in {resolved.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


_REPO_PATH = re.compile(r"(?<![\w/.-])((?:triehh_beam|tests|benchmarks|examples|pipelines|protos|deploy)/[\w./-]*\w)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_file_of_the_repository_named_exists(page):
    """A path the prose names (``triehh_beam/job/state/cas.py``, ``benchmarks/README.md``) is there:
    a module moved or renamed without its docs fails here."""
    named = set(_REPO_PATH.findall(page.read_text(encoding="utf-8")))
    missing = sorted(path for path in named if "*" not in path and not (REPO / path).exists())
    assert not missing, f"{page.relative_to(REPO)} names files that do not exist: {missing}"


def test_the_link_check_sees_links_and_anchors(tmp_path):
    """The checker itself: it finds a broken file, a broken anchor, and skips code."""
    (tmp_path / "a.md").write_text("# Privacy (ε, δ): `what` is covered\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#privacy-ε-δ-what-is-covered) [gone](c.md) [bad](a.md#nope)\n"
                    "`[code](d.md)`\n```\n[fenced](e.md)\n```\n", encoding="utf-8")
    found = {target: (resolved.exists(), anchor in anchors(resolved) if anchor else None)
             for target, resolved, anchor in relative_links(page)}
    assert found == {"a.md#privacy-ε-δ-what-is-covered": (True, True), "c.md": (False, None),
                     "a.md#nope": (True, False)}


def test_the_readme_is_a_front_door():
    """At most 250 lines; the two commands on the first screen; every output block says which
    command produced it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) <= 250, len(lines)
    first_screen = "\n".join(lines[:60])
    assert 'pip install . && triehh demo' in first_screen
    # Both install pages state setup.py's python_requires and the virtual environment to make first.
    version = re.search(r'python_requires=">=(\d+\.\d+)"', (REPO / "setup.py").read_text()).group(1)
    venv = "`python3 -m venv .venv && . .venv/bin/activate`"
    for text in (first_screen, (DOCS / "getting-started.md").read_text(encoding="utf-8")):
        assert f"Python {version} or later" in " ".join(text.split()) and venv in text
    assert 'pip install ".[test]" && python -m pytest -n 2 -q' in first_screen
    assert "discovered " in first_screen  # the demo's first result
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.strip().splitlines()[-1] == 'pip install ".[test]" && python -m pytest -n 2 -q'
    # Output blocks are the fences without a language (commands are ```bash): each follows a
    # comment naming the exact command that printed it.
    inside = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if not inside and line == "```":
                assert lines[i - 1].startswith("<!-- output of: "), f"README line {i + 1}: an output block without its command"
            inside = not inside


def test_the_changelog_has_no_relative_links():
    # CHANGELOG.md is read at the repository's root and included into docs/changelog.md, so a
    # relative link resolves in one of the two places only (it broke `mkdocs build --strict`).
    assert [link for link, _, _ in relative_links(REPO / "CHANGELOG.md")] == []


def documented_build_command() -> str:
    """The build command CONTRIBUTING.md gives, checked to be the one getting-started and
    .ci/run name, so the test, the guides and CI cannot drift apart."""
    named = re.findall(r"`(mkdocs build[^`]*)`", (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    assert len(set(named)) == 1, f"CONTRIBUTING.md should name one build command: {named}"
    for other in (DOCS / "getting-started.md", REPO / ".ci" / "run"):
        assert f"`{named[0]}`" in other.read_text(encoding="utf-8"), f"{other.name} names another build"
    return named[0]


def check_api_page(site: pathlib.Path) -> None:
    """The API page documents every public name of the two public packages, from the code."""
    api = (site / "api.html").read_text(encoding="utf-8")
    import triehh_beam
    import triehh_beam.beam
    for name in triehh_beam.beam.__all__:
        assert f'id="triehh_beam.beam.{name}"' in api, name
    for name in triehh_beam.__all__:
        assert re.search(rf'id="triehh_beam\.[\w.]*\.{name}"', api), name


_WRAP_CODE = re.compile(r"\.md-typeset\s+pre\s*>\s*code\s*\{[^}]*white-space:\s*pre-wrap", re.S)


def mkdocs_config() -> dict:
    """mkdocs.yml as data (its one Python tag, the slug function, dropped)."""
    return yaml.safe_load(re.sub(r"!!python/\S+", "", (REPO / "mkdocs.yml").read_text(encoding="utf-8")))


def check_code_blocks_wrap(site: pathlib.Path) -> None:
    """Long lines of code and output wrap on the site instead of being clipped: the theme's own
    stylesheet (mkdocs.yml's extra_css) says so and every page loads it."""
    sheets = mkdocs_config().get("extra_css", [])
    assert sheets, "mkdocs.yml loads no stylesheet of its own"
    assert any(_WRAP_CODE.search((site / sheet).read_text(encoding="utf-8")) for sheet in sheets), sheets
    for page in ("index.html", "getting-started.html", "guides/discover.html", "evaluation.html"):
        html = (site / page).read_text(encoding="utf-8")
        assert all(f'{sheet}"' in html for sheet in sheets), f"{page} does not load {sheets}"


def test_the_documented_build_passes_strictly():
    # Never skipped: the test extra installs mkdocs, so .ci/run (the README's test command) always
    # builds the site strictly, and a missing mkdocs fails here instead of passing unseen.
    # Exactly the documented command, read from CONTRIBUTING.md, from the repository root (the
    # site goes to mkdocs.yml's site_dir, which git ignores): no --quiet (it hides warnings from
    # the strict count, so a broken link passed), no --site-dir, and no NO_MKDOCS_2_WARNING. That
    # variable only silences Material for MkDocs' end-of-life notice (printed to stderr when the
    # theme loads, not a warning --strict counts); it never hid a failure. `python -m mkdocs` is the `mkdocs`
    # program of the Python running the tests (the console script calls the same entry point).
    argv = shlex.split(documented_build_command())
    silencers = {"NO_MKDOCS_2_WARNING", "DISABLE_MKDOCS_2_WARNING"}
    env = {k: v for k, v in os.environ.items() if k not in silencers}
    result = subprocess.run([sys.executable, "-m", *argv], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert not re.search(r"^WARNING", output, re.M), output[-6000:]
    # Everything that reads the built site reads it here: one build, never two at once under -n 2.
    site = REPO / mkdocs_config()["site_dir"]
    check_api_page(site)
    check_code_blocks_wrap(site)


def test_every_evaluation_row_states_its_guarantee_as_the_report_writes_it():
    # The demo's recall table's privacy column (unit sizes 2 and 3 read only "central"): every row
    # is what report.html's table (present.report.summary_rows) writes for that configuration's
    # plan, from the planner at the page's n = 200,000, delta = 1e-10, rule authors.
    from triehh_beam.present.report import summary_rows
    from triehh_beam.protocol.planning import planner

    page = (DOCS / "evaluation.md").read_text(encoding="utf-8")
    table = page[page.index("### Recall@K: mean over 10 runs"):].split("\n\n")[1]
    rows = [[cell.strip() for cell in line.split("|")[1:3]] for line in table.splitlines()
            if line.startswith("| TrieHH")]
    assert len(rows) == 12
    max_length = {1: 10, 2: 6, 3: 4}  # the page's L at each unit size (10 characters)
    configs = []
    for method, _ in rows:
        epsilon, unit_size = map(int, re.match(r"TrieHH ε=(\d+), unit size (\d)", method).groups())
        plan = planner.plan(200_000, epsilon, 1e-10, max_length[unit_size], rule="authors")
        configs.append({"epsilon": epsilon, "unit_size": unit_size, "max_length": plan.max_length,
                        "privacy": {"epsilon": plan.epsilon, "delta": plan.delta}, "metrics": []})
    result = {"parameters": {"top_k": []}, "triehh": configs, "rivals": {}}
    written = {re.sub(r" \(L=\d+\)$", "", method): guarantee for method, guarantee, _ in summary_rows(result)}
    assert [(m, g) for m, g in rows if written[re.sub(r" \(L=\d+\)$", "", m)] != g] == []
    assert {g for _, g in rows} == {f"({e}, 1.3e-11)-DP central" for e in (1, 2, 4, 8)}


_QUOTED = re.compile(r"[\"“]([^\"”\n]+)[\"”]")


def test_the_home_page_says_what_the_product_is_and_quotes_nothing_unsourced():
    # It opened with "Without collecting raw data", found in no other page (and true of the
    # federated mode only). Now its first sentence is the README's, and any phrase it quotes is
    # one another page says.
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    opening = [p for p in home.split("\n\n") if not p.startswith("#")][0]
    assert opening.split(":")[0] == readme.split("\n\n")[1].split(":")[0] == (
        "Private heavy-hitter discovery as Apache Beam pipelines")
    prose = _INLINE_CODE.sub("", _FENCE.sub("", home))
    assert not re.search(r"^\s*>", prose, re.M), "the home page holds a block quote"
    others = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in PAGES
                      if p != DOCS / "index.md")
    unsourced = [q for q in _QUOTED.findall(prose)
                 if len(q.split()) >= 3 and " ".join(q.split()) not in others]
    assert unsourced == [], f"the home page quotes what no other page says: {unsourced}"
