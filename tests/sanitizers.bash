# sanitizers.bash - the settings every test program runs with under
# ASan+UBSan (build-san/): leaks are errors too, reports go to stderr, and
# each sanitizer exits with its own status.  Values already set are kept.
# Sourced by test_helper.bash and scripts/runtests (the C unit programs);
# TOP is the checkout.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=99}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$TOP/tests/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=98}
