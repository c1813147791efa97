"""Memory a request freed, given back to the system when the request ends.

glibc's allocator keeps freed blocks for reuse, and with images of ever new sizes the blocks it keeps rarely fit
the next request: 120 one-step images at 120 sizes (embedded model, eager) left a process 219 MB larger, 48 MB
after `malloc_trim(0)`. So each request ends by trimming. Elsewhere (macOS, musl, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def give_back() -> bool:
    """Return the heap's free pages to the system; False where the C library cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
