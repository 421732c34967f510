#!/usr/bin/env bash
# Real programs, natively and in the machine: the outcome, whether stdout
# and the exit code are the same, and the slowdown. Prints a Markdown table
# and, last, how many of the programs found behave as natively.
#
#   benches/compat.sh [path/to/rewind-fuzz]
#
# Each case runs in its own fresh copy of a scratch directory holding a few
# input files (a C project, a small Cargo project, a tree to copy), once
# natively and once in the machine, both with the guest's environment (the
# machine's default one, and the same additions). A program missing on
# this host is left out of the table. Times include starting the machine
# (about 50 ms) and loading the program.
set -uo pipefail
RF=$(readlink -f "${1:-target/release/rewind-fuzz}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOKIO=$ROOT/target/release/examples/tokio_processes
[ -x "$TOKIO" ] || (cd "$ROOT" && cargo build -q --release --example tokio_processes)
# The active Rust toolchain's own programs (not rustup's proxies).
SYSROOT=$(rustc --print sysroot 2>/dev/null || true)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
INPUT=$WORK/input
mkdir -p "$INPUT" && cd "$INPUT"
seq 1 200000 > numbers.txt
printf 'hello\n' > f
mkdir -p tree/sub && printf 'x\n' > tree/a && printf 'y\n' > tree/b && head -c 300000 numbers.txt > tree/sub/big
xz -k -T1 numbers.txt
printf 'int main(void) { return 0; }\n' > hello.c
printf 'all:\n\techo built\n' > Makefile
mkdir -p proj
for i in 1 2 3 4 5 6; do printf 'int f%d(void) { return %d; }\n' $i $i > proj/f$i.c; done
printf '#include <stdio.h>\nint f1(void), f2(void), f3(void), f4(void), f5(void), f6(void);\nint main(void) { printf("%%d\\n", f1() + f2() + f3() + f4() + f5() + f6()); return 0; }\n' > proj/main.c
printf 'OBJS = main.o f1.o f2.o f3.o f4.o f5.o f6.o\nall: prog\n\t./prog\nprog: $(OBJS)\n\tgcc -o $@ $(OBJS)\n%%.o: %%.c\n\tgcc -c $< -o $@\n' > proj/Makefile
printf 'fn main() { println!("{}", (1..=10).sum::<u32>()); }\n' > hello.rs
mkdir -p crate/src
printf '[package]\nname = "small"\nversion = "0.1.0"\nedition = "2021"\n' > crate/Cargo.toml
printf 'fn main() { println!("built and ran: {}", 6 * 7); }\n' > crate/src/main.rs
cd "$WORK"

GUEST_ENV=(PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb)
EXTRA_ENV=()

# row NAME PROGRAM ARGS...: one line of the table (with EXTRA_ENV set for
# both runs).
row() {
  local name=$1 prog=$2
  shift 2
  [ -x "$prog" ] || return
  rm -rf native machine && cp -a "$INPUT" native && cp -a "$INPUT" machine
  local t0 t1 t2 code envs=()
  for e in "${EXTRA_ENV[@]}"; do envs+=(--env "$e"); done
  t0=$(date +%s.%N)
  (cd native && env -i "${GUEST_ENV[@]}" "${EXTRA_ENV[@]}" "$prog" "$@" > ../native.out 2>/dev/null < /dev/null)
  code=$?
  t1=$(date +%s.%N)
  (cd machine && "$RF" run --json "${envs[@]}" --target "$prog" -- "$@" > ../machine.json 2>/dev/null < /dev/null)
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

HEREDOC='x=$(cat <<END
hello
there
END
); echo "$x"; wc -l <<EOF
a
b
EOF
read -r first <<< "here string"; echo "$first"'

table() {
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
row "cp -r of a tree" /bin/sh -c 'cp -r tree copy && ls -R copy && cmp tree/sub/big copy/sub/big && echo same'
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
row "bash: here-documents" /bin/bash -c "$HEREDOC"
row "sh: readlink /proc/self/exe" /bin/sh -c 'readlink /proc/self/exe; exec cat /proc/self/comm'
row "python3 thread pool" /usr/bin/python3 -c 'import concurrent.futures as f; print(sum(f.ThreadPoolExecutor(4).map(lambda x: x*x, range(1000))))'
row "python3 asyncio" /usr/bin/python3 -c $'import asyncio\nasync def m():\n    r = await asyncio.gather(*(asyncio.sleep(0.01, i) for i in range(5)))\n    print(sum(r))\nasyncio.run(m())'
row "python3 subprocess" /usr/bin/python3 -c "import subprocess; print(subprocess.run(['sh', '-c', 'echo hi; exit 3'], capture_output=True, text=True))"
row "python3 multiprocessing.Pool" /usr/bin/python3 -c $'import multiprocessing as m\nwith m.Pool(2) as p: print(sum(p.map(abs, range(-50, 50))))'
row "python3 ProcessPoolExecutor" /usr/bin/python3 -c $'import concurrent.futures as f\nwith f.ProcessPoolExecutor(2) as e: print(sorted(e.map(pow, range(8), range(8))))'
row "node event loop" /usr/bin/node -e "setTimeout(() => console.log('timer'), 5); Promise.resolve(6).then(v => console.log(v * 7))"
row "ruby" /usr/bin/ruby -e 'puts (1..100).sum; puts [3, 1, 2].sort.inspect'
row "java -version" /bin/sh -c 'java -version 2>&1'
row "ffmpeg -version" /usr/bin/ffmpeg -hide_banner -version
row "git init, commit, log" /bin/sh -c 'git init -q r && cd r && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m m && git log --format=%s'
row "make" /usr/bin/make
row "make -j2 (gcc, 7 files)" /bin/sh -c 'cd proj && make -j2'
row "make -j4 (gcc, 7 files)" /bin/sh -c 'cd proj && make -j4'
row "gcc -c (driver, cc1, as)" /usr/bin/gcc -c hello.c -o hello.o
if [ -n "$SYSROOT" ]; then
  EXTRA_ENV=("PATH=$SYSROOT/bin:/usr/bin:/bin")
  row "sh: rustc --version" /bin/sh -c 'rustc --version'
  row "rustc hello.rs, run it" /bin/sh -c 'rustc -o hello hello.rs && ./hello'
  row "cargo build --offline, run it" /bin/sh -c 'cd crate && cargo build --offline -q && ./target/debug/small'
  EXTRA_ENV=()
fi
row "Rust: Command and a tokio runtime" "$TOKIO"
}

table | tee "$WORK/table.md"
rows=$(tail -n +3 "$WORK/table.md" | grep -c '^| ' || true)
same=$(grep -c '| yes |' "$WORK/table.md" || true)
echo
echo "$same of $rows programs behave as natively."
