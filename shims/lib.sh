# mcpshim-shim v1 library -- written by `mcpshim install`; sourced by the shims beside it only
# on a rare path: an argument that may hold a credential, a record too large for one write,
# a shell parent, the first exec of a boot. It shares the shim's variables. Do not edit.
# Secret shapes (generated from mcpshim.log.redact_rules by mcpshim.log.redact_sh): a hit
# rewrites only the secret part of an argument. Every step takes time linear in the length
# of what it reads, whatever the text: a rule splits an argument at its anchor character
# in one pass (field splitting) and looks at each piece once; nothing strips a long
# literal prefix (${v#"$long"} tries every length: quadratic); patterns hold at most one
# run of `*` between fixed text (`*a*b*` backtracks); the output is built in pieces.

# Appends $1 to the text being built, _mcpshim_o3 _mcpshim_o2 _mcpshim_o1 in that order: a
# piece lands in o1, which moves into o2 when it grows, and o2 into o3, so no append copies
# a long string often. _mcpshim_wput keeps a second such text (w1-w3), _mcpshim_eput a third.
_mcpshim_put() {
	_mcpshim_o1=$_mcpshim_o1$1
	[ "${#_mcpshim_o1}" -lt 1024 ] && return
	_mcpshim_o2=$_mcpshim_o2$_mcpshim_o1
	_mcpshim_o1=
	[ "${#_mcpshim_o2}" -lt 65536 ] && return
	_mcpshim_o3=$_mcpshim_o3$_mcpshim_o2
	_mcpshim_o2=
}
_mcpshim_wput() {
	_mcpshim_w1=$_mcpshim_w1$1
	[ "${#_mcpshim_w1}" -lt 1024 ] && return
	_mcpshim_w2=$_mcpshim_w2$_mcpshim_w1
	_mcpshim_w1=
	[ "${#_mcpshim_w2}" -lt 65536 ] && return
	_mcpshim_w3=$_mcpshim_w3$_mcpshim_w2
	_mcpshim_w2=
}
_mcpshim_eput() {
	_mcpshim_e1=$_mcpshim_e1$1
	[ "${#_mcpshim_e1}" -lt 1024 ] && return
	_mcpshim_e2=$_mcpshim_e2$_mcpshim_e1
	_mcpshim_e1=
	[ "${#_mcpshim_e2}" -lt 65536 ] && return
	_mcpshim_e3=$_mcpshim_e3$_mcpshim_e2
	_mcpshim_e2=
}

# _mcpshim_drop STRING PREFIX: _mcpshim_d is STRING without PREFIX (which it starts with).
# A long prefix goes 256 characters at a time: ${s#"$p"} costs length(p)^2/2 steps.
_mcpshim_drop() {
	if [ "${#2}" -le 256 ]; then
		_mcpshim_d=${1#"$2"}
		return
	fi
	_mcpshim_d=$1
	_mcpshim_dn=${#2}
	while [ "$_mcpshim_dn" -ge 256 ]; do
		# shellcheck disable=SC2295 # a run of ? on purpose
		_mcpshim_d=${_mcpshim_d#$_mcpshim_q256}
		_mcpshim_dn=$((_mcpshim_dn - 256))
	done
	while [ "$_mcpshim_dn" -ge 16 ]; do
		# shellcheck disable=SC2295
		_mcpshim_d=${_mcpshim_d#$_mcpshim_q16}
		_mcpshim_dn=$((_mcpshim_dn - 16))
	done
	while [ "$_mcpshim_dn" -gt 0 ]; do
		_mcpshim_d=${_mcpshim_d#?}
		_mcpshim_dn=$((_mcpshim_dn - 1))
	done
}

# Around a `set -- $v` that splits v at every character $1 (no globbing), into the
# caller's own "$@": POSIX sh has no arrays.
_mcpshim_ifs0() {
	_mcpshim_sv=${IFS+x}${IFS-}
	IFS=$1
	set -f
}
_mcpshim_ifs1() {
	case $_mcpshim_sv in x*) IFS=${_mcpshim_sv#x} ;; *) unset IFS ;; esac
	set +f
}

# The class of the last character of $1, for a head that starts right after it: a (a-z),
# A (A-Z), d (0-9), s (_.-), o (other).
_mcpshim_cls() {
	case $1 in
	*[a-z]) _mcpshim_pk=a ;;
	*[A-Z]) _mcpshim_pk=A ;;
	*[0-9]) _mcpshim_pk=d ;;
	*[_.-]) _mcpshim_pk=s ;;
	*) _mcpshim_pk=o ;;
	esac
}

# Notes a rule's name for the record, once.
_mcpshim_rule() {
	case ,$_mcpshim_rr, in *",$1,"*) ;; *) _mcpshim_rr=$_mcpshim_rr,$1 ;; esac
}

# Does the current piece (_mcpshim_cu, whose head may not start before offset _mcpshim_co)
# end with head $1 ($2 characters), with what precedes it allowed by $3 (any, word, sep;
# $4 is the head starting upper case, for camelCase)? See redact_rules.Head.
_mcpshim_hd() {
	# shellcheck disable=SC2295 # $1 is a pattern on purpose
	case $_mcpshim_cu in *$1) ;; *) return 1 ;; esac
	_mcpshim_hx=$((${#_mcpshim_cu} - $2 - _mcpshim_co))
	[ "$_mcpshim_hx" -ge 0 ] || return 1
	[ "$3" = any ] && return 0
	if [ "$_mcpshim_hx" -gt 0 ]; then
		if [ "$3" = word ]; then
			# shellcheck disable=SC2295
			case $_mcpshim_cu in *[A-Za-z0-9]$1) return 1 ;; esac
			return 0
		fi
		# shellcheck disable=SC2295
		case $_mcpshim_cu in *[_.-]$1) return 0 ;; esac
		[ -n "$4" ] || return 1
		# shellcheck disable=SC2295
		case $_mcpshim_cu in *[a-z]$4) return 0 ;; esac
		return 1
	fi
	if [ "$3" = word ]; then
		case $_mcpshim_pk in [aAd]) return 1 ;; esac
		return 0
	fi
	[ "$_mcpshim_pk" = s ] && return 0
	[ "$_mcpshim_pk" = a ] && [ -n "$4" ] || return 1
	# shellcheck disable=SC2295
	case $_mcpshim_cu in *$4) return 0 ;; esac
	return 1
}

# One text rule over $1; _mcpshim_r is the result. The value is split at every anchor
# ($3, class $4); each piece after an anchor is checked once: a head ending the piece
# before (function $8), a tail starting this one (function $9, which sets the tail's
# pattern _mcpshim_tg), then the run of characters up to the first of class $5. A run at
# least $7 long becomes the marker; with $6 set the anchor is itself a run character, so
# a run may go on through the next anchors; a run starting with one of class $10 is none.
# With $11 the run is a shell word (_mcpshim_sw; $5 then holds the quotes and backslash).
# Same algorithm as redact._apply.
_mcpshim_tok() { # VALUE NAME ANCHOR ANCHORCLASS STOPCLASS SPANS MINLEN HEADS TAILS NOTFIRST SHELL
	_mcpshim_v=$1 _mcpshim_tn=$2 _mcpshim_tc=$3 _mcpshim_ta=$4 _mcpshim_ts=$5 _mcpshim_tx=$6
	_mcpshim_tm=$7 _mcpshim_th=$8 _mcpshim_tt=$9 _mcpshim_tz=${10-} _mcpshim_tq=${11-}
	_mcpshim_ifs0 "$3"
	# shellcheck disable=SC2086 # split at the anchor on purpose
	set -- $1
	_mcpshim_ifs1
	case $_mcpshim_v in *"$_mcpshim_tc") set -- "$@" '' ;; esac
	_mcpshim_v=
	_mcpshim_cu=$1
	shift
	_mcpshim_o1='' _mcpshim_o2='' _mcpshim_o3='' _mcpshim_pk='' _mcpshim_co=0 _mcpshim_tl='' _mcpshim_fi=0
	_mcpshim_hf=
	for _mcpshim_tf; do
		_mcpshim_fi=$((_mcpshim_fi + 1))
		if [ -n "$_mcpshim_tl" ]; then
			# inside a run that went on through the anchor before this piece
			if [ -n "$_mcpshim_tq" ]; then
				_mcpshim_sw "$_mcpshim_tf"
			else
				# shellcheck disable=SC2295
				_mcpshim_k=${_mcpshim_tf%%$_mcpshim_ts*}
			fi
			_mcpshim_tl=$((_mcpshim_tl + 1 + ${#_mcpshim_k}))
			if [ "${#_mcpshim_k}" -eq "${#_mcpshim_tf}" ] && [ "$_mcpshim_fi" -lt $# ]; then
				[ "$_mcpshim_tl" -lt "$_mcpshim_tm" ] && _mcpshim_tw=$_mcpshim_tw$_mcpshim_tc$_mcpshim_tf
				continue
			fi
			_mcpshim_fin "$_mcpshim_tf" "$_mcpshim_k" "$_mcpshim_tc"
			continue
		fi
		if ! $_mcpshim_tt "$_mcpshim_tf" || ! $_mcpshim_th; then
			_mcpshim_put "$_mcpshim_cu$_mcpshim_tc"
			_mcpshim_cu=$_mcpshim_tf _mcpshim_co=0 _mcpshim_pk=$_mcpshim_ta
			continue
		fi
		# shellcheck disable=SC2295
		_mcpshim_g=${_mcpshim_tf#$_mcpshim_tg}
		_mcpshim_tp=${_mcpshim_tf%%"$_mcpshim_g"}
		_mcpshim_put "$_mcpshim_cu$_mcpshim_tc$_mcpshim_tp"
		_mcpshim_ty=$_mcpshim_tx _mcpshim_k=x
		if [ -n "$_mcpshim_tz" ]; then
			# the run's first character: this piece's, or the anchor after it
			# shellcheck disable=SC2295
			case $_mcpshim_g$_mcpshim_tc in $_mcpshim_tz*) _mcpshim_k='' _mcpshim_ty='' ;; esac
		fi
		if [ -z "$_mcpshim_k" ]; then
			:
		elif [ -n "$_mcpshim_tq" ]; then
			_mcpshim_qs=o _mcpshim_qn=0
			_mcpshim_sw "$_mcpshim_g"
		else
			# shellcheck disable=SC2295
			_mcpshim_k=${_mcpshim_g%%$_mcpshim_ts*}
		fi
		_mcpshim_tl=${#_mcpshim_k} _mcpshim_tw=''
		if [ "${#_mcpshim_k}" -eq "${#_mcpshim_g}" ] && [ -n "$_mcpshim_ty" ] && [ "$_mcpshim_fi" -lt $# ]; then
			_mcpshim_tw=$_mcpshim_k _mcpshim_tj=1
			continue
		fi
		_mcpshim_tj=
		_mcpshim_fin "$_mcpshim_g" "$_mcpshim_k" "$_mcpshim_tc$_mcpshim_tp"
	done
	_mcpshim_put "$_mcpshim_cu"
	_mcpshim_r=$_mcpshim_o3$_mcpshim_o2$_mcpshim_o1
	_mcpshim_o1='' _mcpshim_o2='' _mcpshim_o3='' _mcpshim_cu='' _mcpshim_tf='' _mcpshim_g='' _mcpshim_tw=
	[ -z "$_mcpshim_hf" ] || _mcpshim_rule "$_mcpshim_tn"
}

# The part of piece $1 a shell-word run takes (redact.shell_end), from quote state
# _mcpshim_qs (o: outside quotes, s: in '...', d: in "...", c: in $'...', a: the rest of
# the text), _mcpshim_qn quotes and backslashes seen so far: _mcpshim_k is that part, and
# _mcpshim_qe is 1 when the run ends inside the piece (at a stop outside quotes: one of
# $_mcpshim_ts, which holds the quotes and backslash too). Each step finds the next
# character that matters with one pattern; past MAX_SPECIALS of them the run takes the
# rest of the text, so a piece costs a bounded number of steps.
_mcpshim_sw() {
	_mcpshim_k='' _mcpshim_qe='' _mcpshim_qr=$1
	while :; do
		# shellcheck disable=SC2295
		case $_mcpshim_qs in
		o) _mcpshim_qp=${_mcpshim_qr%%$_mcpshim_ts*} ;;
		s) _mcpshim_qp=${_mcpshim_qr%%\'*} ;;
		d) _mcpshim_qp=${_mcpshim_qr%%$_mcpshim_qd*} ;;
		c) _mcpshim_qp=${_mcpshim_qr%%$_mcpshim_qc*} ;;
		*) _mcpshim_qp=$_mcpshim_qr ;;
		esac
		if [ "${#_mcpshim_qp}" -eq "${#_mcpshim_qr}" ]; then
			_mcpshim_k=$_mcpshim_k$_mcpshim_qr # the piece ends inside the run
			return
		fi
		_mcpshim_drop "$_mcpshim_qr" "$_mcpshim_qp"
		case $_mcpshim_qs$_mcpshim_d in
		o[!\'\"\\]*)
			_mcpshim_k=$_mcpshim_k$_mcpshim_qp _mcpshim_qe=1 # a stop outside quotes
			return
			;;
		esac
		_mcpshim_qn=$((_mcpshim_qn + 1))
		if [ "$_mcpshim_qn" -gt @@MAX_SPECIALS@@ ]; then
			_mcpshim_qs=a _mcpshim_k=$_mcpshim_k$_mcpshim_qr
			return
		fi
		_mcpshim_qr=${_mcpshim_d#?}
		case $_mcpshim_d in
		\'*)
			case $_mcpshim_qs$_mcpshim_qp in
			o*'$') _mcpshim_qs=c ;;
			o*) _mcpshim_qs=s ;;
			*) _mcpshim_qs=o ;;
			esac
			_mcpshim_k=$_mcpshim_k$_mcpshim_qp\'
			;;
		'"'*)
			case $_mcpshim_qs in o) _mcpshim_qs=d ;; *) _mcpshim_qs=o ;; esac
			_mcpshim_k=$_mcpshim_k$_mcpshim_qp'"'
			;;
		*)
			# a backslash and the character it escapes (at the piece's end: the anchor)
			_mcpshim_g2=${_mcpshim_qr#?}
			_mcpshim_k=$_mcpshim_k$_mcpshim_qp"\\"${_mcpshim_qr%%"$_mcpshim_g2"}
			_mcpshim_qr=$_mcpshim_g2
			;;
		esac
	done
}

# The end of a run: $1 is the piece from where the run's part in it starts, $2 that part,
# $3 what precedes that part (for the class of the character before what follows).
_mcpshim_fin() {
	_mcpshim_cls "$3$2"
	if [ "$_mcpshim_tl" -ge "$_mcpshim_tm" ]; then
		_mcpshim_put "[REDACTED:$_mcpshim_tn]"
		_mcpshim_hf=1
		_mcpshim_drop "$1" "$2"
		_mcpshim_cu=$_mcpshim_d _mcpshim_co=0
	else
		[ -z "$_mcpshim_tj" ] || _mcpshim_put "$_mcpshim_tw$_mcpshim_tc"
		_mcpshim_cu=$1 _mcpshim_co=${#2}
	fi
	_mcpshim_tl='' _mcpshim_tj='' _mcpshim_d=
}

# user:password@ after scheme://, password holding @ and / included (redact._apply_url):
# the value is split at every ':'; a piece starting // opens a word that runs to the first
# of $_mcpshim_ux (blank, quote); past its first ':', the text up to its last '@' is the
# password, unless digits and '/' follow that ':' (a port).
_mcpshim_url() {
	_mcpshim_v=$1
	_mcpshim_ifs0 :
	# shellcheck disable=SC2086 # split at ':' on purpose
	set -- $1
	_mcpshim_ifs1
	case $_mcpshim_v in *:) set -- "$@" '' ;; esac
	_mcpshim_v=
	_mcpshim_cu=$1
	shift
	_mcpshim_o1='' _mcpshim_o2='' _mcpshim_o3='' _mcpshim_fi=0 _mcpshim_uw='' _mcpshim_hf=
	for _mcpshim_tf; do
		_mcpshim_fi=$((_mcpshim_fi + 1))
		# shellcheck disable=SC2295
		_mcpshim_k=${_mcpshim_tf%%$_mcpshim_ux*}
		if [ -z "$_mcpshim_uw" ]; then
			case $_mcpshim_tf in
			//*)
				if [ "${#_mcpshim_k}" -eq "${#_mcpshim_tf}" ] && [ "$_mcpshim_fi" -lt $# ]; then
					# the word after :// goes on past its first ':'
					_mcpshim_put "$_mcpshim_cu:$_mcpshim_tf:"
					_mcpshim_cu='' _mcpshim_uw=1 _mcpshim_w1='' _mcpshim_w2='' _mcpshim_w3='' _mcpshim_ua=
					# (_mcpshim_uo is "1" once a port is seen, or "0": k may start with a 1)
					_mcpshim_uo=0
					continue
				fi
				;;
			esac
			_mcpshim_put "$_mcpshim_cu:"
			_mcpshim_cu=$_mcpshim_tf
			continue
		fi
		# inside the word: this piece follows one of its ':' (the first is out already)
		_mcpshim_d=:
		if [ "$_mcpshim_uw" = 1 ]; then
			_mcpshim_uw=2 _mcpshim_d=''
			case $_mcpshim_tf in
			[0-9]*)
				# digits and '/' after the first ':', a port: no password
				_mcpshim_d=${_mcpshim_tf%%[!0-9]*}
				case $_mcpshim_tf in "$_mcpshim_d"/*) _mcpshim_uo=1 ;; esac
				_mcpshim_d=''
				;;
			esac
		fi
		case $_mcpshim_uo$_mcpshim_k in
		1*) _mcpshim_wput "$_mcpshim_d$_mcpshim_tf" ;;
		*@*)
			# the password runs to here: what is kept starts at this piece's last '@'
			_mcpshim_lastat "$_mcpshim_tf" "${#_mcpshim_k}"
			_mcpshim_w1=$_mcpshim_d _mcpshim_w2='' _mcpshim_w3='' _mcpshim_ua=1
			;;
		*) _mcpshim_wput "$_mcpshim_d$_mcpshim_tf" ;;
		esac
		if [ "${#_mcpshim_k}" -lt "${#_mcpshim_tf}" ] || [ "$_mcpshim_fi" -eq $# ]; then
			# the word ends in this piece
			if [ -n "$_mcpshim_ua" ]; then
				_mcpshim_put '[REDACTED:url-password]'
				_mcpshim_hf=1
			fi
			_mcpshim_put "$_mcpshim_w3$_mcpshim_w2$_mcpshim_w1"
			_mcpshim_uw='' _mcpshim_w1='' _mcpshim_w2='' _mcpshim_w3=
		fi
	done
	_mcpshim_put "$_mcpshim_cu"
	_mcpshim_r=$_mcpshim_o3$_mcpshim_o2$_mcpshim_o1
	_mcpshim_o1='' _mcpshim_o2='' _mcpshim_o3='' _mcpshim_cu='' _mcpshim_tf='' _mcpshim_d=
	[ -z "$_mcpshim_hf" ] || _mcpshim_rule url-password
}

# _mcpshim_lastat STRING LIMIT: _mcpshim_d is STRING from its last '@' before offset LIMIT on.
_mcpshim_lastat() {
	_mcpshim_v=$1
	_mcpshim_dl=$2
	_mcpshim_ifs0 @
	# shellcheck disable=SC2086 # split at '@' on purpose
	set -- $1
	_mcpshim_ifs1
	case $_mcpshim_v in *@) set -- "$@" '' ;; esac
	_mcpshim_v=
	_mcpshim_dx=0 _mcpshim_dj=0 _mcpshim_dk=0
	for _mcpshim_d; do
		_mcpshim_dk=$((_mcpshim_dk + 1))
		[ "$_mcpshim_dk" -lt $# ] || break
		_mcpshim_dx=$((_mcpshim_dx + ${#_mcpshim_d}))
		[ "$_mcpshim_dx" -lt "$_mcpshim_dl" ] || break
		_mcpshim_dj=$_mcpshim_dk
		_mcpshim_dx=$((_mcpshim_dx + 1))
	done
	shift "$_mcpshim_dj"
	_mcpshim_ifs0 @
	_mcpshim_d="@$*"
	_mcpshim_ifs1
}

# Whether $1 is a credential name (redact.is_credential_name).
_mcpshim_cname() {
	case $1 in
	@@NAME_PATTERNS@@) return 0 ;;
	esac
	return 1
}

@@RULE_FUNCTIONS@@

# Character classes and the patterns _mcpshim_drop strips with, set by the entry points
# (_mcpshim_redact, _mcpshim_pargv) and unset with the rest (_mcpshim_clear).
_mcpshim_consts() {
	_mcpshim_q16='????????????????'
	_mcpshim_q256=$_mcpshim_q16$_mcpshim_q16$_mcpshim_q16$_mcpshim_q16
	_mcpshim_q256=$_mcpshim_q256$_mcpshim_q256$_mcpshim_q256$_mcpshim_q256
	_mcpshim_ux='[ 	
"'"'"'`<>]'
@@CONSTS@@
}

# Every text rule over _mcpshim_r, in the table's order (redact.redact_text).
_mcpshim_text() {
@@TEXT_RULES@@
}

# One argument; _mcpshim_r is what the log keeps of it (redact.redact_argv, step by step).
# _mcpshim_nx says the next argument is a secret (the value of `--password`), _mcpshim_nw
# the same unless it is an option (a bare `password`, DD_API_KEY, an authorization header
# with no value; `scheme`: its scheme may come first), _mcpshim_ns that the next is an
# option's value, secret after that character (`smbclient -U user%PW`), _mcpshim_na that
# every argument from here on is (`htpasswd -b`; a PEM key's words up to `-----END`),
# _mcpshim_sc which command's own options count, _mcpshim_su which command waits for its
# subcommand (`docker login`), _mcpshim_kp that the last argument was PRIVATE and
# _mcpshim_kb that a `-----BEGIN` came.
_mcpshim_scrub1() {
	_mcpshim_r=$1
	_mcpshim_kv=$_mcpshim_kp _mcpshim_kp=
	[ "$1" = PRIVATE ] && _mcpshim_kp=1
	_mcpshim_kq=$_mcpshim_ko _mcpshim_ko=
	case $1 in -*) _mcpshim_ko=1 ;; esac
	case $1 in -----BEGIN*) _mcpshim_kb=1 ;; esac
	if [ -n "$_mcpshim_na" ]; then
		case $_mcpshim_na$1 in private-key-----END*) _mcpshim_na= && return ;; esac
		_mcpshim_r="[REDACTED:$_mcpshim_na]"
		_mcpshim_rule "$_mcpshim_na"
		return
	fi
	if [ -n "$_mcpshim_nx" ]; then
		_mcpshim_r="[REDACTED:$_mcpshim_nx]"
		_mcpshim_rule "$_mcpshim_nx"
		_mcpshim_nx=
		return
	fi
	if [ -n "$_mcpshim_ns" ]; then
		case $1 in *"$_mcpshim_ns"*)
			_mcpshim_r="${1%%"$_mcpshim_ns"*}${_mcpshim_ns}[REDACTED:option-value]"
			_mcpshim_rule option-value
			;;
		esac
		_mcpshim_ns=
		return
	fi
	if [ -n "$_mcpshim_nw" ]; then
		_mcpshim_kw=$_mcpshim_nw _mcpshim_nw=
		case $1 in
		-*) ;;
		*)
			if [ "$_mcpshim_kw" = scheme ]; then
				case $1 in
				@@AUTH_SCHEMES@@) _mcpshim_nw=authorization && return ;;
				esac
				_mcpshim_kw=authorization
			fi
			_mcpshim_r="[REDACTED:$_mcpshim_kw]"
			_mcpshim_rule "$_mcpshim_kw"
			return
			;;
		esac
	fi
	if [ -n "$_mcpshim_kv$_mcpshim_kb" ] && [ "$1" = KEY----- ] && [ -n "$_mcpshim_kv" ] \
		&& [ -n "$_mcpshim_kb" ]; then
		_mcpshim_na=private-key _mcpshim_kb=
		return
	fi
	case $1 in
@@SCOPE_WORDS@@
	esac
	case $_mcpshim_su in
@@SCOPE_SUBS@@
	esac
	case $_mcpshim_sc in
@@SCOPE_OPTIONS@@
	esac
	case " $1 " in
	@@TRIGGERS@@) ;;
	*@*) case $1 in *://*) ;; *) return ;; esac ;;
	*) return ;;
	esac
	case $1 in
	@@AUTH_HEADERS@@) _mcpshim_nw=scheme && return ;;
	@@AUTH_VALUED@@) _mcpshim_nw=authorization && return ;;
	@@BARE_WORDS@@) _mcpshim_nw=credential-name && return ;;
	[A-Z]*_*)
		case $_mcpshim_kq$1 in
		1* | *[!A-Z0-9_]*) ;;
		*) _mcpshim_cname "$1" && _mcpshim_nw=credential-name && return ;;
		esac
		;;
	esac
	case $1 in
	--*=*)
		_mcpshim_n=${1%%=*}
		if _mcpshim_cname "${_mcpshim_n#--}"; then
			_mcpshim_r=$_mcpshim_n='[REDACTED:option-value]'
			_mcpshim_rule option-value
			return
		fi
		;;
	--*)
		if _mcpshim_cname "${1#--}"; then
			case ${1#--} in
			@@SKIP_BARE@@) ;;
			*)
				_mcpshim_nx=option-value
				return
				;;
			esac
		fi
		;;
@@BARE_NEXT@@
	[A-Za-z_]*=*)
		_mcpshim_n=${1%%=*}
		case $_mcpshim_n in
		*[!A-Za-z0-9_.-]*) ;;
		*)
			if _mcpshim_cname "$_mcpshim_n"; then
				_mcpshim_r=$_mcpshim_n='[REDACTED:credential-name]'
				_mcpshim_rule credential-name
				return
			fi
			;;
		esac
		;;
	@@AWS40@@)
		case $1 in *[!A-Za-z0-9+/]*) ;; *[A-Z]*) case $1 in *[a-z]*) case $1 in *[0-9]*)
			_mcpshim_r='[REDACTED:aws-secret-key]'
			_mcpshim_rule aws-secret-key
			return
			;;
		esac ;; esac ;; esac
		;;
	esac
	_mcpshim_text
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
	_mcpshim_t=0
	while :; do
		_mcpshim_write1 "$@" && return 0
		# Gone between the checks (rotation renamed it): make it anew, a few times at most.
		if [ "$_mcpshim_t" -ge 3 ] || [ -z "$_mcpshim_g" ]; then break; fi
		_mcpshim_t=$((_mcpshim_t + 1))
	done
	_mcpshim_bad=${_mcpshim_bad:-"$_mcpshim_q $_mcpshim_y"}
	return 1
}

_mcpshim_write1() {
	_mcpshim_g=
	if ! [ -e "$_mcpshim_log/$_mcpshim_q" ] && ! [ -h "$_mcpshim_log/$_mcpshim_q" ]; then
		_mcpshim_mask && umask 077
		set -C
		# A file others append to is made empty here and appended to below: a record written
		# through this open (no O_APPEND) would overwrite one another shim appended meanwhile.
		if [ "$_mcpshim_m" = append ]; then
			printf "" >"$_mcpshim_log/$_mcpshim_q" # not `:`, whose failed redirection ends a POSIX sh
		else
			printf "$@" >"$_mcpshim_log/$_mcpshim_q"
		fi
		_mcpshim_e=$?
		set +C
		[ -n "$_mcpshim_um" ] && umask "$_mcpshim_um"
		[ "$_mcpshim_e" -eq 0 ] && [ "$_mcpshim_m" != append ] && return 0
		# another shim may have made it meanwhile: append to it, or keep it
		if [ "$_mcpshim_m" = new ] || ! [ -e "$_mcpshim_log/$_mcpshim_q" ]; then
			_mcpshim_y='cannot be created'
			[ "$_mcpshim_m" = new ] || _mcpshim_g=1 # made by another, then renamed at once?
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
	# Each test above stats the name afresh: a file renamed away meanwhile fails them all.
	[ -e "$_mcpshim_log/$_mcpshim_q" ] || [ -h "$_mcpshim_log/$_mcpshim_q" ] || _mcpshim_g=1
	return 1
}

# Scrubs every argument, then writes the record with what is left. Arguments go by in
# chunks of 128: one look at a chunk's joined text (_mcpshim_chunk) clears most, and only the
# arguments of a chunk that may hold a secret are scrubbed one by one. The new argument list
# is then one `eval`: of "${N}" and numbered variables under dash, whose positional
# parameters are an array (and whose variables share 39 hash chains, so few of them); of an
# array under bash, which walks a list to find "${N}". Linear either way.
_mcpshim_redact() {
	_mcpshim_sc='' _mcpshim_na='' _mcpshim_e1='' _mcpshim_e2='' _mcpshim_e3='' _mcpshim_i=0 _mcpshim_ch='' _mcpshim_q=
	_mcpshim_nw='' _mcpshim_ns='' _mcpshim_su='' _mcpshim_kp='' _mcpshim_kb='' _mcpshim_nx=''
	_mcpshim_kv='' _mcpshim_kw='' _mcpshim_ko='' _mcpshim_kq=''

	case ${_mcpshim_tgt##*/} in
@@SCOPE_OF_TARGET@@
	esac
	_mcpshim_consts
	_mcpshim_nn=$# _mcpshim_ce=128
	[ "$_mcpshim_ce" -le "$_mcpshim_nn" ] || _mcpshim_ce=$_mcpshim_nn
	if [ -n "$_mcpshim_bash" ]; then
		# the arguments in an array (bash syntax inside quotes: dash never parses it)
		eval '_mcpshim_xa=("$@")'
		for _mcpshim_a; do
			_mcpshim_ch="$_mcpshim_ch $_mcpshim_a"
			[ $((_mcpshim_i += 1)) -lt "$_mcpshim_ce" ] && continue
			_mcpshim_next
			_mcpshim_chunk "$_mcpshim_cx" || continue
			while [ "$_mcpshim_j" -le "$_mcpshim_i" ]; do
				eval '_mcpshim_a=${_mcpshim_xa[_mcpshim_j-1]}'
				_mcpshim_scrub1 "$_mcpshim_a"
				[ "$_mcpshim_r" = "$_mcpshim_a" ] || eval '_mcpshim_xa[_mcpshim_j-1]=$_mcpshim_r'
				_mcpshim_j=$((_mcpshim_j + 1))
			done
		done
		# shellcheck disable=SC2016 # expanded by the eval below
		_mcpshim_ev='"${_mcpshim_xa[@]}"'
	else
		for _mcpshim_a; do
			_mcpshim_ch="$_mcpshim_ch $_mcpshim_a"
			_mcpshim_q="$_mcpshim_q \"\${$((_mcpshim_i += 1))}\""
			[ "$_mcpshim_i" -lt "$_mcpshim_ce" ] && continue
			_mcpshim_next
			if _mcpshim_chunk "$_mcpshim_cx"; then
				_mcpshim_q=
				while [ "$_mcpshim_j" -le "$_mcpshim_i" ]; do
					eval "_mcpshim_a=\${$_mcpshim_j}"
					_mcpshim_scrub1 "$_mcpshim_a"
					if [ "$_mcpshim_r" = "$_mcpshim_a" ]; then
						_mcpshim_q="$_mcpshim_q \"\${$_mcpshim_j}\""
					else
						eval "_mcpshim_x$_mcpshim_j=\$_mcpshim_r"
						_mcpshim_q="$_mcpshim_q \"\$_mcpshim_x$_mcpshim_j\""
					fi
					_mcpshim_j=$((_mcpshim_j + 1))
				done
			fi
			_mcpshim_eput "$_mcpshim_q"
			_mcpshim_q=
		done
		_mcpshim_ev=$_mcpshim_e3$_mcpshim_e2$_mcpshim_e1
	fi
	_mcpshim_e1='' _mcpshim_e2='' _mcpshim_e3='' _mcpshim_r='' _mcpshim_ch=
	eval "_mcpshim_emit $_mcpshim_ev"
	_mcpshim_c=$?
	if [ -z "$_mcpshim_bash" ]; then
		while [ "$_mcpshim_i" -gt 0 ]; do
			unset "_mcpshim_x$_mcpshim_i"
			_mcpshim_i=$((_mcpshim_i - 1))
		done
	fi
	_mcpshim_clear
	return "$_mcpshim_c"
}

# The scrubber's own variables, gone once it is done.
_mcpshim_clear() {
	unset _mcpshim_xa _mcpshim_i _mcpshim_j _mcpshim_nn _mcpshim_ce _mcpshim_cx _mcpshim_q _mcpshim_ev _mcpshim_sc _mcpshim_e1 \
		_mcpshim_e2 _mcpshim_e3 _mcpshim_o1 _mcpshim_o2 _mcpshim_o3 _mcpshim_w1 _mcpshim_w2 \
		_mcpshim_w3 _mcpshim_d _mcpshim_dn _mcpshim_dl _mcpshim_dx _mcpshim_dj _mcpshim_dk \
		_mcpshim_sv _mcpshim_pk _mcpshim_hx _mcpshim_tn _mcpshim_tc _mcpshim_ta _mcpshim_ts \
		_mcpshim_tx _mcpshim_tm _mcpshim_th _mcpshim_tt _mcpshim_tz _mcpshim_ty _mcpshim_tg _mcpshim_tp _mcpshim_tl \
		_mcpshim_tw _mcpshim_tj _mcpshim_tf _mcpshim_cu _mcpshim_co _mcpshim_fi _mcpshim_hf \
		_mcpshim_g _mcpshim_uw _mcpshim_ua _mcpshim_uo _mcpshim_ux _mcpshim_ch _mcpshim_q16 \
		_mcpshim_q256 _mcpshim_na _mcpshim_tq _mcpshim_qs _mcpshim_qn _mcpshim_qe _mcpshim_qr \
		_mcpshim_qp _mcpshim_g2 _mcpshim_nw _mcpshim_ns _mcpshim_su _mcpshim_kp _mcpshim_kb \
		_mcpshim_kv _mcpshim_kw _mcpshim_ko _mcpshim_kq @@CLASS_VARS@@
}

# At the end of a chunk: its text moves to _mcpshim_cx; where the next one ends; where this
# one started (_mcpshim_j).
_mcpshim_next() {
	_mcpshim_cx="$_mcpshim_ch " _mcpshim_ch=
	_mcpshim_ce=$((_mcpshim_ce + 128))
	[ "$_mcpshim_ce" -le "$_mcpshim_nn" ] || _mcpshim_ce=$_mcpshim_nn
	_mcpshim_j=$(((_mcpshim_i - 1) / 128 * 128 + 1))
}

# Whether the arguments joined in $1 (each between blanks) need scrubbing one by one: one
# of them may hold a secret, or a command's own options count (_mcpshim_sc), or the first
# is the value of an option before them.
_mcpshim_chunk() {
	[ -n "$_mcpshim_nx$_mcpshim_na$_mcpshim_nw$_mcpshim_ns$_mcpshim_su$_mcpshim_kp$_mcpshim_kb" ] \
		&& return 0
	case $_mcpshim_sc in
	'') ;;
	@@OPERANDS_END@@) return 0 ;;
	*) case $1 in *' -'*) return 0 ;; esac ;;
	esac
	case $1 in
	@@TRIGGERS@@) return 0 ;;
	*@*) case $1 in *://*) return 0 ;; esac ;;
	esac
	_mcpshim_ko=
	return 1
}

# (For a parent's stat.) Start time is stat field 22, ppid field 4. Fields are split by the shell in one pass; that
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

# Writes the record; the argument list is what the log shows (already redacted). The shim
# itself writes the common record; this is for the redacted one and whatever needs the
# library's writes (a log to make anew, a record too large for one write).
_mcpshim_emit() {
	# One record is one write() while it fits the shells' output buffers (bash: 4096 bytes)
	# and, under bash, whose stdout is line-buffered, while no field holds a newline. The
	# arguments' formats are the shim's (_mcpshim_fa: one per argument, as many as here).
	_mcpshim_z=$((${#_mcpshim_cwd} + ${#PATH} + ${#0} + ${#_mcpshim_pc} + ${#_mcpshim_rr} + ${#MCPSHIM_SESSION} + 300))
	for _mcpshim_a; do _mcpshim_z=$((_mcpshim_z + ${#_mcpshim_a} + 2)); done
	_mcpshim_w=
	if [ -n "$_mcpshim_bash" ]; then
		case $_mcpshim_cwd$PATH$0$_mcpshim_pc${MCPSHIM_SESSION-}$* in *'
'*) _mcpshim_w=1 ;;
		esac
	fi
	_mcpshim_f='\0R\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s\0=%s'$_mcpshim_fa'\0\n'
	set -- 1 exec "$_mcpshim_bt" "$_mcpshim_up" "$_mcpshim_boot" "$$" "$_mcpshim_ppid" \
		"$_mcpshim_start" "$_mcpshim_pst" "$_mcpshim_cwd" "$_mcpshim_name" "$_mcpshim_tgt" "$0" \
		"${MCPSHIM_SESSION-}" "${PATH-}" "${_mcpshim_rr#,}" "$_mcpshim_pc" "$#" "$@"
	if [ "$_mcpshim_z" -le 4000 ] && [ -z "$_mcpshim_w" ]; then
		# (_mcpshim_write checks the log as the shim does: never through a link, a FIFO or
		# another user's file; a log gone is made anew.)
		_mcpshim_write append exec.log "$_mcpshim_f" "$@"
		return
	fi
	# A larger record goes whole into a file of its own.
	_mcpshim_spill "$@"
}

# The parent shell's start time and argv, and the marker (FILE, under the log dir) that
# says they are kept: it holds that start time (_mcpshim_kept). No builtin reads the NULs
# between the arguments of /proc/PPID/cmdline (dash's `read` drops them), so this path
# spends a subprocess: xargs -0 (from the system's directories, never PATH) hands the
# arguments, exactly, to one `/bin/sh -p` that prints each single-quoted
# (mcpshim.log.redact_sh.HELPER_SCRIPT). All or nothing: its output is taken only when it
# exited 0 and ended as it always does, and one that cannot be read whole (-x, a count no
# argv reaches) is left out, never kept cut. Each argument is then scrubbed as the shim's
# own are; the record's field is \001 then LENGTH:ARGUMENT for each (execlog.parent_fields
# reads it back).
_mcpshim_parent() {
	read -r _mcpshim_s <"/proc/$_mcpshim_ppid/stat" && _mcpshim_st22 &&
		_mcpshim_pst=$_mcpshim_st
	_mcpshim_kept "$1" && return 0
	_mcpshim_s=
	for _mcpshim_k in /usr/bin/xargs /bin/xargs ''; do
		[ -x "$_mcpshim_k" ] && break
	done
	if [ -n "$_mcpshim_k" ]; then
		# shellcheck disable=SC1003,SC2016 # the helper's own script, for its sh
		_mcpshim_s=$(LC_ALL=C "$_mcpshim_k" @@HELPER_XARGS@@ /bin/sh -p -c @@HELPER_SCRIPT@@ \
			sh <"/proc/$_mcpshim_ppid/cmdline" 2>/dev/null) || _mcpshim_s=
		case $_mcpshim_s in *"' ") _mcpshim_pargv ;; esac
		_mcpshim_s=
	fi
	# Made empty first, which a full disk allows (as the record's own failure is then the
	# one said), then given the start time; a marker left empty is no marker (the next child
	# keeps the argv again, and `log verify` names it).
	_mcpshim_write replace "$1" '' || return 0
	_mcpshim_b=$_mcpshim_bad
	_mcpshim_write replace "$1" '%s\n' "$_mcpshim_pst" || _mcpshim_bad=$_mcpshim_b
	_mcpshim_b=
}

# Whether the marker FILE is the shim's for the parent as it runs now: a regular file of
# this user's holding the parent's start time, so that its argv is on record already. The
# shim sends here a marker it cannot vouch for by its dates alone (a pid reused, or one
# planted for pids to come, dated ahead): an empty one, another process's, or anything
# else in its place is no marker, and the argv is kept again (`log verify` names markers no
# record backs).
_mcpshim_kept() {
	[ -n "$_mcpshim_pst" ] && [ -f "$_mcpshim_log/$1" ] && ! [ -h "$_mcpshim_log/$1" ] &&
		[ -O "$_mcpshim_log/$1" ] || return 1
	_mcpshim_k=
	read -r _mcpshim_k <"$_mcpshim_log/$1"
	[ "$_mcpshim_k" = "$_mcpshim_pst" ] || return 1
	_mcpshim_pst='' _mcpshim_k=''
}

# The helper's words (_mcpshim_s, every character inside single quotes) as the arguments
# of this function, each scrubbed into _mcpshim_pc; the scrubber's variables gone after.
_mcpshim_pargv() {
	eval "set -- $_mcpshim_s"
	_mcpshim_s=
	_mcpshim_nx='' _mcpshim_sc='' _mcpshim_na='' _mcpshim_e1='' _mcpshim_e2='' _mcpshim_e3=''
	_mcpshim_nw='' _mcpshim_ns='' _mcpshim_su='' _mcpshim_kp='' _mcpshim_kb='' _mcpshim_kv='' _mcpshim_kw=''
	_mcpshim_ko='' _mcpshim_kq=''
	_mcpshim_consts
	for _mcpshim_a; do
		_mcpshim_scrub1 "$_mcpshim_a"
		_mcpshim_eput "${#_mcpshim_r}:$_mcpshim_r"
	done
	_mcpshim_pc='@@SOH@@'$_mcpshim_e3$_mcpshim_e2$_mcpshim_e1
	_mcpshim_nx='' _mcpshim_a='' _mcpshim_r=''
	_mcpshim_clear
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

# (bash alone) The caller's environment entries bash changed, put back as the caller had
# them (see the shim): PWD, OLDPWD and `_` through the shim's own restores, the others here,
# unset first so that a dynamic variable is an ordinary one again. Inside eval: dash, which
# shares this library, never parses bash's arrays.
_mcpshim_environ() {
	eval 'for _mcpshim_e in "${_mcpshim_ev[@]}"; do
		_mcpshim_n=${_mcpshim_e%%=*}
		case $_mcpshim_n in
		PWD) _mcpshim_pw=${_mcpshim_e#PWD=} ;;
		OLDPWD) _mcpshim_op=x${_mcpshim_e#OLDPWD=} ;;
		_) _mcpshim_us=x${_mcpshim_e#_=} ;;
		IFS | PS1 | PS2 | PS4 | OPTIND | POSIXLY_CORRECT | BASH | BASH_VERSION | BASH_ARGV0 | \
			LINENO | RANDOM | SRANDOM | BASHPID | HISTCMD | EPOCHREALTIME | EPOCHSECONDS | \
			BASH_SUBSHELL | COMP_WORDBREAKS)
			unset -v "$_mcpshim_n"
			export "$_mcpshim_e"
			;;
		esac
	done'
}
