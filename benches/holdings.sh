#!/usr/bin/env bash
# What a guest's cost and the monitor's memory grow with: what it holds.
# Prints wall time, peak RSS (of the monitor, /usr/bin/time -v), steps and
# what the kernel looked at (waiters, epoll interests, threads, free
# descriptor ranges, timers: its work, the same on every host) for
#  - N eventfds then S cheap system calls (the per-step cost must not grow
#    with N: compare the S=2000 and S=50000 rows of one N; opening must be
#    linear: compare the S=10 rows of N=2000 and N=16000),
#  - N pipes then S writes and reads of one (the same two comparisons),
#  - N threads parked on a condition variable,
#  - N waiters of each kind (threads reading a pipe, an event counter, a
#    socket pair, a timer or signal descriptor, or in poll, select or
#    epoll_wait; processes reading a pipe), each on an object of its own,
#    beside S round trips through another pipe (compare the S=10 and
#    S=20000 rows of one N, and those of N=500 and N=4000),
#  - a parent with N parked threads whose children exec, signal themselves
#    and end, R times,
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
gcc -O1 -pthread -o "$WORK/many_waiters" "$ROOT/benches/programs/many_waiters.c"
gcc -O1 -pthread -o "$WORK/parked_parent" "$ROOT/tests/programs/parked_parent.c"
gcc -O1 -o "$WORK/overlay_fill" "$ROOT/tests/programs/overlay_fill.c"
gcc -O1 -o "$WORK/stat_big" "$ROOT/tests/programs/stat_big.c"
truncate -s 4G "$WORK/big"
# Steps and what was looked at, or how the run ended when it failed.
cat >"$WORK/counts.py" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
o = r["outcome"]
if o["kind"] == "exited" and o.get("code") == 0:
    print(f"{r['steps']} | {r['looked_at']}")
else:
    print(f"{o['kind']} | -")
PY

measure() {
    local what=$1
    shift
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$RF" run --json --max-steps 100000000 "$@" >"$WORK/json" 2>"$WORK/err"
    read -r secs kb < <(tail -1 "$WORK/time")
    local counts
    counts=$(python3 "$WORK/counts.py" "$WORK/json" 2>/dev/null || echo "no report | -")
    printf '| %s | %s | %d | %s |\n' "$what" "$secs" $((kb / 1024)) "$counts"
}

echo "| case | seconds | peak RSS MiB | steps | looked at |"
echo "| --- | --- | --- | --- | --- |"
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
for kind in pipe eventfd socket poll select epoll timerfd signalfd; do
    for n in 500 4000; do
        for s in 10 20000; do
            measure "$n $kind waiters, $s round trips" --memory 2048 --target "$WORK/many_waiters" -- "$kind" "$n" "$s"
        done
    done
done
for n in 100 400; do
    for s in 10 20000; do
        measure "$n processes reading pipes, $s round trips" --memory 2048 --target "$WORK/many_waiters" -- procs "$n" "$s"
    done
done
for n in 500 4000; do
    for r in 2 42; do
        measure "$n parked threads, $r children" --memory 2048 --target "$WORK/parked_parent" -- "$n" "$r"
    done
done
measure "20 ftruncate to 1 GiB, fill (--memory 1024)" --memory 1024 --target "$WORK/overlay_fill"
measure "stat of a 4 GiB sparse file" --target "$WORK/stat_big" -- "$WORK/big"
measure "pipes and datagrams filled (--memory 256)" --memory 256 --target "$WORK/pipe_fill"
