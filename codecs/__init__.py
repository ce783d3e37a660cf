"""Pure, I/O-free codecs for RocketMQ's remoting wire format.

Nothing in this package touches sockets, files, clocks or trio: functions and small
state machines over bytes, in the manner of h11 and wsproto.
"""

# The command module first, whatever is imported: its last lines install its compiled
# builder (``build_command = accelerated(build_command)``), which loads the compiled
# module, which imports the command module in turn: that works only when the command
# module began loading first (a partly loaded accel module has no ``accelerated`` yet).
from . import command as _command_module  # noqa: E402,F401
