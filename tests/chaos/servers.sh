# The chaos suite's servers and their loads (sourced by tests/chaos/chaos.sh, which sets $tmp,
# $lp, $launch and LIVEPROBE_RUNTIME_DIR first). Private instances only: each server has its
# own directory under $tmp, a free loopback port, and is a child of the suite, stopped at its
# end; the system's nginx and memcached (their configuration, ports, services) are never used.
#
# For each SERVER (nginx, memcached):
#   SERVER_start / SERVER_stop          the server and its load generator
#   SERVER_pids                         every pid of the server (nginx: the master and workers)
#   SERVER_target                       sets $target, the pid a session traces (nginx: a worker
#                                       at random)
#   SERVER_alive                        0 when every pid is alive; else says who died, and why
#                                       when the server's log says it (run it in this shell, not
#                                       in $(...): it reaps the dead and takes the new workers)
#   SERVER_load_report                  the load's figures so far: "requests errors"
#   SERVER_final_report                 after SERVER_stop: a line of the load's totals; returns
#                                       non-zero when the load saw an error or lost data
#   memcached_restart                   after memcached died: a new one, with new loaders
# and the specs the sessions trace: ng_inflight and mc_inflight (functions a thread is inside
# while the server idles), ng_all and mc_all (every function of the server).
#
# The servers inherit LIVEPROBE_RUNTIME_DIR (nginx through its `env` directive): an agent that
# `attach` injects takes its socket directory from the process's environment, not the tool's.

# --- processes -------------------------------------------------------------------------------

now_ms() { local t=${EPOCHREALTIME/./}; echo $((10#$t / 1000)); }
# running PID: the process exists and is not a zombie (kill -0 succeeds on a zombie).
running() {
    local line
    [ -n "${1:-}" ] && read -r line 2>/dev/null <"/proc/$1/stat" || return 1
    line=${line##*) }
    case ${line%% *} in Z|X|x|'') return 1 ;; esac
    return 0
}
threads_of() { local t=(/proc/"$1"/task/*); [ -e "${t[0]}" ] && echo "${#t[@]}" || echo 0; }
# zombies_of PID: the pids of its children that are zombies.
zombies_of() { ps --ppid "$1" -o pid=,stat= 2>/dev/null | awk '$2 ~ /^Z/ {print $1}' | tr '\n' ' '; }
# wait_child PID SECONDS: waits for a child of this shell; 0 and its status in $wait_rc when it
# ended, 1 when it is still running after SECONDS.
wait_child() {
    local pid=$1 end=$(( $(now_ms) + $2 * 1000 ))
    while running "$pid"; do
        [ "$(now_ms)" -ge "$end" ] && return 1
        sleep 0.05
    done
    wait "$pid" 2>/dev/null; wait_rc=$?
    return 0
}
# stop_child PID [SIGNAL]: SIGNAL (TERM), 10 s, then SIGKILL; reaps it.
stop_child() {
    running "$1" || { wait "$1" 2>/dev/null; return 0; }
    kill -"${2:-TERM}" "$1" 2>/dev/null
    wait_child "$1" 10 && return 0
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# --- ports -----------------------------------------------------------------------------------

# port_used PORT: a socket of any state on PORT (IPv4 or IPv6) in /proc/net/tcp*.
port_used() {
    local hex
    hex=$(printf '%04X' "$1")
    grep -qE "^ *[0-9]+: [0-9A-F]+:$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
free_port() {
    local p
    for _ in $(seq 500); do
        p=$((20000 + RANDOM % 40000))
        port_used "$p" || { echo "$p"; return 0; }
    done
    return 1
}
# wait_port PORT SECONDS PID: 0 once PORT accepts a connection; 1 when PID died or time ran out.
wait_port() {
    local end=$(( $(now_ms) + $2 * 1000 ))
    while [ "$(now_ms)" -lt "$end" ]; do
        running "$3" || return 1
        if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}

# --- nginx, loaded by wrk ----------------------------------------------------------------------

ng_workers_n=2
ng_inflight=(ngx_process_events_and_timers libc.so.6:epoll_wait)
ng_all='*'
declare -A init_threads=()

# The workers of the master, sorted.
ng_children() { ps --ppid "$ng_master" -o pid= 2>/dev/null | tr -d ' ' | sort -n | tr '\n' ' '; }

nginx_start() {
    ng_dir=$tmp/nginx
    mkdir -p "$ng_dir/www" "$ng_dir/tmp"
    # A page of 4 KiB: every response is checked by status only, wrk counts the others.
    head -c 3000 /dev/urandom | base64 >"$ng_dir/www/index.html"
    local try
    for try in 1 2 3; do
        ng_port=$(free_port) || { echo "nginx: no free port"; return 1; }
        sed -e "s|@DIR@|$ng_dir|g" -e "s|@PORT@|$ng_port|g" -e "s|@WORKERS@|$ng_workers_n|g" \
            "$chaos_dir/nginx.conf.in" >"$ng_dir/nginx.conf"
        : >"$ng_dir/error.log"
        "${launch[@]}" nginx -p "$ng_dir/" -c "$ng_dir/nginx.conf" -e "$ng_dir/error.log" >"$ng_dir/stdout" 2>&1 &
        ng_master=$!
        if wait_port "$ng_port" 30 "$ng_master"; then break; fi
        echo "nginx: did not start on port $ng_port (try $try):"; sed 's/^/    /' "$ng_dir/stdout" "$ng_dir/error.log" | tail -5
        stop_child "$ng_master" KILL
        ng_master=
        [ "$try" -eq 3 ] && return 1
    done
    local w
    for _ in $(seq 300); do
        read -ra ng_workers <<<"$(ng_children)"
        [ "${#ng_workers[@]}" -ge "$ng_workers_n" ] && break
        sleep 0.1
    done
    [ "${#ng_workers[@]}" -eq "$ng_workers_n" ] || { echo "nginx: ${#ng_workers[@]} workers, want $ng_workers_n"; return 1; }
    ng_log_seen=0
    for w in "$ng_master" "${ng_workers[@]}"; do init_threads[$w]=$(threads_of "$w"); done
    echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'): master $ng_master, workers ${ng_workers[*]}, port $ng_port, $ng_dir"
    nginx_load_start
}

# The load: wrk, 1 thread, 8 connections, in runs of 1 s one after the other (a run's report
# says its requests and errors; the runs' times place an error among the sessions), until
# $ng_dir/load.stop exists. Each run is a line of $ng_dir/wrk.runs:
#   START_MS END_MS EXIT REQUESTS NON2XX CONNECT READ WRITE TIMEOUT
# a run without a report is kept as wrk.fail.START_MS and counted as an error.
nginx_load_start() {
    rm -f "$ng_dir/load.stop"
    : >"$ng_dir/wrk.runs"
    (
        trap '' INT
        while [ ! -e "$ng_dir/load.stop" ]; do
            s=$(now_ms)
            wrk -t1 -c8 -d1s --timeout 10s "http://127.0.0.1:$ng_port/index.html" >"$ng_dir/wrk.out" 2>&1
            rc=$?
            e=$(now_ms)
            req=$(sed -nE 's/^ *([0-9]+) requests in .*/\1/p' "$ng_dir/wrk.out")
            non=$(sed -nE 's/^ *Non-2xx or 3xx responses: *([0-9]+).*/\1/p' "$ng_dir/wrk.out")
            sock=$(sed -nE 's/^ *Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+).*/\1 \2 \3 \4/p' "$ng_dir/wrk.out")
            if [ -z "$req" ] || [ "$rc" -ne 0 ]; then cp "$ng_dir/wrk.out" "$ng_dir/wrk.fail.$s"; fi
            echo "$s $e $rc ${req:--1} ${non:-0} ${sock:-0 0 0 0}" >>"$ng_dir/wrk.runs"
        done
    ) &
    ng_load=$!
}

nginx_load_report() {  # requests errors
    awk '{ if ($4 < 0) e++; else r += $4; e += $5 + $6 + $7 + $8 + $9; if ($3 != 0 && $4 >= 0) e++ }
         END { printf "%d %d\n", r, e }' "$ng_dir/wrk.runs"
}

# The runs that saw an error, with the sessions they overlap (from $sessions_log).
nginx_load_errors() {
    local s e rc req non c r w t
    while read -r s e rc req non c r w t; do
        if [ "$req" -lt 0 ] || [ "$rc" -ne 0 ] || [ $((non + c + r + w + t)) -gt 0 ]; then
            echo "    wrk run at +$(( (s - t0_ms) / 1000 )).$(( (s - t0_ms) % 1000 / 100 ))s..+$(( (e - t0_ms) / 1000 )).$(( (e - t0_ms) % 1000 / 100 ))s: exit $rc, requests $req, non-2xx/3xx $non, socket errors connect $c read $r write $w timeout $t; sessions then: $(sessions_between nginx "$s" "$e")"
            [ -e "$ng_dir/wrk.fail.$s" ] && sed 's/^/        /' "$ng_dir/wrk.fail.$s"
        fi
    done <"$ng_dir/wrk.runs"
}

nginx_pids() { echo "$ng_master ${ng_workers[*]}"; }
nginx_target() { target=${ng_workers[RANDOM % ${#ng_workers[@]}]}; }

# nginx_alive: the master and the same workers as before; a worker that died is named with the
# master's line about it, and the new workers are taken as the ones to trace from now on.
nginx_alive() {
    local ok=0 w now line
    if ! running "$ng_master"; then echo "nginx master $ng_master died"; ok=1; fi
    for w in "${ng_workers[@]}"; do
        if ! running "$w"; then
            # (the master says it once it has reaped the worker)
            for _ in $(seq 20); do
                line=$(grep -E "worker process $w exited" "$ng_dir/error.log" | head -1)
                [ -n "$line" ] && break
                sleep 0.1
            done
            echo "nginx worker $w died${line:+ (error.log: ${line#* \[})}"
            ok=1
        fi
    done
    now=$(ng_children)
    if [ "$ok" -ne 0 ] && running "$ng_master"; then
        for _ in $(seq 50); do now=$(ng_children); [ "$(wc -w <<<"$now")" -ge "$ng_workers_n" ] && break; sleep 0.1; done
        read -ra ng_workers <<<"$now"
        for w in "${ng_workers[@]}"; do [ -n "${init_threads[$w]:-}" ] || init_threads[$w]=$(threads_of "$w"); done
        echo "nginx: the master started workers ${ng_workers[*]}"
    elif [ "$now" != "${ng_workers[*]} " ] && running "$ng_master"; then
        echo "nginx: workers are now '$now', were '${ng_workers[*]}'"
        read -ra ng_workers <<<"$now"
        for w in "${ng_workers[@]}"; do [ -n "${init_threads[$w]:-}" ] || init_threads[$w]=$(threads_of "$w"); done
        ok=1
    fi
    # Any other line of the master or a worker at the level alert or above, once.
    local total
    total=$(wc -l <"$ng_dir/error.log")
    if [ "$total" -gt "$ng_log_seen" ]; then
        tail -n +"$((ng_log_seen + 1))" "$ng_dir/error.log" | head -n "$((total - ng_log_seen))" |
            grep -E '\[(alert|crit|emerg)\]' | grep -vE "worker process [0-9]+ exited" | sed 's/^/nginx error.log: /' | grep . && ok=1
        ng_log_seen=$total
    fi
    return $ok
}

nginx_stop() {
    if [ -n "${ng_load:-}" ]; then
        touch "$ng_dir/load.stop"
        wait_child "$ng_load" 30 || { pkill -KILL -P "$ng_load" 2>/dev/null; stop_child "$ng_load" KILL; }
        ng_load=
    fi
    if [ -n "${ng_master:-}" ]; then
        stop_child "$ng_master" QUIT
        ng_master=
    fi
}

nginx_final_report() {
    local r e runs
    read -r r e <<<"$(nginx_load_report)"
    runs=$(wc -l <"$ng_dir/wrk.runs")
    echo "nginx: $r requests in $runs wrk runs, $e errors"
    [ "$e" -eq 0 ] && [ "$r" -gt 0 ] && return 0
    nginx_load_errors
    return 1
}

# --- memcached, loaded by tests/chaos/mc_load.pl -----------------------------------------------

mc_threads=4
mc_loaders_n=2
mc_maxkeys=200000     # per loader: 2 x 200,000 keys of at most 90 bytes, far below -m 512
mc_inflight=(libc.so.6:epoll_wait libevent-2.1.so.7:event_base_loop)
mc_all='libevent-2.1.so.7:*'   # memcached's own symbols are stripped: its event loop's library
mc_epoch=0
mc_past_report=()

# memcached_start [NAME [LOADERS [MAXKEYS]]]: a memcached in $tmp/NAME (memcached), with LOADERS
# loaders (2) of MAXKEYS keys each; sets mc_dir, mc_port, mc_pid, mc_load_pids.
memcached_start() {
    local name=${1:-memcached}
    mc_dir=$tmp/$name
    mc_epoch=$((mc_epoch + 1))
    mkdir -p "$mc_dir"
    local user=() try
    [ "$(id -u)" -eq 0 ] && user=(-u root)
    for try in 1 2 3; do
        mc_port=$(free_port) || { echo "memcached: no free port"; return 1; }
        "${launch[@]}" memcached "${user[@]}" -l 127.0.0.1 -p "$mc_port" -U 0 -m 512 -M -t "$mc_threads" -c 1024 \
            >"$mc_dir/memcached.$mc_epoch.log" 2>&1 &
        mc_pid=$!
        wait_port "$mc_port" 30 "$mc_pid" && break
        echo "memcached: did not start on port $mc_port (try $try):"; sed 's/^/    /' "$mc_dir/memcached.$mc_epoch.log" | tail -5
        stop_child "$mc_pid" KILL
        mc_pid=
        [ "$try" -eq 3 ] && return 1
    done
    # Its threads are all started once it listens; give the last ones a moment.
    sleep 0.3
    init_threads[$mc_pid]=$(threads_of "$mc_pid")
    echo "memcached $(memcached -V 2>&1 | awk '{print $2}'): pid $mc_pid ($(threads_of "$mc_pid") threads), port $mc_port, $mc_dir"
    memcached_load_start "${2:-$mc_loaders_n}" "${3:-$mc_maxkeys}"
}

memcached_load_start() {
    local i prefix
    mc_load_pids=()
    mc_prefixes=()
    for ((i = 0; i < $1; i++)); do
        prefix=e${mc_epoch}l$i
        perl "$chaos_dir/mc_load.pl" 127.0.0.1 "$mc_port" "$prefix" "$2" "$mc_dir/load.$prefix.stats" \
            2>"$mc_dir/load.$prefix.err" &
        mc_load_pids+=($!)
        mc_prefixes+=("$prefix")
    done
}

# Sum of one counter over the loaders' stats files.
mc_sum() {
    local p s=0 v
    for p in "${mc_prefixes[@]}"; do
        v=$(grep -oE "(^| )$1=[0-9]+" "$mc_dir/load.$p.stats" 2>/dev/null | cut -d= -f2)
        s=$((s + ${v:-0}))
    done
    echo "$s"
}
# requests errors, of every memcached of the run (one that died and the one after it)
mc_past_req=0
mc_past_err=0
memcached_load_report() {
    echo "$(( mc_past_req + $(mc_sum sets) + $(mc_sum gets) ))" \
         "$(( mc_past_err + $(mc_sum errors) + $(mc_sum mismatches) + $(mc_sum misses) + $(mc_sum swept_bad) + $(mc_sum unchecked) ))"
}
memcached_pids() { echo "$mc_pid"; }
memcached_target() { target=$mc_pid; }
memcached_alive() {
    running "$mc_pid" && return 0
    wait "$mc_pid" 2>/dev/null
    local rc=$?
    if [ "$rc" -gt 128 ]; then echo "memcached $mc_pid died: signal $((rc - 128)) (SIG$(kill -l $((rc - 128))))"
    else echo "memcached $mc_pid died: exit $rc"; fi
    return 1
}
# The loaders' failures (the first lines of their stderr, its time in seconds since the epoch),
# with the sessions around them (from chaos.sh's sessions_between).
memcached_load_errors() {
    local f name t rest ms
    for f in "$mc_dir"/load.*.err; do
        [ -s "$f" ] || continue
        name=${f##*/load.}
        echo "    loader ${name%.err}: $(wc -l <"$f") lines of errors; the first 3:"
        head -3 "$f" | while read -r t rest; do
            ms=${t/./}
            echo "        +$(( (ms - t0_ms) / 1000 )).$(( (ms - t0_ms) % 1000 / 100 ))s $rest; sessions then: $(sessions_between memcached "$((ms - 1000))" "$ms")"
        done
    done
}
# memcached_restart: after memcached died, its loaders' figures are kept (and their errors
# counted), a new memcached is started with new loaders (its keys start again).
memcached_restart() {
    memcached_stop_loads
    mc_past_report+=("$(memcached_loads_line) (memcached $mc_pid, which died)")
    local r e
    read -r r e <<<"$(memcached_load_report)"
    mc_past_req=$r
    mc_past_err=$e
    stop_child "$mc_pid" KILL
    memcached_start
}

memcached_stop_loads() {
    local p
    for p in "${mc_load_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${mc_load_pids[@]}"; do wait_child "$p" 60 || { echo "memcached: loader $p did not end"; stop_child "$p" KILL; }; done
    mc_load_pids=()
}
memcached_loads_line() {
    echo "$(mc_sum sets) sets, $(mc_sum gets) gets, $(mc_sum errors) errors, $(mc_sum mismatches) wrong values," \
         "$(mc_sum misses) missing keys; at the end $(mc_sum swept) keys read back: $(mc_sum swept_bad) wrong or missing," \
         "$(mc_sum unchecked) not read"
}
memcached_stop() {
    [ -n "${mc_pid:-}" ] || return 0
    memcached_stop_loads
    # Evictions must be 0: the keys never reach the memory limit.
    mc_stats=$(timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$mc_port; printf 'stats\r\nquit\r\n' >&3; cat <&3" 2>/dev/null | tr -d '\r')
    stop_child "$mc_pid" TERM
    mc_stopped_pid=$mc_pid
    mc_pid=
}
memcached_final_report() {
    local bad=0 p n ev items
    for p in "${mc_prefixes[@]}"; do
        grep -q 'final=1' "$mc_dir/load.$p.stats" 2>/dev/null || { echo "memcached: loader $p did not finish its sweep"; bad=1; }
    done
    n=$(( $(mc_sum errors) + $(mc_sum mismatches) + $(mc_sum misses) + $(mc_sum swept_bad) + $(mc_sum unchecked) ))
    ev=$(sed -n 's/^STAT evictions //p' <<<"${mc_stats:-}")
    items=$(sed -n 's/^STAT curr_items //p' <<<"${mc_stats:-}")
    echo "memcached: $(memcached_loads_line); $items items, ${ev:-?} evictions"
    for p in "${mc_past_report[@]}"; do echo "memcached (before a restart): $p"; bad=1; done
    [ "$n" -eq 0 ] || bad=1
    [ "${ev:-x}" = 0 ] || { echo "memcached: evictions: '${ev:-no stats}'"; bad=1; }
    [ "$(mc_sum swept)" -gt 0 ] || { echo "memcached: no key read back"; bad=1; }
    [ "$bad" -ne 0 ] && memcached_load_errors
    return $bad
}
