"""Golden frames, captures and the conformance runner."""
