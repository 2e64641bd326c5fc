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

from mcpshim.log.redact_shapes import (
    ALNUM,
    COMMAND_STOP,
    COOKIE_STOP,
    HEADER_STOP,
    MAX_SPECIALS,
    SHELL_OPEN,
    URL_RULE,
    URL_STOP,
    VALUE_STOP,
    Before,
    CommandOptions,
    Head,
    TextRule,
    Word,
    glob_items,
)
from mcpshim.log.redact_vendors import VENDORS

__all__ = [
    "AUTH_HEADERS",
    "AUTH_SCHEMES",
    "BARE_NEXT",
    "BARE_WORDS",
    "COMMANDS",
    "MAX_SPECIALS",
    "RULES",
    "SETTERS",
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
    Word("bearer", "word"),  # --bearer, BEARER=; not a word that ends in it
    Word("private_key_id", "any"),  # a cloud service account's key id
)

#: `--NAME` alone that takes no value although NAME ends with a credential word
SKIP_BARE = ("no-", "ask-")
#: arguments (any case) after which the next argument is the secret, and the rule named
BARE_NEXT = (("aws_secret_access_key", "aws-secret-key"),)
#: arguments (any case) after which the next argument is the secret unless it is an option:
#: a `.netrc` line given as words (`machine h login u password PW`)
BARE_WORDS = ("password", "passwd")
#: an argument that is an HTTP authorization header with no value yet: the value is the
#: next argument (`-H authorization:bearer TOKEN`, httpie's `Authorization:Bearer TOKEN`),
#: or the scheme is, then the value (`-H "Authorization:" "Bearer" TOKEN`)
AUTH_HEADERS = ("authorization", "proxy-authorization")
#: what sets an environment variable from two words (a composed line holding one of these
#: gets the rule that redacts the word after a credential variable's name)
SETTERS = ("setenv", "set -x", "set -gx", "set -Ux")
AUTH_SCHEMES = ("bearer", "basic", "token", "digest", "negotiate", "bot")


# fmt: off
_MYSQL = (
    "mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlpump",
    "mysqlslap", "mysqlbinlog", "mariadb", "mariadb-dump", "mariadb-admin", "mariadb-import",
    "mariadb-show", "mariadb-check", "mariadb-slap", "mariadb-binlog",
)
_LDAP = (
    "ldapsearch", "ldapadd", "ldapmodify", "ldapdelete", "ldapwhoami", "ldappasswd",
    "ldapcompare", "ldapmodrdn", "ldapexop",
)
_SMB = ("smbclient", "rpcclient", "smbget", "smbcacls")
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
    CommandOptions(("zip", "zipcloak", "unzip"), ("zip",), "P", ("--password",)),
    CommandOptions(_LDAP, ("ldap",), "w"),
    CommandOptions(("sqlcmd", "bcp", "osql"), ("sqlcmd", "bcp ", "osql"), "P"),
    # smbclient -U user%PASSWORD: the part after % (a user alone is kept)
    CommandOptions(_SMB, ("smbclient", "rpcclient", "smbget", "smbcacls"), "U", ("--user",),
                   split="%"),
    CommandOptions(("docker", "podman"), ("docker login", "podman login"), "p", ("--password",),
                   sub=("login",)),
    CommandOptions(("gh",), ("gh secret",), "b", ("--body",), sub=("secret",)),
    CommandOptions(("vault", "bao"), ("vault login", "bao login"), "", sub=("login",),
                   operand=True),
)  # fmt: skip

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
    "passphrase", "password", "api_key", "passwd", "secret", "apikey", "bearer", "token", "pass",
    "auth", "key",
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
    if c.split:  # `-U user%PW`: in a line of the command, what follows the character
        return (TextRule("option-value", c.split, stop=VALUE_STOP, scope=c.words,
                         sh_word=True),)  # fmt: skip
    rules = [rule(blank, tails)] if tails else []
    if c.operand:  # `vault login TOKEN`: the word after the subcommand
        heads = tuple(Head(f"{n} {s[:-1]}", "word") for n in c.commands for s in c.sub)
        for anchor in dict.fromkeys(s[-1] for s in c.sub):
            mine = tuple(h for h, s in zip(heads, [s for _n in c.commands for s in c.sub],
                                           strict=True) if s[-1] == anchor)  # fmt: skip
            rules.append(TextRule("option-value", anchor, mine, (" ", "\t"), stop=VALUE_STOP,
                                  not_first="-", scope=c.words, sh_word=True))  # fmt: skip
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
    # a JWT, and base64 of any JSON object (`{"` is `eyJ`): a credential's value in it
    # would otherwise show decoded by anyone
    _token("jwt", "ey", "J", "", 30, _TOKEN_BODY + "." + "+/="),
    *(
        TextRule("base64-json", a, (Head(h, "word"),), t, body=_B64 + "_-.", min_len=20)
        for h, a, t in (("e", "w", ("0K", "o")), ("e", "y", ("Ai",)), ("W", "3", ("si",)))
    ),  # `{\n`, `{\r\n`, `{ "`, `[{"` in base64
    *VENDORS,
    URL_RULE,
    *(
        TextRule(
            "authorization",
            a,
            (Head("", "word"),),
            ('earer" ', "earer' ", 'earer"\t', "earer'\t", "earer ", "earer\t"),
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
    # a `.netrc` line (`machine h login u password PW`)
    TextRule(
        "credential-name",
        "d",
        (Head("passwor", "word"), Head("passw", "word")),
        (" ", "\t"),
        ci=True,
        stop=VALUE_STOP,
        not_first="-",
        scope=("machine",),
        sh_word=True,
    ),
    # an environment variable's name, then its value as the next word (`setenv DD_API_KEY
    # VALUE`, fish's `set -x`): upper case, after `_`, as variables are written; in a line
    # that sets one (`docker run -e GITHUB_TOKEN IMAGE` names one and keeps its image)
    *(
        TextRule(
            "credential-name",
            w[-1],
            (Head("_" + w[:-1]),),
            (" ", "\t"),
            stop=VALUE_STOP,
            not_first="-",
            scope=SETTERS,
            sh_word=True,
        )
        for w in ("KEY", "TOKEN", "SECRET", "PASSWORD")
    ),
    *(
        TextRule(
            "aws-secret-key", a, (Head(h),), _AWS_TAILS, ci=True, stop=VALUE_STOP, sh_word=True
        )
        for a, h in (("y", "secret_access_ke"), ("Y", "SECRET_ACCESS_KE"))
    ),
)
