#!/usr/bin/env bash
# System tools the tests use (real shells and tracers, Node.js for the fixture and corpus
# servers, a browser for the report test, an OpenTelemetry engine for the export test, a
# syslog daemon and logger for the seal anchors). In CI (CI=true, root) missing ones are
# installed from Debian's packages, and a test that still misses one fails (tests/conftest.py);
# elsewhere the tests that need them skip and say why.
set -u
need=()
command -v dash >/dev/null || need+=(dash)
command -v bash >/dev/null || need+=(bash)
command -v git >/dev/null || need+=(git)
command -v curl >/dev/null || need+=(curl)
command -v make >/dev/null || need+=(make)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v flock >/dev/null || need+=(util-linux)   # flock(1): the log's lock, shared
command -v setpriv >/dev/null || need+=(util-linux) # reading a log as another user
command -v cc >/dev/null || need+=(gcc) # builds the native shims (tests/shim/test_native_*)
command -v strace >/dev/null || need+=(strace)
command -v shellcheck >/dev/null || need+=(shellcheck)
command -v lsof >/dev/null || need+=(lsof)
command -v zsh >/dev/null || need+=(zsh)
command -v chromium >/dev/null || need+=(chromium)
command -v rsyslogd >/dev/null || [ -x /usr/sbin/rsyslogd ] || need+=(rsyslog)
command -v logger >/dev/null || need+=(bsdutils)
# Arize Phoenix, the real OpenTelemetry engine of tests/otel/test_phoenix.py: big (about
# 850 MB, a few minutes to install) and with dependencies of its own, so in a venv of its own.
phoenix_venv=.venv-phoenix
if [ ! -x "$phoenix_venv/bin/phoenix" ]; then
	if [ "${CI:-}" = true ]; then
		echo "installing: arize-phoenix (into $phoenix_venv)"
		python3 -m venv "$phoenix_venv" && "$phoenix_venv/bin/pip" install -q 'arize-phoenix==20.26.1' >/dev/null \
			|| echo "arize-phoenix did not install (its test will fail)"
	else
		echo "not installed (its test will skip): arize-phoenix in $phoenix_venv"
	fi
fi
if [ "${#need[@]}" -eq 0 ]; then exit 0; fi
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "installing: ${need[*]}"
	apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
	echo "not installed (their tests will skip): ${need[*]}"
fi
exit 0
