"""``triehh show`` on the output of a real ``triehh discover`` run: the tables list exactly what
was published, in the documented order, from the directory or from either file; the page and the
picture are written; what is not a result is refused in one line."""

import json
import re
import string

import pytest

from tests.holders import write_holders
from triehh_beam.cli import main

SEED = bytes(range(7, 39))
TARGET = ["--epsilon", "4", "--delta", "1e-6", "--max-length", "4"]


@pytest.fixture(scope="module")
def published(tmp_path_factory, make_population):
    """A discovery on 2,000 users (a steep Zipf law over 60 words of up to 3 letters)."""
    directory = tmp_path_factory.mktemp("show")
    records = make_population(2000, max_chars=3, vocabulary=60, exponent=1.5).write(directory, name="users")
    (directory / "seed.bin").write_bytes(SEED)
    output = directory / "out"
    code = main(["discover", "--protocol", "triehh", "--input", records, "--output", str(output), *TARGET,
                 "--seed-file", str(directory / "seed.bin")])
    assert code == 0
    document = json.loads((output / "heavy_hitters.json").read_text(encoding="utf-8"))
    assert document["heavy_hitters"] and document["frequent_prefixes"]  # both tables have rows
    return output, document


def _rows(out: str, title: str) -> list:
    """The (entry, round, complete) cells of the table under the line starting with ``title``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    header = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("#  "))
    rows = []
    for line in lines[header + 1:]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        assert int(cells[0]) == len(rows) + 1
        rows.append((cells[1], int(cells[2]), cells[3]))
    return rows


def test_show_lists_what_was_published_in_the_documented_order(published, capsys):
    output, document = published
    assert main(["show", str(output)]) == 0
    out = capsys.readouterr().out
    items = _rows(out, f"{len(document['heavy_hitters'])} heavy hitters")
    # The order stated in --help: the round that found it (len + 1 for one-character units),
    # then ignoring case, then by code point; every row a complete item.
    expected = sorted(document["heavy_hitters"], key=lambda w: (len(w) + 1, w.casefold(), w))
    assert items == [(w, len(w) + 1, "yes") for w in expected]
    prefixes = _rows(out, f"{len(document['frequent_prefixes'])} frequent prefix")
    assert sorted(p for p, _, _ in prefixes) == sorted(document["frequent_prefixes"])
    assert all(complete == "no" and r == len(p) for p, r, complete in prefixes)
    assert "the trie (radix view" in out
    for item in document["heavy_hitters"]:
        assert f"\u25cf {item}\n" in out + "\n"  # each item ends a line of the tree


def test_either_file_alone_gives_the_same_tables(published, capsys):
    output, document = published
    assert main(["show", str(output), "--no-tree"]) == 0
    whole = capsys.readouterr().out.split("\n\n", 1)[1]
    for name in ("heavy_hitters.json", "trie.pb"):
        assert main(["show", str(output / name), "--no-tree"]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[0] == f"read: {output / name}"
        assert out.split("\n\n", 1)[1] == whole


def test_show_writes_the_page_and_the_picture(published, tmp_path, capsys):
    output, document = published
    page, image = tmp_path / "report" / "result.html", tmp_path / "trie.png"
    assert main(["show", str(output), "--html", str(page), "--image", str(image)]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [f"page: {page}", f"image: {image}"]
    text = page.read_text(encoding="utf-8")
    assert text.count("<svg") == 1
    assert all(f"<code>{item}</code>" in text for item in document["heavy_hitters"])
    assert image.read_bytes()[:4] == b"\x89PNG"


def test_what_is_not_a_result_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "notes.json").write_text('{"words": []}', encoding="utf-8")
    for path, message in ((tmp_path / "missing", "no such file or directory"),
                          (tmp_path, "holds neither heavy_hitters.json nor trie.pb"),
                          (tmp_path / "notes.json", "not a heavy_hitters.json of triehh-beam")):
        assert main(["show", str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == f"triehh show: error: {path}: {message}" + captured.err.split(message, 1)[1]
        assert len(captured.err.splitlines()) == 1


def test_a_triehh_pp_discovery_and_its_show_name_the_same_parameters(tmp_path, capsys):
    # The default protocol. 26 two-letter words of 300 holders each: more than a screenful is
    # found. show printed "theta=None, ... rule sample-and-threshold" where discover printed tau
    # and p_s, and discover's screenful said "(TrieHH publishes no counts)" of a TrieHH++ run.
    records = write_holders(str(tmp_path / "records.jsonl"), {c + "z": 300 for c in string.ascii_lowercase})
    (tmp_path / "seed.bin").write_bytes(SEED)
    output = tmp_path / "out"
    assert main(["discover", "--input", records, "--output", str(output), "--epsilon", "3", "--delta", "1e-6",
                 "--max-length", "3", "--seed-file", str(tmp_path / "seed.bin")]) == 0
    printed = capsys.readouterr().out
    assert "; the first 20 found (the rounds publish no counts; --estimate-frequencies adds them):" in printed
    assert "TrieHH publishes" not in printed
    [parameters] = re.findall(r"\(TrieHH\+\+: (tau=\d+, p_s=[\d.]+% per round)\)", printed)
    assert main(["show", str(output), "--no-tree"]) == 0
    shown = capsys.readouterr().out
    [line] = [line for line in shown.splitlines() if line.startswith("privacy:")]
    assert line.endswith(f"user level; TrieHH++: {parameters}, L=3") and "None" not in shown
