#!/usr/bin/env bash
# System tools some tests use (real shells and tracers, a browser for the report test).
# In CI (CI=true, root) missing ones are installed from Debian's packages; elsewhere the
# tests that need them skip and say why.
set -u
need=()
command -v dash >/dev/null || need+=(dash)
command -v strace >/dev/null || need+=(strace)
command -v shellcheck >/dev/null || need+=(shellcheck)
command -v lsof >/dev/null || need+=(lsof)
command -v chromium >/dev/null || need+=(chromium)
if [ "${#need[@]}" -eq 0 ]; then exit 0; fi
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "installing: ${need[*]}"
	apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
	echo "not installed (their tests will skip): ${need[*]}"
fi
exit 0
