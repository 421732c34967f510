//! Symbolization of guest addresses: small C, C++ and Rust programs are
//! built with debug information, "mapped" the way Linux would map them, and
//! the symbolizer's answers are compared with binutils' `addr2line` on the
//! same file. These need gcc, g++, rustc and binutils on PATH, but no KVM.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use object::{Object, ObjectSegment, ObjectSymbol};
use rewind_fuzz::report::symbols::{Location, Mapping, Symbolizer};

/// Where Linux puts a PIE executable (its load bias, for a first segment at 0).
const PIE_BASE: u64 = 0x5555_5555_4000;
/// Where the tests put a shared library.
const LIB_BASE: u64 = 0x7fff_f7d8_6000;
const PAGE: u64 = 4096;

const PHILOSOPHERS_C: &str = r#"#include <stdio.h>

static int counter;

__attribute__((noinline)) int philosopher(int n)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += i * counter;
    return total;
}

int main(int argc, char **argv)
{
    (void)argv;
    counter = argc;
    printf("%d\n", philosopher(argc + 3));
    return 0;
}
"#;

/// The lines of `philosopher`'s body in PHILOSOPHERS_C.
const PHILOSOPHER_LINES: std::ops::RangeInclusive<u32> = 5..=11;

const FORKS_CPP: &str = r#"#include <cstdio>

namespace table {
namespace forks {
__attribute__((noinline)) int pick_up(int fork)
{
    int held = fork * 2;
    std::printf("%d\n", held);
    return held;
}
}  // namespace forks
}  // namespace table

int main(int argc, char **)
{
    return table::forks::pick_up(argc) == 0;
}
"#;

const WAITER_RS: &str = r#"#[inline(never)]
fn serve_dinner(n: u64) -> u64 {
    let mut total = 0u64;
    for i in 0..n {
        total = total.wrapping_mul(31).wrapping_add(i);
    }
    std::hint::black_box(total)
}

fn main() {
    println!("{}", serve_dinner(std::env::args().count() as u64 + 10));
}
"#;

/// Runs a command, panicking with its output when it fails.
fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Writes `source` to `dir/name` and compiles it with `compiler` and `args`
/// into `dir/output`.
fn build(
    dir: &Path,
    compiler: &str,
    name: &str,
    source: &str,
    args: &[&str],
    output: &str,
) -> PathBuf {
    let source_path = dir.join(name);
    std::fs::write(&source_path, source).unwrap();
    let out = dir.join(output);
    run(Command::new(compiler)
        .current_dir(dir)
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg(&source_path));
    out
}

fn build_c(dir: &Path, args: &[&str], output: &str) -> PathBuf {
    build(dir, "gcc", "philosophers.c", PHILOSOPHERS_C, args, output)
}

/// The mappings Linux makes for the `PT_LOAD` segments of the ELF file at
/// `path` loaded with `bias`: each segment from the start of its first page.
fn map_like_linux(path: &Path, bias: u64) -> Vec<Mapping> {
    let data = Arc::new(std::fs::read(path).unwrap());
    map_data(path, data, bias)
}

fn map_data(path: &Path, data: Arc<Vec<u8>>, bias: u64) -> Vec<Mapping> {
    let file = object::File::parse(&data[..]).unwrap();
    file.segments()
        .map(|segment| {
            let (offset, filesz) = segment.file_range();
            let vaddr = segment.address();
            let head = vaddr % PAGE;
            let start = bias + vaddr - head;
            let end = (bias + vaddr + filesz).next_multiple_of(PAGE);
            Mapping {
                start,
                end,
                file_offset: offset - head,
                path: path.to_string_lossy().into_owned(),
                data: Arc::clone(&data),
            }
        })
        .collect()
}

/// The address in the file of the function symbol named `name` (from
/// `.symtab`, else `.dynsym`).
fn symbol_address(path: &Path, name: &str) -> u64 {
    symbol_address_by(path, name, |n| n == name)
}

/// The address in the file of the first function symbol whose name passes
/// `wanted` (from `.symtab`, else `.dynsym`).
fn symbol_address_by(path: &Path, name: &str, wanted: impl Fn(&str) -> bool) -> u64 {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&data[..]).unwrap();
    let find = |mut symbols: object::SymbolIterator<'_, '_>| {
        symbols.find_map(|s| {
            let found = s.name().is_ok_and(&wanted)
                && s.kind() == object::SymbolKind::Text
                && !s.is_undefined();
            found.then(|| s.address())
        })
    };
    find(file.symbols())
        .or_else(|| find(file.dynamic_symbols()))
        .unwrap_or_else(|| panic!("no symbol {name} in {}", path.display()))
}

/// What binutils' addr2line says of a file-relative address: function, file
/// base name and line.
fn binutils(path: &Path, offset: u64) -> (String, String, u32) {
    let out = run(Command::new(common::require_tool(
        "addr2line",
        "apt-get install -y binutils",
    ))
    .arg("-f")
    .arg("-C")
    .arg("-e")
    .arg(path)
    .arg(format!("{offset:#x}")));
    let mut lines = out.lines();
    let function = lines.next().unwrap().to_string();
    let place = lines.next().unwrap();
    let place = place.split(" (").next().unwrap();
    let (file, line) = place.rsplit_once(':').unwrap();
    let file = file.rsplit('/').next().unwrap().to_string();
    (function, file, line.parse().unwrap_or(0))
}

fn base(file: &Option<String>) -> Option<&str> {
    file.as_deref().map(|f| f.rsplit('/').next().unwrap())
}

/// Looks up `symbol + delta` in the program at `path` loaded with `bias`,
/// and checks the answer against binutils.
fn check_against_binutils(path: &Path, bias: u64, symbol: &str, delta: u64) -> Location {
    let mappings = map_like_linux(path, bias);
    let offset = symbol_address(path, symbol) + delta;
    let mut symbolizer = Symbolizer::new();
    let location = symbolizer.locate(&mappings, bias + offset);
    let (function, file, line) = binutils(path, offset);
    assert_eq!(location.address, bias + offset);
    assert_eq!(location.offset, offset, "{location:?}");
    assert_eq!(
        location.object,
        path.file_name().unwrap().to_string_lossy(),
        "{location:?}"
    );
    assert_eq!(
        location.function.as_deref(),
        Some(function.as_str()),
        "{location:?}"
    );
    assert_eq!(base(&location.file), Some(file.as_str()), "{location:?}");
    assert_eq!(location.line, Some(line), "{location:?}");
    location
}

#[test]
fn a_pie_c_program_gives_function_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), &["-g", "-O0", "-pie", "-fPIE"], "philosophers");
    for delta in [0, 4, 8, 12] {
        let location = check_against_binutils(&exe, PIE_BASE, "philosopher", delta);
        assert_eq!(location.function.as_deref(), Some("philosopher"));
        assert_eq!(base(&location.file), Some("philosophers.c"));
        assert!(
            PHILOSOPHER_LINES.contains(&location.line.unwrap()),
            "{location:?}"
        );
        assert_eq!(
            location.short(),
            format!("philosopher (philosophers.c:{})", location.line.unwrap())
        );
    }
}

#[test]
fn a_non_pie_c_program_is_found_at_its_own_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(
        dir.path(),
        &["-g", "-O0", "-no-pie", "-fno-PIE"],
        "philosophers",
    );
    let data = std::fs::read(&exe).unwrap();
    assert_eq!(
        object::File::parse(&data[..]).unwrap().kind(),
        object::ObjectKind::Executable
    );
    let location = check_against_binutils(&exe, 0, "philosopher", 6);
    assert_eq!(location.function.as_deref(), Some("philosopher"));
    assert!(PHILOSOPHER_LINES.contains(&location.line.unwrap()));
    let location = check_against_binutils(&exe, 0, "main", 10);
    assert_eq!(location.function.as_deref(), Some("main"));
}

#[test]
fn segments_that_share_pages_are_told_apart() {
    // Without -z separate-code the code and the data segments start in the
    // middle of pages whose heads hold bytes of the segment before.
    let dir = tempfile::tempdir().unwrap();
    for (args, bias) in [
        (&["-g", "-O0", "-Wl,-z,noseparate-code"][..], PIE_BASE),
        (
            &["-g", "-O0", "-no-pie", "-fno-PIE", "-Wl,-z,noseparate-code"][..],
            0,
        ),
    ] {
        let exe = build_c(dir.path(), args, "philosophers");
        let location = check_against_binutils(&exe, bias, "philosopher", 4);
        assert_eq!(location.function.as_deref(), Some("philosopher"));
        // Every byte of every mapping is at its own address in the file.
        let mappings = map_like_linux(&exe, bias);
        let mut symbolizer = Symbolizer::new();
        let data = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&data[..]).unwrap();
        for segment in file.segments() {
            let (_, filesz) = segment.file_range();
            for delta in [0, filesz / 2, filesz.saturating_sub(1)] {
                let vaddr = segment.address() + delta;
                let location = symbolizer.locate(&mappings, bias + vaddr);
                assert_eq!(location.offset, vaddr, "{args:?} {location:?}");
            }
        }
    }
}

#[test]
fn an_optimized_program_reports_the_inlined_function_innermost() {
    let source = r#"#include <stdio.h>
static inline __attribute__((always_inline)) int seat(int n)
{
    return n * 7 + printf("%d\n", n);
}

__attribute__((noinline)) int host(int n)
{
    return seat(n) + 1;
}

int main(int argc, char **argv)
{
    (void)argv;
    return host(argc);
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "gcc",
        "inline.c",
        source,
        &["-g", "-O2"],
        "inline",
    );
    let mappings = map_like_linux(&exe, PIE_BASE);
    let start = symbol_address(&exe, "host");
    let mut symbolizer = Symbolizer::new();
    // Some instruction of `host` comes from `seat`.
    let inlined = (0..64u64).find_map(|delta| {
        let frames = symbolizer.frames(&mappings, PIE_BASE + start + delta, false);
        (frames.len() == 2).then_some((delta, frames))
    });
    let (delta, frames) = inlined.expect("no inlined code found in host");
    assert_eq!(frames[0].function.as_deref(), Some("seat"), "{frames:?}");
    assert_eq!(frames[0].line, Some(4), "{frames:?}");
    assert_eq!(frames[1].function.as_deref(), Some("host"), "{frames:?}");
    assert_eq!(frames[1].line, Some(9), "{frames:?}");
    assert_eq!(
        symbolizer.locate(&mappings, PIE_BASE + start + delta),
        frames[0]
    );
}

#[test]
fn a_cpp_function_in_a_namespace_is_demangled() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "g++",
        "forks.cpp",
        FORKS_CPP,
        &["-g", "-O0"],
        "forks",
    );
    let location = check_against_binutils(&exe, PIE_BASE, "_ZN5table5forks7pick_upEi", 4);
    assert_eq!(
        location.function.as_deref(),
        Some("table::forks::pick_up(int)")
    );
    assert_eq!(base(&location.file), Some("forks.cpp"));

    // Without debug information the symbol table says the same.
    let exe = build(
        dir.path(),
        "g++",
        "forks.cpp",
        FORKS_CPP,
        &["-O0"],
        "forks-nodebug",
    );
    let mappings = map_like_linux(&exe, PIE_BASE);
    let offset = symbol_address(&exe, "_ZN5table5forks7pick_upEi") + 4;
    let location = Symbolizer::new().locate(&mappings, PIE_BASE + offset);
    assert_eq!(
        location.function.as_deref(),
        Some("table::forks::pick_up(int)")
    );
    assert_eq!(location.file, None);
    assert_eq!(location.short(), "table::forks::pick_up(int)");
}

#[test]
fn a_rust_function_is_demangled_without_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "rustc",
        "waiter.rs",
        WAITER_RS,
        &["-g", "-C", "opt-level=0", "--crate-name", "waiter"],
        "waiter",
    );
    let mappings = map_like_linux(&exe, PIE_BASE);
    // Mangled as `_ZN6waiter12serve_dinner17h…E` or `_RNv…6waiter12serve_dinner`.
    let offset = symbol_address_by(&exe, "serve_dinner", |n| n.contains("12serve_dinner")) + 8;
    let mut symbolizer = Symbolizer::new();
    let location = symbolizer.locate(&mappings, PIE_BASE + offset);
    assert_eq!(
        location.function.as_deref(),
        Some("waiter::serve_dinner"),
        "{location:?}"
    );
    assert_eq!(base(&location.file), Some("waiter.rs"));
    let (_, file, line) = binutils(&exe, offset);
    assert_eq!(file, "waiter.rs");
    assert_eq!(location.line, Some(line));
    assert!((1..=8).contains(&line), "{location:?}");
}

#[test]
fn a_return_address_is_looked_up_at_the_call_instruction() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), &["-g", "-O0"], "philosophers");
    let mappings = map_like_linux(&exe, PIE_BASE);
    let start = PIE_BASE + symbol_address(&exe, "philosopher");
    let mut symbolizer = Symbolizer::new();
    // A "return address" at the first byte of philosopher belongs to the
    // code before it, but is reported as itself.
    let at = symbolizer.locate(&mappings, start);
    let call = symbolizer.locate_call_site(&mappings, start);
    assert_eq!(at.function.as_deref(), Some("philosopher"));
    assert_ne!(call.function.as_deref(), Some("philosopher"), "{call:?}");
    assert_eq!(call.address, start);
    assert_eq!(call.offset, at.offset);
    // Inside a function, it is the line of the byte before.
    let main = PIE_BASE + symbol_address(&exe, "main");
    for delta in 1..40 {
        let call = symbolizer.locate_call_site(&mappings, main + delta);
        let before = symbolizer.locate(&mappings, main + delta - 1);
        assert_eq!(call.address, main + delta);
        assert_eq!(call.offset, before.offset + 1);
        assert_eq!(
            (&call.function, &call.file, call.line),
            (&before.function, &before.file, before.line)
        );
    }
    let frames = symbolizer.frames(&mappings, main + 5, true);
    assert_eq!(frames[0], symbolizer.locate_call_site(&mappings, main + 5));
}

#[test]
fn a_stripped_program_gives_a_dynamic_symbol_or_object_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), &["-g", "-O0"], "philosophers");
    let offset = symbol_address(&exe, "philosopher") + 4;

    let stripped = dir.path().join("stripped");
    std::fs::copy(&exe, &stripped).unwrap();
    run(Command::new("strip").arg("-s").arg(&stripped));
    let mappings = map_like_linux(&stripped, PIE_BASE);
    let location = Symbolizer::new().locate(&mappings, PIE_BASE + offset);
    assert_eq!(
        location,
        Location {
            address: PIE_BASE + offset,
            object: "stripped".into(),
            offset,
            function: None,
            file: None,
            line: None,
        }
    );
    assert_eq!(location.short(), format!("stripped+{offset:#x}"));

    // Exported with -rdynamic, the function is in .dynsym and survives.
    let exported = build_c(dir.path(), &["-g", "-O0", "-rdynamic"], "exported");
    run(Command::new("strip").arg("-s").arg(&exported));
    let offset = symbol_address(&exported, "philosopher") + 4;
    let mappings = map_like_linux(&exported, PIE_BASE);
    let location = Symbolizer::new().locate(&mappings, PIE_BASE + offset);
    assert_eq!(
        location.function.as_deref(),
        Some("philosopher"),
        "{location:?}"
    );
    assert_eq!(location.file, None);
    assert_eq!(location.short(), "philosopher");
}

#[test]
fn libc_mapped_as_a_shared_library_resolves_malloc_from_dynsym() {
    let out = run(Command::new("gcc").arg("-print-file-name=libc.so.6"));
    let libc = std::fs::canonicalize(out.trim()).unwrap();
    let mut mappings = map_like_linux(&libc, LIB_BASE);
    assert!(mappings.len() >= 3, "{} mappings", mappings.len());
    // ld.so's mprotect of the RELRO part splits the writable segment in two.
    let last = mappings.pop().unwrap();
    let split = last.start + PAGE;
    if split < last.end {
        mappings.push(Mapping {
            end: split,
            ..last.clone()
        });
        mappings.push(Mapping {
            start: split,
            file_offset: last.file_offset + PAGE,
            ..last
        });
    } else {
        mappings.push(last);
    }
    // The program is mapped too, elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), &["-g", "-O0"], "philosophers");
    mappings.extend(map_like_linux(&exe, PIE_BASE));

    let mut symbolizer = Symbolizer::new();
    // Every mapping of the library, split or not, gives the same bias.
    for mapping in mappings.iter().filter(|m| m.start >= LIB_BASE) {
        for address in [mapping.start, mapping.start + 0x18, mapping.end - 1] {
            let location = symbolizer.locate(&mappings, address);
            assert_eq!(location.offset, address - LIB_BASE, "{location:?}");
        }
    }
    for (name, delta) in [("malloc", 4), ("free", 9), ("pthread_mutex_lock", 16)] {
        let offset = symbol_address(&libc, name) + delta;
        let location = symbolizer.locate(&mappings, LIB_BASE + offset);
        assert_eq!(location.object, "libc.so.6");
        assert_eq!(location.offset, offset);
        assert_eq!(location.function.as_deref(), Some(name), "{location:?}");
    }
    // The ELF header is in no function.
    let location = symbolizer.locate(&mappings, LIB_BASE + 0x10);
    assert_eq!(location.short(), "libc.so.6+0x10");
    // And the program beside it is still found.
    let offset = symbol_address(&exe, "philosopher");
    let location = symbolizer.locate(&mappings, PIE_BASE + offset + 1);
    assert_eq!(location.function.as_deref(), Some("philosopher"));
}

#[test]
fn an_address_outside_every_mapping_is_shown_as_itself() {
    let location = Symbolizer::new().locate(&[], 0xdead_beef);
    assert_eq!(location.object, "");
    assert_eq!(location.offset, 0xdead_beef);
    assert_eq!(location.short(), "0xdeadbeef");
}

/// A deterministic stream of bytes.
fn noise(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[test]
fn garbage_data_gives_object_and_offset_without_panicking() {
    let mut next = noise(7);
    let garbage: Vec<u8> = (0..100_000).map(|_| next() as u8).collect();
    let mapping = Mapping {
        start: 0x40_0000,
        end: 0x40_0000 + 0x10_000,
        file_offset: 0x2000,
        path: "/opt/garbage.bin".into(),
        data: Arc::new(garbage),
    };
    let mut symbolizer = Symbolizer::new();
    let location = symbolizer.locate(std::slice::from_ref(&mapping), 0x40_0123);
    assert_eq!(location.object, "garbage.bin");
    assert_eq!(location.offset, 0x2123);
    assert_eq!(location.function, None);
    assert_eq!(location.short(), "garbage.bin+0x2123");

    // An ELF header with nothing behind it, and an empty file.
    for data in [b"\x7fELF\x02\x01\x01".to_vec(), Vec::new()] {
        let mapping = Mapping {
            data: Arc::new(data),
            ..mapping.clone()
        };
        let location = symbolizer.locate_call_site(&[mapping], 0x40_0123);
        assert_eq!(location.short(), "garbage.bin+0x2123");
    }
}

#[test]
fn truncated_and_corrupted_objects_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), &["-g", "-O0"], "philosophers");
    let original = std::fs::read(&exe).unwrap();
    let good = map_like_linux(&exe, PIE_BASE);
    let probe = PIE_BASE + symbol_address(&exe, "philosopher") + 4;
    let mut symbolizer = Symbolizer::new();
    let mut next = noise(42);
    let mut variants: Vec<Vec<u8>> = [16, 64, 200, 1000, original.len() / 2, original.len() - 1]
        .iter()
        .map(|&len| original[..len].to_vec())
        .collect();
    for _ in 0..150 {
        let mut data = original.clone();
        for _ in 0..1 + next() % 16 {
            let at = (next() % data.len() as u64) as usize;
            data[at] = next() as u8;
        }
        variants.push(data);
    }
    // Corrupt the DWARF sections in particular.
    let file = object::File::parse(&original[..]).unwrap();
    use object::ObjectSection;
    for section in file.sections() {
        if section.name().is_ok_and(|n| n.starts_with(".debug_")) {
            if let Some((start, size)) = section.file_range() {
                for _ in 0..10 {
                    let mut data = original.clone();
                    for _ in 0..4 {
                        let at = start + next() % size.max(1);
                        data[at as usize] = next() as u8;
                    }
                    variants.push(data);
                }
            }
        }
    }
    for data in variants {
        let mappings: Vec<Mapping> = good
            .iter()
            .map(|m| Mapping {
                data: Arc::new(data.clone()),
                ..m.clone()
            })
            .collect();
        for delta in [0, 3, 0x40] {
            let location = symbolizer.locate_call_site(&mappings, probe + delta);
            assert_eq!(location.object, "philosophers");
            let _ = symbolizer.frames(&mappings, probe + delta, false);
        }
    }
}

#[test]
fn thousands_of_addresses_are_symbolized_consistently() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "rustc",
        "waiter.rs",
        WAITER_RS,
        &["-g", "-C", "opt-level=0", "--crate-name", "waiter"],
        "waiter",
    );
    let mappings = map_like_linux(&exe, PIE_BASE);
    let text = mappings
        .iter()
        .find(|m| m.file_offset > 0)
        .expect("a code mapping")
        .clone();
    let mut symbolizer = Symbolizer::new();
    let addresses: Vec<u64> = (0..5000u64)
        .map(|i| text.start + (i * 97) % (text.end - text.start))
        .collect();
    let first: Vec<Location> = addresses
        .iter()
        .map(|&a| symbolizer.locate_call_site(&mappings, a))
        .collect();
    assert!(
        first.iter().filter(|l| l.function.is_some()).count() > 2500,
        "most code is in some function"
    );
    // Other copies of the same file (another run) give the same answers.
    let again = map_like_linux(&exe, PIE_BASE);
    for (location, &address) in first.iter().zip(&addresses) {
        assert_eq!(&symbolizer.locate_call_site(&again, address), location);
    }
}

#[test]
fn a_location_is_shown_short_and_round_trips_through_json() {
    let mut location = Location {
        address: 0x5555_5555_5189,
        object: "philosophers".into(),
        offset: 0x1189,
        function: Some("philosopher".into()),
        file: Some("/src/dining/philosophers.c".into()),
        line: Some(42),
    };
    assert_eq!(location.short(), "philosopher (philosophers.c:42)");
    assert_eq!(location.to_string(), location.short());
    let json = serde_json::to_string(&location).unwrap();
    assert_eq!(serde_json::from_str::<Location>(&json).unwrap(), location);
    location.line = None;
    assert_eq!(location.short(), "philosopher (philosophers.c)");
    location.file = None;
    assert_eq!(location.short(), "philosopher");
    location.function = None;
    assert_eq!(location.short(), "philosophers+0x1189");
    location.file = Some("philosophers.c".into());
    location.line = Some(7);
    assert_eq!(location.short(), "philosophers+0x1189 (philosophers.c:7)");
}

#[test]
fn a_symbolizer_can_move_to_another_thread() {
    fn is_send<T: Send>() {}
    is_send::<Symbolizer>();
}
