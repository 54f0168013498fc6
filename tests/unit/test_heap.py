"""glibc's mmap threshold fixed by srm.replication.heap, in a fresh process: it holds for the life
of the process it is set in."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# A process that frees one large block (glibc then raises its mmap threshold to that size), then
# holds 40 buffers of 1 MiB, each followed by a small allocation that stays (as the copier's objects
# do), and frees the buffers: its RSS before and after, in MiB.
_BUFFERS = """
import ctypes, sys
from srm.replication.heap import fix_mmap_threshold
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 // 2**20
large = libc.malloc(16 << 20); libc.memset(large, 1, 16 << 20); libc.free(large)
buffers, kept = [], []
for _ in range(40):
    buffers.append(libc.malloc(1 << 20))
    libc.memset(buffers[-1], 1, 1 << 20)
    kept.append(libc.malloc(2000))
held = rss()
for b in buffers:
    libc.free(b)
print(held, rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's malloc")
def test_with_the_mmap_threshold_fixed_a_large_buffer_goes_back_to_the_system_when_freed() -> None:
    def held_and_left(mode: str) -> tuple[int, int]:
        out = subprocess.run([sys.executable, "-c", _BUFFERS, mode], capture_output=True, text=True, check=True)
        held, left = out.stdout.split()
        return int(held), int(left)

    held, left = held_and_left("dynamic")
    assert held - left < 8, "glibc's own threshold keeps freed buffers in the heap (the case fixed)"
    held, left = held_and_left("fixed")
    assert held - left >= 38, f"40 MiB of buffers freed, RSS {held} -> {left} MiB"
