"""argparse ``type=`` functions that check a number's range, so a bad value is refused
with the option's own name (``argument --timeout: -1 is not a positive number``) and
never reaches a library check that names an internal field (``send_timeout``)."""

from __future__ import annotations

import argparse
import os

__all__ = ["NAMESRV_HELP", "namesrv_default", "non_negative_int", "positive_float", "positive_int"]


def _number(kind: type, text: str) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if kind is float and value != value:  # NaN
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
    return value


def positive_float(text: str) -> float:
    value = _number(float, text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def positive_int(text: str) -> int:
    value = _number(int, text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer (1 or more)")
    return value


def non_negative_int(text: str) -> int:
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not 0 or more")
    return value


DEFAULT_NAMESRV = "127.0.0.1:9876"


def namesrv_default() -> str:
    """``--namesrv``'s default: ``$NAMESRV_ADDR`` (as RocketMQ's tools read it), else
    127.0.0.1:9876."""
    return os.environ.get("NAMESRV_ADDR", "").strip() or DEFAULT_NAMESRV


NAMESRV_HELP = "name servers, host:port[;host:port...] (default $NAMESRV_ADDR, else 127.0.0.1:9876)"
