# fmtlib 9.1.0 (Debian 12): C++; its GoogleTest suites throw and catch format_error and
# system_error throughout. libfmt.so.9 shared, as Debian builds it.
RP_SOURCE=fmtlib
RP_LANG=C++
# nocheck: the tests are built (FMT_TEST is on) but not run by the build.
RP_DEB_OPTIONS="nocheck parallel=2"
RP_BUILT=bdir/bin/format-test
