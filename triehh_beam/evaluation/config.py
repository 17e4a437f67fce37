"""What ``triehh evaluate`` evaluates, as one frozen ``EvaluationConfig`` validated before anything
runs: the input and its columns, the ε values, δ and L, the unit sizes, runs and K values, the
engine, the protocols and the rivals. L counts units, as everywhere: with several unit sizes,
units of the smallest, and each unit size runs with the units that fit the same items
(``max_length_for``), so every configuration sees the same items."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np

from triehh_beam.io.schema import FORMATS, RecordColumns
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.planning import parameters
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.reference import pipelinedp_rival

__all__ = ["DEFAULT_RIVALS", "ENGINES", "RIVALS", "EvaluationConfig"]

ENGINES = ("pipeline", "simulate")
RIVALS = ("exact", "pem", pipelinedp_rival.NAME)
# PipelineDP is an optional dependency: asked for by name, never by default.
DEFAULT_RIVALS = ("exact", "pem")


def _as_tuple(name: str, values, kind, minimum) -> tuple:
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = (values,)
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name} must hold numbers, got {value!r}")
        if kind is int and int(value) != value:
            raise ValueError(f"{name} must hold integers, got {value!r}")
        value = kind(value)
        if not math.isfinite(value) or value < minimum or (minimum == 0 and value <= 0):
            raise ValueError(f"{name} must hold values {'> 0' if minimum == 0 else f'>= {minimum}'}, got {value!r}")
        out.append(value)
    if not out:
        raise ValueError(f"{name} must not be empty")
    return tuple(sorted(set(out)))


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """What to evaluate, validated before anything runs.

    Args:
      input_pattern: records (path, glob, several comma-separated; any ``FileSystems`` path).
      epsilons: the ε of each TrieHH (and PEM) configuration.
      delta: TrieHH's δ.
      max_length: L in units, as ``discover``'s ``--max-length`` (items of up to L - 1 units);
        with several unit sizes, units of the smallest, k_min: items of up to
        ``(L - 1) k_min`` characters, which unit size k runs with ``ceil((L - 1) k_min / k) + 1``
        units (``max_length_for``).
      unit_sizes: characters per unit, one configuration each.
      runs: R, runs per configuration.
      top_k: the K of recall@K, F1@K and NCR@K (and PEM's k).
      engine: ``"pipeline"`` or ``"simulate"`` (module docstring).
      rivals: any of ``"exact"``, ``"pem"``, ``"pipelinedp"`` (PipelineDP's central partition
        selection, ``reference.pipelinedp_rival``; needs the ``rivals`` extra).
      input_format: ``"jsonl"``, ``"csv"``, ``"parquet"`` or None (from the file names).
      rule: the planner's rule.
      case_fold, truncate_long_items: as ``DiscoveryConfig``.
      user_column, item_column, count_column: the record columns (count may be None).
      seed: the public evaluation seed the run seeds derive from.
      confidence: of the intervals.
      pem_eta: PEM's η (default: ``pem.PEMConfig``'s).
      pem_candidate_factor: PEM keeps this many times K prefixes per intermediate group.
      protocols: ``Protocol`` values (or their names): ``triehh`` and/or ``triehh++`` (sample-and-threshold, on either engine:
        the pipeline's ``--protocol triehh++``); each configuration runs under each, at the same
        (ε, δ) and on the same run seeds; and/or ``sample-threshold`` (one release of whole
        items: unit size 1, either engine).
      work_dir: scratch area of the pipeline engine (outputs and state of each run); default a
        fresh local temporary directory, removed afterwards. Give a ``gs://`` path for a remote
        runner. The simulate engine given the same ``work_dir`` keys each run as the pipeline
        engine does (the run's job identity includes its output path), so the two engines grow
        the same tries run by run.

    Raises:
      ValueError: for any invalid value.
    """

    input_pattern: str
    epsilons: Tuple[float, ...]
    delta: float
    max_length: int
    unit_sizes: Tuple[int, ...] = (1,)
    runs: int = 10
    top_k: Tuple[int, ...] = (10,)
    engine: str = "pipeline"
    rivals: Tuple[str, ...] = DEFAULT_RIVALS
    input_format: Optional[str] = None
    rule: str = "authors"
    case_fold: bool = False
    truncate_long_items: bool = False
    user_column: str = "user_id"
    item_column: str = "item"
    count_column: Optional[str] = "count"
    seed: int = 0
    confidence: float = 0.95
    pem_eta: Optional[int] = None
    pem_candidate_factor: int = 2
    work_dir: Optional[str] = None
    protocols: Tuple[Protocol, ...] = (Protocol.TRIEHH,)

    def __post_init__(self):
        if not self.input_pattern:
            raise ValueError("an input pattern is required")
        object.__setattr__(self, "epsilons", _as_tuple("epsilons", self.epsilons, float, 0))
        object.__setattr__(self, "unit_sizes", _as_tuple("unit sizes", self.unit_sizes, int, 1))
        object.__setattr__(self, "top_k", _as_tuple("top-K", self.top_k, int, 1))
        if not (isinstance(self.delta, (int, float)) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 2:
            raise ValueError(f"max_length must be an integer >= 2, got {self.max_length!r}")
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1:
            raise ValueError(f"runs must be an integer >= 1, got {self.runs!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        rivals = tuple(self.rivals)
        unknown = [r for r in rivals if r not in RIVALS]
        if unknown:
            raise ValueError(f"unknown rival {unknown[0]!r}; the rivals are {', '.join(RIVALS)}")
        object.__setattr__(self, "rivals", tuple(r for r in RIVALS if r in rivals))
        protocols = {Protocol.parse(p) for p in ((self.protocols,) if isinstance(self.protocols, str)
                                                 else self.protocols)}
        if not protocols:
            raise ValueError(f"protocols must not be empty; choose among {', '.join(Protocol)}")
        if Protocol.PARTITION_SELECTION in protocols:  # issue 41: not an evaluate configuration yet
            raise ValueError(f"--protocol {Protocol.PARTITION_SELECTION} is not evaluated by triehh evaluate yet: "
                             "benchmarks/partition_selection.py compares it with PipelineDP")
        if Protocol.NOISY_ROUNDS in protocols:  # issue 41: not an evaluate configuration yet
            raise ValueError(f"--protocol {Protocol.NOISY_ROUNDS} is not evaluated by triehh evaluate yet: "
                             "benchmarks/noisy_rounds.py compares it with TrieHH++")
        object.__setattr__(self, "protocols", tuple(p for p in Protocol if p in protocols))
        if self.input_format not in (None, *FORMATS):
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {self.input_format!r}")
        if self.rule not in parameters.RULES:
            raise ValueError(f"rule must be one of {', '.join(parameters.RULES)}, got {self.rule!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")
        if self.pem_eta is not None and (not isinstance(self.pem_eta, int) or self.pem_eta < 1):
            raise ValueError(f"pem_eta must be an integer >= 1, got {self.pem_eta!r}")
        if not isinstance(self.pem_candidate_factor, int) or self.pem_candidate_factor < 1:
            raise ValueError(f"pem_candidate_factor must be an integer >= 1, got {self.pem_candidate_factor!r}")
        for unit_size in self.unit_sizes:
            self.encoder(unit_size)  # validates the encoding
        RecordColumns(self.user_column, self.item_column, self.count_column or None)

    @property
    def max_characters(self) -> int:
        """The longest item every configuration fits: L - 1 units of the smallest unit size."""
        return (self.max_length - 1) * self.unit_sizes[0]

    def max_length_for(self, unit_size: int) -> int:
        """L in units of ``unit_size`` characters that fits items of up to ``max_characters``."""
        return math.ceil(self.max_characters / unit_size) + 1

    def encoder(self, unit_size: int) -> ItemEncoder:
        return ItemEncoder(
            kind=ItemKind.TEXT,
            unit_size=unit_size,
            max_length=self.max_length_for(unit_size),
            case_fold=self.case_fold,
        )

    @property
    def columns(self) -> RecordColumns:
        return RecordColumns(self.user_column, self.item_column, self.count_column or None)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out.pop("work_dir")
        for key in ("epsilons", "unit_sizes", "top_k", "rivals"):
            out[key] = list(out[key])
        out["protocols"] = [p.value for p in self.protocols]
        out["max_characters"] = self.max_characters
        out["max_length_by_unit_size"] = {str(k): self.max_length_for(k) for k in self.unit_sizes}
        return out
