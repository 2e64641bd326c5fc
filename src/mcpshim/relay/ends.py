"""What both ends of the relay share, and nothing else to load: the directions, the limit
of copies waiting for the recorder, the relay's pipes and how an end is let go. The pump
child starts from here as a session starts (supervise.launch), before the recorder's
machinery (relay.core) is loaded."""

from __future__ import annotations

import os
from datetime import datetime, timezone

__all__ = ["C2S", "COPY_LIMIT", "S2C", "close_end", "iso", "relay_pipe"]

C2S = "client->server"
S2C = "server->client"
#: copies waiting for a recorder that fell behind, at most; past it they are dropped (and
#: the drop recorded): 1.5 GB queued in 4 s before, with a server that kept writing
COPY_LIMIT = 64 << 20


def iso(t: float) -> str:
    """ISO 8601 UTC with microseconds (the time key of every mcp-* event)."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")


def relay_pipe() -> tuple[int, int]:
    """A pipe of the relay's, of the default size (64 KiB).

    Every pipe page counts against the user's pipe-user-pages-soft (64 MiB by default), past
    which the kernel gives each new pipe of that user, in any program, two pages: the relay
    child grows its pipes only in a session that carries large messages (relay.child).
    """
    return os.pipe()


def close_end(fd: int) -> None:
    """Close our end; a standard stream becomes /dev/null so its number is never reused."""
    try:
        if fd <= 2:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, fd)
            os.close(null)
        else:
            os.close(fd)
    except OSError:
        pass
