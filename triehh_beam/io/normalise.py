"""The pure core of the reader: raw Arrow columns in, ``record_schema`` columns and drop counts
out, a batch at a time and vectorised (``pyarrow.compute``). User ids become their canonical
bytes (what ``sampling.user_id_bytes`` gives one id), items the item kind's type (text, bytes
decoded from base64 or hex, or int64), counts int64; each row that fails a check is dropped and
counted under its first reason (``drops.DROP_REASONS``), and a column whose type cannot hold
what it should is a ``RecordFormatError``. With ``normalise_user_ids``, text ids are stripped
of surrounding white space and put in Unicode NFC before anything else sees them. The array
helpers it uses (``binary_buffers`` among them) are ``io.arrays``.
"""

from __future__ import annotations

import collections
import unicodedata
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from triehh_beam.io.arrays import (as_binary, as_text, at_most, binary_buffers, decode_base64,
                                   decode_hex, decoded, is_bytes, is_text, nonempty, true_count, utf8_ok)
from triehh_beam.io.drops import DROP_REASONS
from triehh_beam.io.schema import ITEM_TYPES, RecordColumns, RecordFormatError, RecordOptions
from triehh_beam.io.timestamps import check_timestamp_type, timestamp_micros
from triehh_beam.protocol.items.encoding import ItemKind

# binary_buffers lives in io.arrays; the Beam transforms import it from here too.
__all__ = ["binary_buffers", "normalise_batch", "normalise_block"]

_INT64_MAX = 2**63 - 1
# Decimal strings of up to 18 digits always fit in int64.
_COUNT_TEXT = r"^[0-9]{1,18}$"
_INT_TEXT = r"^[+-]?[0-9]+$"


# ---------------------------------------------------------------------------------------------
# The pure core: raw columns -> normalised columns and drop counts.


def normalise_batch(
    data: Union[pa.RecordBatch, pa.Table],
    columns: RecordColumns = RecordColumns(),
    options: RecordOptions = RecordOptions(),
) -> Tuple[pa.RecordBatch, Dict[str, int]]:
    """A batch of raw records as a ``record_schema`` batch, and how many rows were dropped why.

    Args:
      data: raw records; the user and item columns must be present, the count column may be
        absent (every count is then 1). User ids may be integers, strings or binary; items
        strings (or binary holding UTF-8) for text, binary or strings for bytes, integers or
        decimal strings for integers; counts integers or decimal text (CSV). Dictionary
        columns are decoded. Other columns are ignored.
      columns: the column names.
      options: the item kind and the checks (``RecordOptions``).

    Returns:
      ``(batch, drops)``: the kept rows, in input order, and the number of dropped rows per
      reason, each dropped row counted under its first reason (``DROP_REASONS`` order). The
      keys ``missing_user``, ``missing_item`` and ``bad_count`` are always there; the other
      reasons a batch can fail (``invalid_utf8``, ``oversized_user``, ``bad_item``,
      ``oversized_item``) appear when their count is not zero. When nothing is dropped, the
      output shares the input's buffers where the types allow.

    Raises:
      RecordFormatError: a required column is missing, or a column has a type that cannot hold
        what it should (a float user id, a float count); the message names the column.
    """
    parts, drops = [], collections.Counter()
    for batch in as_batches(data):
        part = normalise_block(batch, columns, options)
        parts.append(part.batch)
        drops.update(part.drops)
    if len(parts) == 1:
        batch = parts[0]
    else:
        table = pa.Table.from_batches(parts, schema=options.schema).combine_chunks()
        batch = single_batch(table)
    report = {reason: drops[reason] for reason in _ALWAYS_REPORTED}
    report.update({r: drops[r] for r in DROP_REASONS if drops[r] and r not in report})
    return batch, report


_ALWAYS_REPORTED = ("missing_user", "missing_item", "bad_count")


def as_batches(data) -> List[pa.RecordBatch]:
    if isinstance(data, pa.RecordBatch):
        return [data]
    if isinstance(data, pa.Table):
        return data.to_batches() or [pa.RecordBatch.from_pylist([], schema=data.schema)]
    raise TypeError(f"expected a pyarrow RecordBatch or Table, not {type(data).__name__}")


def single_batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    if len(batches) > 1:  # only past 2 GiB of ids or items in one table
        raise ValueError("too much data for one record batch; normalise the batches one by one")
    return batches[0]


def require_columns(
    names: Sequence[str], columns: RecordColumns, options: Optional[RecordOptions] = None
) -> None:
    """Refuses a file without the user or item column (or the timestamp column, when set).

    Raises:
      RecordFormatError: naming the column and the file's columns.
    """
    required = [("user id", columns.user), ("item", columns.item)]
    if options is not None and options.timestamp_column is not None:
        required.append(("timestamp", options.timestamp_column))
    for role, name in required:
        if name not in names:
            raise RecordFormatError(f"no {role} column {name!r} (the columns are {list(names)})")


def check_column_types(schema: pa.Schema, columns: RecordColumns, options: RecordOptions) -> None:
    """Refuses a schema whose user, item or count column cannot hold what it should.

    Raises:
      RecordFormatError: a missing user or item column, or a column of an unusable type (the
        message names the column and its type).
    """
    require_columns(schema.names, columns, options)
    _check_user_type(_value_type(schema.field(columns.user).type), columns.user)
    _check_item_type(_value_type(schema.field(columns.item).type), columns.item, options)
    if columns.count is not None and columns.count in schema.names:
        _check_count_type(_value_type(schema.field(columns.count).type), columns.count)
    if options.timestamp_column is not None:
        name = options.timestamp_column
        check_timestamp_type(_value_type(schema.field(name).type), name)


def _value_type(kind: pa.DataType) -> pa.DataType:
    return kind.value_type if pa.types.is_dictionary(kind) else kind


def _check_user_type(kind: pa.DataType, name: str) -> None:
    usable = pa.types.is_null(kind) or pa.types.is_integer(kind)
    if not (usable or is_text(kind) or is_bytes(kind)):
        raise RecordFormatError(
            f"the user id column {name!r} has type {kind}; user ids are strings, integers or binary"
        )


def _check_item_type(kind: pa.DataType, name: str, options: RecordOptions) -> None:
    if pa.types.is_null(kind):
        return
    item_kind = options.item_kind
    if item_kind is ItemKind.TEXT and not (is_text(kind) or is_bytes(kind)):
        raise RecordFormatError(f"the item column {name!r} has type {kind}; items are strings")
    if item_kind is ItemKind.BYTES and not (is_text(kind) or is_bytes(kind)):
        raise RecordFormatError(
            f"the item column {name!r} has type {kind}; byte items are binary, or text "
            f"(base64 or hex with bytes_encoding)"
        )
    if item_kind is ItemKind.INT and not (
        pa.types.is_integer(kind) or is_text(kind) or is_bytes(kind)
    ):
        raise RecordFormatError(
            f"the item column {name!r} has type {kind}; integer items are integers or decimal text"
        )


def _check_count_type(kind: pa.DataType, name: str) -> None:
    if not (pa.types.is_null(kind) or pa.types.is_integer(kind) or is_text(kind)):
        raise RecordFormatError(f"the count column {name!r} has type {kind}; counts are integers")


class _Normalised(NamedTuple):
    batch: pa.RecordBatch
    drops: Dict[str, int]  # every reason the normalisation checks, zeros included
    rejected: List[Tuple[int, str]]  # (row index, reason), when asked for


# (reason, ok mask or None for "all rows pass") in the order the checks apply.
_Checks = List[Tuple[str, Optional[pa.Array]]]


def normalise_block(
    batch: pa.RecordBatch,
    columns: RecordColumns,
    options: RecordOptions = RecordOptions(),
    keep_rejected: bool = False,
    utf8_checked: bool = False,
) -> _Normalised:
    """Normalises one batch; ``utf8_checked``: its text is known to be UTF-8 (CSV, JSON)."""
    names = batch.schema.names
    require_columns(names, columns, options)
    n = batch.num_rows
    user_raw = decoded(batch.column(columns.user))
    item_raw = decoded(batch.column(columns.item))
    has_count = columns.count is not None and columns.count in names
    count_raw = decoded(batch.column(columns.count)) if has_count else None

    stamp_name = options.timestamp_column
    stamp_raw = None if stamp_name is None else decoded(batch.column(stamp_name))

    # Arrow's Parquet reader does not check UTF-8; the CSV and JSON Lines readers take out the
    # lines that are not UTF-8, so their batches need no second check.
    text_ok = None
    if not utf8_checked:
        text_ok = _text_utf8_ok(user_raw, item_raw, [count_raw, stamp_raw], options)
    users = _normalise_users(user_raw, columns.user)
    if options.normalise_user_ids:
        users = _normalised_text_ids(user_raw, users, text_ok)
    items, item_present, item_ok = _normalise_items(item_raw, columns.item, options)
    if has_count:
        counts, count_ok = _normalise_counts(count_raw, columns.count)
    else:
        counts, count_ok = pa.array(np.ones(n, dtype=np.int64)), None
    item_size_ok = None
    if options.item_kind is not ItemKind.INT:
        item_size_ok = at_most(items, options.max_item_bytes)
    stamps = stamp_ok = None
    if stamp_raw is not None:
        if text_ok is not None and (is_text(stamp_raw.type) or is_bytes(stamp_raw.type)):
            # Text that is not UTF-8 (dropped first) never reaches Arrow's string kernels.
            stamp_raw = pc.if_else(pc.fill_null(text_ok, False), stamp_raw,
                                   pa.scalar(None, stamp_raw.type))
        stamps, stamp_ok = timestamp_micros(stamp_raw, stamp_name)

    checks: _Checks = [
        ("invalid_utf8", text_ok),
        ("missing_user", nonempty(users)),
        ("oversized_user", at_most(users, options.max_user_bytes)),
        ("missing_item", item_present),
        ("bad_item", item_ok),
        ("oversized_item", item_size_ok),
        ("bad_count", count_ok),
        ("bad_timestamp", stamp_ok),
    ]
    # Each dropped row is counted once, under the first check it fails.
    drops = {}
    keep, kept = None, n
    for reason, ok in checks:
        if ok is None:
            drops[reason] = 0
            continue
        if ok.null_count:
            ok = pc.fill_null(ok, False)
        keep = ok if keep is None else pc.and_(keep, ok)
        now_kept = true_count(keep)
        drops[reason], kept = kept - now_kept, now_kept
    arrays = [users, items, counts] + ([stamps] if stamps is not None else [])
    rejected: List[Tuple[int, str]] = []
    if kept < n:
        arrays = [pc.filter(array, keep) for array in arrays]
        if keep_rejected:
            rejected = _first_failures(checks, n)
    good = pa.RecordBatch.from_arrays(arrays, schema=options.schema)
    return _Normalised(good, drops, rejected)


def _text_utf8_ok(
    users: pa.Array, items: pa.Array, others: List[Optional[pa.Array]], options: RecordOptions
) -> Optional[pa.Array]:
    """True where every text value of the row is UTF-8 (None if all rows are): string columns
    (``others``: the count and timestamp columns, where there are), and a binary item column
    when items are text."""
    text_items = is_text(items.type) or (
        options.item_kind is ItemKind.TEXT and is_bytes(items.type)
    )
    result = None
    columns = [(users, is_text(users.type)), (items, text_items)]
    columns += [(other, is_text(other.type)) for other in others if other is not None]
    for array, holds_text in columns:
        ok = utf8_ok(array) if holds_text else None
        if ok is not None:
            result = ok if result is None else pc.and_(result, ok)
    return result


def _first_failures(checks: _Checks, n: int) -> List[Tuple[int, str]]:
    """(row, first failing reason) of every row that fails a check, in row order."""
    reason_of = np.full(n, -1, dtype=np.int16)
    for index, (_, ok) in enumerate(checks):
        if ok is None:
            continue
        failed = ~pc.fill_null(ok, False).to_numpy(zero_copy_only=False)
        reason_of[failed & (reason_of < 0)] = index
    rows = np.flatnonzero(reason_of >= 0)
    return [(int(i), checks[reason_of[i]][0]) for i in rows]


def _normalise_users(array: pa.Array, name: str) -> pa.Array:
    """Canonical id bytes: what ``sampling.user_id_bytes`` does, column at a time."""
    kind = array.type
    _check_user_type(kind, name)
    if pa.types.is_null(kind):
        return pa.nulls(len(array), pa.binary())
    if pa.types.is_integer(kind):
        return pc.cast(pc.cast(array, pa.string()), pa.binary())  # decimal digits, e.g. "-5"
    return as_binary(array)  # strings are UTF-8 already: no copy


def _normalised_text_ids(raw: pa.Array, users: pa.Array, utf8_ok: Optional[pa.Array]) -> pa.Array:
    """``users`` (canonical bytes) with text ids stripped of surrounding white space and in NFC.

    Only string columns are text; ids that are not UTF-8 (dropped as ``invalid_utf8`` first)
    become null rather than reaching Arrow's Unicode kernels.
    """
    if not is_text(raw.type):
        return users
    text = users.view(pa.string())
    if utf8_ok is not None:
        text = pc.if_else(pc.fill_null(utf8_ok, False), text, pa.scalar(None, pa.string()))
    text = pc.utf8_trim_whitespace(text)
    # NFC changes only ids with a non-ASCII character; those few go through Python's
    # unicodedata, since pyarrow's utf8_normalize (25.0.1) returns NFD whatever form is asked.
    not_ascii = pc.invert(pc.fill_null(pc.string_is_ascii(text), True))
    if true_count(not_ascii):
        composed = [unicodedata.normalize("NFC", value)
                    for value in pc.filter(text, not_ascii).to_pylist()]
        text = pc.replace_with_mask(text, not_ascii, pa.array(composed, pa.string()))
    return as_binary(text)


def _normalise_items(
    array: pa.Array, name: str, options: RecordOptions
) -> Tuple[pa.Array, pa.Array, Optional[pa.Array]]:
    """(items of the output type, present mask, valid mask or None if all present ones are)."""
    kind = array.type
    _check_item_type(kind, name, options)
    item_kind = options.item_kind
    out_type = ITEM_TYPES[item_kind]
    if pa.types.is_null(kind):
        return pa.nulls(len(array), out_type), pa.array(np.zeros(len(array), dtype=bool)), None
    if item_kind is ItemKind.TEXT:
        items = as_text(array)
        return items, nonempty(items), None
    if item_kind is ItemKind.BYTES:
        if is_bytes(kind) or options.bytes_encoding is None:
            items = as_binary(array)
            return items, nonempty(items), None
        present = nonempty(array)
        decode = decode_base64 if options.bytes_encoding == "base64" else decode_hex
        items, ok = decode(as_binary(array))
        return items, present, ok
    # Integers.
    if pa.types.is_integer(kind):
        present = pc.is_valid(array)
        if kind == pa.uint64():
            ok = pc.less_equal(array, pa.scalar(_INT64_MAX, kind))
            values = pc.cast(array, pa.int64(), safe=False)  # wrapped values fail `ok`
        else:
            ok, values = None, pc.cast(array, pa.int64())
    else:
        present = nonempty(array)
        values, ok = _parse_integers(as_text(array))
    in_range = _int_range_ok(values, options.int_bits)
    if in_range is not None:
        ok = in_range if ok is None else pc.and_(ok, in_range)
    return values, present, ok


def _int_range_ok(values: pa.Array, bits: int) -> Optional[pa.Array]:
    if bits >= 64:
        return None
    half = 1 << (bits - 1)
    return pc.and_(pc.greater_equal(values, -half), pc.less_equal(values, half - 1))


def _parse_integers(text: pa.Array) -> Tuple[pa.Array, pa.Array]:
    """(int64 values, ok mask) of decimal text: optional sign, ASCII digits, spaces around."""
    text = pc.utf8_trim_whitespace(text)
    ok = pc.fill_null(pc.match_substring_regex(text, _INT_TEXT), False)
    # "+7" is 7; Arrow's cast does not take the plus sign.
    unsigned = pc.replace_substring_regex(text, r"^\+", "")
    candidates = pc.if_else(ok, unsigned, pa.scalar(None, pa.string()))
    try:
        return pc.cast(candidates, pa.int64()), ok
    except pa.ArrowInvalid:  # some value overflows int64 (or has many leading zeros)
        pass
    values, oks = [], []
    for value in candidates.to_pylist():
        number = int(value) if value is not None else None
        fits = number is not None and -(2**63) <= number <= _INT64_MAX
        values.append(number if fits else None)
        oks.append(fits)
    return pa.array(values, pa.int64()), pa.array(oks, pa.bool_())


def _normalise_counts(array: pa.Array, name: str) -> Tuple[pa.Array, pa.Array]:
    """(int64 counts, ok mask): ok where the count is an integer in [0, 2^63).

    A null count, and in a text column an empty or all-white-space one, is 1: the count is
    optional in every format (an empty CSV cell, a Parquet null), so only a value that is
    there and is not a count is bad.
    """
    kind = array.type
    _check_count_type(kind, name)
    n = len(array)
    if pa.types.is_null(kind):
        return pa.array(np.ones(n, dtype=np.int64)), pa.array(np.ones(n, dtype=bool))
    if pa.types.is_unsigned_integer(kind):
        if kind == pa.uint64():
            ok = pc.less_equal(array, pa.scalar(_INT64_MAX, kind))
        else:
            ok = None
        counts = pc.cast(array, pa.int64(), safe=False)  # wrapped values are dropped by `ok`
    elif pa.types.is_signed_integer(kind):
        counts = pc.cast(array, pa.int64())
        ok = pc.greater_equal(counts, 0)
    else:
        # CSV counts arrive as text so that one bad cell is a dropped record, not a failed file.
        text = pc.utf8_trim_whitespace(as_text(array))
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
        ok = pc.match_substring_regex(text, _COUNT_TEXT)
        counts = pc.cast(pc.if_else(ok, text, pa.scalar(None, pa.string())), pa.int64())
    if array.null_count or counts.null_count:  # nulls (and empty text) are 1, and ok
        ok = pc.fill_null(ok, True) if ok is not None else None
        counts = pc.fill_null(counts, 1)
    if ok is None:
        return counts, pa.array(np.ones(n, dtype=bool))
    return counts, pc.fill_null(ok, True)


