"""The cross-reader check the corpus runs on every session (tests/corpus/readers.py) finds
each kind of disagreement, and none where the readers agree. Every real session of the
corpus is checked by test_corpus; here, readers that disagree on purpose."""

from __future__ import annotations

from typing import Any

from tests.corpus.readers import parse_report, reader_problems

MD = """\
# mcpshim session S

## Tool calls

### #1 tools/call run\\_test (id 3)

- pid 10 `npm test  -> /usr/bin/npm`
- exec pid 10 `node /usr/bin/npm test  -> /usr/bin/node`
  - pid 11 `sh -c 'node t.js'  -> /usr/bin/sh`

### #2 tools/call browse (id 4)

- pid 20 `/usr/bin/chromium --headless  -> /usr/bin/chromium` — outlived its call: still running
  - pid 21 `uname -m  -> /usr/bin/uname`
- pid 22 `ls  -> /usr/bin/ls`

## Approval cards: server s, session S

### Tool `run_test`

- executable: `/usr/bin/npm  sha256:aa  dpkg package npm`
- executable: `/usr/bin/sh  sha256:bb  dpkg package dash`

### Tool `browse`

- executable: `/usr/bin/ls  sha256:cc  dpkg package coreutils`

### Outside tool calls

- executables: `/usr/bin/chromium (dpkg)`

## Findings (1)
"""

TEXT = """\
== session S tool call at 2026-12-05 10:00:00.000Z: tools/call run_test (id 3)
   answered: ok
   ran: npm test; sh -c 'node t.js'
== session S tool call at 2026-12-05 10:00:01.000Z: tools/call browse (id 4)
   answered: ok
   ran: chromium --headless; uname -m; ls
"""


def _review(call_of_11: int = 3) -> dict[str, Any]:
    ev = {"pid": 11, "call_id": call_of_11, "text": "sh"}
    return {
        "calls": [
            {"id": 3, "name": "run_test", "ran": ["npm test", "sh -c 'node t.js'"]},
            {"id": 4, "name": "browse", "ran": ["chromium --headless", "uname -m", "ls"]},
        ],
        "findings": [{"rule": "MCS104", "evidence": [ev, {"pid": 99, "call_id": 3}]}],
    }


def test_the_report_is_read_as_it_is_written() -> None:
    rep = parse_report(MD)
    assert sorted(rep.sections) == ["3", "4"]
    run, browse = rep.sections["3"], rep.sections["4"]
    assert (run.name, browse.name) == ("run_test", "browse")
    # npm's interpreter exec is npm's own; chromium's start-up is under its outlived process
    assert run.execs == [(10, "/usr/bin/npm", False), (11, "/usr/bin/sh", False)]
    assert browse.execs == [
        (20, "/usr/bin/chromium", True), (21, "/usr/bin/uname", True), (22, "/usr/bin/ls", False)
    ]  # fmt: skip
    assert rep.cards == {"run_test": {"/usr/bin/npm", "/usr/bin/sh"}, "browse": {"/usr/bin/ls"}}


def test_readers_that_agree_say_nothing() -> None:
    assert reader_problems(_review(), TEXT, MD) == []


def test_a_process_filed_under_another_call_is_said() -> None:
    [bad] = reader_problems(_review(call_of_11=4), TEXT, MD)
    assert "pid 11 is call id 4's in review's JSON, under call id(s) 3 in the report" in bad


def test_text_that_says_other_words_is_said() -> None:
    [bad] = reader_problems(_review(), TEXT.replace("ran: npm test;", "ran: npx test;"), MD)
    assert bad.startswith("call id 3: text says it ran")


def test_a_count_the_report_does_not_list_is_said() -> None:
    doc = _review()
    doc["calls"][1]["ran"] = ["chromium --headless", "uname -m", "ls (x2)"]
    text = TEXT.replace("; ls", "; ls (x2)")
    assert reader_problems(doc, text, MD) == [
        "call id 4: JSON counts 4 exec(s), the report lists 3"
    ]
    doc["calls"][1]["ran"] = ["chromium --headless", "and 2 more"]  # hidden: not counted
    assert reader_problems(doc, TEXT.replace("uname -m; ls", "and 2 more"), MD) == []


def test_a_card_that_misses_or_adds_an_executable_is_said() -> None:
    no_sh = MD.replace("- executable: `/usr/bin/sh  sha256:bb  dpkg package dash`\n", "")
    assert reader_problems(_review(), TEXT, no_sh) == [
        "run_test: its calls ran ['/usr/bin/sh'], not on its card"
    ]
    more = MD.replace("/usr/bin/ls  sha256:cc", "/usr/bin/uname  sha256:dd")
    assert sorted(reader_problems(_review(), TEXT, more)) == [
        "browse: its calls ran ['/usr/bin/ls'], not on its card",
    ]
    odd = MD.replace("/usr/bin/ls  sha256:cc", "/usr/bin/curl  sha256:dd")
    assert "browse: its card names ['/usr/bin/curl'], which none of its calls ran" in (
        reader_problems(_review(), TEXT, odd)
    )


def test_a_call_with_no_section_block_or_card_is_said() -> None:
    md = MD.replace("### #2 tools/call browse (id 4)", "### #2 tools/call browse (id 5)")
    assert "call id 4 (browse): no section in the report" in reader_problems(_review(), TEXT, md)
    assert "call id 4 (browse): no block in review's text" in reader_problems(
        _review(), TEXT.replace("(id 4)", "(id 6)"), MD
    )
    assert "browse: called, but no approval card" in reader_problems(
        _review(), TEXT, MD.replace("### Tool `browse`", "### Tool `other`")
    )
