"""A Dask scheduler address checked before `distributed.Client` is given it.

Given a malformed address, `distributed` raises ValueErrors from deep inside; given the address of a
service that is not a Dask scheduler (an SSH or HTTP server), it reads the service's first bytes as a
frame length and tries to allocate that much (3 EiB was seen). So the address is parsed here (scheme,
host, port) and, for `tcp://`, a plain socket reads the scheduler's handshake first, under a time
bound: a Dask scheduler sends a small handshake message as soon as a client connects (an 8-byte
little-endian length, then the frame count and each frame's length), and anything else is refused
with one line naming `scheduler`.
"""

from __future__ import annotations

import re
import socket
import struct
import time

from lpxsim.core.errors import UserError

SCHEMES = ("tcp", "tls")
DEFAULT_PORT = 8786  # Dask's scheduler port
CONNECT_TIMEOUT_S = 5.0
HANDSHAKE_TIMEOUT_S = 5.0
HANDSHAKE_MAX_BYTES = 1024**2  # a scheduler's handshake is a few hundred bytes
FRAMES_MAX = 64
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,252})$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.%A-Za-z]{2,64}$")
_EXAMPLE = "e.g. tcp://127.0.0.1:8786"


def parse_scheduler(address: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a scheduler address, or a UserError naming `scheduler`."""
    text = str(address).strip()
    if not text or len(text) > 300 or not text.isascii() or not text.isprintable():
        raise UserError("scheduler", f"expected a scheduler address ({_EXAMPLE}), got {str(address)[:60]!r}")
    scheme, sep, loc = text.rpartition("://")
    scheme = scheme.lower() if sep else "tcp"
    if scheme not in SCHEMES:
        raise UserError("scheduler", f"expected a {' or '.join(s + '://' for s in SCHEMES)} address ({_EXAMPLE}), "
                                     f"got {text[:60]!r}")
    if loc.startswith("["):
        host, close, tail = loc[1:].partition("]")
        ok = bool(close) and bool(_IPV6.match(host)) and (tail == "" or (tail.startswith(":") and len(tail) > 1))
        port_text = tail[1:] if tail else ""
    else:
        host, colon, port_text = loc.rpartition(":")
        if not colon:
            host, port_text = loc, ""
        ok = bool(_HOST.match(host)) and ".." not in host and not (colon and not port_text)
    if not ok:
        raise UserError("scheduler", f"expected HOST:PORT after {scheme}:// ({_EXAMPLE}), got {text[:60]!r}")
    if port_text == "":
        port = DEFAULT_PORT
    elif port_text.isdigit() and len(port_text) <= 5 and 1 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise UserError("scheduler", f"expected a port in 1..65,535 in {text[:60]!r}")
    return scheme, host, port


def _read_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _looks_like_handshake(sock: socket.socket, deadline: float) -> bool:
    """Read one Dask message's framing (bounded) and check it is self-consistent and small."""
    (total,) = struct.unpack("<Q", _read_exactly(sock, 8, deadline))
    if not 16 <= total <= HANDSHAKE_MAX_BYTES:
        return False
    body = _read_exactly(sock, total, deadline)
    (frames,) = struct.unpack_from("<Q", body)
    if not 1 <= frames <= FRAMES_MAX or 8 + 8 * frames > total:
        return False
    lengths = struct.unpack_from(f"<{frames}Q", body, 8)
    return 8 + 8 * frames + sum(lengths) == total


def check_scheduler(address: str) -> str:
    """The normalised address (`scheme://host:port`) of a reachable Dask scheduler, or a UserError."""
    scheme, host, port = parse_scheduler(address)
    shown = f"[{host}]" if ":" in host else host
    normalised = f"{scheme}://{shown}:{port}"
    if scheme != "tcp":
        return normalised  # TLS: the handshake is inside the encryption; `Client` checks it, under its timeout
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as sock:
            ok = _looks_like_handshake(sock, time.monotonic() + HANDSHAKE_TIMEOUT_S)
    except TimeoutError:
        raise UserError("scheduler", f"no Dask scheduler answered at {normalised} within "
                                     f"{CONNECT_TIMEOUT_S:g} s") from None
    except (OSError, UnicodeError) as e:  # refused, unreachable, unknown host, closed at once
        why = e.strerror or str(e) or type(e).__name__
        raise UserError("scheduler", f"cannot reach a Dask scheduler at {normalised}: {why}") from None
    if not ok:
        raise UserError("scheduler", f"the service at {normalised} is not a Dask scheduler (its first bytes are "
                                     "not a Dask handshake)")
    return normalised
