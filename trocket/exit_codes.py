"""The exit statuses of every ``trocket`` command (the signals' own, 130 and 143, are
:mod:`trocket.interrupt`'s)."""

EXIT_OK = 0
#: the command ran and found a problem: a bad frame, a nonconforming file, a refused request
EXIT_FAIL = 1
#: bad arguments (argparse's own status)
EXIT_USAGE = 2
