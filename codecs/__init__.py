"""Pure, I/O-free codecs for RocketMQ's remoting wire format.

Nothing in this package touches sockets, files, clocks or trio: functions and small
state machines over bytes, in the manner of h11 and wsproto.
"""

# The command module first, whatever is imported: it installs its compiled builder
# (``_command = accelerated(_command)``), and the compiled module imports it in turn, which
# works only when the command module began loading first (see :mod:`.accel`).
from . import command as _command_module  # noqa: E402,F401
