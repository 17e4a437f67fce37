"""What one setting of a discovery is (``Setting``), how a field of ``job.settings.fields``'
``DiscoverySettings`` declares it (``setting``), and the small parsers settings share
(``parse_duration``, ``parse_window_range``, ``read_seed_file``)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
from typing import Any, Callable, Dict, Optional, Tuple

__all__ = ["Setting", "parse_duration", "parse_window_range", "read_seed_file", "setting"]


def read_seed_file(path: str) -> bytes:
    """The secret seed held in ``path`` (16 to 64 bytes); raises ValueError or OSError naming it."""
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path, compression_type="uncompressed") as f:
        seed = f.read()
    if not 16 <= len(seed) <= 64:
        raise ValueError(f"{path}: a seed file holds 16 to 64 bytes, this one {len(seed)}")
    return seed


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting of a discovery, as every front end sees it.

    Attributes:
      name: the ``DiscoveryConfig`` field.
      flag: the ``triehh discover`` flag (``--max-length``).
      parse: turns the flag's text into a value (argparse ``type``); None for a switch.
      default: the field's default (``dataclasses.MISSING`` when required).
      help: the flag's help text.
      group: its argument group (one of ``fields.GROUPS``).
      identity: where a job's state records it (see ``fields.ENCODING``), or None when it is not part
        of the job's identity (a resumed job may change it).
      compare: "always", or "given" (only when set: the state holds the value the job drew).
      record: the value as the state records it, from the whole configuration (default: the field).
      mismatch: how a resume refusal describes a difference, a format string of ``name``,
        ``ours`` and ``theirs`` (never name a secret's value).
      choices, metavar: as argparse's.
      keyed: part of the job's sampling identity (``identity.sampling_identity``), mixed
        into every derived key; default: when it is part of the job's identity.
      load: turns the parsed value into the field's value (reads a seed file); None: as is.
      section, key: where ``triehh scheduled`` reads it in its config file.
      example: a valid value other than the default, as it is written after the flag.
    """

    name: str
    flag: str
    parse: Optional[Callable[[str], Any]]
    default: Any
    help: str
    group: str
    identity: Optional[str]
    compare: str
    record: Optional[Callable[[Any], Any]]
    mismatch: str
    keyed: bool
    choices: Optional[Tuple[str, ...]]
    metavar: Optional[str]
    load: Optional[Callable[[Any], Any]]
    section: str
    key: str
    example: str

    @property
    def dest(self) -> str:
        """The argparse destination: the flag without dashes (``max_length``, ``seed_file``)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    @property
    def is_switch(self) -> bool:
        return self.parse is None

    def add_to(self, parser, *, required: Optional[bool] = None, beam: bool = False) -> None:
        """Adds the flag to an argparse parser or group.

        Args:
          parser: the parser or argument group.
          required: overrides whether the flag is required (default: when the field has no
            default; never for ``beam``).
          beam: Beam's spelling (``--max_length``, with the dashed flag as an alias), never
            required: every ``PipelineOptions`` in the process parses these flags.
        """
        flags = [self.flag]
        if beam:
            flags = ["--" + self.dest] + ([self.flag] if self.flag != "--" + self.dest else [])
        default = None if self.required else self.default
        if self.is_switch:
            parser.add_argument(*flags, dest=self.dest, action="store_true", help=self.help)
            return
        kwargs: Dict[str, Any] = dict(dest=self.dest, type=_flag_type(self.parse), default=default, help=self.help)
        if not beam:
            kwargs["required"] = self.required if required is None else required
        if self.choices:
            kwargs["choices"] = self.choices
        if self.metavar:
            kwargs["metavar"] = self.metavar
        parser.add_argument(*flags, **kwargs)

    def from_file_value(self, value: Any) -> Any:
        """A value read from a config file, parsed as the flag's text would be.

        Raises:
          ValueError: the value has the wrong type or does not parse; the message names the key.
        """
        where = f"[{self.section}] {self.key}"
        if self.is_switch:
            if not isinstance(value, bool):
                raise ValueError(f"{where} must be true or false, got {value!r}")
            return value
        if isinstance(value, (bool, list, dict)) or value is None:
            raise ValueError(f"{where} must be a single value, got {value!r}")
        try:
            parsed = self.parse(str(value))
        except (ValueError, argparse.ArgumentTypeError) as e:
            raise ValueError(f"{where}: not a valid value {value!r} ({e})") from None
        if self.choices and parsed not in self.choices:
            raise ValueError(f"{where} must be one of {', '.join(self.choices)}, got {value!r}")
        return parsed

    def field_value(self, parsed: Any) -> Any:
        """The ``DiscoveryConfig`` field's value for a parsed flag value."""
        if parsed is None or self.load is None:
            return parsed
        return self.load(parsed)


def setting(
    flag: str,
    help: str,
    group: str,
    *,
    default: Any = dataclasses.MISSING,
    parse: Optional[Callable[[str], Any]] = str,
    identity: Optional[str] = None,
    compare: str = "always",
    record: Optional[Callable[[Any], Any]] = None,
    mismatch: str = "{name} (state has {theirs!r}, asked {ours!r})",
    keyed: Optional[bool] = None,
    choices: Optional[Tuple[str, ...]] = None,
    metavar: Optional[str] = None,
    load: Optional[Callable[[Any], Any]] = None,
    section: str = "discovery",
    key: Optional[str] = None,
    example: str,
    repr: bool = True,
    kw_only: bool = False,
    positional: bool = False,
) -> Any:
    """A ``DiscoverySettings`` field that carries its ``Setting`` (see there for the arguments).

    ``kw_only``: a keyword-only field (it may have a default among required fields);
    ``positional``: a field the dataclass requires (so that it can come first) whose flag is
    optional, ``default`` when not given (``config_from_values`` passes it)."""
    spec = dict(flag=flag, parse=parse, default=default, help=help, group=group, identity=identity,
                compare=compare, record=record, mismatch=mismatch,
                keyed=identity is not None if keyed is None else keyed, choices=choices, metavar=metavar,
                load=load, section=section, key=key, example=example)
    return dataclasses.field(default=dataclasses.MISSING if positional else default, repr=repr,
                             kw_only=kw_only, metadata={"setting": spec})


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _flag_type(parse: Optional[Callable[[str], Any]]) -> Optional[Callable[[str], Any]]:
    """``parse`` for argparse: a setting's own parser's ValueError message reaches the user
    (argparse would print "invalid parse_duration value"); int and float keep argparse's."""
    if parse in (None, int, float, str):
        return parse

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def parse_duration(text: str) -> int:
    """Whole seconds from ``90``, ``90s``, ``15m``, ``1h`` or ``1d``; raises ValueError."""
    value = text.strip().lower()
    unit = _DURATION_UNITS.get(value[-1:]) if value else None
    number = value[:-1] if unit else value
    if not number.isdigit():
        raise ValueError(f"not a duration: {text!r} (write 90, 90s, 15m, 1h or 1d)")
    return int(number) * (unit or 1)


def _utc_micros(text: str) -> int:
    """Microseconds since the epoch of an RFC 3339 UTC instant (``2026-11-23T10:00:00Z``)."""
    try:
        instant = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"not an RFC 3339 instant: {text!r} (write 2026-11-23T10:00:00Z)") from None
    if instant.utcoffset() != datetime.timedelta(0):
        raise ValueError(f"{text!r} is not in UTC (write it with Z, e.g. 2026-11-23T10:00:00Z)")
    delta = instant - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def parse_window_range(text: str) -> Tuple[int, Optional[int]]:
    """``FROM..TO`` (RFC 3339 UTC instants) -> (FROM, TO) in microseconds since the epoch, or
    ``FROM..`` (open-ended) -> (FROM, None); raises ValueError unless FROM is before TO."""
    if text.count("..") != 1:
        raise ValueError(f"not a range of windows: {text!r} (write FROM..TO, e.g. "
                         "2026-11-23T00:00:00Z..2026-11-24T00:00:00Z, or FROM.. for every window from FROM on)")
    first_text, last_text = text.split("..")
    first = _utc_micros(first_text)
    if not last_text.strip():
        return first, None
    last = _utc_micros(last_text)
    if first >= last:
        raise ValueError(f"--windows {text}: FROM must be before TO")
    return first, last
