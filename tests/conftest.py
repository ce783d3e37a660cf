"""Settings every test shares: the hypothesis profile.

Hypothesis's default 200 ms deadline per example measures the machine, not the code:
under coverage or on a busy CI box a correct test failed on it. The ``trocket`` profile
has no deadline and is loaded by default; ``HYPOTHESIS_PROFILE=<name>`` picks another
registered profile (hypothesis's own ``default``, say).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("trocket", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "trocket"))
