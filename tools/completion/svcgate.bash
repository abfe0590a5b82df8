# bash completion for svcgate and svcgatectl (installed as both names' completion by the package).
_svcgatectl() {
    local cur prev words cword
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    local commands="status services endpoints stats reload flows drain undrain trace"
    case $prev in
        --socket|--config|--pcap|--out) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --service|--limit|--seed|--timeout) return ;;
    esac
    local cmd="" w
    for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
        case $w in status|services|endpoints|stats|reload|flows|drain|undrain|trace) cmd=$w ;; esac
    done
    case $cmd in
        "") COMPREPLY=($(compgen -W "$commands --socket --help" -- "$cur")) ;;
        flows) COMPREPLY=($(compgen -W "--service --limit --json" -- "$cur")) ;;
        drain) COMPREPLY=($(compgen -W "--timeout --json" -- "$cur")) ;;
        trace) COMPREPLY=($(compgen -W "--config --json --seed --pcap --out --help" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "--json" -- "$cur")) ;;
    esac
}
_svcgate() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    case $prev in
        --config|-c) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --log-level) COMPREPLY=($(compgen -W "err warning notice info debug" -- "$cur")); return ;;
    esac
    COMPREPLY=($(compgen -W "--config --check --log-level --help" -- "$cur"))
}
complete -F _svcgatectl svcgatectl
complete -F _svcgate svcgate
