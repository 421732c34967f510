//! Sync sites in the running program: the step a thread takes when it
//! reaches a patched instruction, and the instruction's execution when the
//! thread runs again (see `code::sites` and `code::sites::emulate`).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::thread::{PendingSignal, PendingSite};
use super::{FpuAccess, Kernel};
use crate::arch::abi;
use crate::arch::cpu::UserRegs;
use crate::code::sites::emulate::{self, Fault};
use crate::code::{Site, SiteTable, unwind};
use crate::ids::GuestAddr;
use crate::memory::Backing;
use crate::observe::Reported;
use crate::observe::trace::{Event, Operation};

/// Frames a report looks through for the caller outside the runtime.
const MAX_RUNTIME_FRAMES: usize = 12;

/// One frame of the unwinding from a sync site (see `walk_callers`).
struct Frame {
    /// 0 for the site itself, then one more per caller.
    depth: usize,
    /// The site's address, or a return address.
    pc: u64,
    facts: FrameFacts,
}

/// What an object's code says of a frame at one address: pure functions of
/// the object's bytes, kept once looked up (the engine unwinds from the same
/// few addresses at every step of a site inside a runtime).
#[derive(Clone, Copy, Debug)]
pub(super) struct FrameFacts {
    /// How to find the caller.
    rule: Option<unwind::FrameRule>,
    /// The function is a language runtime's, by symbol.
    runtime: bool,
    /// A return address's call is the program's code inlined into that
    /// runtime function (its debug information says so).
    users_call: bool,
    /// What the function's name says it does to a lock.
    lock_role: Option<crate::code::sites::acquire::LockRole>,
}

/// [`FrameFacts`] by object (its bytes' address, the bytes kept alive so
/// the address stays theirs) and file offset of the instruction (a return
/// address's call), shared by every copy of a kernel.
#[derive(Default)]
pub(super) struct FrameCache {
    objects: HashMap<usize, Arc<Vec<u8>>>,
    facts: HashMap<(usize, u64, bool), FrameFacts>,
}

/// Guest memory as a thread sees it, for the emulator.
struct ThreadMemory<'k>(&'k mut Kernel);

impl emulate::Memory for ThreadMemory<'_> {
    fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.0.read(va, buf).map_err(|_| Fault::Page { addr: va })
    }
    fn write(&mut self, va: u64, buf: &[u8]) -> Result<(), Fault> {
        self.0.write(va, buf).map_err(|_| Fault::Page { addr: va })
    }
}

impl Kernel {
    /// The sync site whose instruction starts at `va`, if one is patched
    /// there, with its object's table and its file offset.
    pub fn site_at(&self, va: u64) -> Option<(Arc<SiteTable>, Site, u64)> {
        let v = self.mm.vma_at(va)?;
        let Backing::File {
            offset,
            sites: Some(table),
            ..
        } = &v.backing
        else {
            return None;
        };
        let off = offset + (va - v.start);
        let site = *table.at(off)?;
        Some((table.clone(), site, off))
    }

    /// The current thread trapped at the sync site at `va`: one step, taken
    /// before the instruction runs. Returns false when no site is patched
    /// at `va` (the `int3` is the program's own).
    pub fn sync_step(&mut self, va: u64) -> bool {
        let Some((table, site, off)) = self.site_at(va) else {
            return false;
        };
        self.cur().regs.rip = va;
        let instr = emulate::decode(site.code(), va);
        let (regs, fs) = (self.cur().regs, self.cur().fs_base);
        let seen = emulate::preview(&instr, &regs, fs, &mut ThreadMemory(self));
        let (mm, mem) = (&self.mm, &self.mem);
        // The stack as the program would read it, within the window the
        // site dispatcher copies (see `site_path`).
        let stack = mm.vma_at(regs.rsp).filter(|v| v.prot.accessible());
        let end = stack.map_or(0, |v| {
            v.end.min(regs.rsp.saturating_add(abi::SITES_STACK_WINDOW))
        });
        let window = |a: u64| {
            if a < regs.rsp || a.checked_add(8)? > end || a % 8 != 0 {
                return None;
            }
            let mut b = [0u8; 8];
            mm.peek_patched(mem, a, &mut b).ok()?;
            Some(u64::from_le_bytes(b))
        };
        let reported = self.user_site(va, &table, off, &regs, &window);
        self.site_step(&site, va, reported.site, seen);
        self.cur().pending_site = Some(PendingSite { va, site, reported });
        true
    }

    /// Whether the current thread's step at `site` (at `va`) gives way: a
    /// spin always; an atomic in a retry loop when the thread retries it
    /// (at every hit under the format-6 rules). The site dispatcher decides
    /// alike (`guest/sites.S`), from the ring and the thread's last site
    /// published before it ran.
    pub(super) fn gives_way(&self, site: &Site, va: u64) -> bool {
        match site.kind {
            _ if !site.spins => false,
            crate::code::SiteKind::Spin => true,
            _ => {
                self.config.step_rules == crate::code::StepRules::Format6
                    || self.threads[&self.current].last_site == Some(va)
            }
        }
    }

    /// The step of the current thread at `site` (at `va`), reported at
    /// `user_site`, whose operand's address and value are `seen`.
    pub(super) fn site_step(
        &mut self,
        site: &Site,
        va: u64,
        user_site: u64,
        seen: Option<(u64, u64)>,
    ) {
        let tid = self.current;
        let gives_way = self.gives_way(site, va);
        self.begin_step();
        self.obs.syscall_step(tid, false);
        let t = self.cur();
        t.yielded = gives_way;
        t.last_site = Some(va);
        let event = Event {
            step: self.obs.step(),
            thread: tid,
            op: Operation::Sync { site: site.kind },
            object: seen.map(|(addr, _)| addr),
            site: GuestAddr(user_site),
            result: Some(0),
            value: seen.map_or(0, |(_, v)| v),
        };
        self.finish_step(event);
    }

    /// A tick: the loop's site at `site` was passed [`abi::TICK_PERIOD`]
    /// times since the process's last. The thread stands at the site again
    /// (its trampoline counts anew from there), virtual time moves on by
    /// what the passes stand for, and another thread may be chosen. Its
    /// value is the registers' digest: a loop that goes round the same
    /// state shows no progress.
    pub(super) fn tick_step(&mut self, mut regs: UserRegs, site: u64) {
        regs.rip = site;
        self.cur().regs = regs;
        let counter = abi::SITES_DATA_VA + abi::SITES_TICK_COUNT * 8;
        let _ = self.write_u64(counter, abi::TICK_PERIOD);
        let tid = self.current;
        self.begin_step();
        let t = self.cur();
        t.ticked = true;
        t.ticks_in_a_row += 1;
        self.now += super::TICK_NS - super::STEP_QUANTUM_NS;
        let mut digest = xxhash_rust::xxh3::Xxh3::new();
        for w in regs.x86_order() {
            digest.update(&w.to_le_bytes());
        }
        let event = Event {
            step: self.obs.step(),
            thread: tid,
            op: Operation::Sync {
                site: crate::code::SiteKind::Tick,
            },
            object: None,
            site: GuestAddr(site),
            result: Some(0),
            value: digest.digest(),
        };
        self.finish_step(event);
    }

    /// Where a site's step is reported: one past its first byte (a
    /// return-address like value, located the way call sites are), or,
    /// inside a language runtime's function (an unoptimized
    /// `AtomicU32::compare_exchange`, `std::sync::Mutex::lock`), the return
    /// address into the first caller outside it, found by unwinding. The
    /// lock it takes or releases is said to be taken further out still,
    /// past the program's own functions named as locks (a C `spin_lock`),
    /// at their call. And what the site's code or the names of the callers
    /// passed on the way say it does to a lock (an unoptimized
    /// `Mutex::lock` calls the function holding the atomic).
    pub(super) fn user_site(
        &self,
        va: u64,
        table: &SiteTable,
        off: u64,
        regs: &UserRegs,
        stack: &dyn Fn(u64) -> Option<u64>,
    ) -> Reported {
        let mut found = self.program_site(va, table, off, regs, stack);
        if self.config.runtime_caller_sites {
            found.site = self.runtime_caller_site(va, table, off, regs, stack);
        }
        found
    }

    /// [`Kernel::user_site`] as reproducers of format 6 and later report it.
    fn program_site(
        &self,
        va: u64,
        table: &SiteTable,
        off: u64,
        regs: &UserRegs,
        stack: &dyn Fn(u64) -> Option<u64>,
    ) -> Reported {
        let own = Reported {
            site: va + 1,
            lock_site: va + 1,
            role: table.at(off).and_then(|s| s.acquires),
            instruction: va + 1,
        };
        if !table.reports_caller(off) {
            return own;
        }
        let mut found = own;
        let mut site = None;
        self.walk_callers(va, regs, stack, &mut |f| {
            if f.depth == 0 {
                return ControlFlow::Continue(());
            }
            let lock_function = f.facts.lock_role;
            // A runtime function's call may be the program's code inlined
            // into it (a thread's closure into `std::thread`'s).
            let runtime = f.facts.runtime && !f.facts.users_call;
            found.role = found.role.or(lock_function);
            if !runtime && site.is_none() {
                site = Some(f.pc);
            }
            if !runtime && lock_function.is_none() {
                found.lock_site = f.pc;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        // A runtime site whose caller could not be found is its own; a
        // lock function's whose caller could not, the site's.
        found.site = site.unwrap_or(own.site);
        if found.lock_site == own.lock_site {
            found.lock_site = found.site;
        }
        found
    }

    /// Where reproducers of format 5 and earlier reported a site: inside a
    /// runtime function (by its symbol), at the first caller outside one;
    /// else, or when no such caller is found, at the site itself.
    fn runtime_caller_site(
        &self,
        va: u64,
        table: &SiteTable,
        off: u64,
        regs: &UserRegs,
        stack: &dyn Fn(u64) -> Option<u64>,
    ) -> u64 {
        let own = va + 1;
        if table.is_runtime(off) != Some(true) {
            return own;
        }
        let mut caller = None;
        self.walk_callers(va, regs, stack, &mut |f| {
            if f.depth > 0 && !f.facts.runtime {
                caller = Some(f.pc);
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        caller.unwrap_or(own)
    }

    /// Unwinds from the site at `va` through at most [`MAX_RUNTIME_FRAMES`]
    /// frames of file-backed code, showing each to `visit` (the site's own
    /// at depth 0, then return addresses) until it breaks, a frame is not
    /// in a file's code, or unwinding fails.
    fn walk_callers(
        &self,
        va: u64,
        regs: &UserRegs,
        stack: &dyn Fn(u64) -> Option<u64>,
        visit: &mut dyn FnMut(&Frame) -> ControlFlow<()>,
    ) {
        let (mut pc, mut rsp, mut rbp) = (va, regs.rsp, regs.rbp);
        for depth in 0..MAX_RUNTIME_FRAMES {
            let Some(v) = self.mm.vma_at(pc) else {
                return;
            };
            let Backing::File {
                data,
                offset,
                sites,
                ..
            } = &v.backing
            else {
                return;
            };
            // A return address is looked up at its call instruction.
            let at = offset + (if depth == 0 { pc } else { pc - 1 } - v.start);
            let key = (Arc::as_ptr(data) as usize, at, depth == 0);
            let cached = self
                .frames
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .facts
                .get(&key)
                .copied();
            let facts = match cached {
                Some(f) => f,
                None => {
                    let sites = sites.as_deref();
                    let users_call = depth > 0
                        && sites
                            .and_then(|t| t.vaddr_of(at + 1))
                            .is_some_and(|a| crate::code::inline::is_users_call(data, a));
                    let f = FrameFacts {
                        rule: unwind::rule(data, v.start, *offset, pc, depth == 0),
                        runtime: sites.and_then(|t| t.is_runtime(at)) == Some(true),
                        users_call,
                        lock_role: sites.and_then(|t| t.lock_role(at)),
                    };
                    let mut cache = self.frames.lock().unwrap_or_else(|e| e.into_inner());
                    cache.objects.entry(key.0).or_insert_with(|| data.clone());
                    cache.facts.insert(key, f);
                    f
                }
            };
            if visit(&Frame { depth, pc, facts }).is_break() {
                return;
            }
            let mut read = |a: u64| stack(a);
            let Some(step) = facts.rule.and_then(|r| r.caller(rsp, rbp, &mut read)) else {
                return;
            };
            (pc, rsp, rbp) = (step.ra, step.cfa, step.rbp);
        }
    }

    /// Executes the instruction of the sync site the current thread stopped
    /// at, if any, before it runs on: the thread then resumes after it (or
    /// takes the signal its memory access raises).
    pub fn execute_pending_site(&mut self, cpu: &mut dyn FpuAccess) {
        let tid = self.current;
        let Some(p) = self.cur().pending_site.take() else {
            return;
        };
        let instr = emulate::decode(p.site.code(), p.va);
        let mut regs = self.cur().regs;
        let fs = self.cur().fs_base;
        match emulate::execute(&instr, &mut regs, fs, &mut ThreadMemory(self)) {
            Ok(access) => {
                // The instructions after a jump's site run in its
                // trampoline.
                if regs.rip == p.va + u64::from(p.site.len) {
                    if let Some((jump, bias)) = self.mm.jump_at(p.va) {
                        regs.rip = jump.after.wrapping_add(bias);
                    }
                }
                self.cur().regs = regs;
                if let Some(a) = access {
                    self.obs.sync_access(tid, &p.reported, p.site.kind, &a);
                }
            }
            Err(fault) => {
                let signal = match fault {
                    Fault::Page { addr } => {
                        let code = match self.mm.vma_at(addr) {
                            Some(_) => 2, // SEGV_ACCERR
                            None => 1,    // SEGV_MAPERR
                        };
                        PendingSignal {
                            signo: libc::SIGSEGV as u32,
                            code,
                            addr,
                            sender: 0,
                            forced: true,
                        }
                    }
                    Fault::General => PendingSignal {
                        signo: libc::SIGSEGV as u32,
                        code: 0x80, // SI_KERNEL
                        addr: 0,
                        sender: 0,
                        forced: true,
                    },
                };
                self.threads.push_pending(self.current, signal);
                self.deliver_signals(cpu);
            }
        }
    }
}
