"""How a custom header class is declared: :func:`header` and :func:`field`.

A custom header is an attrs class (slots, keyword-only) whose attribute names are the
wire ext-field names, i.e. the Java field names, in Java declaration order. Each
attribute is declared with :func:`field`, which records in the attribute's metadata

* ``kind``: ``"str"``, ``"int"`` (Java ``Integer``/``int``, int32), ``"long"`` (Java
  ``Long``/``long``, int64), ``"bool"`` or ``"double"``. Python annotations say ``int``
  for both int and long; the kind is what range checks use, never the annotation;
* ``required``: Java ``@CFNotNull``. Decoding fails when the ext field is absent (or
  null), where Java would log and leave the field null;
* the default: ``None`` for optional fields (Java ``@CFNullable`` or no annotation: a
  null boxed field is simply not sent); a value for Java fields that are never null,
  e.g. primitive ``boolean unitMode`` (always sent, ``"false"`` by default) or
  ``Integer bodyCrc32 = 0``. Required fields have no default unless Java gives one.

Example::

    @header
    class GetMaxOffsetRequestHeader:
        topic: str = field("str", required=True)
        queueId: int = field("int", required=True)
        bname: str | None = field("str")

``@header(java_fast_codes=True)`` marks a class that Java implements as a
``FastCodesHeader``: in a ROCKETMQ binary frame its fields go first, in declaration
order, ahead of the other ext fields (:func:`~trocket.codecs.serialize.wire_ext_fields`).
The class's codec (hand-written if one is registered, else generated from the
declaration) is the package's business (:mod:`trocket.codecs.custom_header`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, overload

import attrs

from ._java import KINDS

__all__ = ["FieldSpec", "JAVA_FAST_CODES_HEADERS", "field", "header", "header_fields", "is_header_class"]

_META: Final = "trocket.header"
_SPECS: Final = "__trocket_header_fields__"

T = TypeVar("T")

#: The header classes declared ``java_fast_codes=True`` (Java's ``FastCodesHeader``).
JAVA_FAST_CODES_HEADERS: set[type] = set()


@attrs.frozen
class FieldSpec:
    """One ext field of a header, as both codec paths see it."""

    name: str
    kind: str
    required: bool
    #: The attrs default (``attrs.NOTHING`` for required fields without one).
    default: Any


class _Meta:
    """Metadata payload (a class, not a dict, so it cannot be confused with others')."""

    __slots__ = ("kind", "required")

    def __init__(self, kind: str, required: bool) -> None:
        self.kind = kind
        self.required = required


def field(kind: str, *, required: bool = False, default: Any = attrs.NOTHING) -> Any:
    """Declare an ext field of ``kind``; optional (default ``None``) unless ``required``."""
    if kind not in KINDS:
        raise ValueError(f"unknown header field kind {kind!r}; expected one of {sorted(KINDS)}")
    if default is attrs.NOTHING and not required:
        default = None
    return attrs.field(default=default, metadata={_META: _Meta(kind, required)})


@overload
def header(cls: type[T], /) -> type[T]: ...


@overload
def header(*, java_fast_codes: bool = False) -> Callable[[type[T]], type[T]]: ...


def header(cls: type[T] | None = None, /, *, java_fast_codes: bool = False) -> Any:
    """Make ``cls`` a custom header: ``attrs.define(slots=True, kw_only=True)`` + specs.

    ``@header`` or ``@header(java_fast_codes=True)`` (see the module docstring)."""
    if cls is None:
        return lambda c: _declare(c, java_fast_codes)
    return _declare(cls, java_fast_codes)


def _declare(cls: type[T], java_fast_codes: bool) -> type[T]:
    cls = attrs.define(cls, slots=True, kw_only=True)  # type: ignore[assignment]
    specs = []
    for a in attrs.fields(cls):  # type: ignore[arg-type]
        meta = a.metadata.get(_META)
        if meta is None:
            raise TypeError(f"{cls.__name__}.{a.name}: declare header fields with field()")
        if a.name.startswith("_"):
            # attrs would take it as `name.lstrip("_")` in __init__: not the wire name
            raise TypeError(f"{cls.__name__}.{a.name}: a header field's name is its wire name; no leading '_'")
        specs.append(FieldSpec(a.name, meta.kind, meta.required, a.default))
    setattr(cls, _SPECS, tuple(specs))
    if java_fast_codes:
        JAVA_FAST_CODES_HEADERS.add(cls)
    return cls


def header_fields(cls: type) -> tuple[FieldSpec, ...]:
    """The fields of header class ``cls`` in declaration (= wire) order."""
    try:
        return cls.__dict__[_SPECS]
    except (KeyError, AttributeError):
        raise TypeError(f"{cls!r} is not a custom header class (use @header)") from None


def is_header_class(cls: Any) -> bool:
    return isinstance(cls, type) and _SPECS in cls.__dict__
