"""Codecs generated from a header's declaration: Java's ``FastCodesHeader`` idea without
writing each one by hand.

:func:`compile_codec` writes, for one ``@header`` class, the source of a decode and an
encode function, field by field in declaration order, and compiles it once (the way
attrs generates ``__init__``). The result has no loop over fields and no per-field
hook dispatch at run time: one ext lookup per field, the usual values converted inline,
the class, the defaults and the helpers bound as globals.

The rules are the generic path's (:mod:`.generic`), and so are the errors:

* decode: a required field that is absent or ``None`` raises ``missing(header, name)``;
  an absent optional field takes its default. A ``str`` value is taken as given. An int
  spelled canonically in -1..1023 comes from a table, a bool spelled as in
  :data:`._java.BOOLS` likewise, an int of plain ASCII digits short enough to be in
  range (fewer than 10 for int32, 19 for int64) from ``int()``; any other value goes
  through the same parser of :mod:`._java` the generic path uses, and its
  ``ValueError`` becomes the same :func:`._java.value_error`. ``ext=None`` decodes like ``{}``; unknown keys are ignored.
* encode: declaration order, ``None`` left out, each value as the generic hook writes it
  (an exact ``int`` by table or ``str``, anything else by :func:`._java.format_int`).
* encode_wire: the same fields in the order Java writes them on the wire for a header
  that is not a ``FastCodesHeader`` -- the extFields ``HashMap``'s
  (:mod:`~trocket.codecs.java_hashmap`) --, the order of the whole field set computed
  once when the codec is made: a header whose fields are all set is one dict display
  (the serializer's merge would otherwise reorder every command's fields).

``tests/codecs/test_custom_header_compiled.py`` holds both paths to that by hypothesis.

Objects are made with ``object.__new__`` and slot stores when that is what ``__init__``
would do (a slotted attrs class without validators, converters, ``__setattr__`` hooks,
``__attrs_pre_init__``/``__attrs_post_init__``, a hand-written ``__init__`` or factory
defaults); otherwise the generated decoder collects keywords and calls the class, as
the generic path does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import attrs

from ..accel import accelerated
from ..java_hashmap import hashmap_order, hashmap_reordered
from ._java import (
    BOOLS,
    format_double,
    format_int,
    missing,
    parse_bool,
    parse_double,
    parse_int32,
    parse_int64,
    value_error,
)
from ._spec import FieldSpec, header_fields

__all__ = ["HeaderCodec", "compile_codec", "codec_source", "specialize_codec"]


class HeaderCodec(NamedTuple):
    """A header class's conversions: ext fields -> object, object -> ext fields (in
    declaration order, and in Java's wire order for a non-FastCodes header)."""

    decode: Callable[[Mapping[str, str] | None], Any]
    encode: Callable[[Any], dict[str, str]]
    #: None in a hand-written pair: registering it makes one from ``encode``
    encode_wire: Callable[[Any], dict[str, str]] | None = None


#: Canonical spellings of the ints most fields carry, and back.
_SI: dict[str, int] = {str(i): i for i in range(-1, 1024)}
_SS: dict[int, str] = {i: t for t, i in _SI.items()}


def _convert(parse: Callable[[Any], Any], value: Any, header: str, name: str) -> Any:
    """``parse(value)``, its ``ValueError`` turned into the generic path's error."""
    try:
        return parse(value)
    except ValueError as exc:
        raise value_error(header, name, value, exc) from None


def _stores_directly(cls: type) -> bool:
    """Whether ``object.__new__`` plus one store per field is what ``__init__`` does."""
    if hasattr(cls, "__attrs_init__") or hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        return False  # a hand-written __init__, or code attrs' __init__ runs
    if cls.__setattr__ is not object.__setattr__:
        return False  # on_setattr hooks (validators, converters) or a frozen class
    return all(
        a.validator is None and a.converter is None and a.init and not isinstance(a.default, attrs.Factory)
        for a in attrs.fields(cls)
    )


def _decode_value(spec: FieldSpec, target: str, indent: str) -> list[str]:
    """Lines converting the ext value ``v`` of ``spec`` into ``target``."""
    name = repr(spec.name)
    if spec.kind == "str":
        return [f"{indent}{target} = v"]
    if spec.kind == "int":  # mostly small: the table first
        return [
            f"{indent}x = _si(v) if v.__class__ is str else None",
            f"{indent}if x is None:",
            f"{indent}    x = int(v) if v.__class__ is str and v.isdigit() and v.isascii() and len(v) < 10 "
            f"else _convert(_parse_int32, v, _H, {name})",
            f"{indent}{target} = x",
        ]
    if spec.kind == "long":  # offsets, timestamps: mostly beyond the table
        return [
            f"{indent}{target} = int(v) if v.__class__ is str and v.isdigit() and v.isascii() and len(v) < 19 "
            f"else _convert(_parse_int64, v, _H, {name})",
        ]
    if spec.kind == "bool":
        return [
            f"{indent}x = _bools(v) if v.__class__ is str else None",
            f"{indent}{target} = _convert(_parse_bool, v, _H, {name}) if x is None else x",
        ]
    if spec.kind == "double":
        return [f"{indent}{target} = _convert(_parse_double, v, _H, {name})"]
    raise ValueError(f"unknown header field kind {spec.kind!r}")  # pragma: no cover (field() checks)


def _encode_value(spec: FieldSpec, v: str) -> str:
    """The expression writing local ``v`` (not ``None``) as the generic hook does."""
    if spec.kind == "str":
        return v
    if spec.kind in ("int", "long"):
        return f"(_ss({v}) or str({v})) if {v}.__class__ is int else _format_int({v})"
    if spec.kind == "bool":
        return f"'true' if {v} else 'false'"
    return f"_format_double({v})"


def codec_source(cls: type) -> tuple[str, dict[str, Any]]:
    """The source of ``cls``'s generated codec and the globals it runs with."""
    specs = header_fields(cls)
    direct = _stores_directly(cls)
    namespace: dict[str, Any] = {
        "_cls": cls,
        "_H": cls.__name__,
        "_new": object.__new__,
        "_EMPTY": {},
        "_missing": missing,
        "_si": _SI.get,
        "_ss": _SS.get,
        "_bools": BOOLS.get,
        "_convert": _convert,
        "_parse_int32": parse_int32,
        "_parse_int64": parse_int64,
        "_parse_bool": parse_bool,
        "_parse_double": parse_double,
        "_format_int": format_int,
        "_format_double": format_double,
        "_reordered": hashmap_reordered,
    }
    lines = ["def decode(ext):", "    if ext is None:", "        ext = _EMPTY", "    get = ext.get"]
    lines.append("    o = _new(_cls)" if direct else "    kw = {}")
    for i, spec in enumerate(specs):
        target = f"o.{spec.name}" if direct else f"kw[{spec.name!r}]"
        lines.append(f"    v = get({spec.name!r})")
        if spec.required:
            lines += ["    if v is None:", f"        raise _missing(_H, {spec.name!r})"]
            lines += _decode_value(spec, target, "    ")
        elif direct:
            namespace[f"_d{i}"] = spec.default
            lines += ["    if v is None:", f"        {target} = _d{i}", "    else:"]
            lines += _decode_value(spec, target, "        ")
        else:
            lines.append("    if v is not None:")
            lines += _decode_value(spec, target, "        ")
    lines.append("    return o" if direct else "    return _cls(**kw)")

    lines.append("def encode(o):")
    if not specs:
        lines.append("    return {}")
    for i, spec in enumerate(specs):
        lines.append(f"    v{i} = o.{spec.name}")
    if specs:
        lines.append("    out = {")
        for i, spec in enumerate(specs):
            value = _encode_value(spec, f"v{i}")
            lines.append(f"        {spec.name!r}: {f'v{i}' if spec.kind == 'str' else f'v{i} if v{i} is None else {value}'},")
        lines.append("    }")
        for i, spec in enumerate(specs):
            lines += [f"    if v{i} is None:", f"        del out[{spec.name!r}]"]
        lines.append("    return out")

    lines.append("def encode_wire(o):")
    if not specs:
        lines.append("    return {}")
    else:
        index = {spec.name: i for i, spec in enumerate(specs)}
        for i, spec in enumerate(specs):
            lines.append(f"    v{i} = o.{spec.name}")
        every = " and ".join(f"v{i} is not None" for i in range(len(specs)))
        lines.append(f"    if {every}:")
        for i, spec in enumerate(specs):  # converted in declaration order: the same error first
            if spec.kind != "str":
                lines.append(f"        v{i} = {_encode_value(spec, f'v{i}')}")
        lines.append("        return {")
        for name in hashmap_order(spec.name for spec in specs):
            lines.append(f"            {name!r}: v{index[name]},")
        lines.append("        }")
        lines.append("    return _reordered(encode(o))")
    return "\n".join(lines) + "\n", namespace


def compile_codec(cls: type) -> HeaderCodec:
    """Generate and compile ``cls``'s codec (see the module docstring). ``TypeError``
    if ``cls`` is not a ``@header`` class."""
    source, namespace = codec_source(cls)
    filename = f"<trocket generated header codec {cls.__module__}.{cls.__qualname__}>"
    exec(compile(source, filename, "exec"), namespace)
    decode, encode, encode_wire = namespace["decode"], namespace["encode"], namespace["encode_wire"]
    decode.__qualname__ = f"{cls.__qualname__}.<generated decode>"
    encode.__qualname__ = f"{cls.__qualname__}.<generated encode>"
    encode_wire.__qualname__ = f"{cls.__qualname__}.<generated encode_wire>"
    specs = tuple(header_fields(cls))
    wire_order = tuple(hashmap_order(spec.name for spec in specs))
    decode, encode_wire = specialize_codec(cls, specs, wire_order, _stores_directly(cls), BOOLS, decode, encode_wire)
    return HeaderCodec(decode, encode, encode_wire)


def specialize_codec(
    cls: type,
    specs: tuple[FieldSpec, ...],
    wire_order: tuple[str, ...],
    direct: bool,
    bools: dict[str, bool],
    decode: Callable[[Mapping[str, str] | None], Any],
    encode_wire: Callable[[Any], dict[str, str]],
) -> tuple[Callable[[Mapping[str, str] | None], Any], Callable[[Any], dict[str, str]]]:
    """The decode and encode_wire ``cls`` runs with: its generated ones. The compiled twin
    returns its own for a class whose objects are stored ``direct`` ly with str, int, long
    and bool fields (the two conversions every call of a typed service makes, by a table
    of the fields' slots), which hand any input they do not plainly take to these."""
    return decode, encode_wire


specialize_codec = accelerated(specialize_codec)
