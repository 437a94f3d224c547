"""Feature declarations: raw columns, how each feature is preprocessed, and the label.

Every feature names a *raw column* (``source``, by default its own name) with a dtype and an
optional default for missing values. A column without a default is required: a row missing it is
rejected at ingest (with its reason) rather than guessed. Preprocessing is declared here and runs
as tf.Transform analyzers in the transform step, so serving applies exactly the same code.

Example:
    >>> import estflow.dsl as ef
    >>> fare = ef.Numeric("fare", default=0.0, normalize="z_score")
    >>> hour = ef.CategoricalIdentity("trip_start_hour", num_buckets=24, default=0)
    >>> company = ef.CategoricalVocab("company", default="", top_k=50)
"""

from __future__ import annotations

import dataclasses
from typing import Union

from estflow.dsl import _checks
from estflow.dsl.errors import DslError
from estflow.dsl.serialization import serializable

__all__ = [
    "DTYPES",
    "Column",
    "Numeric",
    "Bucketized",
    "CategoricalVocab",
    "CategoricalHash",
    "CategoricalIdentity",
    "Crossed",
    "Label",
    "Feature",
    "CATEGORICAL_KINDS",
]

DTYPES = ("float", "int", "string")
NORMALIZATIONS = (None, "z_score", "min_max", "log")


def _check_default(obj, dtype: str) -> None:
    default = obj.default
    if default is None:
        return
    ok = {
        "float": isinstance(default, (int, float)) and not isinstance(default, bool),
        "int": isinstance(default, int) and not isinstance(default, bool),
        "string": isinstance(default, str),
    }[dtype]
    if not ok:
        raise DslError("default", f"a {dtype} value (the column's dtype) or None", default)
    if dtype == "float":
        _checks.freeze(obj, "default", float(default))


def _check_column(obj, dtypes: tuple[str, ...] = DTYPES) -> None:
    _checks.name(obj.name)
    if obj.source is not None:
        _checks.name(obj.source, "source")
    _checks.one_of(obj.dtype, dtypes, "dtype")
    _check_default(obj, obj.dtype)


class _Sourced:
    """Mixin: a declaration reading one raw column."""

    @property
    def column(self) -> str:
        """The raw column this feature reads."""
        return self.source or self.name  # type: ignore[attr-defined]


@serializable
@dataclasses.dataclass(frozen=True)
class Column:
    """A raw input column that no feature reads directly (e.g. ``tips``, used to derive the label).

    Declared in ``Pipeline.columns`` (raw columns) or ``Derive.outputs`` (derived columns).

    Args:
        name: the column name in the data.
        dtype: ``"float"``, ``"int"`` or ``"string"``.
        default: value used when the column is missing in a row; None makes it required.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Column("tips", "float", default=0.0)
        Column(name='tips', dtype='float', default=0.0)
    """

    name: str
    dtype: str = "float"
    default: float | int | str | None = None

    def __post_init__(self) -> None:
        _checks.name(self.name)
        _checks.one_of(self.dtype, DTYPES, "dtype")
        _check_default(self, self.dtype)


@serializable
@dataclasses.dataclass(frozen=True)
class Numeric(_Sourced):
    """A dense numeric feature.

    Args:
        name: feature name (and raw column name unless ``source`` is given).
        dtype: ``"float"`` or ``"int"`` raw type; the model always sees float32.
        default: fill value for missing cells; None makes the column required.
        normalize: None, ``"z_score"``, ``"min_max"`` (to [0, 1]) or ``"log"`` (log1p of
            values clipped at 0).
        source: raw column to read, when it differs from ``name``.

    Example:
        >>> import estflow.dsl as ef
        >>> distance = ef.Numeric("distance", source="trip_miles", default=0.0, normalize="log")
        >>> distance.column
        'trip_miles'
    """

    name: str
    dtype: str = "float"
    default: float | int | None = None
    normalize: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        _check_column(self, ("float", "int"))
        _checks.one_of(self.normalize, NORMALIZATIONS, "normalize")


@serializable
@dataclasses.dataclass(frozen=True)
class Bucketized(_Sourced):
    """A numeric column cut into buckets: by explicit ``boundaries`` or by ``num_buckets``
    quantiles computed from the training data. The model sees a bucket id (a categorical).

    Args:
        name: feature name (and raw column name unless ``source`` is given).
        boundaries: strictly increasing cut points: bucket 0 holds values below
            ``boundaries[0]``, bucket ``i`` values in ``[boundaries[i-1], boundaries[i])``
            (``len(boundaries) + 1`` buckets).
        num_buckets: instead of ``boundaries``, this many quantile buckets (at least 2),
            computed by the transform step from the training split.
        dtype: ``"float"`` or ``"int"`` raw type.
        default: fill value for missing cells; None makes the column required.
        source: raw column to read, when it differs from ``name``.

    Example:
        >>> import estflow.dsl as ef
        >>> fare_band = ef.Bucketized("fare_band", source="fare", boundaries=(5, 10, 20))
        >>> fare_band.boundaries, fare_band.cardinality
        ((5.0, 10.0, 20.0), 4)
    """

    name: str
    boundaries: tuple[float, ...] = ()
    num_buckets: int | None = None
    dtype: str = "float"
    default: float | int | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        _check_column(self, ("float", "int"))
        boundaries = _checks.tuple_of(self.boundaries, "boundaries", (int, float),
                                      what="numbers")
        _checks.freeze(self, "boundaries", tuple(float(b) for b in boundaries))
        if bool(self.boundaries) == (self.num_buckets is not None):
            raise DslError("boundaries", "exactly one of `boundaries` (explicit cut points) or "
                           "`num_buckets` (quantiles)",
                           {"boundaries": self.boundaries, "num_buckets": self.num_buckets})
        if self.boundaries and list(self.boundaries) != sorted(set(self.boundaries)):
            raise DslError("boundaries", "strictly increasing numbers", self.boundaries)
        _checks.positive_int(self.num_buckets, "num_buckets", allow_none=True, minimum=2)

    @property
    def cardinality(self) -> int:
        """The number of bucket ids."""
        return len(self.boundaries) + 1 if self.boundaries else int(self.num_buckets)


@serializable
@dataclasses.dataclass(frozen=True)
class CategoricalVocab(_Sourced):
    """A categorical column whose vocabulary is computed from the training data.

    Args:
        name: feature name (and raw column name unless ``source`` is given).
        dtype: ``"string"`` or ``"int"`` raw type.
        default: fill value for missing cells; None makes the column required.
        top_k: keep only the most frequent values (None: all).
        frequency_threshold: drop values seen fewer times than this.
        num_oov_buckets: ids for values not in the vocabulary (hashed); at least 1.
        source: raw column to read, when it differs from ``name``.

    Example:
        >>> import estflow.dsl as ef
        >>> company = ef.CategoricalVocab("company", default="", top_k=50)
        >>> company.cardinality is None  # known once the transform step has seen the data
        True
    """

    name: str
    dtype: str = "string"
    default: str | int | None = None
    top_k: int | None = None
    frequency_threshold: int | None = None
    num_oov_buckets: int = 1
    source: str | None = None

    def __post_init__(self) -> None:
        _check_column(self, ("string", "int"))
        _checks.positive_int(self.top_k, "top_k", allow_none=True)
        _checks.positive_int(self.frequency_threshold, "frequency_threshold", allow_none=True)
        _checks.positive_int(self.num_oov_buckets, "num_oov_buckets")

    @property
    def cardinality(self) -> None:
        """Unknown until the data is analysed (vocabulary size + num_oov_buckets)."""
        return None


@serializable
@dataclasses.dataclass(frozen=True)
class CategoricalHash(_Sourced):
    """A categorical column hashed into ``hash_buckets`` ids (no vocabulary needed).

    Args:
        name: feature name (and raw column name unless ``source`` is given).
        hash_buckets: how many ids the values are hashed into (at least 2; required).
        dtype: ``"string"`` or ``"int"`` raw type.
        default: fill value for missing cells; None makes the column required.
        source: raw column to read, when it differs from ``name``.

    Example:
        >>> import estflow.dsl as ef
        >>> tract = ef.CategoricalHash("pickup_census_tract", hash_buckets=1000, default="")
        >>> tract.cardinality
        1000
    """

    name: str
    hash_buckets: int = 0
    dtype: str = "string"
    default: str | int | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        _check_column(self, ("string", "int"))
        _checks.positive_int(self.hash_buckets, "hash_buckets", minimum=2)

    @property
    def cardinality(self) -> int:
        """The number of ids, ``hash_buckets``."""
        return self.hash_buckets


@serializable
@dataclasses.dataclass(frozen=True)
class CategoricalIdentity(_Sourced):
    """An integer column that already is an id in ``[0, num_buckets)``. Values outside that
    range (and negative ones) go to one extra bucket, id ``num_buckets``.

    Args:
        name: feature name (and raw column name unless ``source`` is given).
        num_buckets: the number of valid ids (required).
        default: fill value for missing cells; None makes the column required.
        source: raw column to read, when it differs from ``name``.
        dtype: always ``"int"``.

    Example:
        >>> import estflow.dsl as ef
        >>> hour = ef.CategoricalIdentity("trip_start_hour", num_buckets=24, default=0)
        >>> hour.cardinality  # 24 hours + 1 bucket for out-of-range values
        25
    """

    name: str
    num_buckets: int = 0
    default: int | None = None
    source: str | None = None
    dtype: str = "int"

    def __post_init__(self) -> None:
        _check_column(self, ("int",))
        _checks.positive_int(self.num_buckets, "num_buckets")

    @property
    def cardinality(self) -> int:
        """The number of ids: ``num_buckets`` plus the out-of-range bucket."""
        return self.num_buckets + 1


@serializable
@dataclasses.dataclass(frozen=True)
class Crossed:
    """The cross of two or more categorical/bucketized features, hashed into ``hash_buckets``.

    Args:
        name: feature name (a cross reads no raw column).
        keys: names of two or more categorical, bucketized or crossed features declared before
            this one in ``Pipeline.features``.
        hash_buckets: how many ids the combinations are hashed into (at least 2; required).

    Example:
        >>> import estflow.dsl as ef
        >>> cross = ef.Crossed("payment_x_hour", keys=["payment_type", "trip_start_hour"],
        ...                    hash_buckets=100)
        >>> cross.keys  # lists become tuples: declarations are immutable
        ('payment_type', 'trip_start_hour')
    """

    name: str
    keys: tuple[str, ...] = ()
    hash_buckets: int = 0

    def __post_init__(self) -> None:
        _checks.name(self.name)
        keys = _checks.tuple_of(self.keys, "keys", str, min_len=2, what="feature names")
        _checks.freeze(self, "keys", keys)
        _checks.positive_int(self.hash_buckets, "hash_buckets", minimum=2)

    @property
    def cardinality(self) -> int:
        """The number of ids, ``hash_buckets``."""
        return self.hash_buckets


@serializable
@dataclasses.dataclass(frozen=True)
class Label(_Sourced):
    """The training label: a raw column, or a column produced by the pipeline's ``derive`` hook.

    Args:
        name: the label name (and raw column name unless ``source`` is given); it may name a
            column that ``Pipeline.derive`` computes.
        dtype: ``"int"`` (class ids), ``"float"`` (regression) or ``"string"`` (class names,
            mapped through ``vocabulary``).
        vocabulary: class names in id order, for string labels.
        source: raw column to read, when it differs from ``name``.
        default: always None: a row without a label is rejected, never filled in.

    Example:
        >>> import estflow.dsl as ef
        >>> label = ef.Label("payment", dtype="string", vocabulary=("Cash", "Credit Card"))
        >>> label.column, label.vocabulary
        ('payment', ('Cash', 'Credit Card'))
    """

    name: str
    dtype: str = "int"
    vocabulary: tuple[str, ...] = ()
    source: str | None = None
    default: None = None

    def __post_init__(self) -> None:
        _check_column(self)
        vocab = _checks.tuple_of(self.vocabulary, "vocabulary", str, what="class names")
        _checks.freeze(self, "vocabulary", vocab)
        if self.dtype == "string" and len(vocab) < 2:
            raise DslError("vocabulary", "at least 2 class names for a string label", vocab)
        if self.default is not None:
            raise DslError("default", "None (a label is never filled in; a row without one is "
                           "rejected)", self.default)


Feature = Union[Numeric, Bucketized, CategoricalVocab, CategoricalHash, CategoricalIdentity,
                Crossed]
CATEGORICAL_KINDS = (Bucketized, CategoricalVocab, CategoricalHash, CategoricalIdentity, Crossed)
