"""The building blocks of the redaction table (log.redact_rules, log.redact_vendors): what a
text rule, a credential word and a command's own options are, and the characters that end a
value. See redact_rules for how they are used."""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ALNUM",
    "COMMAND_STOP",
    "COOKIE_STOP",
    "HEADER_STOP",
    "MAX_SPECIALS",
    "SHELL_OPEN",
    "URL_RULE",
    "URL_STOP",
    "VALUE_STOP",
    "Before",
    "CommandOptions",
    "Head",
    "TextRule",
    "Word",
    "glob_items",
]

Before = Literal["any", "word", "sep"]
ALNUM = string.ascii_letters + string.digits
VALUE_STOP = " \t\n\r\"'`;&|<>"  # where a value in a shell line or a query string ends
HEADER_STOP = "\n\r\"'`;&|<>"  # a header value runs on over blanks
COOKIE_STOP = "\n\r\"'`"  # a cookie header runs on over `;` (`a=1; session=...`)
COMMAND_STOP = "\n\r;&|<>`"  # the rest of one command of a composed line
URL_STOP = " \t\n\r\"'`<>"  # where the word after `scheme://` ends
URL_RULE = "url-password"
#: what changes how a shell reads the characters after it: quotes, `$'`, a backslash
SHELL_OPEN = "'\"\\"
#: a shell-word value holding more of SHELL_OPEN than this runs to the end of the text (a
#: bound on the scrubber's work that can only make it take more)
MAX_SPECIALS = 32


def glob_items(pattern: str) -> tuple[str, ...]:
    """A head or tail as the characters each position may hold: `gh[oprsu]` is g, h, oprsu."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            end = pattern.index("]", i + 2)
            out.append(pattern[i + 1 : end])
            i = end + 1
        else:
            out.append(pattern[i])
            i += 1
    return tuple(out)


@dataclass(frozen=True)
class Head:
    """Text that must end right before the anchor. `before` says what may precede it:
    anything; no letter or digit (`word`); one of `_.-`, or a lower-case letter when the
    head starts upper case, as in camelCase (`sep`). The start of the text passes `word`
    but not `sep`."""

    glob: str
    before: Before = "any"


@dataclass(frozen=True)
class TextRule:
    """A secret inside text: one of `heads`, the `anchor` character, one of `tails` (the
    first that matches), then the secret, a run of `body` characters (or of characters not
    in `stop`) at least `min_len` long, which the marker replaces. Heads and tails are
    literal text with `[...]` sets, in any letter case when `ci`; neither may hold the
    anchor, which is never blank. A run starting with one of `not_first` is no secret (the
    value of `--password` in a line is not the next option). `scope` limits the rule to
    text holding one of its words. With `sh_word`, the run is read as a shell word is: a stop
    inside quotes (`'...'`, `"..."`, `$'...'`) or after a backslash does not end it (and
    past MAX_SPECIALS quotes and backslashes it runs to the end of the text).

    The anchor is what makes the shell scrubber linear: it splits the text at every anchor
    in one pass and looks at each piece once (see redact_sh)."""

    name: str
    anchor: str
    heads: tuple[Head, ...] = (Head(""),)
    tails: tuple[str, ...] = ("",)
    ci: bool = False
    body: str = ""
    stop: str = ""
    min_len: int = 1
    not_first: str = ""
    scope: tuple[str, ...] = ()
    sh_word: bool = False  # the run is a shell word: quoted parts go on past a stop

    def __post_init__(self) -> None:
        assert len(self.anchor) == 1 and self.anchor not in " \t\n", self
        assert bool(self.body) != bool(self.stop), self
        assert not self.sh_word or (self.stop and self.anchor not in self.stop + SHELL_OPEN), self
        assert self.tails and self.heads, self
        fold = str.lower if self.ci else str
        for part in [h.glob for h in self.heads] + list(self.tails):
            for chars in glob_items(part):
                assert fold(self.anchor) not in fold(chars), (self.name, part)
        lengths = [len(glob_items(t)) for t in self.tails]
        assert lengths == sorted(lengths, reverse=True), self  # longest tail first

    def in_run(self, ch: str) -> bool:
        return ch in self.body if self.body else ch not in self.stop


@dataclass(frozen=True)
class Word:
    """A credential word that ends a name: `token` ends GITHUB_TOKEN and accessToken."""

    word: str
    before: Before


@dataclass(frozen=True)
class CommandOptions:
    """Options a command takes a secret with. `short` letters take it glued (`-pSECRET`) or as
    the next argument; so do `long` options, or after `=`. With `operands_end`, the first
    argument that is not an option ends the scope (`sshpass -p pw ssh -p 22 host`). A flag
    holding a letter of `rest` makes every argument after it secret. With `sub`, the options
    count only once one of those words came after the command (`docker login -p`, not
    `docker run -p 80:80`); with `operand`, the first argument after it that is no option
    is the secret (`vault login TOKEN`). With `split`, only what follows that character in
    an option's value is (`smbclient -U user%PASSWORD`)."""

    commands: tuple[str, ...]
    words: tuple[str, ...]  # a composed line holding one of these gets the text rules
    short: str
    long: tuple[str, ...] = ()
    operands_end: bool = False
    #: letters of a flag after which every later argument is secret (`htpasswd -b FILE USER
    #: PASSWORD`: the password comes last; file and user go with it)
    rest: str = ""
    sub: tuple[str, ...] = ()
    operand: bool = False
    split: str = ""
