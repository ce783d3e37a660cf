"""Which implementation of the hot codec functions runs: compiled or pure Python.

The pure-Python functions are the reference. The optional compiled module
``trocket.codecs._accel`` (Cython, ``codecs/_accel.pyx``, built by ``setup.py`` when
the machine has a C compiler) holds a twin of some of them under the same name: it
reads the input real traffic carries and hands anything else, every error included,
to the pure function, so both return the same thing for the same input
(``tests/codecs/test_accel.py`` checks it, and CI runs the codec tests on both).

Each module that owns an accelerated function ends with
``name = accelerated(name)``; that is the only switch. A twin that needs objects of a
module above the wire part (a header class) gets them from that module
(:func:`provide`): the compiled module imports only the wire part, as this one does. ``TROCKET_PURE=1`` in the
environment when trocket is imported forces the pure path; so does a missing or
stale build (a ``.so`` older than this file's :data:`ABI`), with :data:`REASON`
saying why. ``trocket --version`` prints which path is active.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

__all__ = ["ABI", "ACTIVE", "REASON", "accelerated", "provide", "pure", "describe"]

#: The twins' contract version; must equal ``_accel.ABI``.
ABI = 28

F = TypeVar("F", bound=Callable)

_PURE: dict[str, Callable] = {}


def _load():
    if os.environ.get("TROCKET_PURE", "") not in ("", "0"):
        return None, "TROCKET_PURE is set"
    try:
        from . import _accel
    except ImportError as exc:
        return None, f"not built ({exc})"
    if getattr(_accel, "ABI", None) != ABI:
        return None, f"stale build (ABI {getattr(_accel, 'ABI', None)}, want {ABI}): reinstall"
    return _accel, f"compiled ({os.path.basename(_accel.__file__)})"


_accel, REASON = _load()
#: True when the compiled twins are in use.
ACTIVE = _accel is not None


def accelerated(fn: F) -> F:
    """The compiled twin of the pure function ``fn`` (``fn`` registered as its
    fallback), or ``fn`` itself when the accelerator is not active."""
    _PURE[fn.__name__] = fn
    if _accel is None:
        return fn
    _accel.set_pure(fn.__name__, fn)
    return getattr(_accel, fn.__name__)


def provide(name: str, value: object) -> None:
    """Hand the compiled twins ``value``, an object they use of a module above the wire
    part (header classes, a helper): that module calls this when imported, before its
    ``accelerated`` lines, so the compiled module imports none of them. Until it has,
    those twins hand every call to the pure function."""
    if _accel is not None:
        _accel.provide(name, value)


def pure(name: str) -> Callable:
    """The pure-Python reference of an accelerated function (for tests and benchmarks)."""
    return _PURE[name]


def describe() -> str:
    """One line: which path is active and why."""
    return f"codec accelerator: {'on' if ACTIVE else 'off'}, {REASON}"
