#!@@INTERP@@
# mcpshim-shim v1 -- written by `mcpshim install`; `mcpshim uninstall` removes it. Do not edit.
# Appends one record for this exec to the log pinned below, then execs the pinned target.
# The log location and the failure mode are literals: no variable in the environment moves
# or silences the record. bash runs this with -p (install adds it): no function, BASH_ENV,
# SHELLOPTS or BASHOPTS is taken from the environment. Functions a bash that became /bin/sh
# later imported anyway are dropped first (in its POSIX mode `unset`, a special builtin, is
# found before any function), so that no builtin used below can be replaced.
# shellcheck disable=SC3028 # `_` is no POSIX variable, but the caller may pass one
_mcpshim_us=${_+x}${_-}
\unset -f cd command printf read test '[' . umask
# Restores, right before exec, every variable this script touched (LC_ALL, PWD, OLDPWD,
# FUNCNEST: bash aborts a script whose functions nest deeper than it says; `_`, taken first:
# bash resets it after each command, and sets it to its own path when the caller had none).
[ -n "${BASH_VERSION-}" ] && [ "$_mcpshim_us" = "x${BASH-}" ] && _mcpshim_us=
_mcpshim_lc=${LC_ALL+x}${LC_ALL-}
_mcpshim_pw=$PWD
_mcpshim_op=${OLDPWD+x}${OLDPWD-}
_mcpshim_fn=${FUNCNEST+x}${FUNCNEST-}
LC_ALL=C
unset FUNCNEST

_mcpshim_log=@@LOGDIR@@
_mcpshim_tgt=@@TARGET@@
_mcpshim_fail=@@ONFAIL@@

# Writes the record; the argument list is what the log shows (already redacted).
_mcpshim_emit() {
	# One record is one write() while it fits the shells' output buffers (bash: 4096 bytes)
	# and, under bash, whose stdout is line-buffered, while no field holds a newline.
	_mcpshim_z=$((${#_mcpshim_cwd} + ${#PATH} + ${#0} + ${#_mcpshim_pc} + ${#_mcpshim_rr} + ${#MCPSHIM_SESSION} + 300))
	for _mcpshim_a; do _mcpshim_z=$((_mcpshim_z + ${#_mcpshim_a} + 2)); done
	_mcpshim_w=
	if [ -n "${BASH_VERSION-}" ]; then
		case $_mcpshim_cwd$PATH$0$_mcpshim_pc${MCPSHIM_SESSION-}$* in *'
'*) _mcpshim_w=1 ;;
		esac
	fi
	# One \0=%s per argument: written out for few, built by doubling for many.
	case $# in
	0) _mcpshim_f= ;;
	1) _mcpshim_f='\0=%s' ;;
	2) _mcpshim_f='\0=%s\0=%s' ;;
	3) _mcpshim_f='\0=%s\0=%s\0=%s' ;;
	*)
		_mcpshim_f=
		_mcpshim_u='\0=%s'
		_mcpshim_k=$#
		while [ "$_mcpshim_k" -gt 0 ]; do
			[ $((_mcpshim_k % 2)) -eq 1 ] && _mcpshim_f=$_mcpshim_f$_mcpshim_u
			_mcpshim_u=$_mcpshim_u$_mcpshim_u
			_mcpshim_k=$((_mcpshim_k / 2))
		done
		;;
	esac
	_mcpshim_f='\0R\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s'$_mcpshim_f'\0\n'
	set -- 1 exec "$_mcpshim_bt" "$_mcpshim_up" "$_mcpshim_boot" "$$" "$_mcpshim_ppid" \
		"$_mcpshim_start" "$_mcpshim_pst" "$_mcpshim_cwd" @@NAME@@ "$_mcpshim_tgt" "$0" \
		"${MCPSHIM_SESSION-}" "${PATH-}" "${_mcpshim_rr#,}" "$_mcpshim_pc" "$#" "$@"
	if [ "$_mcpshim_z" -le 4000 ] && [ -z "$_mcpshim_w" ]; then
		# Only into a regular file of this user's that is no symlink: a FIFO would block the
		# open, a symlink would send the record elsewhere. Anything else (a missing log
		# too) is the library's to sort out. (3 stats: the cost of never following a link.)
		if [ -f "$_mcpshim_log/exec.log" ] && [ -O "$_mcpshim_log/exec.log" ] &&
			! [ -h "$_mcpshim_log/exec.log" ]; then
			printf "$_mcpshim_f" "$@" >>"$_mcpshim_log/exec.log" && return
			_mcpshim_bad='exec.log cannot be written'
			return 1
		fi
		_mcpshim_lib exec.log && _mcpshim_write append exec.log "$_mcpshim_f" "$@"
		return
	fi
	# A larger record goes whole into a file of its own (rare: the library does it).
	_mcpshim_lib spill/ && _mcpshim_spill "$@"
}

# The rare paths (scrubbing, spill files, parent evidence, the boot anchor) live in a library
# beside the shims, parsed only when one is taken.
# `command .`: a library gone since the test makes `.` fail, not the shell exit. With an
# argument, a write needs the library: without it the write fails (the failure mode decides).
_mcpshim_lib() {
	[ -n "$_mcpshim_libok" ] && return 0
	[ -f @@LIB@@ ] && command . @@LIB@@ && _mcpshim_libok=1 && return 0
	[ -n "${1-}" ] && _mcpshim_bad=${_mcpshim_bad:-"$1 needs the shim library, which cannot be read"}
	return 1
}

# Start time is stat field 22, ppid field 4. Fields are split by the shell in one pass; that
# needs a comm without blanks: field 2 must be "(...)", and a line holding ") " twice (a comm
# crafted to fake fields) gets no start time at all.
_mcpshim_st22() {
	_mcpshim_pp=
	_mcpshim_st=
	case $_mcpshim_s in *') '*') '*) return 1 ;; esac
	set -f
	# shellcheck disable=SC2086 # split on purpose
	set -- $_mcpshim_s
	set +f
	case $2 in '('*')') ;; *) return 1 ;; esac
	case $3 in [A-Za-z]) ;; *) return 1 ;; esac
	case $4${22-x} in *[!0-9]*) return 1 ;; esac
	_mcpshim_pp=$4
	_mcpshim_st=${22}
}

_mcpshim_up=
_mcpshim_bt=
_mcpshim_boot=
_mcpshim_s=
_mcpshim_cwd=
_mcpshim_ppid=$PPID
_mcpshim_start=
_mcpshim_pst=
_mcpshim_pc=
_mcpshim_rr=
_mcpshim_nx=
_mcpshim_hit=
_mcpshim_libok=
_mcpshim_r=
_mcpshim_bad=
_mcpshim_um=
# Everything up to the write runs in one group with stderr on /dev/null (each redirection
# costs a handful of syscalls); the warning below goes to the caller's stderr again. No
# failed write ends the shell (a redirection error on a special builtin such as `:` would):
# each one only sets _mcpshim_bad, and --on-log-failure decides below.
{
	# A file-size limit must fail a write, not kill the shim (undone before exec).
	trap '' XFSZ
	read -r _mcpshim_up _mcpshim_k </proc/uptime
	read -r _mcpshim_boot </proc/sys/kernel/random/boot_id
	read -r _mcpshim_s </proc/self/stat
	cd -P . && _mcpshim_cwd=$PWD
	# A cwd that cannot be resolved (deleted: dash leaves PWD empty, bash ".") or searched
	# is recorded as unknown, with why: a path starts with /, a reason with ?.
	case $_mcpshim_cwd in
	/*) ;;
	*) if [ -x . ]; then _mcpshim_cwd='?unresolvable'; else _mcpshim_cwd='?no-search'; fi ;;
	esac
	_mcpshim_st22 && _mcpshim_ppid=$_mcpshim_pp _mcpshim_start=$_mcpshim_st
	if [ -n "$_mcpshim_boot" ]; then
		# the first exec of a boot with no anchor for it makes one (see _mcpshim_anchor)
		[ -e "$_mcpshim_log/boot/$_mcpshim_boot" ] ||
			{ _mcpshim_lib boot/ && _mcpshim_anchor; }
		# Parent evidence: a shell that no shim recorded (`/bin/sh -c '...'` started by
		# absolute path) would leave its composed line nowhere. The first shimmed child of
		# each shell process keeps the shell's start time and command line (NUL separators
		# are lost: dash reads them as nothing); a marker not older than /proc/PPID (whose
		# inode is made anew when a pid is reused) says it was kept already.
		# (test -ef and -ot are not in POSIX but in dash, bash, ksh, zsh, busybox, BSD sh.)
		for _mcpshim_a in @@SHELLS@@; do
			# shellcheck disable=SC3013
			[ "/proc/$_mcpshim_ppid/exe" -ef "$_mcpshim_a" ] || continue
			_mcpshim_a=parents/$_mcpshim_boot.$_mcpshim_ppid
			# shellcheck disable=SC3013
			[ -e "$_mcpshim_log/$_mcpshim_a" ] &&
				! [ "$_mcpshim_log/$_mcpshim_a" -ot "/proc/$_mcpshim_ppid" ] && break
			_mcpshim_lib parents/ && _mcpshim_parent "$_mcpshim_a"
			break
		done
	else
		# No procfs (macOS): the one subprocess this script may start.
		_mcpshim_bt=$(date -u +%s)
		_mcpshim_up=0
	fi
	# One look at the arguments joined with blanks (the shell's IFS at start): a pattern per
	# argument would cost each argument a scan per pattern.
	case " $* " in
	@@TRIGGERS@@) _mcpshim_hit=1 ;;
	*@*) case "$*" in *://*) _mcpshim_hit=1 ;; esac ;;
	esac
	[ -n "$_mcpshim_pc" ] && _mcpshim_hit=1
	if [ -n "$_mcpshim_bad" ] && [ "$_mcpshim_fail" = refuse ]; then
		: # a refused exec leaves no record: it did not happen
	elif [ -z "$_mcpshim_hit" ]; then
		_mcpshim_emit "$@"
	elif _mcpshim_lib; then
		[ -n "$_mcpshim_pc" ] && _mcpshim_scrubtext "$_mcpshim_pc" && _mcpshim_pc=$_mcpshim_r
		_mcpshim_redact "$@"
	else
		# Without its library the shim cannot tell secrets apart: it keeps none of the text.
		_mcpshim_pc=${_mcpshim_pc:+'[REDACTED:scrubber-missing]'}
		_mcpshim_rr=,scrubber-missing
		# "$_mcpshim_r" once per argument, by doubling: `set -- "$@" x` per argument is quadratic.
		# shellcheck disable=SC2016 # expanded by the eval below
		_mcpshim_u=' "$_mcpshim_r"'
		_mcpshim_f=
		_mcpshim_k=$#
		while [ "$_mcpshim_k" -gt 0 ]; do
			[ $((_mcpshim_k % 2)) -eq 1 ] && _mcpshim_f=$_mcpshim_f$_mcpshim_u
			_mcpshim_u=$_mcpshim_u$_mcpshim_u
			_mcpshim_k=$((_mcpshim_k / 2))
		done
		_mcpshim_r='[REDACTED:scrubber-missing]'
		eval "set -- $_mcpshim_f"
		_mcpshim_emit "$@"
	fi
	# (the record's status; _mcpshim_bad says what failed, the record or another file)
	_mcpshim_ok=$?
	[ "$_mcpshim_ok" -ne 0 ] && _mcpshim_bad=${_mcpshim_bad:-'exec.log cannot be written'}
	trap - XFSZ
} 2>/dev/null

case $_mcpshim_lc in x*) LC_ALL=${_mcpshim_lc#x} ;; *) unset LC_ALL ;; esac
PWD=$_mcpshim_pw
case $_mcpshim_op in x*) OLDPWD=${_mcpshim_op#x} ;; *) unset OLDPWD ;; esac
case $_mcpshim_fn in x*) export FUNCNEST="${_mcpshim_fn#x}" ;; esac
# bash -p puts "privileged" in SHELLOPTS, which the target inherits when the caller exported it
# shellcheck disable=SC3041 # only a shell started with -p (bash) has p in $-
case $- in *p*) set +p ;; esac
if [ -n "$_mcpshim_bad" ]; then
	[ -d "$_mcpshim_log" ] || _mcpshim_bad='no such directory'
	if [ "$_mcpshim_fail" = refuse ]; then
		printf 'mcpshim: refusing to run %s: the exec log %s cannot be written (%s)\n' \
			"$_mcpshim_tgt" "$_mcpshim_log" "$_mcpshim_bad" >&2
		exit 126
	fi
	[ "$_mcpshim_ok" -ne 0 ] && _mcpshim_ok=' unlogged' || _mcpshim_ok=
	printf 'mcpshim: warning: the exec log %s cannot be written (%s); running %s%s\n' \
		"$_mcpshim_log" "$_mcpshim_bad" "$_mcpshim_tgt" "$_mcpshim_ok" >&2
fi
unset _mcpshim_lc _mcpshim_pw _mcpshim_op _mcpshim_fn _mcpshim_log _mcpshim_tgt _mcpshim_fail \
	_mcpshim_s _mcpshim_o _mcpshim_v _mcpshim_b _mcpshim_t _mcpshim_k _mcpshim_r _mcpshim_rr \
	_mcpshim_nx _mcpshim_z _mcpshim_w _mcpshim_a _mcpshim_c _mcpshim_f _mcpshim_u _mcpshim_sp \
	_mcpshim_up _mcpshim_bt _mcpshim_boot _mcpshim_ppid _mcpshim_start _mcpshim_pst _mcpshim_pc \
	_mcpshim_pp _mcpshim_st _mcpshim_cwd _mcpshim_hit _mcpshim_n _mcpshim_ok _mcpshim_libok \
	_mcpshim_bad _mcpshim_um _mcpshim_m _mcpshim_q _mcpshim_y _mcpshim_e
case $_mcpshim_us in x*) _=${_mcpshim_us#x} exec @@TARGET@@ "$@" ;; esac
exec @@TARGET@@ "$@"
