"""The rules of departures from an approval (review.departures): MCS520-MCS537.

Metadata only, registered on import like every rule; the checks live in review.departures.
"""

from __future__ import annotations

from mcpshim.review.findings import Severity, define_rule

__all__ = [
    "DRIFT",
    "GONE_TOOL",
    "LISTING_CHANGED",
    "NEW_CRED",
    "NEW_CWD",
    "NEW_DEST",
    "NEW_EXEC",
    "NEW_IDENTITY",
    "NEW_SERVER",
    "NEW_SHAPE",
    "NEW_TOOL",
    "OUTLIVED",
    "SERVER_CHANGED",
    "TERMINATED",
]

DRIFT = define_rule(
    "MCS520",
    "tool-definition-drift",
    Severity.HIGH,
    "An MCP tool's definition (description, schemas, annotations) differs from the one that "
    "was approved: what the model reads about the tool changed (info, and not refused by "
    "--enforce, when only the order of the same words and list items changed).",
    "Read the diff; if the change is expected, accept it into the lock (`mcpshim approve "
    "--update`, which shows the diff first); run the server with `run --mcp --lock L "
    "--enforce` to refuse calls to a drifted tool.",
    cwe=["CWE-494"],
    answers=(),
)
NEW_TOOL = define_rule(
    "MCS521",
    "tool-not-approved",
    Severity.MEDIUM,
    "The server listed a tool the lock does not approve.",
    "Read the tool's card (`mcpshim approve`) and approve it, or remove it from the server.",
    answers=(),
)
GONE_TOOL = define_rule(
    "MCS522",
    "approved-tool-missing",
    Severity.LOW,
    "An approved tool was not in the server's tool list.",
    "If the tool was removed on purpose, approve again; the lock never forgets on its own.",
    answers=(),
)
NEW_SERVER = define_rule(
    "MCS523",
    "server-not-approved",
    Severity.MEDIUM,
    "A relayed session's server has no entry in the lock.",
    "Approve it (`mcpshim approve --session S --server NAME`), or run it under the name it "
    "was approved as (`run --name`).",
    answers=(),
)
SERVER_CHANGED = define_rule(
    "MCS524",
    "server-contract-changed",
    Severity.LOW,
    "The server's version, protocol version, capabilities or instructions to the model "
    "differ from what was approved.",
    "Read what changed; instructions are read by the model like a tool description.",
    answers=(),
)
LISTING_CHANGED = define_rule(
    "MCS525",
    "resource-or-prompt-changed",
    Severity.MEDIUM,
    "A resource or prompt the server lists is new, or its definition changed.",
    "Read the change and approve the session again if it is expected.",
    answers=(),
)
NEW_EXEC = define_rule(
    "MCS530",
    "departure-new-executable",
    Severity.MEDIUM,
    "A tool ran an executable its approval card does not list.",
    "Find out why the tool runs it (the evidence names the chain); approve it if expected.",
    cwe=["CWE-78"],
    answers=(),
)
NEW_IDENTITY = define_rule(
    "MCS531",
    "departure-executable-identity-changed",
    Severity.HIGH,
    "An approved executable path now holds different content (its SHA-256 changed).",
    "Check who replaced it (a package update says so in its vouching line); approve again "
    "only once the new file is accounted for.",
    cwe=["CWE-494"],
    answers=(),
)
NEW_SHAPE = define_rule(
    "MCS532",
    "departure-new-subcommand",
    Severity.LOW,
    "An approved executable ran with a subcommand or argument shape the card does not list.",
    "Approve it if the new use is expected.",
    answers=(),
)
NEW_CWD = define_rule(
    "MCS533",
    "departure-new-cwd",
    Severity.LOW,
    "A tool's process ran in a working directory outside its approved cwd roots.",
    "Approve it if the directory is expected.",
    answers=(),
)
NEW_DEST = define_rule(
    "MCS534",
    "departure-new-destination",
    Severity.MEDIUM,
    "A tool's process reached a network destination its card does not list (high when the "
    "card listed no network use at all: local work turned into network access); an attempt "
    "on one that reached nothing is low.",
    "Find out which program connected and why; approve it if expected.",
    cwe=["CWE-200"],
    answers=(),
)
NEW_CRED = define_rule(
    "MCS535",
    "departure-new-credential-env",
    Severity.MEDIUM,
    "A tool's process held a credential-like environment variable its card does not list.",
    "Clear the variable from the server's environment, or approve it if the tool needs it.",
    cwe=["CWE-214"],
    answers=(),
)
OUTLIVED = define_rule(
    "MCS536",
    "departure-outlived-call",
    Severity.MEDIUM,
    "A process outlived its tool call, where the card said the tool leaves nothing running.",
    "Find out what the process does; run the server with --on-exit terminate.",
    answers=(),
)
TERMINATED = define_rule(
    "MCS537",
    "departure-terminated-family",
    Severity.HIGH,
    "`run --on-departure terminate` ended the server's family at an exec departure.",
    "Read the departure's evidence; approve the executable if it was expected.",
    answers=(),
)
