#!/usr/bin/env bash
# What a guest's cost and the monitor's memory grow with: what it holds.
# Prints wall time and peak RSS (of the monitor, /usr/bin/time -v) for
#  - N eventfds then S cheap system calls (the per-step cost must not grow
#    with N: compare the S=2000 and S=50000 rows of one N; opening must be
#    linear: compare the S=10 rows of N=2000 and N=16000),
#  - N pipes then S writes and reads of one (the same two comparisons),
#  - N threads parked on a condition variable,
#  - twenty ftruncates to a GiB then filling the overlay (--memory 1024),
#  - stat of a 4 GiB sparse file,
#  - pipes filled until no more can be made, datagrams nobody reads
#    (--memory 256: buffers stop at half of it).
#
#   benches/holdings.sh [path/to/rewind-fuzz]
set -uo pipefail
RF=$(readlink -f "${1:-target/release/rewind-fuzz}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
gcc -O1 -o "$WORK/many_fds" "$ROOT/benches/programs/many_fds.c"
gcc -O1 -o "$WORK/many_pipes" "$ROOT/benches/programs/many_pipes.c"
gcc -O1 -o "$WORK/pipe_fill" "$ROOT/tests/programs/pipe_fill.c"
gcc -O1 -pthread -o "$WORK/many_threads" "$ROOT/benches/programs/many_threads.c"
gcc -O1 -o "$WORK/overlay_fill" "$ROOT/tests/programs/overlay_fill.c"
gcc -O1 -o "$WORK/stat_big" "$ROOT/tests/programs/stat_big.c"
truncate -s 4G "$WORK/big"

measure() {
    local what=$1
    shift
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$RF" run --max-steps 100000000 "$@" >/dev/null 2>"$WORK/err"
    read -r secs kb <"$WORK/time"
    printf '| %s | %s | %d |\n' "$what" "$secs" $((kb / 1024))
}

echo "| case | seconds | peak RSS MiB |"
echo "| --- | --- | --- |"
for n in 2000 16000; do
    for s in 10 2000 50000; do
        measure "$n eventfds, $s steps" --target "$WORK/many_fds" -- "$n" "$s"
    done
done
for n in 1000 8000; do
    for s in 10 2000 20000; do
        measure "$n pipes, $s round trips" --target "$WORK/many_pipes" -- "$n" "$s"
    done
done
for n in 500 4000 8000; do
    measure "$n parked threads" --memory 2048 --target "$WORK/many_threads" -- "$n"
done
measure "20 ftruncate to 1 GiB, fill (--memory 1024)" --memory 1024 --target "$WORK/overlay_fill"
measure "stat of a 4 GiB sparse file" --target "$WORK/stat_big" -- "$WORK/big"
measure "pipes and datagrams filled (--memory 256)" --memory 256 --target "$WORK/pipe_fill"
