"""When the kernel received data on a socket, on `time.monotonic()`'s clock.

A request's times are bounded by when it reached the host, not by when Python woke up
to read it (docs/architecture.md, "Trace"); `SO_TIMESTAMPNS` stamps each received
packet (CLOCK_REALTIME, ns) and `recvmsg` hands the stamp of the last segment read.
The conversion reads both clocks at the read, so a step of the realtime clock between
arrival and read moves the stamp by that step (a slew, parts per million, does not
matter); a step of more than MAX_AGE_S makes it unbelievable and the read time is used.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

SO_TIMESTAMPNS = 35  # Linux (asm-generic); not exported by Python's socket module
_TIMESPEC = struct.Struct("@qq")
CMSG_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)
MAX_AGE_S = 10.0  # older stamps are not believed (a clock step); the caller's clock is used


def enable(sock: socket.socket) -> None:
    """Ask the kernel to stamp what `sock` receives (sockets it accepts inherit this)."""
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def stamp_monotonic(ancdata: Sequence[tuple[int, int, bytes]], now_monotonic: float,
                    now_real: float) -> float | None:
    """The receive stamp in `ancdata` as a `time.monotonic()` value, given both clocks
    read at one moment; None without a stamp or with an implausible one (ahead of now,
    or older than MAX_AGE_S)."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            t = sec + nsec * 1e-9 - (now_real - now_monotonic)
            if now_monotonic - MAX_AGE_S <= t <= now_monotonic + 1e-4:
                return min(t, now_monotonic)
    return None


def recv_stamped(sock: socket.socket, bufsize: int) -> tuple[bytes, float]:
    """`sock.recv(bufsize)` and when the kernel received that data (monotonic seconds;
    the time of the call where the kernel gave no stamp)."""
    data, _, at = _recvmsg_stamped(sock, bufsize)
    return data, at


def recvfrom_stamped(sock: socket.socket, bufsize: int
                     ) -> tuple[bytes, tuple[str, int], float]:
    """`recv_stamped` with the sender's address (`sock.recvfrom`; a datagram socket)."""
    data, address, at = _recvmsg_stamped(sock, bufsize)
    return data, (str(address[0]), int(address[1])), at


def _recvmsg_stamped(sock: socket.socket, bufsize: int) -> tuple[bytes, Any, float]:
    """The data, its sender's address (None on a connected stream) and its stamp."""
    data, anc, _, address = sock.recvmsg(bufsize, CMSG_SPACE)
    now_mono = time.monotonic()
    stamp = stamp_monotonic(anc, now_mono, time.time())
    return data, address, now_mono if stamp is None else stamp


def _resolve(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def sock_recv_stamped(loop: asyncio.AbstractEventLoop, sock: socket.socket,
                            bufsize: int) -> tuple[bytes, float]:
    """`recv_stamped` on a non-blocking socket, awaiting readiness in `loop` (what
    `loop.sock_recv` does, plus the kernel's stamp)."""
    while True:
        try:
            return recv_stamped(sock, bufsize)
        except (BlockingIOError, InterruptedError):
            pass
        ready: asyncio.Future[None] = loop.create_future()
        fd = sock.fileno()
        loop.add_reader(fd, _resolve, ready)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
