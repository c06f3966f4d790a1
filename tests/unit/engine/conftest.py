from __future__ import annotations

import pytest
from support.engine import SideEffects


@pytest.fixture
def effects() -> SideEffects:
    return SideEffects()
