"""Golden frames and the conformance checker (``trocket conformance check``); captures
and the replay runner are planned (issue 8)."""
