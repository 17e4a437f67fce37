"""Reading a published result back and rendering it (triehh_beam.present.show, show_page):
hand-written tries with known answers, and the files ``job.release.outputs`` really writes."""

import json
import os

import pytest

from tests.gcs_emulators import (  # noqa: F401 (fixtures)
    gcs_emulator,
    gcs_emulator_client,
    gcs_emulator_server,
)
from triehh_beam.job.release import outputs
from triehh_beam.present import result as published
from triehh_beam.present import show, show_page
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.rounds.trie import Trie

TEXT = ItemEncoder(max_length=5)


def _trie(encoder, *leaves):
    """The trie whose leaves are ``leaves`` (sequences: an item ends with the terminator)."""
    depth = max(len(s) for s in leaves)
    return Trie(encoder, [{s[:r] for s in leaves if len(s) >= r} for r in range(1, depth + 1)])


def _text_trie():
    # items a, all, and, I, The, the; frequent prefixes "an" is an inner node, "bo" a leaf.
    e = TEXT
    return _trie(e, e.encode("a"), e.encode("all"), e.encode("and"), e.encode("I"), e.encode("The"),
                 e.encode("the"), ("b", "o"))


def _publish(tmp_path, trie, state=None, name="out"):
    """The two files ``job.release.outputs.write_outputs`` publishes for ``trie``."""
    state = state or state_pb2.JobState(job_id="0123456789abcdef", created_at="2026-01-02T03:04:05+00:00",
                                        stop_reason="no prefix left to extend")
    state.plan.target_epsilon, state.plan.target_delta = 4.0, 1e-10
    state.plan.theta, state.plan.max_length, state.plan.rule = 14, trie.encoder.max_length, "authors"
    state.plan.protocol = state.plan.protocol or "triehh"  # every plan records its protocol
    for r in range(trie.depth):
        state.rounds.add(round_index=r + 1)
    directory = tmp_path / name
    outputs.write_outputs(str(directory), state, trie)
    return directory


# --- the order, and how entries read -----------------------------------------------------------


def test_entries_are_listed_by_round_then_ignoring_case_then_by_code_point(tmp_path):
    result = published.PublishedResult(_text_trie(), None, ("x",))
    assert [e.value for e in result.heavy_hitters()] == ["a", "I", "all", "and", "The", "the"]
    assert [e.round for e in result.heavy_hitters()] == [2, 2, 4, 4, 4, 4]
    assert all(e.complete for e in result.heavy_hitters())
    assert [(e.value, e.round, e.complete) for e in result.frequent_prefixes()] == [("bo", 2, False)]


def test_display_is_unambiguous():
    assert published.display("the", TEXT) == "the"
    assert published.display("new york ", TEXT) == "'new york '"
    assert published.display("a\tb", TEXT) == "'a\\tb'"
    assert published.display("東京", TEXT) == "東京"
    raw = ItemEncoder(kind=ItemKind.BYTES, max_length=4)
    assert published.display(b"ab", raw) == '6162 ("ab")'
    assert published.display(b"\x00\xff", raw) == "00ff"
    ints = ItemEncoder(kind=ItemKind.INT, int_bits=4, unit_size=2, max_length=3)
    assert published.display(-3, ints) == "-3"
    # The 2 high bits 01 of 4-bit offset binary: 0100..0111 - 8 = -4..-1.
    assert published.display("01", ints, complete=False) == "01\u2026 (values -4 to -1)"


def test_why_a_frequent_prefix_stops():
    e = ItemEncoder(max_length=3)
    trie = _trie(e, ("a", "b", "c"), ("x", "y"), e.encode("xz")[:2] + ("",))
    result = published.PublishedResult(trie, None, ("x",))
    why = {entry.value: result.why_stopped(entry) for entry in result.frequent_prefixes()}
    assert why == {"abc": "reached L=3 units: longer items were cut there",
                   "xy": "round 3 kept none of its continuations"}


# --- text ----------------------------------------------------------------------------------------


def test_render_tree_draws_the_radix_view():
    assert show.render_tree(_text_trie()) == "\n".join([
        "(root)   \u25cf complete item   \u2026 frequent prefix",
        "\u251c\u2500 I      \u25cf I",
        "\u251c\u2500 The    \u25cf The",
        "\u251c\u2500 a      \u25cf a",
        "\u2502  \u251c\u2500 ll  \u25cf all",
        "\u2502  \u2514\u2500 nd  \u25cf and",
        "\u251c\u2500 bo     \u2026 bo",
        "\u2514\u2500 the    \u25cf the",
    ])
    assert show.render_tree(Trie.empty(TEXT)) == "(empty trie: nothing was discovered)"


def test_render_text_tables(tmp_path):
    result = published.load_result(str(_publish(tmp_path, _text_trie())))
    text = show.render_text(result, tree=False)
    lines = text.splitlines()
    assert lines[1] == "job: 01234567, started 2026-01-02 03:04 UTC"
    assert lines[2] == "privacy: within the target (4, 1e-10)-DP, user level; theta=14, L=5, rule authors"
    assert lines[3] == "rounds: 4 run, stopped: no prefix left to extend"
    start = lines.index("6 heavy hitters (complete items):")
    header = lines.index("  #  item  round  complete", start)
    assert lines[header + 1:header + 7] == [
        "  1  a         2  yes", "  2  I         2  yes", "  3  all       4  yes",
        "  4  and       4  yes", "  5  The       4  yes", "  6  the       4  yes"]
    assert "1 frequent prefix (not items):" in lines
    assert "  1  bo          2  no        round 3 kept none of its continuations" in lines
    assert "the trie (radix view" not in text
    assert show.render_tree(result.trie) in show.render_text(result)


# --- reading -----------------------------------------------------------------------------------


ENCODERS = {
    "text": (TEXT, lambda e: [e.encode("a"), e.encode("all"), ("b", "o"), e.encode("éte")]),
    "text-units-of-2": (ItemEncoder(unit_size=2, max_length=4),
                        lambda e: [e.encode("abc"), ("ab", "c"), e.encode("xyzw")[:2]]),
    "bytes": (ItemEncoder(kind=ItemKind.BYTES, max_length=4),
              lambda e: [e.encode(b"\x00a"), (b"\xff",), e.encode(b"\xffb")]),
    "int": (ItemEncoder(kind=ItemKind.INT, int_bits=6, unit_size=2, max_length=4),
            lambda e: [e.encode(5), e.encode(-7), e.encode(-8)[:2]]),
}


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_the_json_alone_gives_the_published_trie(tmp_path, name):
    encoder, leaves = ENCODERS[name]
    trie = _trie(encoder, *leaves(encoder))
    directory = _publish(tmp_path, trie)
    from_json = published.load_result(str(directory / "heavy_hitters.json"))
    from_pb = published.load_result(str(directory / "trie.pb"))
    both = published.load_result(str(directory))
    assert from_json.trie == from_pb.trie == both.trie == trie
    assert from_pb.document is None and from_json.document == both.document
    assert both.sources == (str(directory / "heavy_hitters.json"), str(directory / "trie.pb"))


def test_a_heavy_hitters_json_after_white_space_or_a_byte_order_mark_is_shown(tmp_path):
    # Copied or re-saved files may gain either; the file is still the result, shown in full.
    directory = _publish(tmp_path, _text_trie())
    copy = tmp_path / "x.json"
    copy.write_bytes(b"\xef\xbb\xbf\n  " + (directory / "heavy_hitters.json").read_bytes())
    assert published.load_result(str(copy)).trie == _text_trie()


def test_a_directory_with_one_file_reads_it(tmp_path):
    directory = _publish(tmp_path, _text_trie())
    os.remove(directory / "trie.pb")
    result = published.load_result(str(directory))
    assert result.sources == (str(directory / "heavy_hitters.json"),)
    assert result.trie == _text_trie()


def test_files_of_two_jobs_are_refused(tmp_path):
    one = _publish(tmp_path, _text_trie(), name="one")
    other = _publish(tmp_path, _trie(TEXT, TEXT.encode("a")), name="other")
    os.replace(other / "trie.pb", one / "trie.pb")
    with pytest.raises(published.ResultError, match="describe different tries"):
        published.load_result(str(one))


@pytest.mark.parametrize("content, message", [
    (None, "no such file or directory"),
    (b'{"items": []}', "not a heavy_hitters.json of triehh-beam"),
    (b'{"heavy_hitters": ["a"], "frequent_prefixes": [], "encoding": {}}', "its encoding"),
    (b"{not json", "not valid JSON"),
    (b"\x08\x07", "schema_version 7; this reader understands schema_version 1"),
    (b"", "not a result of triehh discover but an empty file"),
    (b"user_id,item\n1,a\n", "not a result of triehh discover but a text file \\(it starts 'user_id,item'\\)"),
    (b'\n [{"item": "a"}]', "not a heavy_hitters.json of triehh-beam but a JSON document with no heavy_hitters"),
    (b'{"schema": "triehh-beam/evaluation/2"}', "not a heavy_hitters.json of triehh-beam but an evaluation"),
])
def test_what_is_not_a_result_is_refused_naming_the_file(tmp_path, content, message):
    path = tmp_path / "result"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(published.ResultError, match=message) as error:
        published.load_result(str(path))
    assert str(path) in str(error.value) and len(str(error.value).splitlines()) == 1
    if content is not None:  # it says which file show wants
        assert str(error.value).endswith(published.WANTED)
    (tmp_path / "empty").mkdir()
    with pytest.raises(published.ResultError, match="holds neither heavy_hitters.json nor trie.pb"):
        published.load_result(str(tmp_path / "empty"))


# --- the picture and the page ----------------------------------------------------------------


def test_the_page_is_one_file_with_the_tables_and_the_drawn_trie(tmp_path):
    result = published.load_result(str(_publish(tmp_path, _text_trie())))
    page = show_page.page_html(result)
    assert page.count("<svg") == 1 and "<img" not in page and "<link" not in page
    assert "http://" not in page.split("<svg", 1)[0] and "src=" not in page
    svg = page[page.index("<svg"):page.index("</svg>")]
    texts = [t.split(">", 1)[1] for t in svg.split("<text")[1:]]
    drawn = {t.split("</text")[0] for t in texts}
    # Every radix label, and every leaf's whole item or prefix, is text in the picture.
    assert {"I", "The", "a", "ll", "nd", "bo", "the", "all", "and", "bo\u2026"} <= drawn
    for entry in result.heavy_hitters() + result.frequent_prefixes():
        assert f"<code>{entry.text}</code>" in page
    assert page == show_page.page_html(result)  # the same result gives the same page


def _drawn_rounds(fig):
    """entry text -> the round the figure draws it in, read from the figure itself: each row's
    deepest box sits in the column of the round that kept the entry's last unit (an item: its
    end), and the column's tick says which round that is; the entry's text is at the row's end."""
    [ax] = fig.axes
    rounds = {tick.get_position()[0]: int(tick.get_text().split()[1]) for tick in ax.get_xticklabels()}
    margin = max(text.get_position()[0] for text in ax.texts)
    wholes = {text.get_position()[1]: text.get_text() for text in ax.texts if text.get_position()[0] == margin}
    deepest = {}
    for text in ax.texts:
        x, y = text.get_position()
        if x != margin:
            deepest[y] = max(deepest.get(y, 0), x)
    return {whole.rstrip("\u2026"): rounds[deepest[y]] for y, whole in wholes.items()}


@pytest.mark.parametrize("trie", [
    _text_trie(),
    # a word of 5 characters ends in round 6; "word" is both an item and the start of others
    _trie(ItemEncoder(max_length=8), *(ItemEncoder(max_length=8).encode(w) for w in ("word", "words", "wordy", "wo")),
          ("x", "y", "z")),
], ids=["text", "nested"])
def test_the_drawing_puts_every_entry_in_the_round_its_table_gives(trie):
    result = published.PublishedResult(trie, None, ("x",))
    table = {entry.text: entry.round for entry in result.heavy_hitters() + result.frequent_prefixes()}
    fig = show_page.draw_trie(trie)
    try:
        assert _drawn_rounds(fig) == table
    finally:
        show_page.pyplot().close(fig)
    assert table["words"] == 6 if "words" in table else table["the"] == 4


def test_a_trie_too_large_to_draw_gives_a_page_without_a_picture(tmp_path, monkeypatch):
    monkeypatch.setattr(show_page, "MAX_LEAVES_DRAWN", 6)  # the trie has 7 leaves (a: its end, ll, nd)
    result = published.load_result(str(_publish(tmp_path, _text_trie())))
    page = show_page.page_html(result)
    assert "<svg" not in page and "No picture" in page
    assert show_page.write_image(result.trie, str(tmp_path / "t.png")) is None
    assert not (tmp_path / "t.png").exists()


def test_write_image_as_png_and_svg(tmp_path):
    trie = _text_trie()
    png = show_page.write_image(trie, str(tmp_path / "img" / "trie.png"))
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    svg = show_page.write_image(trie, str(tmp_path / "trie.svg"))
    with open(svg, encoding="utf-8") as f:
        assert f.read().startswith("<svg")


def test_the_published_json_is_what_the_loader_parses(tmp_path):
    # The loader reads job.release.outputs' format: a field renamed there breaks this test.
    directory = _publish(tmp_path, _text_trie())
    with open(directory / "heavy_hitters.json", encoding="utf-8") as f:
        document = json.load(f)
    assert published.trie_from_document(document) == _text_trie()


def test_a_result_on_gcs_reads_as_a_local_one(tmp_path, gcs_emulator):
    from apache_beam.io.filesystems import FileSystems

    local = _publish(tmp_path, _text_trie())
    remote = f"gs://{gcs_emulator}/words/out"
    for name in ("heavy_hitters.json", "trie.pb"):
        with FileSystems.create(f"{remote}/{name}") as f:
            f.write((local / name).read_bytes())
    result = published.load_result(remote)
    assert result.sources == (f"{remote}/heavy_hitters.json", f"{remote}/trie.pb")
    assert show.render_text(result).split("\n", 1)[1] == show.render_text(published.load_result(str(local))).split("\n", 1)[1]
    assert published.load_result(f"{remote}/trie.pb").trie == _text_trie()
    with pytest.raises(published.ResultError, match="holds neither heavy_hitters.json nor trie.pb"):
        published.load_result(f"gs://{gcs_emulator}/words/elsewhere")


def test_an_integer_prefix_reads_as_its_bits_and_values_everywhere():
    ints = ItemEncoder(kind=ItemKind.INT, int_bits=4, unit_size=2, max_length=3)
    trie = _trie(ints, ints.encode(-3), (b"11",))  # -3 = 0101; the prefix 11 covers 4..7
    result = published.PublishedResult(trie, None, ("x",))
    [prefix] = result.frequent_prefixes()
    assert prefix.text == "11\u2026 (values 4 to 7)"
    assert "\u2502" not in show.render_tree(trie)
    assert show.render_tree(trie).splitlines()[1:] == ["\u251c\u2500 0101  \u25cf -3",
                                                       "\u2514\u2500 11    \u2026 11\u2026 (values 4 to 7)"]
    svg = show_page.page_html(result)
    assert ">11\u2026 (values 4 to 7)</text>" in svg and "(values 4 to 7)\u2026" not in svg


def test_a_window_is_shown_only_once_released(tmp_path):
    from triehh_beam.job.windows import windowed

    directory = _publish(tmp_path, _text_trie(), name="window=2026-11-23T10:00:00Z")
    with pytest.raises(published.ResultError, match="not released \\(no _RELEASED marker yet\\)"):
        published.load_result(str(directory))
    (directory / windowed.RELEASED_MARKER).write_text("{}\n")
    assert len(published.load_result(str(directory)).heavy_hitters()) == 6


def test_a_triehh_pp_result_shows_tau_and_p_s_and_never_none(tmp_path):
    # show printed "theta=None, ... rule sample-and-threshold" where discover printed tau and p_s.
    state = state_pb2.JobState(job_id="0123456789abcdef", created_at="2026-01-02T03:04:05+00:00",
                               stop_reason="reached max length")
    state.plan.protocol, state.plan.sample_probability, state.plan.accounting = "triehh++", 0.2424, "exact"
    result = published.load_result(str(_publish(tmp_path, _text_trie(), state)))
    line = show.summary_lines(result)[2]
    assert line == ("privacy: within the target (4, 1e-10)-DP, user level; "
                    "TrieHH++: tau=14, p_s=24.24% per round, L=5")
    # A document that lacks a value leaves it out rather than print None.
    privacy = {key: value for key, value in result.document["privacy"].items() if key not in ("tau", "theta")}
    bare = published.PublishedResult(result.trie, {**result.document, "privacy": privacy}, ("x",))
    assert show.summary_lines(bare)[2].endswith("; TrieHH++: p_s=24.24% per round, L=5")
    del privacy["protocol"], privacy["rule"]
    assert show.summary_lines(bare)[2].endswith("user level; L=5")
    # A whole-item release the same way: its tau and p_s, or nothing where the document has none.
    whole = {**result.document, "privacy": {**privacy, "protocol": "sample-threshold"}, "released": []}
    assert show.summary_lines(published.PublishedResult(result.trie, whole, ("x",)))[2].endswith(
        "; one whole-item sample-and-threshold release: p_s=24.24%")
