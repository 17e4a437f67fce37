"""When a record happened: the optional timestamp column (``RecordOptions.timestamp_column``)
read as int64 microseconds since the Unix epoch, UTC, a column at a time with Arrow compute. A
number is milliseconds since the epoch (integer or not; in text too, as CSV cells are); text is
RFC 3339 (``2024-05-01T12:00:00Z``, ``2024-05-01 14:00:00.25+02:00``: seconds required, an
offset or ``Z`` required, digits past the microsecond dropped, a leap second ``:60`` read as
``:59.999999``); a Parquet timestamp is converted from its unit (a timestamp without a time zone
is taken as UTC). Anything else, and a missing value, is not a timestamp: its row is dropped as
``bad_timestamp``. A column of another type is a ``RecordFormatError``.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from triehh_beam.io.arrays import as_text, is_bytes, is_text, true_count
from triehh_beam.io.schema import RecordFormatError

__all__ = [
    "MICROS_TYPE",
    "check_timestamp_type",
    "micros_of_values",
    "timestamp_micros",
]

# What the JSON Lines reader hands over for values it converted itself: already microseconds.
MICROS_TYPE = pa.timestamp("us", tz="UTC")

_INT64_MAX = 2**63 - 1
# The largest number of milliseconds whose microseconds fit in int64 (about the year 294,000);
# floats stay a little below it, where float64 rounding cannot reach 2^63.
_MAX_MS = _INT64_MAX // 1000
_MAX_FLOAT_MS = 9.2e15
_MS_INTEGER = r"^-?[0-9]{1,16}$"
_MS_DECIMAL = r"^-?[0-9]{1,16}\.[0-9]+$"
_RFC3339 = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]"
    r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?"
    r"([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
_MICROS_PER = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}


def check_timestamp_type(kind: pa.DataType, name: str) -> None:
    """Refuses a timestamp column of a type that cannot hold timestamps.

    Raises:
      RecordFormatError: naming the column and its type.
    """
    usable = (
        pa.types.is_null(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_timestamp(kind)
        or is_text(kind)
        or is_bytes(kind)
    )
    if not usable:
        raise RecordFormatError(
            f"the timestamp column {name!r} has type {kind}; timestamps are milliseconds since "
            f"the epoch, RFC 3339 text or timestamps"
        )


def timestamp_micros(array: pa.Array, name: str) -> Tuple[pa.Array, pa.Array]:
    """(int64 microseconds since the epoch, UTC; ok mask) of a raw timestamp column.

    A row that is not ok (missing, or not a timestamp) has a null value and is to be dropped as
    ``bad_timestamp``; the mask has no nulls.

    Raises:
      RecordFormatError: a column of a type that cannot hold timestamps (``name`` names it).
    """
    kind = array.type
    check_timestamp_type(kind, name)
    if pa.types.is_null(kind):
        micros = pa.nulls(len(array), pa.int64())
    elif pa.types.is_timestamp(kind):
        micros = _from_timestamps(array)
    elif pa.types.is_integer(kind):
        micros = _from_integer_ms(array)
    elif pa.types.is_floating(kind):
        micros = _from_float_ms(array)
    else:
        micros = _from_text(as_text(array))
    return micros, pc.is_valid(micros)


def micros_of_values(values: Sequence[object]) -> pa.Array:
    """Microseconds (``MICROS_TYPE``, null where not a timestamp) of parsed JSON values, each of
    its own type: integers and floats are milliseconds, strings RFC 3339 (or milliseconds), as
    ``timestamp_micros`` reads a column of each type. Strings must be UTF-8."""
    integers: List[Optional[int]] = []
    floats: List[Optional[float]] = []
    strings: List[Optional[str]] = []
    for value in values:
        kind = type(value)
        integers.append(value if kind is int and -(2**63) <= value <= _INT64_MAX else None)
        floats.append(value if kind is float else None)
        strings.append(value if kind is str else None)
    micros = pc.coalesce(
        _from_integer_ms(pa.array(integers, pa.int64())),
        _from_float_ms(pa.array(floats, pa.float64())),
        _from_text(pa.array(strings, pa.string())),
    )
    return micros.cast(MICROS_TYPE)


def _within(values: pa.Array, limit: int) -> pa.Array:
    """True where ``-limit <= value <= limit`` (no ``abs``: it wraps at -2^63)."""
    return pc.and_(pc.greater_equal(values, -limit), pc.less_equal(values, limit))


def _null_where_not(mask: pa.Array, values: pa.Array) -> pa.Array:
    return pc.if_else(pc.fill_null(mask, False), values, pa.scalar(None, values.type))


def _from_integer_ms(ms: pa.Array) -> pa.Array:
    if pa.types.is_unsigned_integer(ms.type):
        fits = pc.less_equal(ms, pa.scalar(_MAX_MS, ms.type))
        ms = pc.cast(ms, pa.int64(), safe=False)  # wrapped values are nulled by `fits`
    else:
        ms = pc.cast(ms, pa.int64())
        fits = _within(ms, _MAX_MS)
    return pc.multiply(_null_where_not(fits, ms), 1000)


def _from_float_ms(ms: pa.Array) -> pa.Array:
    ms = pc.cast(ms, pa.float64())
    fits = pc.and_(pc.is_finite(ms), pc.less_equal(pc.abs(ms), _MAX_FLOAT_MS))
    micros = pc.round(pc.multiply(_null_where_not(fits, ms), 1000.0))
    return pc.cast(micros, pa.int64())


def _from_timestamps(stamps: pa.Array) -> pa.Array:
    """A timestamp column's instants in microseconds (naive ones taken as UTC)."""
    unit = stamps.type.unit
    values = pc.cast(stamps, pa.int64())  # the stored integers, in the column's unit
    factor = _MICROS_PER[unit]
    if factor is None:  # nanoseconds: the microsecond they fall in (floor, before 1970 too)
        valid = pc.is_valid(values)
        floored = np.floor_divide(pc.fill_null(values, 0).to_numpy(), 1000)
        return pa.array(floored, pa.int64(), mask=pc.invert(valid).to_numpy(zero_copy_only=False))
    if factor == 1:
        return values
    fits = _within(values, _INT64_MAX // factor)
    return pc.multiply(_null_where_not(fits, values), factor)


def _from_text(text: pa.Array) -> pa.Array:
    """Microseconds of text: RFC 3339, or milliseconds in decimal; null for anything else.

    The usual batch, all RFC 3339, costs one pattern match and one cast (about 0.2 µs a row);
    the patterns for milliseconds run only when some text is not RFC 3339.
    """
    text = pc.utf8_trim_whitespace(text)
    present = len(text) - text.null_count
    rfc3339 = pc.fill_null(pc.match_substring_regex(text, _RFC3339), False)
    dated = true_count(rfc3339)
    parts = []
    if dated:
        parts.append(_from_rfc3339(text if dated == present else _null_where_not(rfc3339, text)))
    if dated < present:
        text = pc.replace_substring_regex(text, r"^\+([0-9])", r"\1")  # Arrow takes no "+"
        integer = pc.fill_null(pc.match_substring_regex(text, _MS_INTEGER), False)
        if true_count(integer):
            parts.append(_from_integer_ms(pc.cast(_null_where_not(integer, text), pa.int64())))
        decimal = pc.fill_null(pc.match_substring_regex(text, _MS_DECIMAL), False)
        if true_count(decimal):
            parts.append(_from_float_ms(pc.cast(_null_where_not(decimal, text), pa.float64())))
    if not parts:
        return pa.nulls(len(text), pa.int64())
    return parts[0] if len(parts) == 1 else pc.coalesce(*parts)


def _from_rfc3339(text: pa.Array) -> pa.Array:
    """Microseconds of RFC 3339 text (already matched by ``_RFC3339``; others null).

    Arrow's ISO 8601 cast reads the usual text at once; only a batch it refuses (a lower-case
    ``t`` or ``z``, more than 6 digits of a second, a leap second, a day the month lacks) is
    rewritten into what it reads and cast in halves around the values it still refuses.
    """
    try:
        return pc.cast(pc.cast(text, MICROS_TYPE), pa.int64())
    except pa.ArrowInvalid:
        pass
    text = pc.utf8_upper(text)  # "t" and "z" are allowed
    text = pc.replace_substring_regex(text, r"(\.[0-9]{6})[0-9]+", r"\1")
    text = pc.replace_substring_regex(text, r":60(\.[0-9]+)?([Z+-])", r":59.999999\2")
    return pc.cast(_cast_or_split(text), pa.int64())


def _cast_or_split(text: pa.Array) -> pa.Array:
    """Arrow's ISO 8601 cast, in halves around the values it refuses (a day 31 in a month of
    30 days, which the pattern lets through), which become null."""
    try:
        return pc.cast(text, MICROS_TYPE)
    except pa.ArrowInvalid:
        if len(text) == 1:
            return pa.nulls(1, MICROS_TYPE)
    half = len(text) // 2
    return pa.concat_arrays([_cast_or_split(text.slice(0, half)),
                             _cast_or_split(text.slice(half))])
