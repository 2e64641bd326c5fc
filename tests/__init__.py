"""mcpshim's test suite: one package per source package (tests/log for mcpshim.log...),
e2e/ for whole-product runs, corpus/ for the labelled sessions, fixtures/ for helpers."""
