//! What the debug information says was inlined at a call: whether a
//! runtime function's call is the program's code, inlined there (a
//! thread's closure inlined into `std::thread`'s, a lock taken inside
//! an inlined iterator adapter). Sites in runtime code are reported at
//! the program's frame; this finds that frame where unwinding alone sees
//! only the runtime's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use object::{Object, ObjectSection};

/// The DWARF reader: section contents copied out of the file, shared.
type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// One object's DWARF, and the answers it gave, by address.
struct Inlines {
    dwarf: Option<DwarfContext>,
    answers: HashMap<u64, bool>,
}

/// Whether the call whose return address is `vaddr` (in the object's own
/// link-time addresses) lies in code of the program inlined into a
/// runtime function: a function among the inlined frames there that is
/// not a runtime's. A pure function of the object's bytes, cached for
/// every machine of the process.
pub fn is_users_call(data: &Arc<Vec<u8>>, vaddr: u64) -> bool {
    type Cache = Mutex<HashMap<usize, (Arc<Vec<u8>>, Inlines)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (_, inlines) = cache.entry(Arc::as_ptr(data) as usize).or_insert_with(|| {
        // The parsers take untrusted input; a bug in them costs this
        // object its answers, not the run.
        let dwarf = std::panic::catch_unwind(|| context(data)).ok().flatten();
        (
            data.clone(),
            Inlines {
                dwarf,
                answers: HashMap::new(),
            },
        )
    });
    if let Some(a) = inlines.answers.get(&vaddr) {
        return *a;
    }
    let answer = match &inlines.dwarf {
        Some(ctx) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            users_frame(ctx, vaddr.wrapping_sub(1))
        }))
        .unwrap_or(false),
        None => false,
    };
    inlines.answers.insert(vaddr, answer);
    answer
}

fn users_frame(ctx: &DwarfContext, probe: u64) -> bool {
    let Ok(mut frames) = ctx.find_frames(probe).skip_all_loads() else {
        return false;
    };
    for _ in 0..256 {
        let Ok(Some(frame)) = frames.next() else {
            break;
        };
        let function = frame
            .function
            .as_ref()
            .and_then(|n| n.demangle().ok())
            .map(|n| n.to_string());
        let file = frame.location.as_ref().and_then(|l| l.file);
        if function.is_some() && !is_runtime_code(function.as_deref(), file) {
            return true;
        }
    }
    false
}

/// Whether a function (by its demangled name, and the source file its
/// code comes from) is a language runtime's: Rust's `core`, `std` and
/// `alloc` (by name or by their sources in the toolchain), the crates a
/// build fetched from a registry, C++'s standard library headers.
pub fn is_runtime_code(function: Option<&str>, file: Option<&str>) -> bool {
    let by_name = function.is_some_and(|f| {
        let f = f.trim_start_matches('<');
        [
            "core::",
            "std::",
            "alloc::",
            "__gnu_cxx::",
            "core[",
            "std[",
            "alloc[",
        ]
        .iter()
        .any(|p| f.starts_with(p))
    });
    // Rust's toolchain and the crates a build fetched (a lock's inlined
    // fast path is parking_lot's code, not the program's line that locked).
    let by_file = file.is_some_and(|p| {
        p.starts_with("/rustc/")
            || p.contains("/lib/rustlib/")
            || p.contains("/.cargo/registry/src/")
            || p.contains("/.cargo/git/checkouts/")
            || p.starts_with("/usr/include/c++/")
            || p.contains("/bits/")
    });
    by_name || by_file
}

/// The DWARF of an object, when it has any: the line tables and inlined
/// frames symbolizers look addresses up in.
pub type DwarfContext = addr2line::Context<Reader>;

/// The DWARF of an ELF object's bytes, when it has any.
fn context(data: &[u8]) -> Option<DwarfContext> {
    dwarf_of(&object::File::parse(data).ok()?)
}

/// The DWARF of a parsed object, when it has any. A section that is
/// missing, or compressed in a way not read here, is empty: the rest may
/// still answer.
pub fn dwarf_of<'d>(file: &impl Object<'d>) -> Option<DwarfContext> {
    if file
        .section_by_name(".debug_info")
        .is_none_or(|s| s.size() == 0)
    {
        return None;
    }
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let data: Arc<[u8]> = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .map(|d| Arc::from(d.as_ref()))
            .unwrap_or_else(|| Arc::from(&[][..]));
        Ok(Reader::new(data, endian))
    };
    addr2line::Context::from_dwarf(gimli::Dwarf::load(load).ok()?).ok()
}
