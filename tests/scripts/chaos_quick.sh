#!/usr/bin/env bash
# The chaos suite's bounded subset (issue 30, part 5), run by `make test`: tests/chaos/chaos.sh
# with a few cycles on nginx under wrk and memcached under its loaders (each cycle a session on
# each server, ended by Ctrl-C, --duration, SIGHUP, SIGKILL or detach), then 50 attach/trace/
# detach cycles on one process whose memory must stay flat. About a minute on 2 cores beside
# another test. `make torture` runs the whole suite (100 cycles, 1,000 memory cycles).
# CHAOS_QUICK_CYCLES changes the count; CHAOS_SEED repeats a run's choices.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../chaos/chaos.sh" --memory 50 "${CHAOS_QUICK_CYCLES:-10}"
