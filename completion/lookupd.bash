# bash completion for lookupd(8). Installed by the package as
# /usr/share/bash-completion/completions/lookupd; Tests/CLITests/CompletionTests.swift
# checks it offers every subcommand and option the code knows.

_lookupd_options() {
    case "$1" in
        query)   echo "--config --directory --contacts --callee --verstat --at --json --attribution --country --country-code --national-prefix --international-prefix --national-number-length --help" ;;
        compile) echo "--output --format --on-duplicate --directory-version --file-format --max-errors --memory --config --number-column --label-column --action-column --action --no-header --skip-invalid --vanity --discard-changes --country --country-code --national-prefix --international-prefix --national-number-length --json --quiet --help" ;;
        check)   echo "--json --help" ;;
        check-config) echo "--json --config --help" ;;
        inspect) echo "--json --config --help" ;;
        export)  echo "--base-only --output --help" ;;
        serve)   echo "--config --help" ;;
        reload)  echo "--config --socket --json --help" ;;
        stats)   echo "--config --socket --json --summary --help" ;;
        add)     echo "--block --allow --label --expires --from-file --to --json --config --country --country-code --national-prefix --international-prefix --national-number-length --help" ;;
        remove)  echo "--from --from-file --json --config --country --country-code --national-prefix --international-prefix --national-number-length --help" ;;
        compact) echo "--json --config --help" ;;
        search)  echo "--directory --limit --json --config --help" ;;
        update)  echo "--config --force --allow-shrink --rollback --no-reload --quiet --json --help" ;;
        log)     echo "--blocked --verdict --since --until --caller --callee --call-id --id --follow --json --config --file --help" ;;
    esac
}

_lookupd() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    local commands="query compile check check-config inspect export serve reload stats add remove compact search update log"

    if [ "$cword" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi
    local command=${words[1]}

    # Values of options.
    case "$prev" in
        --config|--contacts|--file|--from-file)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --directory)
            COMPREPLY=($(compgen -f -X '!*.lkd' -- "$cur") $(compgen -d -- "$cur")); return ;;
        -o|--output)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --socket)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --format)
            COMPREPLY=($(compgen -W "csv json text vcard" -- "$cur")); return ;;
        --on-duplicate)
            COMPREPLY=($(compgen -W "error first last" -- "$cur")); return ;;
        --file-format)
            COMPREPLY=($(compgen -W "4 2" -- "$cur")); return ;;
        --action)
            COMPREPLY=($(compgen -W "block identify allow" -- "$cur")); return ;;
        --verstat)
            COMPREPLY=($(compgen -W "TN-Validation-Passed TN-Validation-Failed No-TN-Validation" -- "$cur")); return ;;
        --since|--until)
            COMPREPLY=($(compgen -W "15m 1h 24h 7d" -- "$cur")); return ;;
        --verdict)
            COMPREPLY=($(compgen -W "blocked identified contact unknown anonymous invalid bypassed" -- "$cur")); return ;;
        --expires)
            COMPREPLY=($(compgen -W "15m 1h 24h 7d" -- "$cur")); return ;;
        --country)
            COMPREPLY=($(compgen -W "CN US GB IT DE FR JP KR IN AU CA HK TW SG RU BR ES NL NO SE" -- "$cur")); return ;;
        --attribution)
            COMPREPLY=($(compgen -W "zh en zh_Hant de fr ja ko ru es off" -- "$cur")); return ;;
        --label|--callee|--caller|--id|--call-id|--at|--to|--from|--rollback|--country-code|--national-prefix|--international-prefix|--national-number-length|--directory-version|--max-errors|--memory|--number-column|--label-column|--action-column)
            return ;;
    esac

    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(_lookupd_options "$command")" -- "$cur"))
        return
    fi
    case "$command" in
        compile) COMPREPLY=($(compgen -f -- "$cur")) ;;
        check|inspect|export) COMPREPLY=($(compgen -f -X '!*.lkd' -- "$cur") $(compgen -d -- "$cur")) ;;
        help) COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
    esac
}

complete -F _lookupd lookupd
