# bash completion for pacerctl (installed as
# /usr/share/bash-completion/completions/pacerctl). It completes the
# commands, the flags, the directions, the settings of set, add and
# direction, and the class names of a running pacerd (from pacerctl status,
# when the control socket can be read).

_pacerctl_settings_set="rate= burst= peak= backlog= per_rate= per_burst= per_peak= per_keys= per_idle= parent= ceil= cburst= priority= weight="
_pacerctl_settings_add="rate= burst= peak= mode= backlog= capped= before= match.src= match.dst= match.proto= match.sport= match.dport= match.dscp="
_pacerctl_settings_queue="queue= aqm= ecn= target= interval= rtt= flows= isolate= quantum= ack_filter= limit= drop="
_pacerctl_settings_emulation="delay= jitter= distribution= reorder= reorder.gap= loss= loss.p= loss.r= loss.h= loss.k= duplicate= corrupt= trace= rates= correlation.delay= correlation.loss= correlation.duplicate= correlation.corrupt= correlation.reorder= onoff= onoff.on= onoff.off= onoff.exponential= slot= slot.min= slot.max= slot.packets= slot.bytes="
_pacerctl_settings_global="global.key= global.rate= global.burst= global.period= global.lease= global.on_unreachable="

_pacerctl_classes() { # direction, socket flag words
	local dir=$1
	shift
	pacerctl "$@" -timeout 1s status 2>/dev/null | awk -v d="$dir" '$1 == d { print $2 }'
}

_pacerctl() {
	local cur prev words cword
	if declare -F _init_completion >/dev/null; then
		_init_completion -n = || return
	else
		cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
	fi
	local i cmd= cmdi=0 sock=()
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-socket | --socket) sock=(-socket "${words[i+1]}"); ((i++)) ;;
		-timeout | --timeout) ((i++)) ;;
		-*) ;;
		*) cmd=${words[i]} cmdi=$i; break ;;
		esac
	done
	if [[ -z $cmd ]]; then
		case $prev in
		-socket | --socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
		-timeout | --timeout) return ;;
		esac
		COMPREPLY=($(compgen -W "status watch set add direction blackout capture plot remove flows keys reload help -socket -timeout -h" -- "$cur"))
		return
	fi
	local n=$((cword - cmdi)) # the argument's position after the command
	case $cmd in
	status) COMPREPLY=($(compgen -W "-json" -- "$cur")) ;;
	watch) COMPREPLY=($(compgen -W "-interval" -- "$cur")) ;;
	capture)
		if ((n == 1)); then
			COMPREPLY=($(compgen -W "egress ingress" -- "$cur"))
		elif [[ $prev == -o ]]; then
			COMPREPLY=($(compgen -f -- "$cur"))
		elif [[ $prev == -point ]]; then
			COMPREPLY=($(compgen -W "departure arrival" -- "$cur"))
		elif ((n > 2)); then
			COMPREPLY=($(compgen -W "-o -point -snaplen" -- "$cur"))
		fi
		;;
	set | add | remove | rm | flows | keys | direction)
		if ((n == 1)); then
			COMPREPLY=($(compgen -W "egress ingress" -- "$cur"))
		elif ((n == 2)) && [[ $cmd != add && $cmd != direction ]]; then
			COMPREPLY=($(compgen -W "$(_pacerctl_classes "${words[cmdi+1]}" "${sock[@]}")" -- "$cur"))
		elif [[ $cmd == flows ]]; then
			COMPREPLY=($(compgen -W "-n -sort -json queued sent" -- "$cur"))
		elif [[ $cmd == keys ]]; then
			COMPREPLY=($(compgen -W "-n -sort -json rate queued sent" -- "$cur"))
		elif [[ $cmd == set ]]; then
			compopt -o nospace 2>/dev/null
			COMPREPLY=($(compgen -W "$_pacerctl_settings_set $_pacerctl_settings_queue $_pacerctl_settings_emulation $_pacerctl_settings_global" -- "$cur"))
		elif [[ $cmd == add ]] && ((n > 2)); then
			compopt -o nospace 2>/dev/null
			COMPREPLY=($(compgen -W "$_pacerctl_settings_add $_pacerctl_settings_queue $_pacerctl_settings_emulation $_pacerctl_settings_global" -- "$cur"))
		elif [[ $cmd == direction ]]; then
			compopt -o nospace 2>/dev/null
			COMPREPLY=($(compgen -W "$_pacerctl_settings_emulation" -- "$cur"))
		fi
		;;
	esac
}
complete -F _pacerctl pacerctl
