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
