"""``triehh show``: a discovery's published result as a person reads it, from an output directory
of ``triehh discover`` or its ``heavy_hitters.json`` (shown in full: the trie is rebuilt from its
items and prefixes) or ``trie.pb`` alone (``present.result``, ``present.show``): the heavy hitters
as a table, the frequent prefixes apart with why each stops, and the trie as a text tree;
``--html`` also writes a one-file page with the trie drawn, ``--image`` the drawing alone. Reads
only published files, never the private state. Exit codes: 0 shown; 2 no result at that path, or
a file that is not one (one line on stderr saying what the file is and which file ``show`` wants).
On a ``triehh stream`` output it shows the stream instead (``present.show_stream``), with the lag
of its last release, operator-only, from the stream's private state directory when it can read it.
"""

from __future__ import annotations

import argparse
import os
import sys

from triehh_beam.cli.argtypes import UsageError

__all__ = ["register_show"]

_ORDER_HELP = (
    "The rounds publish no counts, so the table is not a ranking by frequency: it lists entries in "
    "the order the discovery found them, by round (an item of k units is found in round k+1), "
    "then alphabetically ignoring case (so 'I' sits beside 'i', not before 'a'), then by code "
    "point."
)


def register_show(subparsers) -> None:
    """Adds ``show`` to the ``triehh`` tool."""
    parser = subparsers.add_parser(
        "show",
        help="print a discovery's result: heavy hitters, frequent prefixes and the trie",
        description="Prints what a discovery found, from its published files: the heavy hitters "
        "(complete items) as a table, the frequent prefixes (starts of items that no single "
        "continuation of reached the threshold) apart, and the trie's radix view as a text tree. "
        + _ORDER_HELP,
    )
    parser.add_argument("output", metavar="OUTPUT",
                        help="the --output directory of triehh discover (both files are read and "
                             "checked against each other) or of triehh stream (its windows and spend, and the lag from "
                             "its state directory; "
                             "each window's directory is a result of its own), or its heavy_hitters.json "
                             "(shown in full: the trie is rebuilt from its items and prefixes) or trie.pb; "
                             "any other file is refused in one line that says what it is")
    parser.add_argument("--html", metavar="PATH",
                        help="also write one self-contained HTML page: the tables and the trie drawn")
    parser.add_argument("--image", metavar="PATH",
                        help="also write the trie drawn, as PNG (or SVG when PATH ends in .svg)")
    parser.add_argument("--no-tree", action="store_true", help="print the tables without the text tree")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="a stream's private state directory (default OUTPUT.state): show reads the lag of "
                             "its last release there (operator-only: it depends on the records), when it can")
    parser.set_defaults(handler=lambda args, extra: _run_show(args))


def _run_show(args: argparse.Namespace) -> int:
    from triehh_beam.present import result as published, show, show_stream

    status = show_stream.load_status(args.output)
    if status is not None:  # a stream's output: its windows and spend, and (operator-only) its lag
        state_dir = args.state_dir or os.path.abspath(args.output.rstrip("/")) + ".state"
        print("\n".join(show_stream.stream_lines(status, show_stream.load_operator_status(state_dir))))
        return 0

    try:
        result = published.load_result(args.output)
    except published.ResultError as e:
        raise UsageError(str(e)) from None
    print(show.render_text(result, tree=not args.no_tree))
    if args.html or args.image:
        from triehh_beam.present import show_page

        if args.html:
            print(f"page: {show_page.write_page(result, args.html)}", file=sys.stderr)
        if args.image:
            written = show_page.write_image(result.trie, args.image)
            if written is None:
                print(f"image: not written: the trie has no node or more than "
                      f"{show_page.MAX_LEAVES_DRAWN:,} leaves", file=sys.stderr)
            else:
                print(f"image: {written}", file=sys.stderr)
    return 0
