#!@@INTERP@@
# mcpshim-shim v1 -- written by `mcpshim install`; `mcpshim uninstall` removes it. Do not edit.
# Appends one record for this exec to the log pinned below, then execs the pinned target.
# The log location and the failure mode are literals: no variable in the environment moves
# or silences the record. Shell functions imported from the environment (bash) are dropped
# first so that no builtin used below can be replaced.
\unset -f cd command printf read test '[' .
# Restores, right before exec, every variable this script touched (LC_ALL, PWD, OLDPWD).
_mcpshim_lc=${LC_ALL+x}${LC_ALL-}
_mcpshim_pw=$PWD
_mcpshim_op=${OLDPWD+x}${OLDPWD-}
LC_ALL=C

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
		printf "$_mcpshim_f" "$@" >>"$_mcpshim_log/exec.log"
		return
	fi
	# A larger record goes whole into a file of its own (rare: the library does it).
	_mcpshim_lib && _mcpshim_spill "$@"
}

# The rare paths (scrubbing, spill files, parent evidence, the boot anchor) live in a library
# beside the shims, parsed only when one is taken.
_mcpshim_lib() {
	[ -n "$_mcpshim_libok" ] && return 0
	[ -r @@LIB@@ ] && . @@LIB@@ && _mcpshim_libok=1
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
# Everything up to the write runs in one group with stderr on /dev/null (each redirection
# costs a handful of syscalls); the warning below goes to the caller's stderr again.
{
	read -r _mcpshim_up _ </proc/uptime
	read -r _mcpshim_boot </proc/sys/kernel/random/boot_id
	read -r _mcpshim_s </proc/self/stat
	cd -P . && _mcpshim_cwd=$PWD
	_mcpshim_st22 && _mcpshim_ppid=$_mcpshim_pp _mcpshim_start=$_mcpshim_st
	if [ -n "$_mcpshim_boot" ]; then
		# the first exec of a boot with no anchor for it makes one (see _mcpshim_anchor)
		[ -e "$_mcpshim_log/boot/$_mcpshim_boot" ] || { _mcpshim_lib && _mcpshim_anchor; }
		# Parent evidence: a shell that no shim recorded (`/bin/sh -c '...'` started by
		# absolute path) would leave its composed line nowhere. The first shimmed child of
		# each shell process keeps the shell's start time and command line (NUL separators
		# are lost: dash reads them as nothing); a marker not older than /proc/PPID (whose
		# inode is made anew when a pid is reused) says it was kept already.
		# (test -ef and -ot are not in POSIX but in dash, bash, ksh, zsh, busybox, BSD sh.)
		for _mcpshim_a in @@SHELLS@@; do
			# shellcheck disable=SC3013
			[ "/proc/$_mcpshim_ppid/exe" -ef "$_mcpshim_a" ] || continue
			_mcpshim_a=$_mcpshim_log/parents/$_mcpshim_boot.$_mcpshim_ppid
			# shellcheck disable=SC3013
			[ -e "$_mcpshim_a" ] && ! [ "$_mcpshim_a" -ot "/proc/$_mcpshim_ppid" ] && break
			_mcpshim_lib && _mcpshim_parent "$_mcpshim_a"
			break
		done
	else
		# No procfs (macOS): the one subprocess this script may start.
		_mcpshim_bt=$(date -u +%s)
		_mcpshim_up=0
	fi
	for _mcpshim_a; do
		case $_mcpshim_a in
		@@TRIGGERS@@) _mcpshim_hit=1 && break ;;
		esac
	done
	[ -n "$_mcpshim_pc" ] && _mcpshim_hit=1
	# A file-size limit must fail the write, not kill the shim (undone before exec).
	trap '' XFSZ
	if [ -z "$_mcpshim_hit" ]; then
		_mcpshim_emit "$@"
	elif _mcpshim_lib; then
		[ -n "$_mcpshim_pc" ] && _mcpshim_scrubtext "$_mcpshim_pc" && _mcpshim_pc=$_mcpshim_r
		_mcpshim_redact "$@"
	else
		# Without its library the shim cannot tell secrets apart: it keeps none of the text.
		_mcpshim_pc=${_mcpshim_pc:+'[REDACTED:scrubber-missing]'}
		_mcpshim_rr=,scrubber-missing
		_mcpshim_c=$#
		for _mcpshim_a; do set -- "$@" '[REDACTED:scrubber-missing]'; done
		shift "$_mcpshim_c"
		_mcpshim_emit "$@"
	fi
	_mcpshim_ok=$?
	trap - XFSZ
} 2>/dev/null

case $_mcpshim_lc in x*) LC_ALL=${_mcpshim_lc#x} ;; *) unset LC_ALL ;; esac
PWD=$_mcpshim_pw
case $_mcpshim_op in x*) OLDPWD=${_mcpshim_op#x} ;; *) unset OLDPWD ;; esac
if [ "$_mcpshim_ok" -ne 0 ]; then
	if [ "$_mcpshim_fail" = refuse ]; then
		printf 'mcpshim: refusing to run %s: the exec log %s cannot be written\n' "$_mcpshim_tgt" "$_mcpshim_log" >&2
		exit 126
	fi
	printf 'mcpshim: warning: the exec log %s cannot be written; running %s unlogged\n' "$_mcpshim_log" "$_mcpshim_tgt" >&2
fi
unset _mcpshim_lc _mcpshim_pw _mcpshim_op _mcpshim_log _mcpshim_tgt _mcpshim_fail _mcpshim_s \
	_mcpshim_o _mcpshim_v _mcpshim_b _mcpshim_t _mcpshim_k _mcpshim_r _mcpshim_rr _mcpshim_nx \
	_mcpshim_z _mcpshim_w _mcpshim_a _mcpshim_c _mcpshim_f _mcpshim_u _mcpshim_sp _mcpshim_up _mcpshim_bt _mcpshim_boot \
	_mcpshim_ppid _mcpshim_start _mcpshim_pst _mcpshim_pc _mcpshim_pp _mcpshim_st _mcpshim_cwd _mcpshim_hit _mcpshim_n _mcpshim_ok _mcpshim_libok
exec @@TARGET@@ "$@"
