#!/usr/bin/env bash
# What worker processes cost against threads, and what they keep when
# killed. For each harness below, a fuzz session of --execs EXECS and
# --seed 1 with 1 and 2 jobs, as processes (the default) and as threads
# (--worker-threads); prints executions per second, steps per execution,
# machine exits per step, µs per exit, and the execution and time at which
# each finding came. Then (unless NO_KILLS=1) a 70 s session of 2 worker
# processes in which a worker is killed with SIGKILL every 10 s: restarts,
# corpus, findings, and shared-memory files left behind. Then (unless
# NO_NODES=1) one node alone for 30 s against three nodes on loopback
# (one listening, two joining it) for 30 s each: findings, where each was
# recorded, and corpus imported.
#
#   benches/workers.sh [path/to/rewind-fuzz] [EXECS]
set -uo pipefail
RF=$(readlink -f "${1:-target/release/rewind-fuzz}")
EXECS=${2:-600}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
HARNESSES="philosophers abba atomicity three-lock-cycle missed-wakeup bank-transfer"

stat() { awk -F' *: *' -v k="$2" '$1 == k { print $2 }' "$1/fuzzer_stats"; }

printf '%-18s %-9s %4s %9s %10s %10s %9s  %s\n' harness workers jobs exec/s steps/exec exits/step us/exit "findings (at execution, after)"
for h in $HARNESSES; do
    for jobs in 1 2; do
        for kind in processes threads; do
            out="$WORK/$h-$jobs-$kind"
            extra=()
            [ "$kind" = threads ] && extra=(--worker-threads)
            start=$(date +%s.%N)
            "$RF" fuzz --target "harness:$h" --jobs "$jobs" --execs "$EXECS" --seed 1 -q \
                -o "$out" "${extra[@]}" 2>"$out.err" >/dev/null
            end=$(date +%s.%N)
            execs=$(stat "$out" execs_done)
            rate=$(awk -v e="$execs" -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", e / (b - a) }')
            finds=$(grep -o 'new finding after [0-9]* executions ([^)]*): [a-z-]*' "$out.err" |
                sed 's/new finding after \([0-9]*\) executions (\([^)]*\)): \(.*\)/\3@\1 (\2)/' | paste -sd' ' -)
            printf '%-18s %-9s %4s %9s %10s %10s %9s  %s\n' "$h" "$kind" "$jobs" "$rate" \
                "$(stat "$out" steps_per_exec)" "$(stat "$out" exits_per_step)" \
                "$(stat "$out" us_per_exit)" "${finds:--}"
        done
    done
done

[ "${NO_KILLS:-0}" = 1 ] && exit 0
echo
echo "A worker killed with SIGKILL every 10 s for a minute (2 jobs, prodcons):"
out="$WORK/kills"
"$RF" fuzz --target harness:prodcons --jobs 2 --time 70s --seed 1 -q -o "$out" 2>"$out.err" &
session=$!
pids=("$session")
for i in 1 2 3 4 5 6; do
    sleep 10
    zygote=$(pgrep -P "$session" | head -1)
    workers=($(pgrep -P "$zygote"))
    pids+=("${workers[@]}")
    kill -9 "${workers[$((i % 2))]}" 2>/dev/null
done
wait "$session"
for z in $(pgrep -P "$session" 2>/dev/null); do pids+=("$z"); done
left=0
for p in "${pids[@]}"; do left=$((left + $(ls /dev/shm 2>/dev/null | grep -c "^libafl_${p}_"))); done
echo "  restarts said:     $(grep -c 'and was started again' "$out.err")"
echo "  worker_restarts:   $(stat "$out" worker_restarts)"
echo "  executions:        $(stat "$out" execs_done) ($(stat "$out" execs_per_job) per job)"
echo "  corpus (stats):    $(stat "$out" corpus_count), files in queue: $(ls "$out/queue" | wc -l)"
echo "  findings:          $(stat "$out" findings), files: $(ls "$out/findings" | grep -c '\.rwd$')"
echo "  shared memory left behind: $left file(s)"

[ "${NO_NODES:-0}" = 1 ] && exit 0
echo
echo "Three nodes on loopback against one (philosophers, 1 job each, 30 s):"
sigs() { ls "$1/findings" 2>/dev/null | sed -n 's/\.rwd$//p' | sort; }
"$RF" fuzz --target harness:philosophers --jobs 1 --time 30s -q -o "$WORK/alone" 2>/dev/null
port=$((47000 + RANDOM % 2000))
"$RF" fuzz --target harness:philosophers --jobs 1 --time 30s -q -o "$WORK/n1" --sync-id n1 \
    --node-listen "127.0.0.1:$port" 2>"$WORK/n1.err" &
sleep 1
for n in n2 n3; do
    "$RF" fuzz --target harness:philosophers --jobs 1 --time 30s -q -o "$WORK/$n" --sync-id "$n" \
        --seed "${#n}$RANDOM" --node-connect "127.0.0.1:$port" 2>"$WORK/$n.err" &
done
wait
printf '  %-6s %-40s %12s %8s %9s\n' node "findings recorded here" node_findings corpus imported
for n in alone n1 n2 n3; do
    printf '  %-6s %-40s %12s %8s %9s\n' "$n" "$(sigs "$WORK/$n" | paste -sd' ' -)" \
        "$(stat "$WORK/$n" node_findings)" "$(stat "$WORK/$n" corpus_count)" \
        "$(stat "$WORK/$n" node_entries_imported)"
done
echo "  alone found:        $(sigs "$WORK/alone" | paste -sd' ' -)"
echo "  the three found:    $(for n in n1 n2 n3; do sigs "$WORK/$n"; done | sort -u | paste -sd' ' -)"
echo "  recorded twice:     $(for n in n1 n2 n3; do sigs "$WORK/$n"; done | sort | uniq -d | wc -l)"
