# Bash completion for liveprobe(1): commands, options, PIDs, function names, files.
#
# The commands and their options come from the tool itself (`liveprobe --completion`, read once
# a shell session per tool), so they are those of the tool being completed, whatever its
# version. Function names come from `liveprobe list` (-p PID, -x FILE, or the program after
# "--"), read once per process or file in a session. docs/man-and-completion.md says what
# completes where. Needs nothing but bash (not the bash-completion package).

# Splits COMP_LINE as the shell will: _lp_words, the words with their quotes removed;
# _lp_cword, the index of the word at the cursor (COMP_POINT); _lp_cur, its part before the
# cursor. Not COMP_WORDS: bash splits those at ':' and '=' too, which the specs are full of.
_liveprobe_split()
{
    local line=$COMP_LINE point=${COMP_POINT:-${#COMP_LINE}}
    ((point <= ${#line})) || point=${#line}
    local i c word='' inword=0 quote=''
    _lp_words=()
    _lp_cword=-1
    _lp_cur=
    for ((i = 0; i <= ${#line}; i++)); do
        if ((i == point && _lp_cword < 0)); then
            _lp_cword=${#_lp_words[@]}
            _lp_cur=$word
            # Between words: an empty word at the cursor.
            ((inword)) || _lp_words+=("")
        fi
        ((i == ${#line})) && break
        c=${line:i:1}
        if [[ -n $quote ]]; then
            if [[ $c == "$quote" ]]; then quote=; else word+=$c; fi
            continue
        fi
        case $c in
        ' ' | $'\t' | $'\n')
            if ((inword)); then
                _lp_words+=("$word")
                word=
                inword=0
            fi
            ;;
        \' | \") quote=$c inword=1 ;;
        \\) ((i++)); word+=${line:i:1}; inword=1 ;;
        *) word+=$c; inword=1 ;;
        esac
    done
    ((inword)) && _lp_words+=("$word")
}

# Reads the tool's commands and options (`TOOL --completion`, tab-separated lines; man_page.hpp
# says what they hold) once for each tool.
_liveprobe_load()
{
    local tool=$1 line rest f
    [[ ${_lp_loaded_for-} == "$tool" ]] && return 0
    local listing
    listing=$("$tool" --completion 2>/dev/null) || return 1
    _lp_cmds=()
    declare -gA _lp_opts=() _lp_value=() _lp_program=() _lp_pos=()
    while IFS= read -r line; do
        # Split at each tab, keeping empty fields (read would merge them).
        f=()
        rest=$line$'\t'
        while [[ -n $rest ]]; do
            f+=("${rest%%$'\t'*}")
            rest=${rest#*$'\t'}
        done
        case ${f[0]} in
        command)
            _lp_cmds+=("${f[1]}")
            [[ ${f[2]-} == program ]] && _lp_program[${f[1]}]=1
            ;;
        option)
            # The tool's own options (no command) under "/": a key cannot be empty.
            [[ -n ${f[1]} ]] || f[1]=/
            _lp_opts[${f[1]}]+=" ${f[2]}"
            local n
            for n in ${f[2]}; do _lp_value["${f[1]} $n"]=${f[3]-}; done
            ;;
        positional) _lp_pos[${f[1]}]+=" ${f[2]}|${f[3]-}|${f[4]-}" ;;
        esac
    done <<<"$listing"
    _lp_loaded_for=$tool
}

# COMPREPLY: the words of $2... that start with $1.
_liveprobe_reply()
{
    local cur=$1 w
    shift
    COMPREPLY=()
    for w; do [[ $w == "$cur"* ]] && COMPREPLY+=("$w"); done
}

# The PIDs of the user's processes (every process's for root, not the kernel's threads) whose
# PID starts with $1, or, when $1 is not a number, whose name (comm) does: `-p ngi<TAB>`
# completes nginx's PID.
_liveprobe_pids()
{
    local cur=$1 d pid comm
    COMPREPLY=()
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        if ((EUID != 0)); then [[ -O $d ]] || continue; else [[ -e $d/exe ]] || continue; fi
        if [[ $cur == *[!0-9]* ]]; then
            comm=
            read -r comm <"$d/comm" 2>/dev/null
            [[ $comm == "$cur"* ]] && COMPREPLY+=("$pid")
        elif [[ $pid == "$cur"* ]]; then
            COMPREPLY+=("$pid")
        fi
    done
}

# File names starting with $1; with globs after it, only the files matching one (and
# directories, to go down into).
_liveprobe_files()
{
    local cur=$1 glob
    shift
    compopt -o filenames 2>/dev/null
    if (($#)); then
        mapfile -t COMPREPLY < <(
            compgen -d -- "$cur"
            for glob; do compgen -f -X "!$glob" -- "$cur"; done
        )
    else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
}

# The value of option $1 in the words before the cursor ("-p 12", "--pid=12", "-p12").
_liveprobe_option_value()
{
    local short=$1 long=$2 i w
    for ((i = 2; i < ${#_lp_words[@]}; i++)); do
        ((i == _lp_cword)) && continue
        w=${_lp_words[i]}
        [[ $w == -- ]] && break
        if [[ $w == "$short" || $w == "$long" ]]; then
            ((i + 1 != _lp_cword)) && { printf '%s' "${_lp_words[i + 1]-}"; return 0; }
        elif [[ $w == "$long="* ]]; then
            printf '%s' "${w#*=}"
            return 0
        elif [[ $w == "$short"?* ]]; then
            printf '%s' "${w#"$short"}"
            return 0
        fi
    done
    return 1
}

# The program after "--" (its path), if the line has one.
_liveprobe_program()
{
    local i
    for ((i = 2; i < ${#_lp_words[@]} - 1; i++)); do
        if [[ ${_lp_words[i]} == -- ]]; then
            ((i + 1 == _lp_cword)) && return 1
            local p=${_lp_words[i + 1]}
            [[ $p == */* ]] || p=$(type -P -- "$p") || return 1
            [[ -n $p ]] && printf '%s' "$p"
            return
        fi
    done
    return 1
}

# The functions of a process or file, as `liveprobe list` names them (OBJECT:NAME), cached in
# _lp_funcs under _lp_key, "-p PID START" (START: when it started, for a PID used again) or
# "-x FILE", for the session (a library the process loads later shows in a new shell).
# _lp_fnames: the same names without their objects, each once.
_liveprobe_functions()
{
    local tool=$1 how=$2 what=$3
    _lp_key="$how $what"
    if [[ $how == -p ]]; then
        local stat
        [[ $what == +([0-9]) ]] || return
        { stat=$(<"/proc/$what/stat"); } 2>/dev/null || return
        stat=${stat##*) }
        local -a fields
        read -ra fields <<<"$stat"
        _lp_key+=" ${fields[19]-}"
    fi
    local key=$_lp_key
    declare -gA _lp_funcs _lp_fnames
    if [[ -z ${_lp_funcs[$key]+set} ]]; then
        local list
        # Not kept when list fails (no such process yet, not ours): asked again next time.
        list=$("$tool" list "$how" "$what" 2>/dev/null) || return
        _lp_funcs[$key]=$list
        _lp_fnames[$key]=$(printf '%s\n' "$list" | sed 's/^[^:]*://' | sort -u)
    fi
}

# Function names for a spec or a list pattern, $1 the word so far: NAME, OBJECT:NAME, and
# after the p:, r: and rN: of a probe's spec.
_liveprobe_complete_function()
{
    local tool=$1 cmd=$2 cur=$3 how='' what=''
    if what=$(_liveprobe_option_value -p --pid); then
        how=-p
    elif [[ $cmd == list ]] && what=$(_liveprobe_option_value -x --exec); then
        how=-x
    elif what=$(_liveprobe_program); then
        how=-x
    else
        return
    fi
    [[ -n $what ]] || return
    _liveprobe_functions "$tool" "$how" "$what" || return
    local key=$_lp_key pre='' name=$cur
    if [[ $cmd == trace && $cur =~ ^([pr][0-9]*:)(.*)$ ]]; then
        pre=${BASH_REMATCH[1]}
        name=${BASH_REMATCH[2]}
    fi
    local list=${_lp_fnames[$key]}
    [[ $name == *:* ]] && list=${_lp_funcs[$key]}
    local -a names
    mapfile -t names <<<"$list"
    COMPREPLY=()
    local n
    for n in "${names[@]}"; do [[ -n $n && $n == "$name"* ]] && COMPREPLY+=("$pre$n"); done
}

# The modules loaded in the process of -p, for rmmod: the first word of lsmod's module lines
# (not its heading, nor the indented probe lines, nor "(program)", the probes of no module).
_liveprobe_modules()
{
    local tool=$1 cur=$2 pid line
    pid=$(_liveprobe_option_value -p --pid) || return
    local -a mods=()
    while IFS= read -r line; do
        case $line in
        '' | ' '* | 'Module '* | '(program) '*) ;;
        *) mods+=("${line%% *}") ;;
        esac
    done < <("$tool" lsmod -p "$pid" 2>/dev/null)
    _liveprobe_reply "$cur" "${mods[@]}"
}

# The value of an option of cmd, by the option's name and its type name.
_liveprobe_complete_value()
{
    local tool=$1 cmd=$2 opt=$3 type=$4 cur=$5
    case $opt in
    -p | --pid) _liveprobe_pids "$cur"; return ;;
    --tid)
        local pid
        pid=$(_liveprobe_option_value -p --pid) && [[ -d /proc/$pid/task ]] || return
        local -a tids=(/proc/"$pid"/task/*)
        _liveprobe_reply "$cur" "${tids[@]##*/}"
        return
        ;;
    esac
    # A process's name (trace --follow-name COMM): those of the processes running now.
    if [[ $type == COMM ]]; then
        local d comm
        local -A seen=()
        for d in /proc/[0-9]*; do
            if ((EUID != 0)); then [[ -O $d ]] || continue; else [[ -e $d/exe ]] || continue; fi
            comm=
            read -r comm <"$d/comm" 2>/dev/null
            [[ -n $comm ]] && seen[$comm]=1
        done
        _liveprobe_reply "$cur" "${!seen[@]}"
        return
    fi
    # A choice among words (CLI11's IsMember: "TEXT:{total,self,...}"), file names for text and
    # files ("OUT.html"); numbers, expressions and keys have no list.
    case $type in
    *:\{*\})
        local -a words
        type=${type#*\{}
        IFS=, read -ra words <<<"${type%\}}"
        _liveprobe_reply "$cur" "${words[@]}"
        ;;
    TEXT | TEXT:* | *FILE* | *PATH* | *DIR* | *.*) _liveprobe_files "$cur" ;;
    *) COMPREPLY=() ;;
    esac
}

# A positional argument of cmd, by its name.
_liveprobe_complete_positional()
{
    local tool=$1 cmd=$2 name=$3 type=$4 cur=$5
    case $cmd:$name in
    trace:specs | list:pattern) _liveprobe_complete_function "$tool" "$cmd" "$cur" ;;
    insmod:module) _liveprobe_files "$cur" '*.so' ;;
    rmmod:module) _liveprobe_modules "$tool" "$cur" ;;
    build-module:source) _liveprobe_files "$cur" '*.c' '*.cc' '*.cpp' '*.cxx' ;;
    insmod:params | build-module:cflags) COMPREPLY=() ;;
    *) _liveprobe_complete_value "$tool" "$cmd" "" "$type" "$cur" ;;
    esac
}

_liveprobe()
{
    local tool=$1
    # A path typed as the command (./build/tools/liveprobe/liveprobe) is the tool to ask.
    [[ $tool == */* ]] || tool=$(type -P -- "$tool") || return
    _liveprobe_split
    _liveprobe_load "$tool" || return
    local cur=$_lp_cur i cmd='' ci=0
    # The command: the first word after the tool's own options and their values.
    local w
    for ((i = 1; i < _lp_cword; i++)); do
        w=${_lp_words[i]}
        if [[ $w == -* ]]; then
            [[ $w != *=* && -n ${_lp_value["/ $w"]-} ]] && ((i++))
            continue
        fi
        cmd=$w
        ci=$i
        break
    done
    if [[ -z $cmd ]]; then
        local prev=${_lp_words[_lp_cword - 1]}
        if ((_lp_cword > 1)) && [[ $prev == -* && -n ${_lp_value["/ $prev"]-} ]]; then
            _liveprobe_complete_value "$tool" "" "$prev" "${_lp_value["/ $prev"]}" "$cur"
        elif [[ $cur == -* ]]; then
            # shellcheck disable=SC2086  # a list of words
            _liveprobe_reply "$cur" ${_lp_opts[/]}
        else
            _liveprobe_reply "$cur" "${_lp_cmds[@]}"
        fi
        return
    fi
    # After "--": the program, then its arguments (files).
    for ((i = ci + 1; i < _lp_cword; i++)); do
        if [[ ${_lp_words[i]} == -- ]]; then
            if ((i + 1 == _lp_cword)) && [[ $cur != */* ]]; then
                mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
            else
                _liveprobe_files "$cur"
            fi
            return
        fi
    done
    # The value of an option: "--opt VALUE" or "--opt=VALUE".
    local prev=${_lp_words[_lp_cword - 1]}
    # The tool's own options after the command (trace --config FILE: CLI11 passes them up).
    local value_type=${_lp_value["$cmd $prev"]-${_lp_value["/ $prev"]-}}
    if ((_lp_cword - 1 > ci)) && [[ $prev == -* && -n $value_type ]]; then
        _liveprobe_complete_value "$tool" "$cmd" "$prev" "$value_type" "$cur"
        return
    fi
    if [[ $cur == --*=* && -n ${_lp_value["$cmd ${cur%%=*}"]-} ]]; then
        _liveprobe_complete_value "$tool" "$cmd" "${cur%%=*}" "${_lp_value["$cmd ${cur%%=*}"]}" "${cur#*=}"
        # Bash replaces the part after '=' only.
        return
    fi
    if [[ $cur == -* ]]; then
        local -a opts
        # shellcheck disable=SC2206  # a list of words
        opts=(${_lp_opts[$cmd]-})
        [[ -n ${_lp_program[$cmd]-} ]] && opts+=(--)
        _liveprobe_reply "$cur" "${opts[@]}"
        return
    fi
    # A positional argument: which one, counting those before the cursor (not the options'
    # values). One that takes several words takes all that follow.
    local n=0
    for ((i = ci + 1; i < _lp_cword; i++)); do
        w=${_lp_words[i]}
        if [[ $w == -* ]]; then
            [[ $w != *=* && -n ${_lp_value["$cmd $w"]-} ]] && ((i++))
            continue
        fi
        ((n++))
    done
    local -a pos
    # shellcheck disable=SC2206  # a list of words
    pos=(${_lp_pos[$cmd]-})
    ((${#pos[@]})) || return
    local p
    for ((i = 0; i < ${#pos[@]}; i++)); do
        p=${pos[i]}
        [[ ${p##*|} == many ]] && break
        ((i == n)) && break
    done
    ((i < ${#pos[@]})) || return
    p=${pos[i]}
    local name=${p%%|*} type=${p#*|}
    type=${type%|*}
    _liveprobe_complete_positional "$tool" "$cmd" "$name" "$type" "$cur"
    # Bash replaces the word after its last ':' (COMP_WORDBREAKS): the replies start there too.
    if [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]]; then
        local colon=${cur%"${cur##*:}"}
        for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]=${COMPREPLY[i]#"$colon"}; done
    fi
}

complete -F _liveprobe liveprobe
