#!/usr/bin/env bash
# Lock inference against correct lock-free code and real inversions: for
# each program, each strategy's share of schedules that end in a finding.
# Correct programs must show 0 everywhere; inversions must be found.
# Prints a Markdown table.
#
#   benches/lock-inference.sh [path/to/rewind-fuzz] [schedules per strategy, default 1000]
#
# FILTER (a regex on the program's name) runs some of the rows.
#
# The C programs are tests/programs/locks/*.c built with gcc at -O0 and -O2
# (-O1 and -O2 for the published index, whose -O0 spin loop is no spin
# site); the Rust ones are this package's `channels` and `mutex_inversions`
# examples, built in release and in debug.
set -uo pipefail
RF=$(readlink -f "${1:-target/release/rewind-fuzz}")
N=${2:-1000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export XDG_CACHE_HOME=$WORK/cache
(cd "$ROOT" && cargo build -q --release --examples && cargo build -q --examples) || exit 1

build() { gcc -g "$2" -pthread -o "$WORK/$1$2" "$ROOT/tests/programs/locks/$1.c" && echo "$WORK/$1$2"; }

# name|program|args|what is right|check's options
cases=()
for o in -O0 -O2; do
  cases+=("treiber $o|$(build treiber $o)||none")
  cases+=("chase_lev $o|$(build chase_lev $o)||none")
  cases+=("futex_inversion $o|$(build futex_inversion $o)||found")
  # Threads spinning for each other end when the step budget does.
  cases+=("spin_inversion $o|$(build spin_inversion $o)||found|--max-steps 5000")
  # At globals the locks' release stores are sites: their holds end where
  # they do, and their orders count.
  cases+=("spin_inversion $o at globals|$(build spin_inversion $o)||found|--max-steps 5000 --sync-points globals")
done
for o in -O1 -O2; do
  cases+=("index_publish $o|$(build index_publish $o)||none")
done
for o in -O0 -O2; do
  cases+=("reused_lock $o|$(build reused_lock $o)||none")
  cases+=("spin_then_mutex $o|$(build spin_then_mutex $o)||none")
done
for p in release debug; do
  cases+=("std channels ($p)|$ROOT/target/$p/examples/channels||none")
  cases+=("std Mutex inversion ($p)|$ROOT/target/$p/examples/mutex_inversions|std|found")
  cases+=("parking_lot inversion ($p)|$ROOT/target/$p/examples/mutex_inversions|parking_lot|found")
done

printf '| program | right | random | pct:3 | pos | time |\n|---|---|---|---|---|---|\n'
for c in "${cases[@]}"; do
  IFS='|' read -r name prog args right opts <<< "$c"
  [ -n "${FILTER:-}" ] && ! [[ $name =~ $FILTER ]] && continue
  row="| $name | $right |"
  start=$(date +%s)
  for s in random pct:3 pos; do
    # shellcheck disable=SC2086
    v=$("$RF" check --json --strategy "$s" --schedules "$N" $opts --target "$prog" -- $args 2>/dev/null)
    row+=" $(python3 -c 'import json, sys
v = json.loads(sys.stdin.read())
o = v["outcomes"]
bad = sum(n for k, n in o.items() if k != "exited(0)")
print(str(bad) + "/" + str(v["schedules"]))' <<< "$v") |"
  done
  printf '%s %ss |\n' "$row" $(( $(date +%s) - start ))
done
