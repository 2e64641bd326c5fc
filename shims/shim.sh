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
#bash{
[ -n "${BASH_VERSION-}" ] && [ "$_mcpshim_us" = "x${BASH-}" ] && _mcpshim_us=
#bash}
# The common path runs as few commands as it can, and defines one small function: each
# command costs the interpreter microseconds, and a function definition is parsed and
# copied (the rare paths are in the library, parsed only when taken). Assignments that do
# not read one another share a command. The commented text is the package's shims/shim.sh;
# the installed shim keeps no comment line (each line is read on every exec).
_mcpshim_lc=${LC_ALL+x}${LC_ALL-} _mcpshim_pw=$PWD _mcpshim_op=${OLDPWD+x}${OLDPWD-} \
	_mcpshim_fn=${FUNCNEST+x}${FUNCNEST-}
LC_ALL=C
unset FUNCNEST
_mcpshim_log=@@LOGDIR@@
_mcpshim_tgt=@@TARGET@@
_mcpshim_fail=@@ONFAIL@@
_mcpshim_name=@@NAME@@
# Whether bash runs this shim, as install rendered it: a dash shim never asks the environment,
# where BASH_VERSION may say anything (bash sets its own; dash takes the caller's).
_mcpshim_up='' _mcpshim_bt='' _mcpshim_boot='' _mcpshim_s='' _mcpshim_cwd='' _mcpshim_ppid=$PPID \
	_mcpshim_bash=@@BASH@@ _mcpshim_start='' _mcpshim_pst='' _mcpshim_pc='' _mcpshim_rr='' _mcpshim_nx='' _mcpshim_hit='' \
	_mcpshim_libok='' _mcpshim_r='' _mcpshim_bad='' _mcpshim_um='' _mcpshim_av=1 _mcpshim_w='' _mcpshim_ok=0

# Loads the library on a rare path. `command .`: a library gone since the test makes `.`
# fail, not the shell exit. With an argument, a write needs the library: without it the
# write fails (the failure mode decides).
_mcpshim_lib() {
	[ -n "$_mcpshim_libok" ] && return 0
	[ -f @@LIB@@ ] && command . @@LIB@@ && _mcpshim_libok=1 && return 0
	[ -n "${1-}" ] && _mcpshim_bad=${_mcpshim_bad:-"$1 needs the shim library, which cannot be read"}
	return 1
}

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
	# The fields after the comm go in front of the arguments for a moment: ppid is the 2nd,
	# the start time the 20th (stat fields 4 and 22); the shift gives the arguments back
	# untouched. A line holding ") " twice (a comm crafted to fake fields) gets no start
	# time at all, and nor does one with fewer than 20 fields of its own: a newline in the
	# comm cuts the line short, and ${20} would be a caller's argument. (${s##*') '} would
	# find the last one, in time quadratic in the line.)
	case $_mcpshim_s in
	*') '*') '*) ;;
	"$$ ("*') '*)
		_mcpshim_n=$#
		set -f
		# shellcheck disable=SC2086 # split on purpose
		set -- ${_mcpshim_s#*') '} "$@"
		set +f
		[ $(($# - _mcpshim_n)) -lt 20 ] || case $1 in [A-Za-z])
			case $2${20} in *[!0-9]*) ;; *) _mcpshim_ppid=$2 _mcpshim_start=${20} ;; esac
			;;
		esac
		shift $(($# - _mcpshim_n))
		;;
	esac
	if [ -n "$_mcpshim_boot" ]; then
		# the first exec of a boot with no anchor for it makes one (see _mcpshim_anchor)
		[ -e "$_mcpshim_log/boot/$_mcpshim_boot" ] ||
			{ _mcpshim_lib boot/ && _mcpshim_anchor; }
		# Parent evidence: a shell that no shim recorded (`/bin/sh -c '...'` started by
		# absolute path) would leave its composed line nowhere. The first shimmed child of
		# each shell process keeps the shell's start time and argv, scrubbed (the library
		# spends a subprocess on it: no builtin reads the NULs between the arguments); a
		# marker not older than /proc/PPID (whose inode is made anew when a pid is reused)
		# and not newer than this process (no marker planted ahead for a pid, dated in the
		# future) says it was kept already. Any other marker is the library's to judge by
		# its content (_mcpshim_kept).
		# (test -ef, -ot and -nt are not in POSIX but in dash, bash, ksh, zsh, busybox, BSD sh.)
		for _mcpshim_a in @@SHELLS@@; do
			# shellcheck disable=SC3013
			[ "/proc/$_mcpshim_ppid/exe" -ef "$_mcpshim_a" ] || continue
			_mcpshim_a=parents/$_mcpshim_boot.$_mcpshim_ppid
			# shellcheck disable=SC3013
			[ -e "$_mcpshim_log/$_mcpshim_a" ] &&
				! [ "$_mcpshim_log/$_mcpshim_a" -ot "/proc/$_mcpshim_ppid" ] &&
				! [ "$_mcpshim_log/$_mcpshim_a" -nt "/proc/$$" ] && break
			_mcpshim_lib parents/ && _mcpshim_parent "$_mcpshim_a" @@LIB@@
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
	# The format: one \0=%s per argument, written out for few, built by doubling for many
	# (_mcpshim_fa; the library's writer uses it too). Without its library the shim cannot
	# tell secrets apart, so it keeps none of the arguments' text: the format then holds a
	# placeholder per argument, and no argument is passed to printf (${_mcpshim_av+"$@"}).
	# The arguments themselves never change: the target gets them as they came.
	_mcpshim_u='\0=%s'
	if [ -n "$_mcpshim_hit" ] && ! _mcpshim_lib; then
		_mcpshim_pc=${_mcpshim_pc:+'[REDACTED:scrubber-missing]'}
		_mcpshim_rr=,scrubber-missing
		_mcpshim_u='\0=[REDACTED:scrubber-missing]'
		_mcpshim_hit=''
		unset _mcpshim_av
	fi
	case $# in
	0) _mcpshim_fa='' ;;
	1) _mcpshim_fa=$_mcpshim_u ;;
	2) _mcpshim_fa=$_mcpshim_u$_mcpshim_u ;;
	3) _mcpshim_fa=$_mcpshim_u$_mcpshim_u$_mcpshim_u ;;
	*)
		_mcpshim_fa=''
		_mcpshim_k=$#
		while [ "$_mcpshim_k" -gt 0 ]; do
			[ $((_mcpshim_k % 2)) -eq 1 ] && _mcpshim_fa=$_mcpshim_fa$_mcpshim_u
			_mcpshim_u=$_mcpshim_u$_mcpshim_u
			_mcpshim_k=$((_mcpshim_k / 2))
		done
		;;
	esac
	if [ -n "$_mcpshim_bad" ] && [ "$_mcpshim_fail" = refuse ]; then
		_mcpshim_ok= # a refused exec leaves no record: it did not happen
	elif [ -n "$_mcpshim_hit" ]; then
		# the library scrubs the arguments and writes the record (_mcpshim_emit)
		_mcpshim_redact "$@" && _mcpshim_ok=
	else
		# One record is one write() while it fits the shells' output buffers (bash: 4096
		# bytes) and, under bash, whose stdout is line-buffered, while no field holds a
		# newline. ("$*" joins with at most one character: its length plus 2 per argument
		# bounds the arguments' part; the format's length bounds the placeholders'.)
		_mcpshim_a="$*"
		_mcpshim_z=$((${#_mcpshim_cwd} + ${#PATH} + ${#0} + ${#_mcpshim_pc} + ${#_mcpshim_rr} + ${#MCPSHIM_SESSION} + ${#_mcpshim_a} + ${#_mcpshim_fa} + 2 * $# + 300))
		[ -n "$_mcpshim_bash" ] && case $_mcpshim_cwd$PATH$0$_mcpshim_pc${MCPSHIM_SESSION-}$* in *'
'*) _mcpshim_w=1 ;;
		esac
		_mcpshim_f='\0R\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s'$_mcpshim_fa'\0\n'
		# Only into a regular file of this user's that is no symlink: a FIFO would block the
		# open, a symlink would send the record elsewhere. Anything else (a missing log
		# too, or a record too large for one write) is the library's to sort out, with the
		# same fields (_mcpshim_emit). (3 stats: the cost of never following a link.)
		if [ "$_mcpshim_z" -le 4000 ] && [ -z "$_mcpshim_w" ] && [ -f "$_mcpshim_log/exec.log" ] &&
			[ -O "$_mcpshim_log/exec.log" ] && ! [ -h "$_mcpshim_log/exec.log" ]; then
			printf "$_mcpshim_f" 1 exec "$_mcpshim_bt" "$_mcpshim_up" "$_mcpshim_boot" "$$" \
				"$_mcpshim_ppid" "$_mcpshim_start" "$_mcpshim_pst" "$_mcpshim_cwd" "$_mcpshim_name" \
				"$_mcpshim_tgt" "$0" "${MCPSHIM_SESSION-}" "${PATH-}" "${_mcpshim_rr#,}" \
				"$_mcpshim_pc" "$#" ${_mcpshim_av+"$@"} >>"$_mcpshim_log/exec.log" &&
				_mcpshim_ok= || _mcpshim_bad='exec.log cannot be written'
		elif _mcpshim_lib exec.log && [ -n "${_mcpshim_av-}" ] && _mcpshim_emit "$@"; then
			_mcpshim_ok=
		fi
	fi
	# (_mcpshim_ok: empty once the record is written or needs none; _mcpshim_bad says what
	# failed, the record or another file)
	[ -n "$_mcpshim_ok" ] && _mcpshim_ok=' unlogged' _mcpshim_bad=${_mcpshim_bad:-'exec.log cannot be written'}
	trap - XFSZ
} 2>/dev/null

#bash{ (install renders the lines from here to the closing mark for bash alone)
# bash changes the environment its children get: it exports SHLVL (0 when the caller had
# none) and PWD (corrected, when the caller had none or a stale one), drops an OLDPWD that
# names no directory, resets IFS, PS4, OPTIND and POSIXLY_CORRECT, unsets PS1 and PS2, and
# puts its own values in its dynamic variables (RANDOM, LINENO, BASH...) and in `_`. The
# caller's environment, as it came, is in /proc/self/environ (`mapfile -d ''`, bash 4.4: a
# few reads). One look at its names (and at PWD, OLDPWD and `_` beside bash's) finds what
# bash changed; only then does the library go through the entries (_mcpshim_environ). What
# the caller did not have is removed here (SHLVL becomes an array: bash exports no array,
# and its `exec` would write any other SHLVL anew). What bash keeps readonly (PPID, UID,
# EUID, SHELLOPTS, BASHOPTS) and a SHLVL that is no number stay as bash has them:
# docs/threat-model.md. LC_ALL is still C here (matching bytes, not characters); bash's
# arrays only inside eval, which no other shell parses.
_mcpshim_pu=
# shellcheck disable=SC3044,SC2154 # bash alone runs this part (mapfile, declare; eval assigns)
if [ -n "${BASH_VERSION-}" ] && [ -r /proc/self/environ ] &&
	mapfile -d '' -t _mcpshim_ev </proc/self/environ 2>/dev/null; then
	eval '_mcpshim_k=" ${_mcpshim_ev[*]%%=*} " _mcpshim_e=" ${_mcpshim_ev[*]} "'
	_mcpshim_n=
	case $_mcpshim_k in *" SHLVL "*) ;; *) unset -v SHLVL && declare -a SHLVL ;; esac
	case $_mcpshim_k in
	*" _ "*) case $_mcpshim_e in *" _=${_mcpshim_us#x} "*) ;; *) _mcpshim_n=1 ;; esac ;;
	*) _mcpshim_us= ;;
	esac
	case $_mcpshim_k in
	*" PWD "*) case $_mcpshim_e in *" PWD=$_mcpshim_pw "*) ;; *) _mcpshim_n=1 ;; esac ;;
	*) _mcpshim_pu=1 ;;
	esac
	case $_mcpshim_k in *" OLDPWD "*)
		case $_mcpshim_op in
		x*) case $_mcpshim_e in *" OLDPWD=${_mcpshim_op#x} "*) ;; *) _mcpshim_n=1 ;; esac ;;
		*) _mcpshim_n=1 ;;
		esac
		;;
	esac
	case $_mcpshim_k in
	*" IFS "* | *" PS"[124]" "* | *" OPTIND "* | *" POSIXLY_CORRECT "* | *" BASH"* | \
		*" LINENO "* | *"RANDOM "* | *" HISTCMD "* | *" EPOCH"* | *" COMP_WORDBREAKS "*)
		_mcpshim_n=1
		;;
	esac
	# (the entries themselves: the library's rare path)
	[ -z "$_mcpshim_n" ] || ! _mcpshim_lib || _mcpshim_environ
	unset -v _mcpshim_ev _mcpshim_e _mcpshim_n _mcpshim_k
fi
#bash}
case $_mcpshim_lc in x*) LC_ALL=${_mcpshim_lc#x} ;; *) unset LC_ALL ;; esac
PWD=$_mcpshim_pw
#bash{
[ -z "$_mcpshim_pu" ] || unset PWD
#bash}
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
	printf 'mcpshim: warning: the exec log %s cannot be written (%s); running %s%s\n' \
		"$_mcpshim_log" "$_mcpshim_bad" "$_mcpshim_tgt" "$_mcpshim_ok" >&2
fi
unset _mcpshim_lc _mcpshim_pw _mcpshim_op _mcpshim_fn _mcpshim_log _mcpshim_tgt _mcpshim_fail \
	_mcpshim_s _mcpshim_o _mcpshim_v _mcpshim_b _mcpshim_t _mcpshim_k _mcpshim_r _mcpshim_rr \
	_mcpshim_nx _mcpshim_z _mcpshim_w _mcpshim_a _mcpshim_c _mcpshim_f _mcpshim_u _mcpshim_sp \
	_mcpshim_up _mcpshim_bt _mcpshim_boot _mcpshim_ppid _mcpshim_start _mcpshim_pst _mcpshim_pc \
	_mcpshim_pp _mcpshim_st _mcpshim_cwd _mcpshim_hit _mcpshim_n _mcpshim_ok _mcpshim_libok \
	_mcpshim_bad _mcpshim_um _mcpshim_m _mcpshim_q _mcpshim_y _mcpshim_e _mcpshim_av _mcpshim_name \
	_mcpshim_fa _mcpshim_bash _mcpshim_pu
case $_mcpshim_us in x*) _=${_mcpshim_us#x} exec @@TARGET@@ "$@" ;; esac
exec @@TARGET@@ "$@"
