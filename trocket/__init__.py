"""trocket: Apache RocketMQ's remoting protocol on trio.

The distribution installs one import namespace; the repository's top-level folders
are its subpackages: ``trocket.codecs`` (pure wire formats), ``trocket.remoting``
(the trio RPC framework), ``trocket.broker``, ``trocket.client``,
``trocket.conformance`` and ``trocket.spark``.
"""

__version__ = "0.1.0"
