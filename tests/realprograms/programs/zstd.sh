# zstd 1.5.4 (Debian 12): C, multithreaded compression (ZSTD_c_nbWorkers, worker threads of
# libzstd's pool).
RP_SOURCE=libzstd
RP_LANG=C
# nocheck: Debian's full `make test` takes most of an hour (fuzzers run for minutes each); the
# test programs are built after the package (rp_build_extra) by the same tests/Makefile that
# `make test` builds them with, with Debian's flags.
RP_DEB_OPTIONS="nocheck parallel=2"
RP_BUILT=tests/zstreamtest
rp_build_extra() {
    eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
    make -C tests -j2 zstreamtest fuzzer datagen poolTests
}
RP_TIMEOUT=300
# '*': the test programs hold libzstd (static); the zstd CLI (playTests.sh) too.
RP_SPECS=('*')

# The programs tests/Makefile's test targets run, with fixed seeds (-s1) and counts (-i) where
# they fuzz, so that every mode does the same work (`make test` runs them for fixed times):
#   zstreamtest -v -s1 -i0   the streaming API's unit tests, multithreaded ones (nbWorkers 2) among them
#   zstreamtest -s1 -i40     then 40 fuzzing rounds, some of them on worker threads
#   fuzzer -v -s1 -i0        the simple API's unit tests, the thread pool's among them
#   poolTests                the thread pool (threads, queues, resizing while busy)
#   playTests.sh             the CLI: hundreds of zstd commands from sh (-T# worker threads,
#                            pipes, files, dictionaries, --rm, links), zstd run through lpw.sh by
#                            the script's own EXEC_PREFIX
rp_tests() {
    printf '%s\n' zstreamtest-unit fuzzer-unit poolTests
    [ -n "${RP_QUICK:-}" ] || printf '%s\n' zstreamtest-fuzz playTests.sh
}
rp_events_tests() { printf '%s\n' zstreamtest-unit fuzzer-unit poolTests zstreamtest-fuzz; }
rp_run() {
    cd "$RP_TREE/tests"
    case $1 in
    zstreamtest-unit) "$LPW" ./zstreamtest -v -s1 -i0 ;;
    zstreamtest-fuzz) "$LPW" ./zstreamtest -s1 -i40 ;;
    fuzzer-unit) "$LPW" ./fuzzer -v -s1 -i0 ;;
    poolTests) "$LPW" ./poolTests ;;
    playTests.sh)
        # In a private copy of tests/ (the script writes its files where it runs; it reads
        # ../tests/golden-* and runs ../programs/zstdgrep and zstdless).
        local d=$RP_WORK/zstd-play.$BASHPID rc=0
        rm -rf "$d" && mkdir -p "$d" && cp -a "$RP_TREE/tests" "$d/tests" && ln -s "$RP_TREE/programs" "$d/programs"
        (cd "$d/tests" && EXEC_PREFIX=$LPW ZSTD_BIN=$RP_TREE/programs/zstd DATAGEN_BIN=$RP_TREE/tests/datagen \
            bash ./playTests.sh) || rc=$?
        rm -rf "$d"
        return "$rc"
        ;;
    esac
}
# Two processes of one pipeline (zstd | zstd, with -v) write on one stderr: the order of their
# lines changes with their speed, traced or not; the driver compares stderr's lines as a set.
RP_STDERR_UNORDERED=1
# Per test: the verdicts the programs print ("test N : ... OK", "PASS", "SUCCESS", errors).
rp_result() {
    tr '\r' '\n' <"$2.out" | grep -E '^test +[0-9]+ :|OK *$|PASS|SUCCESS|rror' | sed -E 's/\([0-9.]+ ?(ms|s)\)//g' || true
}
# Progress (\r-refreshed, at time intervals), speeds, times, the private directories.
rp_mask() {
    tr '\r' '\n' | sed -E '/^ *[0-9]+% *$/d; /^ *[0-9]+\/ *[0-9]+ *$/d; /MB\/s|GB\/s|kB\/s|cpu load|Completed in|bytes .*copied/d;
        s/ +$//; /^$/d; s|/tmp/[^ ]*/zstd-(play\.[0-9]+\|exec)|PLAYDIR|g; s/0x[0-9a-f]{6,}/ADDR/g;
        s/ [A-Z][a-z]{2} +[0-9]+ [0-9]{2}:[0-9]{2} / DATE /g'
}

# The exec mode: the same programs run from sh (poolTests, then playTests.sh, whose zstd is
# found by following exec), under one trace, in a copy of the tree.
RP_EXEC=(sh -c 'cd tests && ./poolTests && ./zstreamtest -v -s1 -i0 && bash ./playTests.sh')
rp_exec_setup() {
    rm -rf "$RP_WORK/zstd-exec" && cp -a "$RP_TREE" "$RP_WORK/zstd-exec" && cd "$RP_WORK/zstd-exec" &&
        export ZSTD_BIN=$PWD/programs/zstd DATAGEN_BIN=$PWD/tests/datagen
}
