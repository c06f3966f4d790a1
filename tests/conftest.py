"""Suite-wide settings. In CI (``CI=true``) property tests draw a fixed sequence of
examples, so a landing run is reproducible; locally they explore new examples each run."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
