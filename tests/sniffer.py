"""Watch every byte that crosses the loopback interface, and every process's command line, for
given strings: how a test proves a secret never travelled in clear between the processes of a job
(Spark RPC and block transfers carry the pickled tasks, py4j the driver's calls into its JVM).

Needs a raw packet socket (root or CAP_NET_RAW). TCP payloads are searched per connection with the
tail of the previous segment, so a string split across two segments is still found; loopback does
not lose or reorder segments. The kernel counts packets the socket had to drop: a capture that
dropped any proves nothing, and :meth:`LoopbackCapture.stop` says so.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from collections import Counter
from pathlib import Path

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4  # loopback shows each packet twice: as sent and as received
ETHERNET_HEADER = 14
BUFFER_BYTES = 256 * 1024 * 1024
SO_RCVBUFFORCE = 33  # Linux; the socket module does not name it


def can_capture() -> bool:
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)).close()
    except (PermissionError, AttributeError, OSError):
        return False
    return True


class LoopbackCapture:
    """Counts, per needle, how often it crossed ``lo`` in a TCP payload while running."""

    def __init__(self, needles: list[bytes]) -> None:
        self.needles = needles
        self.hits: Counter[bytes] = Counter()
        self.payload_bytes = 0
        self.dropped = 0
        self._tails: dict[tuple[bytes, bytes], bytes] = {}
        self._keep = max(len(n) for n in needles) - 1
        self._stop = threading.Event()
        self._socket = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._socket.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, BUFFER_BYTES)
        self._socket.bind(("lo", 0))
        self._thread = threading.Thread(target=self._run, name="loopback-capture", daemon=True)

    def __enter__(self) -> LoopbackCapture:
        self._statistics()  # reading the counters resets them
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> int:
        """Stop; the number of packets the kernel dropped (0 for a capture that saw everything)."""
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self.dropped = self._statistics()[1]
            self._socket.close()
        return self.dropped

    def _statistics(self) -> tuple[int, int]:
        packets, drops = struct.unpack("II", self._socket.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        return packets, drops

    def _run(self) -> None:
        while True:
            ready, _, _ = select.select([self._socket], [], [], 0.2)
            if not ready:
                if self._stop.is_set():
                    return  # drained
                continue
            frame, address = self._socket.recvfrom(262144)
            if address[2] != PACKET_OUTGOING:
                self._inspect(frame[ETHERNET_HEADER:])

    def _inspect(self, packet: bytes) -> None:
        version = packet[0] >> 4
        if version == 4 and packet[9] == socket.IPPROTO_TCP:
            total = struct.unpack("!H", packet[2:4])[0]
            header = (packet[0] & 0x0F) * 4
            ends, segment = packet[12:20], packet[header:total]
        elif version == 6 and packet[6] == socket.IPPROTO_TCP:
            ends, segment = packet[8:40], packet[40 : 40 + struct.unpack("!H", packet[4:6])[0]]
        else:
            return
        flow = (ends, segment[:4])  # addresses, then source and destination ports
        payload = segment[(segment[12] >> 4) * 4 :]
        if not payload:
            return
        self.payload_bytes += len(payload)
        window = self._tails.get(flow, b"") + payload
        for needle in self.needles:
            self.hits[needle] += window.count(needle)
        self._tails[flow] = window[-self._keep :] if self._keep else b""


class CommandLineWatch:
    """Samples every process's command line while running; :attr:`seen` holds those containing a needle."""

    def __init__(self, needle: bytes, every_s: float = 0.1) -> None:
        self.needle = needle
        self.every_s = every_s
        self.seen: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cmdline-watch", daemon=True)

    def __enter__(self) -> CommandLineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.samples += 1
            for path in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    line = path.read_bytes()
                except OSError:
                    continue
                if self.needle in line:
                    self.seen.append(line.replace(b"\0", b" ").decode(errors="replace"))
