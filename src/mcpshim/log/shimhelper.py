"""The shim library's own helper: what it runs to read a parent shell's argv whole, and how
every reader knows those execs are mcpshim's work, not the family's (kept apart from the
scrubber's tables so that `sessions` can ask without loading them)."""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["HELPER_SCRIPT", "HELPER_XARGS", "is_shim_helper"]

#: what the shim library runs to read a parent shell's argv whole (lib.sh, _mcpshim_parent):
#: xargs -0 with these options, then `/bin/sh -p -c HELPER_SCRIPT sh ARG...`, which prints
#: each argument single-quoted (a quote as '\\''), a blank after each: words the library's
#: `eval` takes back exactly, in time linear in their length
HELPER_XARGS = ("-0", "-x", "-n", "2097152", "-s", "2097152")
HELPER_SCRIPT = """q() {
	IFS=\\'
	set -f
	set -- ${1}x
	n=$#
	for p; do
		[ "$n" -lt $# ] && printf '%s' "'\\\\''"
		n=$((n - 1))
		[ "$n" -eq 0 ] && p=${p%x}
		printf '%s' "$p"
	done
}
for a; do
	printf "'"
	q "$a"
	printf "' "
done"""
_HEAD = [b"/bin/sh", b"-p", b"-c", HELPER_SCRIPT.encode(), b"sh"]


def is_shim_helper(argv: Sequence[bytes]) -> bool:
    """Whether an exec is the shim library's own helper (xargs, or the sh it starts), which
    does nothing but print its arguments: mcpshim's work, not the server's."""
    if len(argv) >= 5 and list(argv[:5]) == _HEAD:
        return True
    if len(argv) == 12 and os.path.basename(argv[0]) == b"xargs":
        opts = tuple(a.decode("ascii", "replace") for a in argv[1:7])
        return opts == HELPER_XARGS and list(argv[7:]) == _HEAD
    return False
