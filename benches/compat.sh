#!/usr/bin/env bash
# Real programs, natively and in the machine: the outcome, whether stdout
# and the exit code are the same, and the slowdown. Prints a Markdown table.
#
#   benches/compat.sh [path/to/rewind-fuzz]
#
# Each case runs in a scratch directory holding a few input files. A
# program missing on this host is left out of the table. Times include
# starting the machine (about 50 ms) and loading the program.
set -uo pipefail
RF=$(readlink -f "${1:-target/release/rewind-fuzz}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOKIO=$ROOT/target/release/examples/tokio_processes
[ -x "$TOKIO" ] || (cd "$ROOT" && cargo build -q --release --example tokio_processes)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
seq 1 200000 > numbers.txt
printf 'hello\n' > f
mkdir -p tree && printf 'x\n' > tree/a && printf 'y\n' > tree/b
xz -k -T1 numbers.txt
printf 'int main(void) { return 0; }\n' > hello.c
printf 'all:\n\techo built\n' > Makefile

# row NAME PROGRAM ARGS...: one line of the table.
row() {
  local name=$1 prog=$2
  shift 2
  [ -x "$prog" ] || return
  rm -rf out r t.tar hello.o
  local t0 t1 t2 code
  t0=$(date +%s.%N)
  "$prog" "$@" > native.out 2>/dev/null < /dev/null
  code=$?
  t1=$(date +%s.%N)
  rm -rf out r t.tar hello.o
  "$RF" run --json --target "$prog" -- "$@" > machine.json 2>/dev/null < /dev/null
  t2=$(date +%s.%N)
  python3 - "$name" "$code" "$t0" "$t1" "$t2" <<'PY'
import json, sys
name, code, t0, t1, t2 = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
try:
    r = json.load(open("machine.json"))
except Exception:
    print(f"| {name} | (no report) | no | | | | |")
    sys.exit()
o = r["outcome"]
kind = o["kind"] + (f" {o['code']}" if o["kind"] == "exited" else "")
if o["kind"] == "unsupported":
    kind += " (" + o["summary"].split("system call ")[-1].split(" by ")[0] + ")"
same = r["stdout"] == open("native.out", errors="replace").read() and o.get("code") == code
native, machine = t1 - t0, t2 - t1
print(f"| {name} | {kind} | {'yes' if same else 'NO'} | {native:.2f} s | {machine:.2f} s | {machine / max(native, 1e-3):.0f}x | {r['steps']} |")
PY
}

echo "| program | outcome in the machine | same stdout and exit code | native | in the machine | slowdown | steps |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
row "sh: ls / \| wc -l" /bin/sh -c 'ls / | wc -l'
row "sh: cat f; echo \$?" /bin/sh -c 'cat f; cat missing 2>/dev/null; echo $?'
row "sh: subshells, bc" /bin/sh -c 'x=$(seq 1 5 | paste -sd+); echo "$x" | bc'
row "sort \| uniq \| head" /bin/sh -c 'sort -rn numbers.txt | uniq | head -3'
row "xz -T2 \| xz -d" /bin/sh -c 'xz -T2 -c numbers.txt | xz -d | md5sum'
row "xz -d" /usr/bin/xz -d -c numbers.txt.xz
row "gzip \| gunzip" /bin/sh -c 'gzip -c numbers.txt | gunzip | tail -1'
row "bzip2 round trip" /bin/sh -c 'bzip2 -c numbers.txt | bzip2 -d | wc -l'
row "zstd -T2 round trip" /bin/sh -c 'zstd -q -T2 -c numbers.txt | zstd -q -d | wc -l'
row "tar -c and -x" /bin/sh -c 'tar -cf t.tar tree && mkdir -p out && tar -xf t.tar -C out && cat out/tree/a out/tree/b'
row "ls -la /etc" /bin/ls -la --time-style=+%s /etc
row "find \| wc -l" /bin/sh -c "find /usr/include -name '*.h' | wc -l"
row "grep -c" /bin/grep -c 99 numbers.txt
row "awk" /usr/bin/awk '{s+=$1} END {print s}' numbers.txt
row "sed" /bin/sed -n 's/^1999$/found &/p' numbers.txt
row "sha256sum" /usr/bin/sha256sum numbers.txt
row "openssl dgst" /usr/bin/openssl dgst -sha256 numbers.txt
row "sqlite3 :memory:" /usr/bin/sqlite3 :memory: 'create table t(x); insert into t values (1),(2),(3); select sum(x) from t'
row "jq" /usr/bin/jq -cn '[range(10)] | add'
row "perl" /usr/bin/perl -e 'my $s = 0; $s += $_ for 1..100000; print "$s\n"'
row "python3 thread pool" /usr/bin/python3 -c 'import concurrent.futures as f; print(sum(f.ThreadPoolExecutor(4).map(lambda x: x*x, range(1000))))'
row "python3 asyncio" /usr/bin/python3 -c $'import asyncio\nasync def m():\n    r = await asyncio.gather(*(asyncio.sleep(0.01, i) for i in range(5)))\n    print(sum(r))\nasyncio.run(m())'
row "python3 subprocess" /usr/bin/python3 -c "import subprocess; print(subprocess.run(['sh', '-c', 'echo hi; exit 3'], capture_output=True, text=True))"
row "node event loop" /usr/bin/node -e "setTimeout(() => console.log('timer'), 5); Promise.resolve(6).then(v => console.log(v * 7))"
row "git init, commit, log" /bin/sh -c 'git init -q r && cd r && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m m && git log --format=%s'
row "make" /usr/bin/make
row "gcc -c (driver, cc1, as)" /usr/bin/gcc -c hello.c -o hello.o
row "Rust: Command and a tokio runtime" "$TOKIO"
