//! Sync sites taken without an exit (see `arch::abi`): the sites area each
//! process with sync sites carries (the dispatcher, the out-of-line copies
//! and the table saying where each site's operand is), the way back to the
//! breakpoint when the dispatcher or a copy cannot finish, and the steps
//! the dispatcher buffered.
//!
//! A buffered step is the step the breakpoint would have been, taken at the
//! next exit exactly as `sync::sync_step` takes it, with the registers and
//! operand the dispatcher recorded; the instruction has already run in the
//! guest, and the emulator, run again on what it read, says what it wrote.
//! Runs and traces are the same either way (tests compare them).

use super::Kernel;
use crate::arch::abi::*;
use crate::arch::cpu::UserRegs;
use crate::code::sites::emulate::{self, Fault};
use crate::code::sites::out_of_line;
use crate::code::sites::trampoline::Origin;
use crate::code::{Site, SiteTable};
use crate::memory::{Backing, HIDDEN_MAPPING, MemError, Placement, Prot};
use crate::observe::Reported;

unsafe extern "C" {
    static rewind_sites_start: u8;
    static rewind_sites_end: u8;
    #[cfg(test)]
    static rewind_sites_miss: u8;
    #[cfg(test)]
    static rewind_sites_jump: u8;
}
std::arch::global_asm!(
    include_str!("../../guest/sites.S"),
    data = const SITES_DATA_VA,
    stack_top = const SITES_STACK_TOP,
    ring = const RING_VA,
    hash_mul = const SITES_HASH_MUL,
    hash_shift = const 64 - SITES_SLOTS.trailing_zeros() as u64,
    table = const SITES_TABLE_VA,
    slot_mask = const SITES_SLOTS - 1,
    op_site = const RING_OP_SITE,
    side_bytes = const SITES_SIDE_WORDS * 8,
    side_offset = const SITES_SIDE_OFFSET,
    code = const SITES_VA,
    desc = const SITES_SAVE_DESC * 8,
    jump_door = const SITES_JUMP_DOOR,
    riprel_flag = const SITES_RIPREL_FLAG,
    yield_flag = const SITES_YIELD_FLAG,
    retry_flag = const SITES_RETRY_FLAG,
    yield_limit = const SITES_YIELD_LIMIT * 8,
    last_site = const SITES_LAST_SITE * 8,
    retry_always = const SITES_RETRY_ALWAYS * 8,
    runtime_flag = const SITES_RUNTIME_FLAG,
    window_words = const SITES_STACK_WINDOW / 8,
    stack_lo = const SITES_STACK_LO * 8,
    stack_hi = const SITES_STACK_HI * 8,
    options(att_syntax)
);

/// The dispatcher's bytes, as assembled into this binary.
fn dispatcher() -> &'static [u8] {
    // SAFETY: the labels are in one section of `guest/sites.S`, start
    // before end; the bytes between are initialized read-only data for the
    // life of the program.
    unsafe {
        let start = &raw const rewind_sites_start;
        let end = &raw const rewind_sites_end;
        std::slice::from_raw_parts(start, end.offset_from(start) as usize)
    }
}

/// Whether `rip` is in the dispatcher or a stub.
fn in_sites_code(rip: u64) -> bool {
    (SITES_VA..SITES_VA + SITES_CODE_SIZE).contains(&rip)
}

impl Kernel {
    /// Whether `rip` is in code of the site path: the dispatcher, a stub or
    /// a trampoline.
    fn in_site_path(&self, rip: u64) -> bool {
        in_sites_code(rip) || self.mm.vma_at(rip).is_some_and(|v| v.is_jumps())
    }
}

/// The slot of the table an address hashes to first.
fn first_slot(va: u64) -> u64 {
    va.wrapping_mul(SITES_HASH_MUL) >> (64 - SITES_SLOTS.trailing_zeros())
}

/// Guest memory as it was when the dispatcher recorded a site: the operand
/// as it read it; writes are checked for rights, not made (the instruction
/// has run).
struct Recorded<'k> {
    kernel: &'k Kernel,
    addr: u64,
    operand: [u8; 16],
}

impl emulate::Memory for Recorded<'_> {
    fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let at = va.wrapping_sub(self.addr) as usize;
        match self.operand.get(at..at + buf.len()) {
            Some(b) => {
                buf.copy_from_slice(b);
                Ok(())
            }
            None => Err(Fault::Page { addr: va }),
        }
    }
    fn write(&mut self, va: u64, buf: &[u8]) -> Result<(), Fault> {
        match self.kernel.mm.vma_at(va) {
            Some(v) if v.prot.write && va + buf.len() as u64 <= v.end => Ok(()),
            _ => Err(Fault::Page { addr: va }),
        }
    }
}

/// A sync site's step the dispatcher buffered.
#[derive(Clone, Debug)]
pub struct BufferedSite {
    /// The instruction's address.
    pub va: u64,
    /// The registers at the breakpoint (rip = `va`).
    pub regs: UserRegs,
    /// The operand's address and its 16 bytes as read then.
    pub addr: u64,
    pub operand: [u8; 16],
    /// For a site inside a runtime, where the dispatcher copied the stack
    /// window as it was then, and its length in bytes (0 for other sites).
    /// Read word by word as unwinding asks: the copy stays until the thread
    /// runs again.
    pub stack_at: u64,
    pub stack_len: u64,
}

impl Kernel {
    /// Maps the sites area of a process with sync sites (the dispatcher
    /// filled in; table and stubs as sites are mapped).
    pub(super) fn map_site_path(&mut self) -> Result<(), MemError> {
        if self.config.sync_points == crate::code::SyncPoints::Calls {
            return Ok(());
        }
        let areas = [
            (SITES_VA, SITES_CODE_SIZE, Prot::RX),
            (SITES_TABLE_VA, SITES_SLOTS * SITES_ENTRY_BYTES, Prot::R),
            (SITES_DATA_VA, SITES_DATA_SIZE, Prot::RW),
        ];
        for (va, len, prot) in areas {
            self.mm.map(
                &self.mem,
                Placement::FixedNoReplace(va),
                len,
                prot,
                Backing::Anon,
                HIDDEN_MAPPING,
            )?;
        }
        self.mm.poke(&self.mem, SITES_VA, dispatcher())?;
        self.write_u64(SITES_DATA_VA + SITES_TICK_COUNT * 8, TICK_PERIOD)?;
        Ok(())
    }

    /// Whether the dispatcher may take the current process's breakpoints:
    /// its sites area is there, and the ring word the breakpoint handler
    /// writes from ring 0 is writable now (a fault there would be ring 0's).
    pub fn site_path_ready(&self) -> bool {
        let named = |va: u64| self.mm.vma_at(va).is_some_and(|v| v.name == HIDDEN_MAPPING);
        named(SITES_VA)
            && named(SITES_TABLE_VA)
            && named(SITES_DATA_VA)
            && self.mm.writable_now(&self.mem, RING_VA)
    }

    /// Publishes the bounds of the mapping the current thread's stack
    /// pointer is in, where the dispatcher's stack window ends.
    pub fn publish_stack_bounds(&mut self) {
        let (rip, rsp) = (self.cur().regs.rip, self.cur().regs.rsp);
        if self.in_site_path(rip) {
            // Inside the dispatcher (after a page fill): its own stack.
            return;
        }
        let (lo, hi) = self.mm.vma_at(rsp).map_or((0, 0), |v| (v.start, v.end));
        for (word, v) in [(SITES_STACK_LO, lo), (SITES_STACK_HI, hi)] {
            let at = SITES_DATA_VA + word * 8;
            if self.mm.peek_u64(&self.mem, at) != Some(v) {
                let _ = self.write_u64(at, v);
            }
        }
    }

    /// Publishes what the dispatcher needs to tell whether a step gives
    /// way, and below which step it may buffer one that does (see
    /// `abi::SITES_YIELD_LIMIT`).
    pub fn publish_yield_limit(&mut self, limit: u64) {
        let last = self.cur().last_site.unwrap_or(0);
        let always = u64::from(self.config.step_rules == crate::code::StepRules::Format6);
        for (word, v) in [
            (SITES_YIELD_LIMIT, limit),
            (SITES_LAST_SITE, last),
            (SITES_RETRY_ALWAYS, always),
        ] {
            let at = SITES_DATA_VA + word * 8;
            if self.mm.peek_u64(&self.mem, at) != Some(v) {
                let _ = self.write_u64(at, v);
            }
        }
    }

    /// Enters the sites the dispatcher can take of a new executable mapping
    /// (`len` bytes at `start` of the object whose site table is `table`,
    /// from file offset `offset`): jumps to their trampolines where it can,
    /// else entries of the table the dispatcher finds breakpoints' sites in.
    pub fn add_site_path(&mut self, start: u64, len: u64, offset: u64, table: &SiteTable) {
        if self
            .mm
            .vma_at(SITES_VA)
            .is_none_or(|v| v.name != HIDDEN_MAPPING)
        {
            return;
        }
        // Ticks always jump; sync sites only when `site_jumps` planned them.
        let jumps = self.mm.enable_jumps(&self.mem, start);
        let Ok(mut used) = self.read_u64(SITES_DATA_VA + SITES_SAVE_USED * 8) else {
            return;
        };
        for site in table.in_range(offset, offset + len) {
            if used >= SITES_MAX {
                break;
            }
            if !site.fast || (jumps && table.trampolines.jump(site.offset).is_some()) {
                continue;
            }
            let va = start + (site.offset - offset);
            let stub_va = SITES_STUBS_VA + used * SITES_STUB_BYTES;
            let Some(p) = out_of_line::plan(site, va, stub_va) else {
                continue;
            };
            // The bytes after the int3, as the dispatcher will compare them.
            let mut after = [0u8; 8];
            if self.mm.peek_patched(&self.mem, va + 1, &mut after).is_err() {
                continue;
            }
            let mut slot = first_slot(va);
            let free = loop {
                let at = SITES_TABLE_VA + slot * SITES_ENTRY_BYTES;
                match self.mm.peek_u64(&self.mem, at) {
                    Some(0) | None => break at,
                    Some(rel) if at.wrapping_add(rel) == va => break at,
                    Some(_) => slot = (slot + 1) % SITES_SLOTS,
                }
            };
            let runtime = table.reports_caller(site.offset);
            let mut e = [0u8; SITES_ENTRY_BYTES as usize];
            e[0..8].copy_from_slice(&va.wrapping_sub(free).to_le_bytes());
            let o = &p.operand;
            e[8..16].copy_from_slice(&o.displacement.to_le_bytes());
            e[16] = o.base;
            e[17] = o.index;
            e[18] = o.scale_shift | if runtime { SITES_RUNTIME_FLAG } else { 0 };
            e[19] = o.size;
            e[20..24].copy_from_slice(&(stub_va.wrapping_sub(free) as u32).to_le_bytes());
            e[24..32].copy_from_slice(&after);
            if self.mm.poke(&self.mem, stub_va, &p.stub).is_err()
                || self.mm.poke(&self.mem, free, &e).is_err()
            {
                return;
            }
            used += 1;
        }
        let _ = self.write_u64(SITES_DATA_VA + SITES_SAVE_USED * 8, used);
    }

    /// A page the dispatcher or a copy touched first, filled: the thread
    /// runs on where it stood (true). The steps it buffered stay in the
    /// ring meanwhile: the dispatcher may be between placing an entry's side
    /// record and counting the entry.
    pub fn site_path_page_fill(
        &mut self,
        regs: &UserRegs,
        error_code: u64,
        fault_addr: u64,
    ) -> bool {
        if !self.in_site_path(regs.rip) {
            return false;
        }
        let access = crate::memory::Access::from_error_code(error_code);
        if self.mm.fault(&self.mem, fault_addr, access).is_err() {
            return false;
        }
        self.cur().regs = *regs;
        true
    }

    /// When an exception arrived in the sites area or a trampoline, the
    /// registers and vector it stands for in the program: the breakpoint
    /// itself when the dispatcher handed it over (its `ud2`) or could not
    /// read what it needed; the site's instruction when its copy faulted; a
    /// moved instruction when its copy faulted. `None` when the exception
    /// is the program's own.
    pub(super) fn site_path_origin(
        &mut self,
        regs: &UserRegs,
        vector: u8,
    ) -> Option<(UserRegs, u8)> {
        let rip = regs.rip;
        if let Some(o) = self.mm.jump_origin(rip) {
            let mut out = *regs;
            out.rip = match o.origin {
                Origin::Site(a) | Origin::Moved(a) => a,
            };
            return Some((out, vector));
        }
        if !in_sites_code(rip) {
            return None;
        }
        if rip < SITES_STUBS_VA {
            let mut w = [0u64; 17];
            for (n, v) in w.iter_mut().enumerate() {
                *v = self.read_u64(SITES_DATA_VA + n as u64 * 8).ok()?;
            }
            let site = self.read_u64(SITES_DATA_VA + SITES_SAVE_SITE * 8).ok()?;
            return Some((UserRegs::from_x86_order(&w, site.wrapping_add(1)), 3));
        }
        let slot = rip - (rip - SITES_STUBS_VA) % SITES_STUB_BYTES;
        let site = self.read_u64(slot + SITES_STUB_BYTES - 8).ok()?;
        let mut scratch = [0u8];
        self.read(slot + SITES_STUB_BYTES - 9, &mut scratch).ok()?;
        let mut out = *regs;
        out.rip = site;
        if scratch[0] < 16 {
            let saved = self.read_u64(SITES_DATA_VA + SITES_SAVE_SCRATCH * 8).ok()?;
            let mut w = out.x86_order();
            w[scratch[0] as usize] = saved;
            out = UserRegs::from_x86_order(&w, out.rip);
        }
        Some((out, vector))
    }

    /// The step of a site the dispatcher buffered, as `sync_step` takes a
    /// breakpoint's. Returns the site and where it is reported, for
    /// [`Kernel::buffered_site_done`].
    pub fn buffered_site_step(&mut self, b: &BufferedSite) -> Option<(Site, Reported)> {
        let (table, site, off) = self.site_at(b.va)?;
        let instr = emulate::decode(site.code(), b.va);
        let fs = self.cur().fs_base;
        let seen = emulate::preview(&instr, &b.regs, fs, &mut self.recorded(b));
        let (mm, mem) = (&self.mm, &self.mem);
        let window = |a: u64| {
            let at = a.checked_sub(b.regs.rsp)?;
            if a % 8 != 0 || at.checked_add(8)? > b.stack_len {
                return None;
            }
            mm.peek_u64(mem, b.stack_at + at)
        };
        let reported = self.user_site(b.va, &table, off, &b.regs, &window);
        self.site_step(&site, b.va, reported.site, seen);
        Some((site, reported))
    }

    /// What the buffered site's instruction did, as `execute_pending_site`
    /// learns it. A fault is the guest's too: its exception follows.
    pub fn buffered_site_done(&mut self, b: &BufferedSite, site: &Site, reported: &Reported) {
        let tid = self.current;
        let instr = emulate::decode(site.code(), b.va);
        let fs = self.cur().fs_base;
        let mut regs = b.regs;
        if let Ok(Some(access)) = emulate::execute(&instr, &mut regs, fs, &mut self.recorded(b)) {
            self.obs.sync_access(tid, reported, site.kind, &access);
        }
    }

    fn recorded(&self, b: &BufferedSite) -> Recorded<'_> {
        Recorded {
            kernel: self,
            addr: b.addr,
            operand: b.operand,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `ud2` the dispatcher ends at when it hands the breakpoint over.
    fn miss_va() -> u64 {
        // SAFETY: both labels are in the section `rewind_sites_start` opens.
        let off =
            unsafe { (&raw const rewind_sites_miss).offset_from(&raw const rewind_sites_start) };
        SITES_VA + off as u64
    }

    #[test]
    fn the_dispatcher_fits_its_page_and_jumps_through_its_target_word_or_to_its_ud2() {
        let d = dispatcher();
        assert!(
            d.len() as u64 <= SITES_STUBS_VA - SITES_VA,
            "{} bytes",
            d.len()
        );
        let miss = (miss_va() - SITES_VA) as usize;
        assert_eq!(&d[miss..miss + 2], &[0x0f, 0x0b], "ud2 at the miss");
        assert_eq!(miss + 2, d.len());
        // The jump before it: jmp *disp32(%rip) to the target word.
        let jmp = miss - 6;
        assert_eq!(&d[jmp..jmp + 2], &[0xff, 0x25]);
        let disp = i32::from_le_bytes(d[jmp + 2..jmp + 6].try_into().unwrap());
        let word = (SITES_VA + miss as u64).wrapping_add(disp as i64 as u64);
        assert_eq!(word, SITES_DATA_VA + SITES_SAVE_TARGET * 8);
    }

    #[test]
    fn the_trampolines_door_is_where_the_contract_says() {
        // SAFETY: both labels are in the section `rewind_sites_start` opens.
        let off =
            unsafe { (&raw const rewind_sites_jump).offset_from(&raw const rewind_sites_start) };
        assert_eq!(off as u64, SITES_JUMP_DOOR);
    }

    #[test]
    fn sites_hash_into_the_table() {
        for va in [0u64, 1, 0x5555_5555_4000, 0x7fff_f7ff_f123, u64::MAX] {
            assert!(first_slot(va) < SITES_SLOTS);
        }
        let slots: std::collections::BTreeSet<u64> = (0..1000u64)
            .map(|i| first_slot(0x5555_5555_4000 + i * 5))
            .collect();
        assert!(slots.len() > 900, "{} distinct slots", slots.len());
    }
}
