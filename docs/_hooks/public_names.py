"""MkDocs hook: the API page's list of ``triehh_beam``'s public names, made at build time from
``triehh_beam.__all__`` (each name documented where it is defined), so the page follows the code."""

import importlib

MARKER = "<!-- triehh_beam.__all__ -->"


def on_page_markdown(markdown, page, **kwargs):
    """Replaces MARKER with one mkdocstrings entry per name of ``triehh_beam.__all__``.

    Raises:
      ValueError: a public name is a value without ``__module__`` (a constant).
    """
    if MARKER not in markdown:
        return markdown
    package = importlib.import_module("triehh_beam")
    entries = []
    for name in package.__all__:
        module = getattr(getattr(package, name), "__module__", None)
        if module is None:  # a constant: mkdocstrings needs the module that defines it
            raise ValueError(f"triehh_beam.{name} has no __module__; document it by hand in docs/api.md")
        entries.append(f"::: {module}.{name}\n    options:\n      heading_level: 3\n")
    return markdown.replace(MARKER, "\n".join(entries))
