# xz-utils 5.4.1 (Debian 12): C. liblzma and xz, as Debian builds them (three configurations).
RP_SOURCE=xz-utils
RP_LANG=C
# Debian's build (debian/rules build-arch): dh_auto_test runs each configuration's `make check`,
# which builds the test programs.
RP_DEB_OPTIONS="parallel=2"
RP_BUILT=debian/static-build/tests/test_check
RP_TIMEOUT=120
# '*': the test programs of the static build hold liblzma; xz (normal build) uses liblzma.so.5.
RP_SPECS=('*' 'liblzma.so.5:*')

# The suite (tests/Makefile.am TESTS): the C tests (tuktest), one process each, from the static
# build; the shell tests run xz (and xzdiff, xzgrep: shell scripts that run xz), which the
# driver's copy of each script names through a wrapper that runs the real xz through lpw.sh.
rp_c_tests=(test_check test_hardware test_stream_flags test_filter_flags test_block_header test_index
    test_index_hash test_bcj_exact_size test_memlimit test_lzip_decoder test_vli)
rp_sh_tests=(test_files.sh test_compress_prepared_bcj_sparc test_compress_prepared_bcj_x86
    test_compress_generated_abc test_compress_generated_random test_compress_generated_text test_scripts.sh)
rp_tests() {
    printf '%s\n' "${rp_c_tests[@]}"
    if [ -n "${RP_QUICK:-}" ]; then printf '%s\n' test_files.sh test_compress_generated_abc; else printf '%s\n' "${rp_sh_tests[@]}"; fi
}
rp_events_tests() { rp_tests; }

rp_run() {
    local t=$1 tree=$RP_TREE
    case " ${rp_c_tests[*]} " in
    *" $t "*)
        cd "$tree/debian/static-build/tests" && srcdir=$tree/tests "$LPW" "./$t"
        return
        ;;
    esac
    # A private directory per run for what the scripts write (tmp_comp_*, the generated files),
    # with the configuration they read (../config.h); xz and xzdec by wrappers.
    local d=$RP_WORK/xz-run.$BASHPID
    rm -rf "$d" && mkdir -p "$d/tests" "$d/bin"
    cp "$tree/debian/normal-build/config.h" "$d/config.h"
    cat >"$d/bin/xz" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH=$tree/debian/normal-build/src/liblzma/.libs exec "\$LPW" $tree/debian/normal-build/src/xz/.libs/xz "\$@"
WRAP
    chmod +x "$d/bin/xz"
    local s
    for s in test_files.sh test_compress.sh test_scripts.sh; do
        sed -e "s|\.\./src/xz/xz|$d/bin/xz|g" -e "s|\`pwd\`/\.\./src/xz|$d/bin|" \
            -e "s|\.\./src/scripts/|$tree/debian/normal-build/src/scripts/|g" \
            -e "s|\./create_compress_files|\"\$LPW\" $tree/debian/static-build/tests/create_compress_files|" \
            "$tree/tests/$s" >"$d/tests/$s"
        chmod +x "$d/tests/$s"
    done
    local rc=0
    case $t in
    test_compress_*) (cd "$d/tests" && srcdir=$tree/tests ./test_compress.sh "${t#test_}") || rc=$? ;;
    *) (cd "$d/tests" && srcdir=$tree/tests "./$t") || rc=$? ;;
    esac
    rm -rf "$d"
    return "$rc"
}
# Per test: tuktest's PASS/FAIL/SKIP lines (the C tests); the exit status (all).
rp_result() { grep -E '^(PASS|FAIL|SKIP|ERROR):' "$2.out" || true; }

# The suite's own runner: `make check` of the normal build (liblzma shared, libtool's wrapper
# scripts executing the real programs), under one trace (exec followed), in a copy of its own.
RP_EXEC=(make check)
rp_exec_setup() {
    rm -rf "$RP_WORK/xz-exec" && cp -a "$RP_TREE" "$RP_WORK/xz-exec" && cd "$RP_WORK/xz-exec/debian/normal-build"
}
