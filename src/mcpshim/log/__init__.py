"""The exec log: its record codec and streaming reader (execlog) over its framing (framing), an
exec record's fields decoded one way for every reader (execfields, rows), what an event
record may hold (events), boot time anchors (boot), the event writer the supervisor and
relay append with (eventlog), rename-based rotation and size-based retention, `log --follow`
(follow), the session index and the sessions it lists (sessionindex, what a segment's
records say for it in indexscan, sessions), one session's part of the log read by the index
(scope), review marks, credential redaction shared by every writer (its one table in
redact_rules, the Python side in redact, the shim's sh rendered by redact_sh), the tracer's
socket-call records as typed values (netrecords), and the JSON/ECS/text views of a record
(logview).

Everything that reads or writes `exec.log` goes through here; nothing here knows about
families, rules or the command line.

May import: base.
"""
