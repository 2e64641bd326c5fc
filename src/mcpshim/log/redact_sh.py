"""The table of redact_rules rendered into POSIX sh: the sections of the shim library
(`shims/lib.sh`, its `@@...@@` markers) and the trigger patterns every shim checks.

The library's functions follow redact's algorithm; what they are given comes from here:
per text rule a quick check (a `case` pattern a value must match for the rule to fire at
all), a function that checks its heads and one that checks its tails, and its character
classes. Every pattern holds at most one run of text between two `*`s: `*a*b*` makes
dash and bash backtrack, in time the square of the text's length or worse.
"""

from __future__ import annotations

import shlex

from mcpshim.log.redact import PREFILTER_RUN, prefilter_len, run_chars
from mcpshim.log.redact_rules import (
    AUTH_HEADERS,
    AUTH_SCHEMES,
    BARE_NEXT,
    BARE_WORDS,
    COMMANDS,
    MAX_SPECIALS,
    RULES,
    SHELL_OPEN,
    SKIP_BARE,
    WORDS,
    CommandOptions,
    TextRule,
    glob_items,
)
from mcpshim.log.redact_sh_glob import (
    SAFE,
    ci_glob,
    cls_of,
    glob_value,
    glob_word,
    items,
    quote,
    set_value,
    set_word,
)
from mcpshim.log.shimhelper import HELPER_SCRIPT, HELPER_XARGS, is_shim_helper

__all__ = [
    "HELPER_SCRIPT",
    "glob_value",
    "glob_word",
    "is_shim_helper",
    "lib_sections",
    "sh_triggers",
]

# ---- the shim's trigger -------------------------------------------------------------------

_WORD_TRIGGERS = ("token", "pass", "secret", "key", "bearer", "pwd", "cookie")
#: what the word triggers, with the auth and pat ones, cover
_COVERED = (*_WORD_TRIGGERS, "auth", "pat")


def _ci_first(word: str, then: str = "*") -> list[str]:
    """`*w[Oo][Rr][Dd]` and `*W[Oo]...`: a literal after the `*` lets dash skip ahead to it,
    where a bracket costs a test at every position."""
    rest = glob_word(word[1:], ci=True)
    return [f"*{shlex.quote(c)}{rest}{then}" for c in (word[0].lower(), word[0].upper())]


_WIDE = 8  # a set of more characters is `?` in a trigger: shorter, and as cheap to test


def _token_trigger(items: tuple[str, ...], r: TextRule) -> str:
    """A token shape's trigger: its head, anchor and tail, wide sets as `?` and leading
    ones left out (the `*` takes them), then a few characters of its body when the text
    before is short (`hf_` alone would load the library for every `chf_...`). "" when a
    word's trigger takes it already (`AGE-SECRET-KEY-`)."""
    literal = "".join(c for c in items if len(c) == 1)
    if any(w in literal.lower() for w in _WORD_TRIGGERS):
        return ""
    while items and len(items[0]) > _WIDE:
        items = items[1:]
    out, lit = [], ""
    for chars in items:
        if len(chars) == 1:
            lit += chars
            continue
        if lit:
            out.append(quote(lit) if set(lit) - SAFE else lit)
            lit = ""
        out.append("?" if len(chars) > _WIDE else set_word(chars))
    if lit:
        out.append(quote(lit) if set(lit) - SAFE else lit)
    if len(literal) < 4:
        out.append(set_word(r.body) * min(r.min_len, PREFILTER_RUN))
    return "*" + "".join(out) + "*"


def _triggers() -> list[str]:
    """Patterns one of which every argument a rule could change matches, checked on the
    arguments joined with blanks, with a blank before and after (`case " $* " in`): a
    superset, where "ends with" becomes "before a blank"."""
    # (a bracket first, not the word in both cases: fewer patterns, and on the common path
    # the arguments are short)
    pats = [f"*{glob_word(w, ci=True)}*" for w in _WORD_TRIGGERS]
    after = set_word('=:" \t')  # what follows a name word in the rules, or a blank
    pats += [f"*{glob_word('auth', ci=True)}{after}*", f"*{glob_word('authoriz', ci=True)}*"]
    pats += [f"*{glob_word('pat', ci=True)}{after}*"]  # (_pat, -pat, xPat...)
    for r in RULES:
        if isinstance(r, TextRule) and r.body:  # the token shapes
            for h in r.heads:
                for t in r.tails:
                    pat = _token_trigger(glob_items(h.glob + r.anchor + t), r)
                    if pat:
                        pats.append(pat)
        elif isinstance(r, TextRule) and not r.scope:  # a value after a marker word
            for h in r.heads:
                for t in r.tails:
                    items = glob_items(h.glob + r.anchor + t)
                    text = "".join(c[0] for c in items).lower()
                    if any(w in text for w in _COVERED) or len(h.glob) < 2:
                        continue
                    assert all(len(c) == 1 for c in items), r  # (a marker word, as `sig=`)
                    pats.append(f"*{glob_word(h.glob + r.anchor, ci=r.ci)}*")
    pats += [f"*{shlex.quote(w)}*" for c in COMMANDS for w in c.words]
    # a PEM key given as words: `-----BEGIN RSA PRIVATE KEY----- MIIE... -----END ...`
    pats += ["*' -----BEGIN'*", "*' PRIVATE '*"]
    # an argument of 40 characters, maybe a bare AWS secret key (the library looks closer),
    # unless every one is a lowercase hex digit: a git object name, which git's own
    # plumbing passes at every turn (a base64 key is never that: 16/64 per character)
    for k in range(40):
        pats.append("*' '" + "[!' ']" * k + "[!' '0-9a-f]" + "[!' ']" * (39 - k) + "' '*")
    return list(dict.fromkeys(pats))


def _command_of(name: str) -> CommandOptions | None:
    return next((c for c in COMMANDS if name in c.commands), None)


def sh_triggers(*names: str) -> str:
    """The `case " $* " in` pattern list of shims/shim.sh (see _triggers); the names are
    the shim's and its target's, whose own options count too."""
    pats = _triggers()
    for c in dict.fromkeys(c for c in map(_command_of, names) if c is not None):
        for x in c.short:
            # an argument starting -x, or ending in x (`-vx`: flags combined)
            pats += [f"*' '-{x}*", f"*{x}' '*"]
        if c.rest:
            pats.append("*' '-*")  # any flag may hold the letter (`htpasswd -nbB`)
        pats += [f"*{o}*" for o in c.long]
        pats += [f"*' '{shlex.quote(w)}' '*" for w in c.sub]  # `vault login TOKEN`
    return " | ".join(dict.fromkeys(pats))


# ---- the library --------------------------------------------------------------------------


def _name_patterns() -> str:
    pats = []
    for w in WORDS:
        word = glob_word(w.word, ci=True)
        if w.before == "any":
            pats.append(f"*{word}")
        elif w.before == "word":
            pats += [word, f"*[!A-Za-z0-9]{word}"]
        else:
            pats += [f"*[_.-]{word}", f"*[a-z]{glob_word(w.word, True, True)}"]
    return " | ".join(pats)


def _head_body(r: TextRule) -> str:
    checks = []
    for h in r.heads:
        items = glob_items(h.glob)
        upper = ""
        if h.before == "sep" and items and any(c.isalpha() for c in items[0]):
            upper = glob_value(h.glob, r.ci, upper_first=True)
        args = [glob_value(h.glob, r.ci), str(len(items)), h.before, upper]
        checks.append("_mcpshim_hd " + " ".join(shlex.quote(a) for a in args))
    return "\t" + " ||\n\t\t".join(checks)


def _tail_body(r: TextRule) -> str:
    cases = []
    for t in r.tails:
        pat = glob_word(t, r.ci) + "*" if t else "*"
        cases.append(f"\t{pat}) _mcpshim_tg={quote(glob_value(t, r.ci))} ;;")
    if r.tails[-1]:
        cases.append("\t*) return 1 ;;")
    return "\tcase $1 in\n" + "\n".join(cases) + "\n\tesac"


class _Functions:
    """The head and tail checks of the rules, one function per distinct body (the header,
    JSON and NAME= rules share their long lists of heads)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def name(self, kind: str, body: str) -> str:
        return self.names.setdefault(body, f"_mcpshim_{kind}{len(self.names) + 1}")

    def text(self) -> str:
        return "\n".join(f"{n}() {{\n{b}\n}}" for b, n in self.names.items())


def _classes() -> dict[str, str]:
    """One variable per character class the quick checks use: `$_mcpshim_z1` in a pattern
    reads shorter than the bracket expression quoted for the shell."""
    out: dict[str, str] = {}
    for r in RULES:
        if isinstance(r, TextRule):
            chars, negated = run_chars(r)
            out.setdefault(set_value(chars, negate=negated), f"_mcpshim_z{len(out) + 1}")
    return out


#: the quote states' patterns of _mcpshim_sw: what ends "..." and $'...'
_QUOTE_VARS = {"_mcpshim_qd": set_value('"\\'), "_mcpshim_qc": set_value("'\\")}


def _rule_call(r: TextRule, classes: dict[str, str], fns: _Functions) -> str:
    run = r.body or r.stop
    k = prefilter_len(r)
    anchor = "[" + r.anchor + "]" if r.anchor in "[]" else r.anchor
    chars, negated = run_chars(r)
    cls = "$" + classes[set_value(chars, negate=negated)]
    tails = [ci_glob(t, r.ci) for t in r.tails]
    # After a `*`, a literal lets dash skip ahead to it (a bracket costs a test at every
    # position): a rule's one head when it starts with a literal, else its anchor (then the
    # head too, in a second look); the many heads of a family are left to _mcpshim_hd.
    [head] = [ci_glob(h.glob, r.ci) for h in r.heads] if len(r.heads) == 1 else [""]
    literal = bool(head) and len(items(head, False)[0]) == 1
    lead = glob_word((head if literal else "") + anchor)
    # one tail and the run's first characters; of many tails, their first characters (and
    # the run's, for an empty one)
    firsts = "".join(dict.fromkeys(c for t in tails if t for c in items(t, False)[0]))
    if len(tails) == 1:
        alts = [f"*{glob_word((head if literal else '') + anchor + tails[0])}{cls * k}*"]
    else:
        alts = [f"*{lead}{set_word(firsts)}*"] if firsts else []
        alts += [f"*{lead}{cls * k}*"] if "" in tails else []
    pre = " | ".join(alts)
    heads = [head] if head and not literal else []
    ends = "".join(dict.fromkeys(r.stop + SHELL_OPEN)) if r.sh_word else run
    args = [
        r.name,
        r.anchor,
        cls_of(r.anchor),
        set_value(ends, negate=bool(r.body)),  # what ends the run (or a plain part of it)
        "1" if r.in_run(r.anchor) else "",
        str(r.min_len),
        fns.name("h", _head_body(r)),
        fns.name("t", _tail_body(r)),
        set_value(r.not_first) if r.not_first else "",
        "1" if r.sh_word else "",
    ]
    while not args[-1]:  # (trailing empty arguments are left out)
        args.pop()
    call = '_mcpshim_tok "$_mcpshim_r" ' + " ".join(shlex.quote(a) for a in args)
    if heads:
        inner = " | ".join(f"*{glob_word(h + anchor)}*" for h in heads)
        call = f"case $_mcpshim_r in {inner}) {call} ;; esac"
    line = f"\tcase $_mcpshim_r in {pre}) {call} ;; esac"
    if r.scope:
        words = " | ".join(f"*{shlex.quote(w)}*" for w in r.scope)
        line = f"\tcase $_mcpshim_r in {words})\n\t{line}\n\t\t;;\n\tesac"
    return line


def _scope_words(then: str) -> str:
    """A command's name: its options count from here on, or (`sub`) once its subcommand
    came."""
    out = []
    for i, c in enumerate(COMMANDS, 1):
        names = " | ".join(p for n in c.commands for p in (shlex.quote(n), "*/" + shlex.quote(n)))
        to = f"_mcpshim_sc='' _mcpshim_su={i}" if c.sub else f"_mcpshim_sc={i} _mcpshim_su=''"
        out.append(f"\t{names}) {to}{then} ;;")
    return "\n".join(out)


def _scope_subs() -> str:
    out = []
    for i, c in enumerate(COMMANDS, 1):
        if c.sub:
            words = " | ".join(shlex.quote(w) for w in c.sub)
            out.append(
                f"\t{i}) case $1 in {words}) _mcpshim_sc={i} _mcpshim_su='' && return ;; esac ;;"
            )
    return "\n".join(out) or "\t'') ;;"


def _auth_patterns() -> tuple[str, str]:
    """An authorization header with no value: (its scheme may come next, the scheme came)."""
    bare, valued = [], []
    for h in AUTH_HEADERS:
        head = glob_word(h + ":", ci=True)
        bare += [head, head + "' '"]
        for s in AUTH_SCHEMES:
            scheme = glob_word(s, ci=True)
            valued += [head + scheme, f"{head}' '{scheme}", f"{head}{scheme}' '",
                       f"{head}' '{scheme}' '"]  # fmt: skip
    return " | ".join(bare), " | ".join(valued)


def _bare_next() -> str:
    out = []
    for word, rule in BARE_NEXT:
        out.append(f"\t{glob_word(word, ci=True)})\n\t\t_mcpshim_nx={rule}\n\t\treturn\n\t\t;;")
    return "\n".join(out)


def _glued(prefix: str, c: CommandOptions) -> str:
    """An option given with its value in one argument (`-pPW`, `--user=u%PW`)."""
    if not c.split:
        return (
            f"_mcpshim_r={prefix}'[REDACTED:option-value]' && _mcpshim_rule option-value && return"
        )
    sep = shlex.quote(c.split)
    return (
        f"case $1 in *{sep}*) _mcpshim_r=\"${{1%%{sep}*}}\"{sep}'[REDACTED:option-value]' && "
        "_mcpshim_rule option-value ;; esac; return"
    )


def _scope_options() -> str:
    out = []
    for i, c in enumerate(COMMANDS, 1):
        nxt = f"_mcpshim_ns={shlex.quote(c.split)}" if c.split else "_mcpshim_nx=option-value"
        cases = [f"\t\t-{x}) {nxt} && return ;;" for x in c.short]
        for x in c.short:
            cases.append(f"\t\t-{x}?*) {_glued('-' + x, c)} ;;")
        for o in c.long:
            cases.append(f"\t\t{o}) {nxt} && return ;;")
            cases.append(f"\t\t{o}=*) {_glued(o + '=', c)} ;;")
        cases.append("\t\t-*[!A-Za-z]*) ;;")
        if c.short:
            combined = " | ".join(f"-[A-Za-z]*{x}" for x in c.short)
            cases.append(f"\t\t{combined}) {nxt} && return ;;")
        if c.operand:  # `vault login TOKEN` (not `username=u`, not an option)
            cases.append("\t\t-* | *=*) ;;")
            cases.append(
                "\t\t*) _mcpshim_r='[REDACTED:option-value]' _mcpshim_sc='' && "
                "_mcpshim_rule option-value && return ;;"
            )
        if c.rest:
            rest = " | ".join(f"-*{x}*" for x in c.rest)
            cases.append(f"\t\t{rest}) _mcpshim_na=option-value && return ;;")
        block = "\t\tcase $1 in\n" + "\n".join(cases) + "\n\t\tesac"
        if c.operands_end:
            block += "\n\t\tcase $1 in -*) ;; *) _mcpshim_sc= ;; esac"
        out.append(f"\t{i})\n{block}\n\t\t;;")
    return "\n".join(out)


def lib_sections() -> dict[str, str]:
    """The text for each `@@NAME@@` marker of shims/lib.sh."""
    classes = _classes()
    fns = _Functions()
    calls = []
    for r in RULES:
        if isinstance(r, TextRule):
            calls.append(_rule_call(r, classes, fns))
        else:
            url = '_mcpshim_url "$_mcpshim_r"'
            calls.append(
                f"\tcase $_mcpshim_r in *://*) case $_mcpshim_r in *@*) {url} ;; esac ;; esac"
            )
    return {
        "@@NAME_PATTERNS@@": _name_patterns(),
        "@@RULE_FUNCTIONS@@": fns.text(),
        "@@CONSTS@@": "\n".join(
            f"\t{var}={shlex.quote(v)}"
            for var, v in [*((var, v) for v, var in classes.items()), *_QUOTE_VARS.items()]
        ),
        "@@CLASS_VARS@@": " ".join([*classes.values(), *_QUOTE_VARS]),
        "@@MAX_SPECIALS@@": str(MAX_SPECIALS),
        "@@TEXT_RULES@@": "\n".join(calls),
        "@@SCOPE_WORDS@@": _scope_words(" && return"),
        "@@SCOPE_OF_TARGET@@": _scope_words(""),
        "@@SCOPE_OPTIONS@@": _scope_options(),
        "@@SCOPE_SUBS@@": _scope_subs(),
        "@@AUTH_SCHEMES@@": " | ".join(glob_word(s, ci=True) for s in AUTH_SCHEMES),
        "@@AUTH_HEADERS@@": _auth_patterns()[0],
        "@@AUTH_VALUED@@": _auth_patterns()[1],
        "@@BARE_WORDS@@": " | ".join(glob_word(s, ci=True) for s in BARE_WORDS),
        "@@TRIGGERS@@": " | ".join(_triggers()),
        "@@OPERANDS_END@@": " | ".join(
            str(i) for i, c in enumerate(COMMANDS, 1) if c.operands_end or c.operand
        ),
        "@@SKIP_BARE@@": " | ".join(glob_word(s, ci=True) + "*" for s in SKIP_BARE),
        "@@BARE_NEXT@@": _bare_next(),
        "@@AWS40@@": "?" * 40,
        "@@HELPER_XARGS@@": " ".join(HELPER_XARGS),
        "@@HELPER_SCRIPT@@": quote(HELPER_SCRIPT),
        "@@SOH@@": "\x01",
    }
