//! Symbolization of guest code addresses: `0x555555555189` becomes
//! `philosopher (philosophers.c:42)`.
//!
//! The input is the guest's file-backed mappings, as `/proc/self/maps` would
//! list them, each with the bytes of the file it maps. For an address the
//! [`Symbolizer`] finds the mapping that holds it, works out the load bias of
//! the ELF object from its `PT_LOAD` program headers, and looks the
//! object-relative address up in, in this order:
//!
//! 1. the DWARF debug information of the object itself (through the
//!    `addr2line` crate: source file, line, and the chain of inlined
//!    functions);
//! 2. its symbol table (`.symtab`, else `.dynsym`), for a function name;
//! 3. nothing: the location is then `object+0xoffset`.
//!
//! Function names are demangled (C++ and Rust, with Rust's hash suffixes
//! stripped). Separate debug files are not looked for: a reproducer carries
//! the files the run read, and nothing else.
//!
//! The file bytes may come from somebody else's reproducer, so parsing treats
//! them as hostile: a truncated or garbage object gives a location with only
//! the object name and offset, never a panic. Parsed objects are cached by
//! content, and each object caches the answers it gave, so symbolizing
//! thousands of addresses costs one parse per object.

use std::borrow::Cow;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

pub use crate::code::Mapping;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};

/// The guest is x86-64: its objects are little-endian ELF64 (parsed with the
/// endianness the file declares all the same).
type ElfFile<'data> = object::read::elf::ElfFile64<'data, object::Endianness>;

/// Page size the loader rounds segments to (x86-64 Linux).
const PAGE_SIZE: u64 = 4096;

/// Where an address is, for people.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Location {
    /// The address that was asked about.
    pub address: u64,
    /// File name (without directories) of the ELF object holding the
    /// address; empty when no mapping holds it.
    pub object: String,
    /// Address relative to the object's load bias: the address in the ELF
    /// file's own terms, as `addr2line -e OBJECT` takes it. When the object
    /// could not be parsed this is the offset in the file instead; when no
    /// mapping holds the address it is the address itself.
    pub offset: u64,
    /// Demangled name of the (innermost, when inlined) function.
    pub function: Option<String>,
    /// Source file, as the debug information names it (often a full path).
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
}

impl Location {
    /// `"function (file.c:42)"`, or `"function"`, or `"libc.so.6+0x8f2a0"`;
    /// the source file is shown by its base name.
    pub fn short(&self) -> String {
        let place = self.file.as_deref().map(|file| {
            let base = base_name(file);
            match self.line {
                Some(line) if line > 0 => format!("{base}:{line}"),
                _ => base.to_string(),
            }
        });
        match (&self.function, place) {
            (Some(function), Some(place)) => format!("{function} ({place})"),
            (Some(function), None) => function.clone(),
            (None, Some(place)) => format!("{} ({place})", self.raw()),
            (None, None) => self.raw(),
        }
    }

    /// `"libc.so.6+0x8f2a0"`, or `"0x7f0012345678"` outside any object.
    pub fn raw(&self) -> String {
        if self.object.is_empty() {
            format!("{:#x}", self.address)
        } else {
            format!("{}+{:#x}", self.object, self.offset)
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.short())
    }
}

/// Turns guest addresses into [`Location`]s, caching every object it parsed.
///
/// Objects are cached by content (a 128-bit hash of the file), so the same
/// library seen under two paths, or in two runs, is parsed once. The
/// symbolizer keeps the file contents it has seen alive (it remembers them by
/// identity, to skip hashing them again); [`Symbolizer::clear`] lets go.
#[derive(Default)]
pub struct Symbolizer {
    /// File contents seen so far, by the address of their buffer, with the
    /// hash of their contents. Holding the `Arc` keeps the address unique.
    seen: HashMap<usize, (Arc<Vec<u8>>, u128)>,
    /// Parsed objects by content hash.
    objects: HashMap<u128, ObjectInfo>,
}

impl Symbolizer {
    /// An empty symbolizer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every parsed object and every file it held on to.
    pub fn clear(&mut self) {
        self.seen.clear();
        self.objects.clear();
    }

    /// Symbolizes `addr` (a return address or instruction pointer) given the
    /// mappings of the run: the innermost frame in the user's code, past
    /// those inlined from a language runtime (an atomic of Rust's `core`, a
    /// `std::mutex` wrapper of libstdc++), or the innermost one when all are.
    pub fn locate(&mut self, mappings: &[Mapping], addr: u64) -> Location {
        user_frame(self.frames_at(mappings, addr, addr))
    }

    /// For call sites that are return addresses: looks up `addr - 1` for the
    /// line and function (the call instruction), but reports `addr`.
    pub fn locate_call_site(&mut self, mappings: &[Mapping], addr: u64) -> Location {
        user_frame(self.frames_at(mappings, addr, addr.saturating_sub(1)))
    }

    /// Where a lock was taken or asked for, given its site (a return-address
    /// like value): as [`Symbolizer::locate_call_site`], past inlined
    /// functions whose names say they take locks (an inlined C
    /// `spin_lock`): the line that locked, not the lock's own code.
    pub fn locate_lock_site(&mut self, mappings: &[Mapping], addr: u64) -> Location {
        let mut frames = self.frames_at(mappings, addr, addr.saturating_sub(1));
        let lock_code = |f: &Location| {
            is_runtime_frame(f)
                || f.function
                    .as_deref()
                    .is_some_and(|n| crate::code::sites::acquire::role_of_name(n).is_some())
        };
        match frames.iter().position(|f| !lock_code(f)) {
            Some(i) => frames.swap_remove(i),
            None => user_frame(frames),
        }
    }

    /// A stack frame's address: a return address (`is_return`, as
    /// [`Symbolizer::locate_call_site`]) or where a thread stopped.
    pub fn locate_frame(&mut self, mappings: &[Mapping], addr: u64, is_return: bool) -> Location {
        if is_return {
            self.locate_call_site(mappings, addr)
        } else {
            self.locate(mappings, addr)
        }
    }

    /// The whole chain of functions at `addr`, innermost first: when code was
    /// inlined, the first location is the inlined function at its line, the
    /// next one the function it was inlined into, at the line of the inlined
    /// call, and so on; the last one is the function that was really
    /// compiled. Never empty; its first element is what
    /// [`locate`](Self::locate) (or, with `call_site`,
    /// [`locate_call_site`](Self::locate_call_site)) returns.
    pub fn frames(&mut self, mappings: &[Mapping], addr: u64, call_site: bool) -> Vec<Location> {
        let probe = if call_site {
            addr.saturating_sub(1)
        } else {
            addr
        };
        self.frames_at(mappings, addr, probe)
    }

    /// Looks `probe` up and reports the answer as being about `addr`.
    fn frames_at(&mut self, mappings: &[Mapping], addr: u64, probe: u64) -> Vec<Location> {
        let unknown = |object: String, offset: u64| {
            vec![Location {
                address: addr,
                object,
                offset,
                function: None,
                file: None,
                line: None,
            }]
        };
        let Some(mapping) = mappings.iter().find(|m| m.start <= probe && probe < m.end) else {
            return unknown(String::new(), addr);
        };
        let object = base_name(&mapping.path).to_string();
        // Offset in the file of the byte at `addr`, the answer of last resort.
        let file_offset = addr
            .wrapping_sub(mapping.start)
            .wrapping_add(mapping.file_offset);
        let info = self.object(&mapping.data);
        let Some(bias) = info.bias(mapping, probe) else {
            return unknown(object, file_offset);
        };
        let offset = addr.wrapping_sub(bias);
        let frames = info.lookup(probe.wrapping_sub(bias));
        if frames.is_empty() {
            return unknown(object, offset);
        }
        frames
            .iter()
            .map(|frame| Location {
                address: addr,
                object: object.clone(),
                offset,
                function: frame.function.as_deref().map(str::to_string),
                file: frame.file.as_deref().map(str::to_string),
                line: frame.line,
            })
            .collect()
    }

    /// The parsed object for these file contents, parsing it the first time.
    fn object(&mut self, data: &Arc<Vec<u8>>) -> &mut ObjectInfo {
        let key = Arc::as_ptr(data) as usize;
        let hash = match self.seen.get(&key) {
            Some((_, hash)) => *hash,
            None => {
                let hash = xxhash_rust::xxh3::xxh3_128(data);
                self.seen.insert(key, (Arc::clone(data), hash));
                hash
            }
        };
        self.objects
            .entry(hash)
            .or_insert_with(|| ObjectInfo::parse(data))
    }
}

/// Base name of a path: what follows its last `/`.
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A `PT_LOAD` program header.
#[derive(Clone, Copy, Debug)]
struct Segment {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
}

/// A function symbol: `[start, end)` in the object's addresses.
#[derive(Debug)]
struct Symbol {
    start: u64,
    end: u64,
    name: Box<str>,
}

/// One frame of an answer: a function at a place.
#[derive(Clone, Debug, Default)]
struct Frame {
    function: Option<Arc<str>>,
    file: Option<Arc<str>>,
    line: Option<u32>,
}

/// What the symbolizer knows of one ELF object.
struct ObjectInfo {
    segments: Vec<Segment>,
    /// Function symbols sorted by start, at most one per start address.
    symbols: Vec<Symbol>,
    dwarf: Option<crate::code::inline::DwarfContext>,
    /// Answers already given, by object-relative address.
    answers: HashMap<u64, Arc<[Frame]>>,
}

impl ObjectInfo {
    /// Parses what it can of `data`; anything broken is left out.
    fn parse(data: &[u8]) -> ObjectInfo {
        let empty = || ObjectInfo {
            segments: Vec::new(),
            symbols: Vec::new(),
            dwarf: None,
            answers: HashMap::new(),
        };
        // The parsers are written for untrusted input; this is a second line
        // of defence, so that a bug in them costs one object, not the report.
        catch_unwind(AssertUnwindSafe(|| {
            let Ok(file) = ElfFile::parse(data) else {
                return empty();
            };
            ObjectInfo {
                segments: segments(&file),
                symbols: symbols(&file),
                dwarf: crate::code::inline::dwarf_of(&file),
                answers: HashMap::new(),
            }
        }))
        .unwrap_or_else(|_| empty())
    }

    /// The load bias of this object given that `mapping` maps it and holds
    /// `probe`: what was added to the ELF's virtual addresses to place them.
    ///
    /// Linux maps each `PT_LOAD` segment from the start of the page holding
    /// its first byte: at `bias + vaddr - (offset % PAGE)` from file offset
    /// `offset - (offset % PAGE)`. Segments have `vaddr ≡ offset (mod PAGE)`,
    /// so in every mapping of a segment (a segment may be split in several
    /// by later `mprotect`s, and ld.so maps a library as several mappings of
    /// one file) an address and its file offset differ by
    /// `bias + vaddr - offset`, whence the bias.
    fn bias(&self, mapping: &Mapping, probe: u64) -> Option<u64> {
        let file_offset = mapping
            .file_offset
            .checked_add(probe.checked_sub(mapping.start)?)?;
        // The segment whose file contents hold the byte; failing that, the
        // segment whose mapping holds it (the head of its first page and the
        // tail of its last one hold bytes of other segments, or zeros).
        let strict = |s: &&Segment| {
            s.offset <= file_offset
                && s.offset
                    .checked_add(s.filesz)
                    .is_some_and(|end| file_offset < end)
        };
        let paged = |s: &&Segment| {
            s.offset - s.offset % PAGE_SIZE <= file_offset
                && s.offset
                    .checked_add(s.filesz)
                    .and_then(|end| end.checked_next_multiple_of(PAGE_SIZE))
                    .is_some_and(|end| file_offset < end)
        };
        let segment = self.segments.iter().find(strict);
        let segment = segment.or_else(|| self.segments.iter().find(paged))?;
        Some(
            mapping
                .start
                .wrapping_sub(mapping.file_offset)
                .wrapping_sub(segment.vaddr.wrapping_sub(segment.offset)),
        )
    }

    /// The frames at object-relative address `vaddr`, innermost first;
    /// empty when nothing is known there.
    fn lookup(&mut self, vaddr: u64) -> Arc<[Frame]> {
        if let Some(answer) = self.answers.get(&vaddr) {
            return Arc::clone(answer);
        }
        let in_segment = self.segments.iter().any(|s| {
            s.vaddr <= vaddr && s.vaddr.checked_add(s.memsz).is_some_and(|end| vaddr < end)
        });
        let mut frames = if in_segment {
            match catch_unwind(AssertUnwindSafe(|| self.dwarf_frames(vaddr))) {
                Ok(frames) => frames,
                Err(_) => {
                    // Its state may be half updated: use it no more.
                    self.dwarf = None;
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        if frames.last().is_none_or(|f| f.function.is_none()) {
            if let Some(name) = self.symbol_at(vaddr) {
                match frames.last_mut() {
                    Some(frame) => frame.function = Some(name),
                    None => frames.push(Frame {
                        function: Some(name),
                        ..Frame::default()
                    }),
                }
            }
        }
        let answer: Arc<[Frame]> = frames.into();
        self.answers.insert(vaddr, Arc::clone(&answer));
        answer
    }

    /// The frames the debug information gives for `vaddr`.
    fn dwarf_frames(&self, vaddr: u64) -> Vec<Frame> {
        let Some(context) = &self.dwarf else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let Ok(mut iter) = context.find_frames(vaddr).skip_all_loads() else {
            return out;
        };
        // A bound on the inlining depth, against a cyclic or absurd tree.
        while out.len() < 256 {
            let Ok(Some(frame)) = iter.next() else {
                break;
            };
            let function = frame
                .function
                .as_ref()
                .and_then(|name| name.demangle().ok())
                .filter(|name| !name.is_empty())
                .map(|name| Arc::from(crate::escape::line(&name).as_ref()));
            // Names come from the program's own debug info: shown, not obeyed.
            let (file, line) = match &frame.location {
                Some(location) => (
                    location
                        .file
                        .map(|f| Arc::from(crate::escape::line(f).as_ref())),
                    location.line,
                ),
                None => (None, None),
            };
            out.push(Frame {
                function,
                file,
                line,
            });
        }
        out
    }

    /// The demangled name of the function symbol holding `vaddr`.
    fn symbol_at(&self, vaddr: u64) -> Option<Arc<str>> {
        let index = self.symbols.partition_point(|s| s.start <= vaddr);
        let symbol = &self.symbols[index.checked_sub(1)?];
        if vaddr >= symbol.end {
            return None;
        }
        Some(Arc::from(
            crate::escape::line(&demangle(&symbol.name)).as_ref(),
        ))
    }
}

/// The first of `frames` (innermost first, never empty) that is the user's
/// code rather than a language runtime's, else the first.
fn user_frame(mut frames: Vec<Location>) -> Location {
    let i = frames
        .iter()
        .position(|f| !is_runtime_frame(f))
        .unwrap_or(0);
    frames.swap_remove(i)
}

/// Whether a frame is code of a language runtime: Rust's `core`, `std` and
/// `alloc` (by name or by their sources in the toolchain) and the crates a
/// build fetched from a registry, C++'s standard library headers.
pub fn is_runtime_frame(l: &Location) -> bool {
    crate::code::inline::is_runtime_code(l.function.as_deref(), l.file.as_deref())
}

/// Demangles a symbol name of unknown language (C++ or Rust, whose hash
/// suffix goes); other names come back unchanged.
fn demangle(name: &str) -> Cow<'_, str> {
    // Demanglers recurse; a name this long is no function's.
    if name.len() > 4096 {
        return Cow::Borrowed(name);
    }
    addr2line::demangle_auto(Cow::Borrowed(name), None)
}

/// The `PT_LOAD` segments of an ELF file.
fn segments(file: &ElfFile<'_>) -> Vec<Segment> {
    file.segments()
        .map(|segment| {
            let (offset, filesz) = segment.file_range();
            Segment {
                vaddr: segment.address(),
                memsz: segment.size(),
                offset,
                filesz,
            }
        })
        .collect()
}

/// The function symbols of the file, from `.symtab`, else from `.dynsym`;
/// sorted by address, one per address (the most public of the aliases).
fn symbols(file: &ElfFile<'_>) -> Vec<Symbol> {
    // Executable sections, `[start, end)`, to bound symbols of no size and
    // to accept symbols of no type that label code.
    let text: Vec<(object::SectionIndex, u64)> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .map(|s| (s.index(), s.address().saturating_add(s.size())))
        .collect();
    let section_end = |symbol: &object::read::elf::ElfSymbol64<'_, '_, object::Endianness>| {
        let index = symbol.section_index()?;
        text.iter().find(|(i, _)| *i == index).map(|(_, end)| *end)
    };
    // Symbol versions of `.dynsym`: `cfree@GLIBC_2.2.5`, a hidden (not
    // default) version, is the compatibility alias of `free`.
    let versions = file
        .elf_section_table()
        .versions(file.endian(), file.data())
        .ok()
        .flatten();
    let collect = |dynamic: bool| {
        let table = if dynamic {
            file.dynamic_symbols()
        } else {
            file.symbols()
        };
        let mut found: Vec<Candidate> = Vec::new();
        for symbol in table {
            let kind = symbol.kind();
            if symbol.is_undefined() || !matches!(kind, SymbolKind::Text | SymbolKind::Unknown) {
                continue;
            }
            let Ok(name) = symbol.name() else { continue };
            if name.is_empty() || name.starts_with(".L") || name.starts_with('$') {
                continue;
            }
            let end_of_section = section_end(&symbol);
            if kind == SymbolKind::Unknown && end_of_section.is_none() {
                continue;
            }
            let start = symbol.address();
            let (end, sized) = if symbol.size() > 0 {
                (start.saturating_add(symbol.size()), true)
            } else {
                (end_of_section.unwrap_or(start), false)
            };
            // `.symtab` spells versioned aliases `name@VERSION`.
            let (name, versioned) = match name.split_once('@') {
                Some((plain, _)) if !plain.is_empty() => (plain, true),
                _ => (name, false),
            };
            let hidden = versioned
                || (dynamic
                    && versions.as_ref().is_some_and(|v| {
                        v.version_index(file.endian(), symbol.index()).is_hidden()
                    }));
            // Prefer default versions, then global over weak over local,
            // then fewer leading underscores: `malloc` over `__libc_malloc`.
            let binding = if symbol.is_global() {
                0
            } else if symbol.is_weak() {
                1
            } else {
                2
            };
            let underscores = name.bytes().take_while(|&b| b == b'_').count();
            found.push(Candidate {
                start,
                end,
                sized,
                rank: (hidden, binding, underscores),
                name: name.into(),
            });
        }
        found
    };
    let mut found = collect(false);
    if found.is_empty() {
        found = collect(true);
    }
    // By start, then sized before unsized, then by rank and name.
    found.sort_by(|a, b| {
        (a.start, !a.sized, a.rank, &a.name).cmp(&(b.start, !b.sized, b.rank, &b.name))
    });
    found.dedup_by_key(|c| c.start);
    let starts: Vec<u64> = found.iter().map(|c| c.start).collect();
    found
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            // A symbol of no size reaches to the next one, within its section.
            let end = match (c.sized, starts.get(i + 1)) {
                (false, Some(&next)) => c.end.min(next),
                _ => c.end,
            };
            Symbol {
                start: c.start,
                end,
                name: c.name,
            }
        })
        .collect()
}

/// A function symbol before aliases are weeded out.
struct Candidate {
    start: u64,
    /// End of the symbol, or of its section when it has no size.
    end: u64,
    sized: bool,
    /// (hidden version, binding, leading underscores): lowest wins.
    rank: (bool, u8, usize),
    name: Box<str>,
}
