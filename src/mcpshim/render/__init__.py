"""Renderers: pure functions from a report (findings, a forest, tool calls) to one output
format each: text, JSON, SARIF, Markdown, HTML, dot.

May import: base, log, shim, family, review, pathcheck, contract, sandbox.
"""
