//! Finding sync sites: decoding an object's code (iced-x86), bounded by
//! its function symbols and `.eh_frame` ranges so that no data is decoded
//! as code, and choosing the instructions that become scheduling points
//! (see the module's doc for which).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    Register,
};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SymbolKind};

use super::acquire::{self, Callee, LockRole};
use super::emulate::{self, is_atomic};
use super::site::{Site, SiteKind, SyncPoints};
use super::table::{Function, Plan, Scope, SiteCounts, SiteTable, function_at};

/// The sites of the object `elf` at `level` under `plan`, computed once per
/// content, level and plan (the same libraries are mapped again by every
/// machine).
pub fn sites_of(elf: &Arc<Vec<u8>>, level: SyncPoints, plan: Plan) -> Arc<SiteTable> {
    type Cache = Mutex<HashMap<(u128, SyncPoints, Plan), Arc<SiteTable>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (xxhash_rust::xxh3::xxh3_128(elf), level, plan);
    let cache = CACHE.get_or_init(Default::default);
    if let Some(t) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return t.clone();
    }
    // A hostile object (a reproducer's) may break the parser: it then has
    // no sites, and runs as it would at `calls`.
    let table = std::panic::catch_unwind(|| discover_in(elf, level, plan)).unwrap_or_default();
    let table = Arc::new(table);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, table.clone());
    table
}

/// An executable or writable PT_LOAD segment.
#[derive(Clone, Copy, Debug)]
struct Segment {
    vaddr: u64,
    offset: u64,
    filesz: u64,
    memsz: u64,
}

/// Finds the sites of `elf` at `level`.
pub fn discover(elf: &[u8], level: SyncPoints) -> SiteTable {
    discover_in(elf, level, Plan::default())
}

/// Finds the sites of `elf` at `level` under `plan`.
pub fn discover_in(elf: &[u8], level: SyncPoints, plan: Plan) -> SiteTable {
    let mut table = SiteTable::default();
    if level == SyncPoints::Calls {
        return table;
    }
    let Ok(file) = object::read::elf::ElfFile64::<object::Endianness>::parse(elf) else {
        return table;
    };
    let mut exec = Vec::new();
    let mut writable = Vec::new();
    for seg in file.elf_program_headers() {
        use object::read::elf::ProgramHeader;
        let e = file.endian();
        if seg.p_type(e) != object::elf::PT_LOAD {
            continue;
        }
        let s = Segment {
            vaddr: seg.p_vaddr(e),
            offset: seg.p_offset(e),
            filesz: seg.p_filesz(e),
            memsz: seg.p_memsz(e),
        };
        if seg.p_flags(e).0 & object::elf::PF_X.0 != 0 {
            exec.push(s);
        }
        if seg.p_flags(e).0 & object::elf::PF_W.0 != 0 {
            writable.push(s);
        }
    }
    table.segments = exec
        .iter()
        .map(|s| {
            (
                s.offset,
                s.offset + s.filesz,
                s.vaddr.wrapping_sub(s.offset),
            )
        })
        .collect();
    table.functions = functions(&file, &exec);
    let fdes = fde_ranges(&file);
    let entries: std::collections::BTreeSet<u64> = table
        .functions
        .iter()
        .map(|f| f.start)
        .chain(fdes.iter().map(|r| r.0))
        .collect();
    let ranges = code_ranges(&exec, &table.functions, &fdes);
    let bytes_at = |va: u64| -> Option<(&[u8], u64)> {
        exec.iter().find_map(|s| {
            let off = va.checked_sub(s.vaddr)?;
            (off < s.filesz).then(|| {
                let start = (s.offset + off) as usize;
                let end = (s.offset + s.filesz) as usize;
                (elf.get(start..end).unwrap_or(&[]), s.offset + off)
            })
        })
    };
    let relro = relro_range(&file);
    let in_writable = |va: u64| {
        writable
            .iter()
            .any(|s| va >= s.vaddr && va < s.vaddr + s.memsz)
            && !relro.is_some_and(|(a, b)| va >= a && va < b)
    };
    // An address in (or just past) the code that no function starts at.
    let code_as_data = |va: u64| {
        exec.iter()
            .any(|s| va >= s.vaddr && va <= s.vaddr + s.filesz)
            && !entries.contains(&va)
    };
    let got = got_targets(&file);
    let code = ObjectCode {
        bytes_at: &bytes_at,
        functions: &table.functions,
        got: &got,
    };
    let mut finder = Finder {
        level,
        info: InstructionInfoFactory::new(),
        leaves: HashMap::new(),
        bytes_at: &bytes_at,
        in_writable: &in_writable,
        code_as_data: &code_as_data,
        sites: BTreeMap::new(),
        counts: SiteCounts::default(),
        reads_own_code: false,
        targets: entries.iter().copied().collect(),
        loops: Vec::new(),
    };
    for (start, end) in ranges {
        let instrs = finder.decode(start, end);
        finder.scan(&instrs);
        if plan.ticks {
            finder.loops(&instrs, plan.scope);
        }
    }
    if plan.scope == Scope::Ticks {
        finder.sites.clear();
        finder.counts = SiteCounts::default();
    }
    table.counts = finder.counts;
    table.reads_own_code = finder.reads_own_code;
    let mut sites: Vec<Site> = finder.sites.into_values().collect();
    // What the code around each atomic says about locks; an object left
    // unpatched (it reads its own code) takes no steps at its sites.
    if !table.reads_own_code {
        for site in sites.iter_mut().filter(|s| s.kind == SiteKind::AtomicRmw) {
            let Some(ip) = table.vaddr_of(site.offset) else {
                continue;
            };
            let bytes = &site.bytes[..usize::from(site.len)];
            let instr =
                iced_x86::Decoder::with_ip(64, bytes, ip, iced_x86::DecoderOptions::NONE).decode();
            site.acquires = acquire::site_evidence(&code, &instr);
        }
    }
    table.sites = sites;
    for site in &mut table.sites {
        let va = site.offset;
        site.fast = super::out_of_line::plan(site, va, crate::arch::abi::SITES_STUBS_VA).is_some();
    }
    if !table.reads_own_code {
        let reports_caller = |offset: u64| table.reports_caller(offset);
        let vaddr_of = |offset: u64| table.vaddr_of(offset);
        let function_end = |va: u64| function_at(&table.functions, va).map(|f| f.end);
        let object = super::trampoline::Object {
            bytes_at: &bytes_at,
            targets: &finder.targets,
            reports_caller: &reports_caller,
            vaddr_of: &vaddr_of,
            function_end: &function_end,
            region: match object::read::elf::FileHeader::e_type(file.elf_header(), file.endian()) {
                object::elf::ET_EXEC => super::trampoline::LOW_REGION_BYTE,
                _ => super::trampoline::REGION_BYTE,
            },
        };
        let sync = if plan.jumps { &table.sites[..] } else { &[] };
        let mut trampolines = super::trampoline::plan(sync, &object);
        let ticks =
            super::trampoline::plan_ticks(&finder.loops, &table.sites, &object, &mut trampolines);
        table.counts.ticks = ticks.len();
        table.sites.extend(ticks);
        table.sites.sort_by_key(|s| s.offset);
        table.trampolines = trampolines;
    }
    table
}

/// The range `PT_GNU_RELRO` makes read-only after relocation (the GOT):
/// writable at link time, never written while the program runs.
fn relro_range(file: &object::read::elf::ElfFile64<object::Endianness>) -> Option<(u64, u64)> {
    use object::read::elf::ProgramHeader;
    let e = file.endian();
    file.elf_program_headers()
        .iter()
        .find(|p| p.p_type(e) == object::elf::PT_GNU_RELRO)
        .map(|p| (p.p_vaddr(e), p.p_vaddr(e) + p.p_memsz(e)))
}

/// The object's functions from its symbols, with their runtime flag.
fn functions(
    file: &object::read::elf::ElfFile64<object::Endianness>,
    exec: &[Segment],
) -> Vec<Function> {
    let in_exec = |va: u64| {
        exec.iter()
            .any(|s| va >= s.vaddr && va < s.vaddr + s.filesz)
    };
    let mut out: Vec<Function> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0 && in_exec(s.address()))
        .map(|s| {
            let name = s.name().unwrap_or("");
            Function {
                start: s.address(),
                end: s.address() + s.size(),
                runtime: is_runtime_symbol(name),
                lock: acquire::role_of_symbol(name),
                syscall: name == "syscall",
                yields: acquire::yields(name),
            }
        })
        .collect();
    out.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
    out.dedup_by_key(|f| f.start);
    out
}

/// Whether a (mangled) symbol names a function of a language runtime.
pub fn is_runtime_symbol(mangled: &str) -> bool {
    // `{:#}` leaves out hashes and crate disambiguators (`std[1a2b]::`).
    let name = format!("{:#}", rustc_demangle::demangle(mangled));
    let name = name.trim_start_matches('<');
    const RUST: [&str; 4] = ["core::", "std::", "alloc::", "compiler_builtins::"];
    if RUST.iter().any(|p| name.starts_with(p)) {
        return true;
    }
    // C++ (Itanium mangling): std:: functions the compiler did not inline.
    mangled.starts_with("_ZNSt")
        || mangled.starts_with("_ZNKSt")
        || mangled.starts_with("_ZSt")
        || mangled.starts_with("_ZNVSt")
}

/// What a call through a GOT entry reaches: a function of this object
/// (a relative relocation's address) or an imported symbol's name.
enum GotTarget {
    Address(u64),
    Import(String),
}

/// The GOT entries the dynamic relocations fill, by link-time address.
fn got_targets(file: &object::read::elf::ElfFile64<object::Endianness>) -> HashMap<u64, GotTarget> {
    let mut out = HashMap::new();
    let Some(relocs) = file.dynamic_relocations() else {
        return out;
    };
    let symbols = file.dynamic_symbol_table();
    for (slot, r) in relocs.take(1_000_000) {
        let object::RelocationFlags::Elf { r_type } = r.flags() else {
            continue;
        };
        let target = match r_type {
            object::elf::R_X86_64_RELATIVE => GotTarget::Address(r.addend() as u64),
            object::elf::R_X86_64_GLOB_DAT | object::elf::R_X86_64_JUMP_SLOT => {
                let object::RelocationTarget::Symbol(index) = r.target() else {
                    continue;
                };
                let Some(name) = symbols
                    .as_ref()
                    .and_then(|t| t.symbol_by_index(index).ok())
                    .and_then(|s| s.name().ok())
                else {
                    continue;
                };
                GotTarget::Import(name.to_string())
            }
            _ => continue,
        };
        out.insert(slot, target);
    }
    out
}

/// An object's code as the acquisition analysis reads it.
struct ObjectCode<'f, 'd> {
    bytes_at: BytesAt<'f, 'd>,
    functions: &'f [Function],
    got: &'f HashMap<u64, GotTarget>,
}

impl ObjectCode<'_, '_> {
    fn callee_of(f: &Function) -> Callee {
        match f.lock {
            Some(role) => Callee::Lock(role),
            None if f.syscall => Callee::Syscall,
            None if f.yields => Callee::Yield,
            None => Callee::Other,
        }
    }
}

impl acquire::Code for ObjectCode<'_, '_> {
    fn instruction(&self, va: u64) -> Option<Instruction> {
        let (bytes, _) = (self.bytes_at)(va)?;
        let i =
            Decoder::with_ip(64, &bytes[..bytes.len().min(15)], va, DecoderOptions::NONE).decode();
        (!i.is_invalid()).then_some(i)
    }

    fn function(&self, va: u64) -> Option<(u64, u64, Option<LockRole>)> {
        function_at(self.functions, va).map(|f| (f.start, f.end, f.lock))
    }

    fn callee(&self, target: u64) -> Callee {
        if let Some(f) = self.functions.iter().find(|f| f.start == target) {
            return Self::callee_of(f);
        }
        // A PLT entry: `endbr64`, then a jump through its GOT entry.
        let mut va = target;
        for _ in 0..2 {
            let Some(i) = self.instruction(va) else {
                break;
            };
            if i.mnemonic() == Mnemonic::Jmp && i.is_ip_rel_memory_operand() {
                return self.callee_via(i.ip_rel_memory_address());
            }
            if i.mnemonic() != Mnemonic::Endbr64 {
                break;
            }
            va = i.next_ip();
        }
        Callee::Other
    }

    fn callee_via(&self, slot: u64) -> Callee {
        match self.got.get(&slot) {
            Some(GotTarget::Address(a)) => function_at(self.functions, *a)
                .filter(|f| f.start == *a)
                .map_or(Callee::Other, Self::callee_of),
            Some(GotTarget::Import(name)) if name == "syscall" => Callee::Syscall,
            Some(GotTarget::Import(name)) if acquire::yields(name) => Callee::Yield,
            Some(GotTarget::Import(name)) => {
                acquire::role_of_symbol(name).map_or(Callee::Other, Callee::Lock)
            }
            None => Callee::Other,
        }
    }
}

/// The address ranges to decode: every function (symbols and `.eh_frame`
/// FDEs), merged, within executable segments.
fn code_ranges(exec: &[Segment], functions: &[Function], fdes: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = functions.iter().map(|f| (f.start, f.end)).collect();
    ranges.extend_from_slice(fdes);
    ranges.retain(|(a, b)| {
        a < b
            && exec
                .iter()
                .any(|s| *a >= s.vaddr && *b <= s.vaddr + s.filesz)
    });
    ranges.sort();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a < last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// The code ranges `.eh_frame` describes.
fn fde_ranges(file: &object::read::elf::ElfFile64<object::Endianness>) -> Vec<(u64, u64)> {
    use gimli::UnwindSection;
    let Some(section) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let eh = gimli::EhFrame::new(data, gimli::LittleEndian);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    let mut out = Vec::new();
    let mut entries = eh.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry {
            if let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) {
                let start = fde.initial_address();
                out.push((start, start.saturating_add(fde.len())));
            }
        }
        if out.len() > 1_000_000 {
            break;
        }
    }
    out
}

/// Longest backward branch that can close a spin loop, in bytes.
const SPIN_LOOP_BYTES: u64 = 96;
/// Longest function a spin loop may call (an unoptimized atomic load).
const LEAF_BYTES: u64 = 160;
/// How deep such calls may nest.
const LEAF_DEPTH: u32 = 3;

/// The code's bytes at a link-time address, and their file offset.
type BytesAt<'f, 'd> = &'f dyn Fn(u64) -> Option<(&'d [u8], u64)>;

struct Finder<'f, 'd> {
    level: SyncPoints,
    info: InstructionInfoFactory,
    /// Functions known to only load (true) or not (false), by address.
    leaves: HashMap<u64, bool>,
    bytes_at: BytesAt<'f, 'd>,
    in_writable: &'f dyn Fn(u64) -> bool,
    code_as_data: &'f dyn Fn(u64) -> bool,
    sites: BTreeMap<u64, Site>,
    counts: SiteCounts,
    reads_own_code: bool,
    /// Addresses direct branches and calls reach.
    targets: std::collections::BTreeSet<u64>,
    /// Loops with no sync site: the last instructions of each one's body
    /// (up to its backward branch), where a tick goes.
    loops: Vec<Vec<Instruction>>,
}

/// How many of a loop's last instructions may hold its tick: a loop whose
/// last few cannot (each would displace one that may not move) has none.
const TICK_CANDIDATES: usize = 8;

/// A decoded instruction and the file offset of its first byte.
#[derive(Clone, Copy)]
struct Decoded {
    instr: Instruction,
    offset: u64,
}

impl Finder<'_, '_> {
    /// Decodes `[start, end)`.
    fn decode(&self, start: u64, end: u64) -> Vec<Decoded> {
        let Some((bytes, offset)) = (self.bytes_at)(start) else {
            return Vec::new();
        };
        let len = ((end - start) as usize).min(bytes.len());
        let mut d = Decoder::with_ip(64, &bytes[..len], start, DecoderOptions::NONE);
        let mut out = Vec::new();
        while d.can_decode() {
            let instr = d.decode();
            if instr.is_invalid() {
                continue;
            }
            out.push(Decoded {
                instr,
                offset: offset + (instr.ip() - start),
            });
        }
        out
    }

    fn add(&mut self, d: &Decoded, kind: SiteKind, spins: bool) {
        let Some((bytes, _)) = (self.bytes_at)(d.instr.ip()) else {
            return;
        };
        let len = d.instr.len();
        let mut b = [0u8; 15];
        b[..len].copy_from_slice(&bytes[..len]);
        // Found once the scan is over: only for objects whose sites are used.
        let acquires = None;
        let site = Site {
            offset: d.offset,
            kind,
            spins,
            fast: false,
            bytes: b,
            len: len as u8,
            acquires,
        };
        if self.sites.insert(d.offset, site).is_none() {
            match kind {
                SiteKind::AtomicRmw => self.counts.atomics += 1,
                SiteKind::Spin => self.counts.spins += 1,
                SiteKind::Load => self.counts.loads += 1,
                SiteKind::Store => self.counts.stores += 1,
                SiteKind::Tick => {}
            }
        }
    }

    fn scan(&mut self, instrs: &[Decoded]) {
        for d in instrs {
            let i = &d.instr;
            if matches!(
                i.flow_control(),
                FlowControl::ConditionalBranch
                    | FlowControl::UnconditionalBranch
                    | FlowControl::Call
            ) && i.op0_kind() == iced_x86::OpKind::NearBranch64
            {
                self.targets.insert(i.near_branch_target());
            }
            if i.mnemonic() == Mnemonic::Lea
                && i.is_ip_rel_memory_operand()
                && (self.code_as_data)(i.ip_rel_memory_address())
            {
                self.reads_own_code = true;
            }
            if is_atomic(i) {
                if emulate::supported(i) {
                    self.add(d, SiteKind::AtomicRmw, false);
                } else {
                    self.counts.unsupported += 1;
                }
            } else if i.mnemonic() == Mnemonic::Pause {
                self.add(d, SiteKind::Spin, true);
            } else if self.level >= SyncPoints::Globals {
                if let Some(kind) = self.global_access(i) {
                    if emulate::supported(i) {
                        self.add(d, kind, false);
                    } else {
                        self.counts.unsupported += 1;
                    }
                }
            }
        }
        for (n, d) in instrs.iter().enumerate() {
            if let Some(start) = self.spin_loop(instrs, n) {
                let body = &instrs[start..=n];
                if body.iter().any(|b| b.instr.mnemonic() == Mnemonic::Pause) {
                    continue;
                }
                // A test-and-set or compare-and-swap retry loop: its atomic
                // is the site, and it gives way.
                if let Some(a) = body.iter().find(|b| is_atomic(&b.instr)) {
                    if let Some(s) = self.sites.get_mut(&a.offset) {
                        s.spins = true;
                    }
                    continue;
                }
                if emulate::supported(&d.instr) {
                    // A global load in the loop would be a second step per
                    // iteration: the branch alone is the site.
                    for b in body {
                        if let Some(s) = self.sites.get(&b.offset) {
                            if matches!(s.kind, SiteKind::Load) {
                                self.sites.remove(&b.offset);
                                self.counts.loads -= 1;
                            }
                        }
                    }
                    self.add(d, SiteKind::Spin, true);
                }
            }
        }
    }

    /// Notes each loop of `instrs` (one range of code) that holds no sync
    /// site (in `Scope::Ticks`, whose sync sites are not patched, every
    /// loop): a direct backward branch to an instruction of the same
    /// decoding, and the last [`TICK_CANDIDATES`] instructions up to it.
    fn loops(&mut self, instrs: &[Decoded], scope: Scope) {
        let Some(first) = instrs.first() else { return };
        let start = first.instr.ip();
        for (n, d) in instrs.iter().enumerate() {
            let i = &d.instr;
            let backward = matches!(
                i.flow_control(),
                FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch
            ) && i.op0_kind() == iced_x86::OpKind::NearBranch64
                && i.near_branch_target() <= i.ip()
                && i.near_branch_target() >= start;
            if !backward {
                continue;
            }
            let head = d.offset - (i.ip() - i.near_branch_target());
            if scope != Scope::Ticks && self.sites.range(head..=d.offset).next().is_some() {
                continue;
            }
            let Ok(first) = instrs[..=n].binary_search_by_key(&head, |d| d.offset) else {
                continue;
            };
            let from = first.max((n + 1).saturating_sub(TICK_CANDIDATES));
            self.loops
                .push(instrs[from..=n].iter().map(|d| d.instr).collect());
        }
    }

    /// For a global variable access, whether it loads or stores.
    fn global_access(&mut self, i: &Instruction) -> Option<SiteKind> {
        if !i.is_ip_rel_memory_operand() || i.mnemonic() == Mnemonic::Lea {
            return None;
        }
        if !(self.in_writable)(i.ip_rel_memory_address()) {
            return None;
        }
        let info = self.info.info(i);
        let access = info.used_memory().first()?.access();
        match access {
            OpAccess::Read | OpAccess::CondRead => Some(SiteKind::Load),
            OpAccess::Write
            | OpAccess::CondWrite
            | OpAccess::ReadWrite
            | OpAccess::ReadCondWrite => Some(SiteKind::Store),
            _ => None,
        }
    }

    /// If instruction `n` closes a spin loop, the index of the loop's first
    /// instruction.
    fn spin_loop(&mut self, instrs: &[Decoded], n: usize) -> Option<usize> {
        let br = &instrs[n].instr;
        if !matches!(
            br.flow_control(),
            FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch
        ) {
            return None;
        }
        let target = br.near_branch_target();
        if target >= br.ip() || br.ip() - target > SPIN_LOOP_BYTES {
            return None;
        }
        let start = instrs[..n]
            .iter()
            .rposition(|d| d.instr.ip() == target)
            .filter(|s| instrs[*s].instr.ip() == target)?;
        let body = &instrs[start..=n];
        let mut written = Vec::new();
        let mut reads = Vec::new();
        let mut polled = Vec::new();
        for d in body {
            let i = &d.instr;
            match i.flow_control() {
                FlowControl::Next | FlowControl::ConditionalBranch => {}
                FlowControl::UnconditionalBranch if std::ptr::eq(d, &instrs[n]) => {}
                FlowControl::Call => {
                    if !self.is_load_leaf(i.near_branch_target(), LEAF_DEPTH) {
                        return None;
                    }
                    reads.push(Register::None);
                    continue;
                }
                _ => return None,
            }
            // A branch inside the body may only leave the loop.
            if i.flow_control() == FlowControl::ConditionalBranch
                && !std::ptr::eq(d, &instrs[n])
                && (target..=br.ip()).contains(&i.near_branch_target())
            {
                return None;
            }
            let info = self.info.info(i);
            for m in info.used_memory() {
                match m.access() {
                    OpAccess::Read | OpAccess::CondRead | OpAccess::NoMemAccess => {
                        if m.access() != OpAccess::NoMemAccess {
                            reads.push(m.base());
                            reads.push(m.index());
                            polled.push((m.base(), m.index(), m.displacement()));
                        }
                    }
                    _ if is_atomic(i) => {
                        // The atomic of a retry loop must poll a word read
                        // the same way.
                        reads.push(m.base());
                        reads.push(m.index());
                        polled.push((m.base(), m.index(), m.displacement()));
                    }
                    _ => return None,
                }
            }
            for r in info.used_registers() {
                if matches!(
                    r.access(),
                    OpAccess::Write
                        | OpAccess::CondWrite
                        | OpAccess::ReadWrite
                        | OpAccess::ReadCondWrite
                ) {
                    written.push(r.register().full_register());
                }
            }
        }
        if reads.is_empty() {
            return None;
        }
        // The polled addresses must not move: their registers are not
        // written in the loop (strlen-style loops walk memory).
        let moves = reads
            .iter()
            .filter(|r| **r != Register::None && **r != Register::RIP)
            .any(|r| written.contains(&r.full_register()));
        (!moves).then_some(start)
    }

    /// Whether the function at `va` only loads: short, straight-line code
    /// that writes no memory but its own stack frame and calls only such
    /// functions (an unoptimized atomic load is a chain of them).
    fn is_load_leaf(&mut self, va: u64, depth: u32) -> bool {
        if let Some(known) = self.leaves.get(&va) {
            return *known;
        }
        self.leaves.insert(va, false);
        let verdict = depth > 0 && self.check_leaf(va, depth);
        self.leaves.insert(va, verdict);
        verdict
    }

    fn check_leaf(&mut self, va: u64, depth: u32) -> bool {
        let instrs = self.decode(va, va + LEAF_BYTES);
        for d in &instrs {
            let i = &d.instr;
            if is_atomic(i) && !is_plain_atomic_load(i) {
                return false;
            }
            match i.flow_control() {
                FlowControl::Next => {}
                FlowControl::Return => return true,
                FlowControl::Call => {
                    if !self.is_load_leaf(i.near_branch_target(), depth - 1) {
                        return false;
                    }
                }
                _ => return false,
            }
            let info = self.info.info(i);
            for m in info.used_memory() {
                let writes = !matches!(
                    m.access(),
                    OpAccess::Read | OpAccess::CondRead | OpAccess::NoMemAccess
                );
                let stack = matches!(m.base(), Register::RSP | Register::RBP);
                if writes && !stack {
                    return false;
                }
            }
        }
        false
    }
}

/// A locked instruction that only reads (none exist on x86; kept for
/// clarity of the leaf rule).
fn is_plain_atomic_load(_: &Instruction) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `code` at `ip` into the finder's form.
    fn decoded(code: &[u8], ip: u64) -> Vec<Decoded> {
        let mut d = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
        let mut out = Vec::new();
        while d.can_decode() {
            let instr = d.decode();
            out.push(Decoded {
                instr,
                offset: instr.ip() - ip,
            });
        }
        out
    }

    fn scan(code: &'static [u8], level: SyncPoints) -> (Vec<Site>, SiteCounts) {
        let bytes_at = move |va: u64| -> Option<(&'static [u8], u64)> {
            let off = va.checked_sub(0x1000)? as usize;
            (off < code.len()).then(|| (&code[off..], off as u64))
        };
        let in_writable = |va: u64| (0x4000..0x5000).contains(&va);
        let mut f = Finder {
            level,
            info: InstructionInfoFactory::new(),
            leaves: HashMap::new(),
            bytes_at: &bytes_at,
            in_writable: &in_writable,
            code_as_data: &|_| false,
            sites: BTreeMap::new(),
            counts: SiteCounts::default(),
            reads_own_code: false,
            targets: Default::default(),
            loops: Vec::new(),
        };
        let instrs = decoded(code, 0x1000);
        f.scan(&instrs);
        (f.sites.into_values().collect(), f.counts)
    }

    #[test]
    fn locked_instructions_and_xchg_with_memory_are_atomic_sites() {
        // lock cmpxchg %ecx,(%rdi); xchg %eax,(%rdx); lock xadd %rax,(%rsi); ret
        let code: &[u8] = &[
            0xf0, 0x0f, 0xb1, 0x0f, 0x87, 0x02, 0xf0, 0x48, 0x0f, 0xc1, 0x06, 0xc3,
        ];
        let (sites, counts) = scan(code, SyncPoints::Atomics);
        let offsets: Vec<u64> = sites.iter().map(|s| s.offset).collect();
        assert_eq!(offsets, vec![0, 4, 6]);
        assert!(
            sites
                .iter()
                .all(|s| s.kind == SiteKind::AtomicRmw && !s.spins)
        );
        assert_eq!(counts.atomics, 3);
    }

    #[test]
    fn a_loop_that_only_polls_a_global_is_a_spin_site_at_its_branch() {
        // loop: movzbl 0x2ff9(%rip),%eax (-> 0x4000); test %al,%al; je loop; ret
        let code: &[u8] = &[
            0x0f, 0xb6, 0x05, 0xf9, 0x2f, 0x00, 0x00, 0x84, 0xc0, 0x74, 0xf5, 0xc3,
        ];
        let (sites, _) = scan(code, SyncPoints::Atomics);
        assert_eq!(sites.len(), 1);
        assert_eq!(
            (sites[0].offset, sites[0].kind, sites[0].spins),
            (9, SiteKind::Spin, true)
        );
        // At `globals` the load alone would be a second step per iteration:
        // the branch stays the only site.
        let (sites, _) = scan(code, SyncPoints::Globals);
        assert_eq!(sites.iter().map(|s| s.offset).collect::<Vec<_>>(), vec![9]);
    }

    #[test]
    fn a_loop_that_walks_memory_is_no_spin() {
        // loop: cmpb $0,(%rdi); lea 1(%rdi),%rdi; jne loop; ret  (strlen-like)
        let code: &[u8] = &[0x80, 0x3f, 0x00, 0x48, 0x8d, 0x7f, 0x01, 0x75, 0xf7, 0xc3];
        let (sites, _) = scan(code, SyncPoints::Atomics);
        assert!(sites.is_empty(), "{sites:?}");
    }

    #[test]
    fn a_loop_that_stores_is_no_spin() {
        // loop: mov (%rdi),%eax; mov %eax,(%rsi); test %eax,%eax; je loop; ret
        let code: &[u8] = &[0x8b, 0x07, 0x89, 0x06, 0x85, 0xc0, 0x74, 0xf8, 0xc3];
        let (sites, _) = scan(code, SyncPoints::Atomics);
        assert!(sites.is_empty(), "{sites:?}");
    }

    #[test]
    fn pause_is_the_site_of_its_loop_and_a_test_and_set_loop_gives_way() {
        // loop: pause; cmpl $0,(%rdi); jne loop; ret
        let code: &[u8] = &[0xf3, 0x90, 0x83, 0x3f, 0x00, 0x75, 0xf9, 0xc3];
        let (sites, _) = scan(code, SyncPoints::Atomics);
        assert_eq!(sites.iter().map(|s| s.offset).collect::<Vec<_>>(), vec![0]);
        // loop: mov $1,%eax; xchg %eax,(%rdi); test %eax,%eax; jne loop; ret
        let code: &[u8] = &[
            0xb8, 0x01, 0x00, 0x00, 0x00, 0x87, 0x07, 0x85, 0xc0, 0x75, 0xf5, 0xc3,
        ];
        let (sites, _) = scan(code, SyncPoints::Atomics);
        assert_eq!(sites.len(), 1);
        assert!(sites[0].spins && sites[0].kind == SiteKind::AtomicRmw);
    }

    #[test]
    fn globals_are_sites_only_at_the_globals_level() {
        // movl $1,0x2ff6(%rip) (-> 0x4000); mov 0x2ff0(%rip),%eax; lea 0x2fea(%rip),%rax; ret
        let code: &[u8] = &[
            0xc7, 0x05, 0xf6, 0x2f, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x8b, 0x05, 0xf0, 0x2f,
            0x00, 0x00, 0x48, 0x8d, 0x05, 0xe9, 0x2f, 0x00, 0x00, 0xc3,
        ];
        assert!(scan(code, SyncPoints::Atomics).0.is_empty());
        let (sites, counts) = scan(code, SyncPoints::Globals);
        let kinds: Vec<(u64, SiteKind)> = sites.iter().map(|s| (s.offset, s.kind)).collect();
        assert_eq!(kinds, vec![(0, SiteKind::Store), (10, SiteKind::Load)]);
        assert_eq!((counts.loads, counts.stores), (1, 1));
    }

    #[test]
    fn runtime_symbols_are_told_from_user_code() {
        assert!(is_runtime_symbol(
            "_ZN4core4sync6atomic23atomic_compare_exchange17h0123456789abcdefE"
        ));
        assert!(is_runtime_symbol(
            "_ZN3std4sync6poison5mutex14Mutex$LT$T$GT$4lock17h0123456789abcdefE"
        ));
        assert!(is_runtime_symbol(
            "_ZNSt13__atomic_baseIiE9fetch_addEiSt12memory_order"
        ));
        assert!(is_runtime_symbol(
            "_RNvNtNtNtNtNtCsjrHSEGnQ3l9_3std3sys3pal4unix14stack_overflow11thread_info16set_current_info"
        ));
        assert!(!is_runtime_symbol("_ZN4prog4main17h0123456789abcdefE"));
        assert!(!is_runtime_symbol("worker"));
    }
}
