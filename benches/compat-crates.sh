#!/usr/bin/env bash
# Well-tested crates' own test suites, natively and in the machine: the
# outcome, whether the result is the same, and the slowdown. Prints a
# Markdown table.
#
#   benches/compat-crates.sh [path/to/rewind-fuzz] [cache dir, default /tmp/crates-compat]
#
# Fetches the crates below from crates.io (a dummy project and `cargo fetch`),
# copies each to CACHE/src/NAME, builds its test binaries (lib and integration
# tests) with `cargo test --no-run --release` into CACHE/target, then runs
# each binary with `--test-threads=1 -q` natively and under `rewind-fuzz run`.
# A binary whose run in the machine ends like the native one is run again in
# the machine with `--test-threads=2` (a second row). All of it is
# idempotent: a second call reuses the sources and the build. Every run's
# output is kept in CACHE/runs/.
#
# Environment: NATIVE_MAX (seconds: a binary whose native run takes longer
# is not run in the machine), TIMEOUT (seconds per run, default 600), MEM_CAP_GIB (address
# space limit of one rewind-fuzz run, default 8: a run above it aborts instead
# of running the host out of memory), FILTER (a regex on "crate/binary").
#
# CHECK=N (and STRATEGY, default pct:3) instead runs `rewind-fuzz check
# --per-test --schedules N` on each binary and tabulates the outcomes over
# all its tests: on these well-tested suites every finding (a deadlock, a
# potential deadlock, a crash) would be false; `hung` is a test that ran
# out of steps, counted apart.
#
# "tests" is the number of tests that pass natively. "same result" compares
# the exit code and stdout, with libtest's "finished in X s" removed. Times
# include starting the machine and loading the program.
set -uo pipefail
RF=$(readlink -f "${1:-target/release/rewind-fuzz}")
CACHE=$(mkdir -p "${2:-/tmp/crates-compat}" && cd "${2:-/tmp/crates-compat}" && pwd)
TIMEOUT=${TIMEOUT:-600}
MEM_CAP_GIB=${MEM_CAP_GIB:-8}
FILTER=${FILTER:-}
NATIVE_MAX=${NATIVE_MAX:-}
[ -x "$RF" ] || { echo "no rewind-fuzz at $RF" >&2; exit 2; }
export CARGO_TARGET_DIR=$CACHE/target
# dashmap pins its toolchain (rust-toolchain.toml); use the installed one.
export RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-stable}

CRATES="crossbeam-channel@0.5.17 crossbeam-deque@0.8.8 crossbeam-utils@0.8.23
crossbeam-epoch@0.9.18 crossbeam-queue@0.3.12 parking_lot@0.13.0 once_cell@1.21.4 dashmap@6.2.1 flume@0.12.0
rayon-core@1.13.0 spin@0.12.3 arc-swap@1.9.5"

# Sources: one dummy project pinning every crate, `cargo fetch`, then a copy
# of each crate's registry directory (which holds its tests and Cargo.lock).
mkdir -p "$CACHE/fetcher/src" "$CACHE/src" "$CACHE/build" "$CACHE/runs"
{
  printf '[package]\nname = "fetcher"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n[dependencies]\n'
  for c in $CRATES; do printf '%s = "=%s"\n' "${c%@*}" "${c#*@}"; done
} > "$CACHE/fetcher/Cargo.toml.new"
cmp -s "$CACHE/fetcher/Cargo.toml.new" "$CACHE/fetcher/Cargo.toml" 2>/dev/null \
  && rm "$CACHE/fetcher/Cargo.toml.new" || mv "$CACHE/fetcher/Cargo.toml.new" "$CACHE/fetcher/Cargo.toml"
touch "$CACHE/fetcher/src/lib.rs"
(cd "$CACHE/fetcher" && cargo fetch -q) || { echo "cargo fetch failed" >&2; exit 1; }
REG=$(cargo metadata -q --format-version 1 --manifest-path "$CACHE/fetcher/Cargo.toml" 2>/dev/null)
for c in $CRATES; do
  name=${c%@*} version=${c#*@}
  [ -f "$CACHE/src/$name/.version-$version" ] && continue
  dir=$(python3 -c 'import json, sys, os
m = json.loads(sys.stdin.read())
print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == sys.argv[1] and p["version"] == sys.argv[2]))' \
    "$name" "$version" <<< "$REG")
  rm -rf "$CACHE/src/$name" && cp -r "$dir" "$CACHE/src/$name" && touch "$CACHE/src/$name/.version-$version"
done

# Builds: cargo is itself idempotent (a second build is a no-op) and prints
# the test executables again. A crate that does not build is left out.
BINS=$CACHE/build/bins.tsv
: > "$BINS"
for c in $CRATES; do
  name=${c%@*}
  if ! (cd "$CACHE/src/$name" && timeout 1800 cargo test --no-run --release --message-format=json \
        > "$CACHE/build/$name.json" 2> "$CACHE/build/$name.err"); then
    echo "$name: does not build (see $CACHE/build/$name.err), left out" >&2
    continue
  fi
  python3 - "$name" "$CACHE/build/$name.json" >> "$BINS" <<'PY'
import json, sys
name = sys.argv[1]
for line in open(sys.argv[2]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        t = m["target"]
        print(f'{name}/{"lib" if "lib" in t["kind"] else t["name"]}\t{m["executable"]}')
PY
done

# row NAME BIN THREADS: one line of the table; returns 0 if the run in the
# machine ended like the native one.
row() {
  local name=$1 bin=$2 threads=$3 crate=${1%%/*}
  local out=$CACHE/runs/${name//\//__}
  local t0 t1 t2 t3 code mcode
  cd "$CACHE/src/$crate" || return 1
  # The native run (one test thread) serves both rows.
  if [ "$threads" = 1 ]; then
    t0=$(date +%s.%N)
    timeout "$TIMEOUT" "$bin" --test-threads=1 -q > "$out.native.out" 2> "$out.native.err" < /dev/null
    code=$?
    t1=$(date +%s.%N)
    echo "$code $t0 $t1" > "$out.native.status"
  fi
  read -r code t0 t1 < "$out.native.status"
  if [ -n "$NATIVE_MAX" ] && awk -v a="$t0" -v b="$t1" -v m="$NATIVE_MAX" 'BEGIN { exit !(b - a > m) }'; then
    printf '| %s | | not run in the machine (native %.2f s, over NATIVE_MAX) | | %.2f s | | | |\n' \
      "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
    return 1
  fi
  t2=$(date +%s.%N)
  (
    ulimit -v $((MEM_CAP_GIB * 1024 * 1024))
    exec timeout "$TIMEOUT" "$RF" run --json --target "$bin" -- --test-threads="$threads" -q
  ) > "$out.t$threads.json" 2> "$out.t$threads.err" < /dev/null
  mcode=$?
  t3=$(date +%s.%N)
  python3 - "$name" "$threads" "$code" "$mcode" "$t0" "$t1" "$t2" "$t3" "$out" "$TIMEOUT" "$MEM_CAP_GIB" <<'PY'
import json, re, sys
name, threads, code, mcode, t0, t1, t2, t3, out, timeout, cap = sys.argv[1:]
threads, code, mcode = int(threads), int(code), int(mcode)
t0, t1, t2, t3 = map(float, (t0, t1, t2, t3))
label = name if threads == 1 else f"{name} (--test-threads={threads})"

def norm(s):
    return re.sub(r"; finished in [0-9.]+s", "", s)

def progress(s):
    # -q prints one character a test ('.', 'F', 'i') after "running N tests".
    # Long runs wrap the line with a " done/total" count.
    m = re.search(r"running (\d+) tests?\n(.*?)(?:\n\n|\Z)", s, re.S)
    if not m:
        return None, 0
    return int(m.group(1)), len(re.findall(r"[.Fi]", re.sub(r" \d+/\d+", "", m.group(2))))

def slowdown(native, machine):
    x = machine / max(native, 1e-3)
    return f"{x:.1f}x" if x < 10 else f"{x:.0f}x"

native = open(out + ".native.out", errors="replace").read()
m = re.search(r"test result: \w+\. (\d+) passed", native)
tests = m.group(1) if m else "?"
native_time, machine_time = t1 - t0, t3 - t2
try:
    r = json.load(open(out + f".t{threads}.json"))
except Exception:
    err = open(out + f".t{threads}.err", errors="replace").read()
    if mcode == 124:
        kind = f"wall-clock limit ({timeout} s) reached"
    elif "memory allocation of" in err:
        kind = f"rewind-fuzz aborted: a host allocation failed ({cap} GiB address-space cap)"
    elif mcode == 137:
        kind = "rewind-fuzz killed (SIGKILL)"
    else:
        kind = f"no report (rewind-fuzz exit {mcode})"
    print(f"| {label} | {tests} | {kind} | NO | {native_time:.2f} s | {machine_time:.2f} s | {slowdown(native_time, machine_time)} | |")
    sys.exit(1)
o = r["outcome"]
kind = o["kind"] + (f" {o['code']}" if o["kind"] == "exited" else "")
if o["kind"] == "unsupported":
    kind += " (" + o["summary"].split("system call ")[-1].split(" by ")[0] + ")"
elif o["kind"] != "exited":
    kind += " (" + o["summary"].split(": ", 1)[-1] + ")"
total, done = progress(r["stdout"])
if o["kind"] != "exited" and total is not None:
    kind += f", after {done} of {total} tests"
same = norm(r["stdout"]) == norm(native) and o.get("code") == code and o["kind"] == "exited"
print(f"| {label} | {tests} | {kind} | {'yes' if same else 'NO'} | {native_time:.2f} s | {machine_time:.2f} s | {slowdown(native_time, machine_time)} | {r['steps']} |")
sys.exit(0 if same else 1)
PY
}

# check_row NAME BIN: the outcomes of `check --per-test` over every test.
check_row() {
  local name=$1 bin=$2 crate=${1%%/*}
  local out=$CACHE/runs/${name//\//__}.check
  cd "$CACHE/src/$crate" || return 1
  local t0 t1
  t0=$(date +%s)
  (
    ulimit -v $((MEM_CAP_GIB * 1024 * 1024))
    exec timeout "$TIMEOUT" "$RF" check --per-test --json --jobs 2 --schedules "$CHECK" \
      --strategy "${STRATEGY:-pct:3}" --target "$bin"
  ) > "$out.json" 2> "$out.err" < /dev/null
  local mcode=$?
  t1=$(date +%s)
  python3 - "$name" "$out.json" "$mcode" $((t1 - t0)) <<'PY'
import json, sys
name, path, mcode, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(path, errors="replace").read()
dec, i, docs = json.JSONDecoder(), 0, []
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    try:
        v, i = dec.raw_decode(text, i)
    except ValueError:
        break
    docs.append(v)
counts = {}
for d in docs:
    for k, n in d.get("outcomes", {}).items():
        counts[k] = counts.get(k, 0) + n
runs = sum(counts.values())
findings = sum(n for k, n in counts.items() if k not in ("exited(0)", "hung") and not k.startswith("exited("))
hung = counts.get("hung", 0)
shown = ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
end = "" if mcode in (0, 1) else (" (stopped at the time limit)" if mcode == 124 else f" (exit {mcode})")
print(f"| {name} | {len(docs)} | {runs} | {shown}{end} | {findings} | {hung} | {secs} s |")
PY
}

if [ -n "${CHECK:-}" ]; then
  echo "| test binary | tests | schedules | outcomes | findings | hung | time |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  while IFS=$'\t' read -r name bin; do
    [ -n "$FILTER" ] && ! [[ $name =~ $FILTER ]] && continue
    check_row "$name" "$bin"
  done < "$BINS"
  exit 0
fi

echo "| test binary | tests | outcome in the machine | same result as natively | native | in the machine | slowdown | steps |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
while IFS=$'\t' read -r name bin; do
  [ -n "$FILTER" ] && ! [[ $name =~ $FILTER ]] && continue
  row "$name" "$bin" 1 && row "$name" "$bin" 2
done < "$BINS"
