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
  shell's argument): a marker, then the secret that follows it (TextRule). A value that
  ends where a shell word ends (`sh_word`) is read as the shell reads it: `-p'Pw 1'`,
  `--password="a b"`, `TOKEN=$'x\'y'` lose all of it, quotes and escapes included;
- the vendor table (VENDORS): tokens known by the prefix their vendor gives them
  (`sk_live_`, `hf_`, `SG.`...; the vendors gitleaks and detect-secrets watch for), as
  text rules;
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
    "MAX_SPECIALS",
    "RULES",
    "SHELL_OPEN",
    "SKIP_BARE",
    "URL_RULE",
    "URL_STOP",
    "VENDORS",
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
    Word("cookie", "any"),  # Cookie, --cookie, session_cookie
)

#: `--NAME` alone that takes no value although NAME ends with a credential word
SKIP_BARE = ("no-", "ask-")
#: arguments (any case) after which the next argument is the secret
BARE_NEXT = ("aws_secret_access_key",)


@dataclass(frozen=True)
class CommandOptions:
    """Options a command takes a secret with. `short` letters take it glued (`-pSECRET`) or as
    the next argument; so do `long` options, or after `=`. With `operands_end`, the first
    argument that is not an option ends the scope (`sshpass -p pw ssh -p 22 host`). A flag
    holding a letter of `rest` makes every argument after it secret."""

    commands: tuple[str, ...]
    words: tuple[str, ...]  # a composed line holding one of these gets the text rules
    short: str
    long: tuple[str, ...] = ()
    operands_end: bool = False
    #: letters of a flag after which every later argument is secret (`htpasswd -b FILE USER
    #: PASSWORD`: the password comes last; file and user go with it)
    rest: str = ""


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
    # curl -b: cookie data (or a cookie file: kept out all the same)
    CommandOptions(("curl",), ("curl",), "uUb", ("--user", "--proxy-user", "--oauth2-bearer")),
    # ssh-keygen -N new passphrase, -P old passphrase (`ssh-keygen -N '' -f key`)
    CommandOptions(("ssh-keygen",), ("ssh-keygen",), "NP"),
    CommandOptions(("htpasswd",), ("htpasswd",), "", rest="b"),
)

_TOKEN_BODY = ALNUM + "_-"


def _token(name: str, head: str, anchor: str, tail: str, min_len: int, body: str) -> TextRule:
    return TextRule(name, anchor, (Head(head, "word"),), (tail,), body=body, min_len=min_len)


def _word_heads(
    words: tuple[Word, ...], suffix: str = "", before: Before | None = None
) -> tuple[Head, ...]:
    return tuple(Head(w.word + suffix, before or w.before) for w in words)


_AUTH = tuple(w for w in WORDS if w.word == "authorization")
_COOKIE = tuple(w for w in WORDS if w.word == "cookie")
_OTHER = tuple(w for w in WORDS if w.word not in ("authorization", "cookie"))
_JSON_BEFORE: dict[Before, Before] = {"any": "any", "word": "word", "sep": "word"}
#: words that end an option taking its value after a blank, in a composed line
_OPTION_WORDS = (
    "passphrase", "password", "api_key", "passwd", "secret", "apikey", "token", "pass", "auth",
    "key",
)  # fmt: skip


def _header_rules(
    name: str, words: tuple[Word, ...], stop: str = HEADER_STOP
) -> tuple[TextRule, ...]:
    heads = _word_heads(words)
    json_heads = tuple(Head(w.word + '"', _JSON_BEFORE[w.before]) for w in words)
    return (
        # `Authorization: Basic ...`, `X-Api-Key: ...`, `password: ...`: the rest of the line
        TextRule(name, ":", heads, (" ", "\t"), ci=True, stop=stop),
        # glued (`X-Api-Key:abc`): up to `/` or `@` too, so `https://x-token:pw@host` keeps
        # its host
        TextRule(name, ":", heads, ("",), ci=True, stop=stop + "/@"),
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
            "option-value", "-", heads, tails, stop=VALUE_STOP, not_first="-", scope=c.words,
            sh_word=True,
        )  # fmt: skip

    if c.rest:  # the rest of the command: `htpasswd -b file user 'pw'`
        rest = tuple(
            letters * k + x + letters * m + s
            for k in (2, 1, 0) for m in (2, 1, 0) for x in c.rest for s in (" ", "\t")
        )  # fmt: skip
        rest = tuple(sorted(rest, key=lambda t: len(glob_items(t)), reverse=True))
        return (TextRule("option-value", "-", blank, rest, stop=COMMAND_STOP, scope=c.words,
                         sh_word=True),)  # fmt: skip
    rules = [rule(blank, tails)]
    if c.long:
        ends = tuple(dict.fromkeys(o.rsplit("-", 1)[1] for o in c.long))
        long_tails = tuple(e + s for e in ends for s in (" ", "\t", "="))
        long_tails = tuple(sorted(long_tails, key=len, reverse=True))
        rules.append(rule((Head(""),), long_tails))
    return tuple(rules)


_AWS_TAILS = (" = ", " =", "= ", ": ", "=", ":", " ", "\t")
_HEX = string.digits + "abcdef"
_UPPER = string.ascii_uppercase + string.digits
_B64 = ALNUM + "+/="


def _vendor(
    name: str,
    heads: str | tuple[str, ...],
    anchor: str,
    tails: tuple[str, ...] = ("",),
    min_len: int = 20,
    body: str = _TOKEN_BODY,
    before: Before = "word",
    scope: tuple[str, ...] = (),
) -> TextRule:
    globs = (heads,) if isinstance(heads, str) else heads
    return TextRule(
        name, anchor, tuple(Head(h, before) for h in globs), tails, body=body, min_len=min_len,
        scope=scope,
    )  # fmt: skip


_B62 = "[" + ALNUM + "]"
_DIGIT = "[" + string.digits + "]"
# fmt: off
#: Tokens known by their shape, each as its vendor documents it (the prefix it issues them
#: with, then the token's alphabet and least length). The marker replaces what follows the
#: anchor: a prefix's last characters may stay in the record (`sk_live_[REDACTED:...]`),
#: the secret never does.
VENDORS: tuple[TextRule, ...] = (
    _vendor("stripe-key", "[rs]", "k", ("_live_", "_test_"), 20, ALNUM),  # sk_live_, rk_test_
    _vendor("stripe-key", "whse", "c", ("_",), 24, ALNUM),  # webhook signing secret
    _vendor("sendgrid-key", "SG", ".", min_len=60, body=_TOKEN_BODY + "."),  # SG.x{22}.y{43}
    _vendor("huggingface-token", "hf", "_", min_len=30, body=ALNUM),
    _vendor("huggingface-token", "api_or", "g", ("_",), 30, ALNUM),  # api_org_
    _vendor("digitalocean-token", "do[opr]_", "v", ("1_",), 64, _HEX),  # dop_v1_, doo_, dor_
    _vendor("vault-token", "hv[sbr]", ".", min_len=24),  # hvs., hvb., hvr.
    _vendor("shopify-token", "shp[acps][acst]", "_", min_len=32, body=ALNUM),  # shpat_, shpss_
    _vendor("pypi-token", "pypi", "-", ("AgENdGVzdC5weXBpLm9yZw", "AgEIcHlwaS5vcmc"), 50),
    _vendor("slack-webhook", ("services", "workflows"), "/", ("T",), 30, ALNUM + "/",
            scope=("hooks.slack.com",)),
    _vendor("slack-token", "xapp", "-", min_len=20, body=ALNUM + "-"),
    _vendor("telegram-bot-token", _DIGIT * 5, ":", ("AA",), 30, before="any"),
    *(_vendor("discord-token", "[MNO]" + _B62 * n, ".", min_len=34, body=_TOKEN_BODY + ".")
      for n in (23, 24, 25)),
    _vendor("discord-webhook", "webhooks", "/", min_len=60, body=_TOKEN_BODY + "/",
            scope=("discord",)),
    _vendor("age-secret-key", "AGE-SECRET-KE", "Y", ("-1",), 50, _UPPER, before="any"),
    _vendor("mailgun-key", "key", "-", min_len=32, body=_HEX),
    _vendor("twilio-key", "S", "K", min_len=32, body=_HEX),
    _vendor("twilio-auth", "AC" + ("[" + _HEX + "]") * 32, ":", min_len=32, body=_HEX),
    _vendor("gitlab-token", ("glptt", "gldt", "glrt", "glsoat", "glcbt", "glimt", "glft",
                             "glagent"), "-"),
    _vendor("grafana-token", ("glc", "glsa"), "_", min_len=32),
    _vendor("linear-key", "lin_", "a", ("pi_",), 40, ALNUM),
    _vendor("doppler-token", "dp.[pcs]", "t", (".",), 40, ALNUM),
    _vendor("sentry-token", "sntry[su]", "_", min_len=40, body=_B64 + "_"),
    _vendor("postman-key", "PMAK", "-", min_len=50, body=ALNUM + "-"),
    _vendor("databricks-token", "dap", "i", min_len=32, body=_HEX),
    _vendor("newrelic-key", ("NRAK", "NRII"), "-", min_len=27, body=_UPPER),
    _vendor("rubygems-key", "rubygems", "_", min_len=48, body=_HEX),
    _vendor("planetscale-token", "pscale", "_", min_len=32),
    _vendor("pulumi-token", "pul", "-", min_len=40, body=_HEX),
    _vendor("heroku-key", "HRKU", "-", min_len=40),
    _vendor("square-token", "sq0[ac][st]p", "-", min_len=22),
    _vendor("dynatrace-token", "dt0c01", ".", min_len=80, body=ALNUM + "."),
    _vendor("atlassian-token", "ATATT3", "x", min_len=50, body=_TOKEN_BODY + "="),
    _vendor("bitbucket-token", "A", "T", ("BB",), 30, _TOKEN_BODY + "="),
    _vendor("figma-token", "figd", "_", min_len=40),
    _vendor("notion-token", "ntn", "_", min_len=40, body=ALNUM),
    _vendor("flyio-token", "fo1", "_", min_len=40),
    _vendor("supabase-key", "sbp", "_", min_len=40, body=_HEX),
    _vendor("supabase-key", "sb_secre", "t", ("_",), 20),
    _vendor("groq-key", "gsk", "_", min_len=50, body=ALNUM),
    _vendor("xai-key", "xai", "-", min_len=60, body=ALNUM),
    _vendor("replicate-token", "r8", "_", min_len=30, body=ALNUM),
    _vendor("perplexity-key", "pplx", "-", min_len=40, body=ALNUM),
    _vendor("mapbox-token", "sk", ".", ("eyJ",), 60, _TOKEN_BODY + "."),
    _vendor("dropbox-token", "sl", ".", min_len=100),
    _vendor("onepassword-token", "ops", "_", ("eyJ",), 50, _TOKEN_BODY + "."),
    _vendor("tailscale-key", "tskey", "-", min_len=30, body=ALNUM + "-"),
    _vendor("terraform-token", "atlasv1", ".", min_len=60, before="any"),
    _vendor("docker-token", "dckr", "_", min_len=25),  # dckr_pat_, dckr_oat_
    _vendor("buildkite-token", "bkua", "_", min_len=40, body=_HEX),
    _vendor("circleci-token", "CCIPAT", "_", min_len=30, body=ALNUM + "_"),
    _vendor("shippo-token", "shippo", "_", min_len=40, body=ALNUM + "_"),
    _vendor("flutterwave-key", "FLWSEC", "K", min_len=30),
    _vendor("brevo-key", "xkeysib", "-", min_len=60, body=ALNUM + "-"),
    _vendor("google-oauth-secret", "GOCSPX", "-", min_len=24),
    _vendor("google-oauth-token", "ya29", ".", min_len=30, body=_TOKEN_BODY + "."),
    _vendor("azure-ad-secret", _DIGIT + "Q", "~", min_len=30, body=_TOKEN_BODY + "~.",
            before="any"),
    _vendor("jfrog-token", "AKC", "p", min_len=60, body=ALNUM),
    _vendor("infracost-key", "ico", "-", min_len=32, body=ALNUM),
    _vendor("prefect-key", "pnu", "_", min_len=36, body=ALNUM),
    _vendor("readme-key", "rdme", "_", min_len=60, body=ALNUM),
    _vendor("typeform-token", "tfp", "_", min_len=40, body=_TOKEN_BODY + "."),
    _vendor("scalingo-token", "tk-", "u", ("s-",), 40),
    _vendor("frameio-token", "fio-", "u", ("-",), 60, _TOKEN_BODY + "="),
    _vendor("duffel-token", "duffel", "_", min_len=43, body=_TOKEN_BODY + "="),
    _vendor("easypost-key", "EZ[AT]", "K", min_len=54, body=ALNUM),
    _vendor("adafruit-key", "aio", "_", min_len=28, body=ALNUM),
    _vendor("contentful-token", "CFPAT", "-", min_len=40),
    _vendor("harness-token", "pat", ".", min_len=60, body=_TOKEN_BODY + "."),
)
# fmt: on

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
    *VENDORS,
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
            sh_word=True,
        )
        for a in "Bb"
    ),
    *_header_rules("authorization", _AUTH),
    *_header_rules("cookie", _COOKIE, COOKIE_STOP),
    *_header_rules("credential-name", _OTHER),
    # NAME=VALUE inside text: `GITHUB_TOKEN=... make`, `?access_token=...&`, `DB_PASSWORD='x'`
    TextRule("credential-name", "=", _word_heads(WORDS), ci=True, stop=VALUE_STOP, sh_word=True),
    # an Azure shared access signature: `...&sp=r&sig=...`
    TextRule("azure-sas", "=", (Head("sig", "word"),), stop=VALUE_STOP, min_len=16, sh_word=True),
    # `--password VALUE` inside a composed line (`--password=` is the rule above)
    TextRule(
        "option-value",
        "-",
        tails=tuple(w + s for w in _OPTION_WORDS for s in (" ", "\t")),
        ci=True,
        stop=VALUE_STOP,
        not_first="-",
        sh_word=True,
    ),
    *(r for c in COMMANDS for r in _command_rules(c)),
    *(
        TextRule(
            "aws-secret-key", a, (Head(h),), _AWS_TAILS, ci=True, stop=VALUE_STOP, sh_word=True
        )
        for a, h in (("y", "secret_access_ke"), ("Y", "SECRET_ACCESS_KE"))
    ),
)
