#!/bin/sh
# tables.sh runs the benchmark set README.md's tables come from: ROUNDS
# rounds (default 5) of the commands below, in turn, so that contenders
# and workloads interleave, then the idle-stream memory once. The raw
# output goes to OUT (default bench.txt); the tables are the medians of
# the rounds, and
#
#	go run golang.org/x/perf/cmd/benchstat@latest -col /impl OUT
#
# gives them with their spread. Run it from the repository's root with
# nothing else busy: it takes about 35 minutes on a 2-core VM.
set -eu
out=${1:-bench.txt}
rounds=${2:-5}
dir=$(mktemp -d)
trap 'rm -r "$dir"' EXIT # a failed run leaves no binary behind either
bin=$dir/bench.test
(cd bench && go test -c -o "$bin" .)
: >"$out"
field='impl=(braid|braid-nocoalesce|yamux|smux|hashicorp)$'
run() { "$bin" -test.run '^$' -test.cpu 1,2 "$@" >>"$out"; }
i=1
while [ "$i" -le "$rounds" ]; do
	run -test.bench "^BenchmarkPingPong\$/.*/load=bulk/$field" -test.benchtime 2000x
	run -test.bench '^BenchmarkBulk$/' -test.benchtime 4000x -test.benchmem
	run -test.bench '^BenchmarkBulkStreams$/' -test.benchtime 20000x -test.benchmem
	run -test.bench '^BenchmarkNotifications$/' -test.benchtime 2x
	run -test.bench '^BenchmarkSmallMessages$' -test.benchtime 1000000x -test.benchmem
	run -test.bench '^BenchmarkPingPong$/.*/load=idle/' -test.benchtime 2000x
	run -test.bench "^BenchmarkPingPongSpaced\$/.*/$field" -test.benchtime 2000x
	run -test.bench "^BenchmarkPingPongSparse\$/.*/$field" -test.benchtime 200x
	run -test.bench '^BenchmarkPingPongAfterQuiet$/.*/impl=(braid|yamux|smux|hashicorp)$' -test.benchtime 100x
	i=$((i + 1))
done
"$bin" -test.run '^$' -test.bench '^BenchmarkIdleStreams$' -test.benchtime 1x -test.benchmem >>"$out"
