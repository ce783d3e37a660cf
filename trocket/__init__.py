"""trocket: Apache RocketMQ's remoting protocol on trio.

The distribution installs one import namespace; the repository's top-level folders
are its subpackages: ``trocket.codecs`` (pure wire formats), ``trocket.remoting``
(the trio RPC framework), ``trocket.broker``, ``trocket.client``,
``trocket.conformance`` and ``trocket.spark``.

``trocket.__version__`` is the installed distribution's version
(:func:`trocket._version.version`), read when first asked for.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from trocket._version import version

        return version()
    raise AttributeError(f"module 'trocket' has no attribute {name!r}")
