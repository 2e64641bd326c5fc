"""The one table of credential shapes. The shim's scrubber (rendered from it by redact_sh),
the Python writers and the MCP recorder (both through redact) apply it, so a shape added
here is redacted by every writer, and a corpus test holds them to the same bytes.

Three kinds of entry:

- whole-argument rules, for one item of an argv: `--NAME=VALUE` and `--NAME VALUE` when NAME
  is a credential name, `NAME=VALUE` likewise (`GITHUB_TOKEN=...`, also after `env`), a bare
  AWS secret access key, and the short options a few commands take a password with
  (COMMANDS: `mysql -pSECRET`, `curl -u user:pw`). Those count only after that command's
  name (the shim's own, or an earlier argument such as `docker exec db mysql -pX`): `-p` is
  an ordinary flag elsewhere (`mkdir -p`, `git log -p`, `ssh -p 22`);
- text rules, applied to every argument and to composed lines (`sh -c '...'`, a parent
  shell's command line): a marker, then the secret that follows it (TextRule);
- the URL rule: the password of `scheme://user:password@host`, `@` and `/` included.

A name is a credential name when it *ends* with one of WORDS (AWS_SECRET_ACCESS_KEY,
GITHUB_TOKEN, db_password, apiKey); one that merely holds such a word elsewhere is a setting
(AWS_CA_BUNDLE, PASSWORD_FILE, --tokenizer, core.editor).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BARE_NEXT",
    "COMMANDS",
    "JOINED_OPTION_NAMES",
    "RULES",
    "SKIP_BARE",
    "URL_RULE",
    "URL_STOP",
    "WORDS",
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
URL_STOP = " \t\n\r\"'`<>"  # where the word after `scheme://` ends
URL_RULE = "url-password"


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
    text holding one of its words.

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

    def __post_init__(self) -> None:
        assert len(self.anchor) == 1 and self.anchor not in " \t\n", self
        assert bool(self.body) != bool(self.stop), self
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


WORDS: tuple[Word, ...] = (
    Word("token", "any"),
    Word("password", "any"),
    Word("passwd", "any"),
    Word("passphrase", "any"),
    Word("secret", "any"),
    Word("apikey", "any"),
    Word("accesskey", "any"),
    Word("privatekey", "any"),
    Word("authorization", "any"),
    Word("sshpass", "any"),
    Word("key", "sep"),  # api_key, apiKey, AWS_SECRET_ACCESS_KEY; not key, monkey, hotkey
    Word("pass", "word"),  # pass, db_pass; not bypass, compass
    Word("pat", "sep"),  # GH_PAT
    Word("auth", "word"),  # npm's _auth; not oauth, author
    Word("pwd", "sep"),  # MYSQL_PWD; not PWD, OLDPWD
)

#: `--NAME` alone that takes no value although NAME ends with a credential word
SKIP_BARE = ("no-", "ask-")
#: arguments (any case) after which the next argument is the secret
BARE_NEXT = ("aws_secret_access_key",)


@dataclass(frozen=True)
class CommandOptions:
    """Options a command takes a secret with. `short` letters take it glued (`-pSECRET`) or as
    the next argument; so do `long` options, or after `=`. With `operands_end`, the first
    argument that is not an option ends the scope (`sshpass -p pw ssh -p 22 host`)."""

    commands: tuple[str, ...]
    words: tuple[str, ...]  # a composed line holding one of these gets the text rules
    short: str
    long: tuple[str, ...] = ()
    operands_end: bool = False


# fmt: off
_MYSQL = (
    "mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlpump",
    "mysqlslap", "mysqlbinlog", "mariadb", "mariadb-dump", "mariadb-admin", "mariadb-import",
    "mariadb-show", "mariadb-check", "mariadb-slap", "mariadb-binlog",
)
_MONGO = (
    "mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport", "mongostat",
    "mongotop", "mongofiles",
)
# fmt: on

COMMANDS: tuple[CommandOptions, ...] = (
    # mysql reads `-p WORD` as "prompt, database WORD"; typed meaning a password, it is kept out.
    CommandOptions(_MYSQL, ("mysql", "mariadb"), "p"),
    CommandOptions(("sshpass",), ("sshpass",), "p", operands_end=True),
    CommandOptions(_MONGO, ("mongo",), "p"),
    CommandOptions(("redis-cli",), ("redis-cli",), "a"),
    CommandOptions(("curl",), ("curl",), "uU", ("--user", "--proxy-user", "--oauth2-bearer")),
)

#: option names after which a parent shell's line (NUL separators lost) is dropped
JOINED_OPTION_NAMES: tuple[str, ...] = (
    "--password",
    "--passwd",
    "--token",
    "--api-key",
    "--api_key",
    "--apikey",
    "--secret",
    "--client-secret",
    "--access-token",
    "--auth-token",
    "--private-token",
)

_TOKEN_BODY = ALNUM + "_-"


def _token(name: str, head: str, anchor: str, tail: str, min_len: int, body: str) -> TextRule:
    return TextRule(name, anchor, (Head(head, "word"),), (tail,), body=body, min_len=min_len)


def _word_heads(
    words: tuple[Word, ...], suffix: str = "", before: Before | None = None
) -> tuple[Head, ...]:
    return tuple(Head(w.word + suffix, before or w.before) for w in words)


_AUTH = tuple(w for w in WORDS if w.word == "authorization")
_OTHER = tuple(w for w in WORDS if w.word != "authorization")
_JSON_BEFORE: dict[Before, Before] = {"any": "any", "word": "word", "sep": "word"}
#: words that end an option taking its value after a blank, in a composed line
_OPTION_WORDS = (
    "passphrase", "password", "api_key", "passwd", "secret", "apikey", "token", "pass", "auth",
    "key",
)  # fmt: skip


def _header_rules(name: str, words: tuple[Word, ...]) -> tuple[TextRule, ...]:
    heads = _word_heads(words)
    json_heads = tuple(Head(w.word + '"', _JSON_BEFORE[w.before]) for w in words)
    return (
        # `Authorization: Basic ...`, `X-Api-Key: ...`, `password: ...`: the rest of the line
        TextRule(name, ":", heads, (" ", "\t"), ci=True, stop=HEADER_STOP),
        # glued (`X-Api-Key:abc`): up to `/` or `@` too, so `https://x-token:pw@host` keeps
        # its host
        TextRule(name, ":", heads, ("",), ci=True, stop=HEADER_STOP + "/@"),
        # JSON: {"token": "..."}
        TextRule(name, ":", json_heads, (' "', '"'), ci=True, stop='"'),
    )


def _command_rules(c: CommandOptions) -> tuple[TextRule, ...]:
    # `-p VALUE`, `-pVALUE`, and flags combined before the letter (`-su VALUE`)
    letters = "[" + string.ascii_letters + "]"
    tails = tuple(
        letters * k + x + s for k in (3, 2, 1, 0) for x in c.short for s in (" ", "\t")
    ) + tuple(c.short)
    blank = (Head("[ \t'\"]"),)

    def rule(heads: tuple[Head, ...], tails: tuple[str, ...]) -> TextRule:
        return TextRule(
            "option-value", "-", heads, tails, stop=VALUE_STOP, not_first="-", scope=c.words
        )

    rules = [rule(blank, tails)]
    if c.long:
        ends = tuple(dict.fromkeys(o.rsplit("-", 1)[1] for o in c.long))
        long_tails = tuple(e + s for e in ends for s in (" ", "\t", "="))
        long_tails = tuple(sorted(long_tails, key=len, reverse=True))
        rules.append(rule((Head(""),), long_tails))
    return tuple(rules)


_AWS_TAILS = (" = ", " =", "= ", ": ", "=", ":", " ", "\t")

#: every text rule, in the order they run (each over the previous one's output); the URL
#: rule runs where URL_RULE stands
RULES: tuple[TextRule | str, ...] = (
    TextRule("private-key", "Y", (Head("PRIVATE KE"),), (" BLOCK-----", "-----"), stop="-"),
    _token("github-token", "gh[oprsu]", "_", "", 30, ALNUM),
    _token("github-token", "github_", "p", "at_", 30, ALNUM + "_"),
    _token("api-key", "sk", "-", "", 20, _TOKEN_BODY),
    _token("slack-token", "xox[abeprs]", "-", "", 10, ALNUM + "-"),
    _token("aws-access-key", "A[KS]", "I", "A", 16, string.ascii_uppercase + string.digits),
    _token("gitlab-token", "glpat", "-", "", 20, _TOKEN_BODY),
    _token("npm-token", "npm", "_", "", 36, ALNUM),
    _token("google-api-key", "AI", "z", "a", 35, _TOKEN_BODY),
    _token("jwt", "ey", "J", "", 30, _TOKEN_BODY + "."),
    URL_RULE,
    *(
        TextRule(
            "authorization",
            a,
            (Head("", "word"),),
            ("earer ", "earer\t"),
            ci=True,
            stop=VALUE_STOP,
            min_len=8,
        )
        for a in "Bb"
    ),
    *_header_rules("authorization", _AUTH),
    *_header_rules("credential-name", _OTHER),
    # NAME=VALUE inside text: `GITHUB_TOKEN=... make`, `?access_token=...&`
    TextRule("credential-name", "=", _word_heads(WORDS), ci=True, stop=VALUE_STOP),
    # `--password VALUE` inside a composed line (`--password=` is the rule above)
    TextRule(
        "option-value",
        "-",
        tails=tuple(w + s for w in _OPTION_WORDS for s in (" ", "\t")),
        ci=True,
        stop=VALUE_STOP,
        not_first="-",
    ),
    *(r for c in COMMANDS for r in _command_rules(c)),
    *(
        TextRule("aws-secret-key", a, (Head(h),), _AWS_TAILS, ci=True, stop=VALUE_STOP)
        for a, h in (("y", "secret_access_ke"), ("Y", "SECRET_ACCESS_KE"))
    ),
)
