# mcpshim-shim v1 scrubber -- written by `mcpshim install`; sourced by the shims beside it
# only when an argument looks like it may hold a credential. Do not edit.
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
