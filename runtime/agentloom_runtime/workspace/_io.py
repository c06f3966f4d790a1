"""Blocking I/O in worker threads that a cancellation cannot leave half-done.

``asyncio.to_thread`` cannot stop a thread. If the awaiting task were cancelled and
returned at once, a write could still land after the cancelled step was resumed, racing
the resumed request. So the thread future is shielded: on cancellation we set the
``cancel`` event (scans stop early; writes ignore it and finish), wait for the thread to
end, then re-raise ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def storage_call(fn: Callable[[threading.Event], T]) -> T:
    cancel = threading.Event()
    future = asyncio.ensure_future(asyncio.to_thread(fn, cancel))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        cancel.set()
        while not future.done():
            try:
                await asyncio.wait({future})
            except asyncio.CancelledError:
                continue  # cancelled again: still wait for the I/O to end
        if not future.cancelled():
            future.exception()  # retrieved: the caller sees CancelledError
        raise
