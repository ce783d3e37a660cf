"""Pure, I/O-free codecs for RocketMQ's remoting wire format.

Nothing in this package touches sockets, files, clocks or trio: functions and small
state machines over bytes, in the manner of h11 and wsproto.
"""
