# mcpshim-shim v1 library -- written by `mcpshim install`; sourced by the shims beside it only
# on a rare path: an argument that may hold a credential, a record too large for one write,
# a shell parent, the first exec of a boot. It shares the shim's variables. Do not edit.
# Secret shapes (generated from mcpshim.redact): a hit rewrites only the secret part of an argument.
_mcpshim_tok() { # VALUE PREFIX STOPCLASS MINLEN NAME BOUNDARY
	_mcpshim_o=
	_mcpshim_v=$1
	while :; do
		case $_mcpshim_v in *"$2"*) ;; *) break ;; esac
		_mcpshim_b=${_mcpshim_v%%"$2"*}
		_mcpshim_t=${_mcpshim_v#"$_mcpshim_b$2"}
		# shellcheck disable=SC2295 # $3 is a bracket pattern on purpose
		_mcpshim_k=${_mcpshim_t%%$3*}
		_mcpshim_v=${_mcpshim_t#"$_mcpshim_k"}
		_mcpshim_n=${#_mcpshim_k}
		# A prefix glued to a word (task-..., disk-...) is not a token.
		case $6$_mcpshim_b in b*[ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789]) _mcpshim_n=0 ;; esac
		if [ "$_mcpshim_n" -ge "$4" ]; then
			_mcpshim_o=$_mcpshim_o$_mcpshim_b$2"[REDACTED:$5]"
			_mcpshim_rr=$_mcpshim_rr,$5
		else
			_mcpshim_o=$_mcpshim_o$_mcpshim_b$2$_mcpshim_k
		fi
	done
	_mcpshim_r=$_mcpshim_o$_mcpshim_v
}

# user:password@ in a URL keeps the user and the host.
_mcpshim_url() {
	_mcpshim_o=
	_mcpshim_v=$1
	while :; do
		case $_mcpshim_v in *://*) ;; *) break ;; esac
		_mcpshim_b=${_mcpshim_v%%://*}://
		_mcpshim_t=${_mcpshim_v#"$_mcpshim_b"}
		_mcpshim_k=${_mcpshim_t%%[/@ 	\"\'
]*}
		_mcpshim_v=${_mcpshim_t#"$_mcpshim_k"}
		if [ "${_mcpshim_v#@}" != "$_mcpshim_v" ] && [ "${_mcpshim_k#*:}" != "$_mcpshim_k" ]; then
			_mcpshim_o=$_mcpshim_o$_mcpshim_b${_mcpshim_k%%:*}:'[REDACTED:url-password]'
			_mcpshim_rr=$_mcpshim_rr,url-password
		else
			_mcpshim_o=$_mcpshim_o$_mcpshim_b$_mcpshim_k
		fi
	done
	_mcpshim_r=$_mcpshim_o$_mcpshim_v
}

_mcpshim_scrub1() {
	_mcpshim_r=$1
	if [ -n "$_mcpshim_nx" ]; then
		_mcpshim_r="[REDACTED:$_mcpshim_nx]"
		_mcpshim_rr=$_mcpshim_rr,$_mcpshim_nx
		_mcpshim_nx=
		return
	fi
	case $1 in
@@OPTION_CASES@@
	esac
@@TOKEN_CALLS@@
	case $_mcpshim_r in *://*:*@*) _mcpshim_url "$_mcpshim_r" ;; esac
}


# A parent's command line read with its NUL separators lost: token rules as for an argument,
# and everything after a secret-bearing option name is dropped (its value cannot be told
# apart from the name any more).
_mcpshim_scrubtext() {
	_mcpshim_nx=
	_mcpshim_scrub1 "$1"
	_mcpshim_nx=
	for _mcpshim_a in @@OPTION_NAMES@@; do
		case $_mcpshim_r in
		*"$_mcpshim_a"*)
			_mcpshim_r=${_mcpshim_r%%"$_mcpshim_a"*}$_mcpshim_a'[REDACTED:option-value]'
			_mcpshim_rr=$_mcpshim_rr,option-value
			;;
		esac
	done
	return 0
}

# A record too large for one write; called with its fields (after the shim's `set --`).
_mcpshim_spill() {
	# The whole record in a file of its own, then a one-write pointer to it in the log.
	# The name is unique: only one process has this boot, pid and start, and it runs one
	# shim at a time (an exec chain within one tick bumps the counter).
	_mcpshim_sp=$_mcpshim_boot.$$.$_mcpshim_start.$_mcpshim_up
	_mcpshim_k=0
	while [ -e "$_mcpshim_log/spill/$_mcpshim_sp.$_mcpshim_k" ] ||
		[ -h "$_mcpshim_log/spill/$_mcpshim_sp.$_mcpshim_k" ]; do
		_mcpshim_k=$((_mcpshim_k + 1))
	done
	_mcpshim_write new "spill/$_mcpshim_sp.$_mcpshim_k" "$_mcpshim_f" "$@" &&
		_mcpshim_write append exec.log '\0P\0=1\0=%s\0\n' "$_mcpshim_sp.$_mcpshim_k"
}

# The caller's umask, read once (Linux has it in /proc since 4.7; elsewhere the one
# subshell), so that it can be put back the moment a file is created.
_mcpshim_mask() {
	[ -n "$_mcpshim_um" ] && return 0
	{
		read -r _mcpshim_e
		read -r _mcpshim_e _mcpshim_um
	} </proc/self/status
	case $_mcpshim_e:$_mcpshim_um in Umask::[0-7]*) ;; *) _mcpshim_um=$(umask) ;; esac
	case $_mcpshim_um in '' | *[!0-7]*) _mcpshim_um= && return 1 ;; esac
}

# Writes one printf (FORMAT ARGS...) to FILE, a name under the log dir, as MODE says: new
# (the file must not exist), keep (create it unless it exists, then leave it), append, or
# replace (truncate: a marker's mtime). A file is created 0600 (umask 077 for that one
# open, the caller's put back at once) with noclobber, whose open has O_EXCL: never
# through a symlink. An existing file must be a regular file of this user's and no
# symlink: a FIFO would block the open, a symlink would send the write elsewhere, another
# user's file is not ours to append to. (What remains: a FIFO or symlink swapped in
# between the test and the open; in a log dir only its owner can write, install makes
# sure of that, only the owner can swap it.) What failed goes to _mcpshim_bad.
_mcpshim_write() {
	_mcpshim_m=$1
	_mcpshim_q=$2
	shift 2
	if ! [ -e "$_mcpshim_log/$_mcpshim_q" ] && ! [ -h "$_mcpshim_log/$_mcpshim_q" ]; then
		_mcpshim_mask && umask 077
		set -C
		printf "$@" >"$_mcpshim_log/$_mcpshim_q"
		_mcpshim_e=$?
		set +C
		[ -n "$_mcpshim_um" ] && umask "$_mcpshim_um"
		[ "$_mcpshim_e" -eq 0 ] && return 0
		# another shim may have made it meanwhile: append to it, or keep it
		if [ "$_mcpshim_m" = new ] || ! [ -e "$_mcpshim_log/$_mcpshim_q" ]; then
			_mcpshim_bad=${_mcpshim_bad:-"$_mcpshim_q cannot be created"}
			return 1
		fi
	fi
	if [ -h "$_mcpshim_log/$_mcpshim_q" ]; then
		_mcpshim_y='is a symlink'
	elif [ "$_mcpshim_m" = new ]; then
		_mcpshim_y='exists already'
	elif ! [ -f "$_mcpshim_log/$_mcpshim_q" ]; then
		_mcpshim_y='is not a regular file'
	elif ! [ -O "$_mcpshim_log/$_mcpshim_q" ]; then
		_mcpshim_y='belongs to another user'
	elif [ "$_mcpshim_m" = keep ]; then
		return 0
	elif [ "$_mcpshim_m" = append ]; then
		printf "$@" >>"$_mcpshim_log/$_mcpshim_q" && return 0
		_mcpshim_y='cannot be written'
	else
		printf "$@" >"$_mcpshim_log/$_mcpshim_q" && return 0
		_mcpshim_y='cannot be written'
	fi
	_mcpshim_bad=${_mcpshim_bad:-"$_mcpshim_q $_mcpshim_y"}
	return 1
}

# Scrubs every argument, then writes the record with what is left.
_mcpshim_redact() {
	_mcpshim_c=$#
	for _mcpshim_a; do
		_mcpshim_scrub1 "$_mcpshim_a"
		set -- "$@" "$_mcpshim_r"
	done
	shift "$_mcpshim_c"
	_mcpshim_emit "$@"
}

# The parent shell's start time and command line, and the marker (FILE, under the log dir)
# that says they are kept.
_mcpshim_parent() {
	read -r _mcpshim_s <"/proc/$_mcpshim_ppid/stat" && _mcpshim_st22 &&
		_mcpshim_pst=$_mcpshim_st
	_mcpshim_s=
	while IFS= read -r _mcpshim_k || [ -n "$_mcpshim_k" ]; do
		_mcpshim_pc=$_mcpshim_pc$_mcpshim_s$_mcpshim_k
		_mcpshim_s='
'
	done <"/proc/$_mcpshim_ppid/cmdline"
	_mcpshim_write replace "$1" ''
}

# boot/<boot id> anchors uptime to UTC for the reader (whole seconds, from /proc/stat), when
# mcpshim itself has not written a finer one for this boot.
_mcpshim_anchor() {
	while read -r _mcpshim_k _mcpshim_bt; do
		[ "$_mcpshim_k" = btime ] && break
		_mcpshim_bt=
	done </proc/stat
	[ -n "$_mcpshim_bt" ] && _mcpshim_write keep "boot/$_mcpshim_boot" '%s\n' "$_mcpshim_bt"
	_mcpshim_bt=
}
