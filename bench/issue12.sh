#!/bin/sh
# issue12.sh runs issue 12's benchmarks (BenchmarkAccounts) once and
# prints the machine's load before and after: the figures mean little
# without it on a shared machine. Extra arguments go to go test.
set -eu
cd "$(dirname "$0")"
echo "load before: $(cat /proc/loadavg) ($(nproc) CPUs)"
go test -run XXX -bench 'BenchmarkAccounts$' -v "$@" | grep -v '^\(goos\|goarch\|pkg\):'
echo "load after: $(cat /proc/loadavg)"
