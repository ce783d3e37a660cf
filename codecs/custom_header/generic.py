"""The generic custom-header path: any ``@header`` class, driven by its field specs.

The counterpart of Java's reflective ``RemotingCommand.decodeCommandCustomHeader`` /
``makeCustomHeaderToNet``. Built on one module-level, preconfigured cattrs
:data:`converter`:

* each field kind is a ``NewType`` (:data:`JavaInt`, :data:`JavaLong`, ...) with a
  structure hook (str -> value, the strict rules of :mod:`._java`) and an unstructure
  hook (value -> Java ``toString``);
* header classes get structure/unstructure hooks from a hook *factory*, which walks the
  class's fields in declaration order with the per-kind hooks fetched once from the
  converter.

Why a loop and not ``cattrs.gen.make_dict_structure_fn``: the generated function
structures fields that have defaults first and required ones last, so with several bad
fields it would not report the first one in declaration order (the order of Java's
field loop, and the one the fast path and the tests use). The loop does.

Rules (identical on the fast path; tests hold both to them). Stricter than Java on
purpose: 4.9.x's ``decodeCommandCustomHeader`` catches and only logs both a missing
``@CFNotNull`` field and a ``NumberFormatException``, leaving the field null, and
``FastCodesHeader.getAndCheckNotNull`` only logs too; here both are errors.

* decode: a missing or null (``None``) value of a required field raises
  :class:`CustomHeaderError` "the custom field <name> is null"; of an optional field
  keeps the default. A value that does not parse raises :class:`CustomHeaderError`
  naming the field and the value. Unknown ext fields are ignored. ``ext=None`` (a frame
  without extFields) decodes like ``{}``; Java would skip all checks there.
* encode: fields in declaration order, ``None`` fields omitted, values as Java's
  ``toString`` writes them. Values are not range-checked on encode.
* ext values are strings (the JSON header codec turns client ints/bools into strings).
  A non-string value for an int/long/bool/double field is a :class:`CustomHeaderError`;
  a ``str`` field takes the value as given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NewType, TypeVar

import cattrs

from ._java import (
    format_bool,
    format_double,
    format_int,
    missing,
    parse_bool,
    parse_double,
    parse_int32,
    parse_int64,
    value_error,
)
from ._spec import header_fields, is_header_class

__all__ = [
    "converter",
    "generic_decode",
    "generic_encode",
    "JavaString",
    "JavaInt",
    "JavaLong",
    "JavaBool",
    "JavaDouble",
    "KIND_TYPES",
]

T = TypeVar("T")

JavaString = NewType("JavaString", str)
JavaInt = NewType("JavaInt", int)
JavaLong = NewType("JavaLong", int)
JavaBool = NewType("JavaBool", bool)
JavaDouble = NewType("JavaDouble", float)

#: Field kind -> the type whose converter hooks implement it.
KIND_TYPES: dict[str, Any] = {
    "str": JavaString,
    "int": JavaInt,
    "long": JavaLong,
    "bool": JavaBool,
    "double": JavaDouble,
}

converter = cattrs.Converter(detailed_validation=False)

converter.register_structure_hook(JavaString, lambda value, _: value)
converter.register_structure_hook(JavaInt, lambda value, _: parse_int32(value))
converter.register_structure_hook(JavaLong, lambda value, _: parse_int64(value))
converter.register_structure_hook(JavaBool, lambda value, _: parse_bool(value))
converter.register_structure_hook(JavaDouble, lambda value, _: parse_double(value))

converter.register_unstructure_hook(JavaString, lambda value: value)
converter.register_unstructure_hook(JavaInt, format_int)
converter.register_unstructure_hook(JavaLong, format_int)
converter.register_unstructure_hook(JavaBool, format_bool)
converter.register_unstructure_hook(JavaDouble, format_double)


def _make_structure_hook(cls: type) -> Callable[[Any, type], Any]:
    header = cls.__name__
    plan = tuple(
        (
            spec.name,
            spec.required,
            converter.get_structure_hook(KIND_TYPES[spec.kind]),
            KIND_TYPES[spec.kind],
        )
        for spec in header_fields(cls)
    )

    def structure_header(ext: Mapping[str, str] | None, _: type = cls) -> Any:
        if ext is None:
            ext = {}
        values: dict[str, Any] = {}
        for name, required, hook, kind_type in plan:
            raw = ext.get(name)
            if raw is None:
                if required:
                    raise missing(header, name)
                continue
            try:
                values[name] = hook(raw, kind_type)
            except ValueError as exc:
                raise value_error(header, name, raw, exc) from None
        return cls(**values)

    return structure_header


def _make_unstructure_hook(cls: type) -> Callable[[Any], dict[str, str]]:
    plan = tuple(
        (spec.name, converter.get_unstructure_hook(KIND_TYPES[spec.kind]))
        for spec in header_fields(cls)
    )

    def unstructure_header(obj: Any) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, hook in plan:
            value = getattr(obj, name)
            if value is not None:
                out[name] = hook(value)
        return out

    return unstructure_header


converter.register_structure_hook_factory(is_header_class, _make_structure_hook)
converter.register_unstructure_hook_factory(is_header_class, _make_unstructure_hook)


def generic_decode(cls: type[T], ext: Mapping[str, str] | None) -> T:
    """Decode ``ext`` into header class ``cls`` the generic way (see the module docs)."""
    if not is_header_class(cls):
        raise TypeError(f"{cls!r} is not a custom header class (use @header)")
    return converter.structure(ext, cls)


def generic_encode(obj: Any) -> dict[str, str]:
    """Encode header ``obj`` into ext fields the generic way, in declaration order."""
    if not is_header_class(type(obj)):
        raise TypeError(f"{type(obj)!r} is not a custom header class (use @header)")
    return converter.unstructure(obj)
