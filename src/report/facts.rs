//! What a finished run left that its signature and its story need beyond
//! its report: where files were mapped, and a crash's backtrace.

use std::collections::BTreeMap;

use crate::code::unwind;
use crate::engine::{RunReport, Vm};
use crate::ids::Tid;
use crate::kernel::Kernel;
use crate::observe::outcome::Outcome;
use crate::report::signature::{self, Naming, Signature};
use crate::report::symbols::{Mapping, Symbolizer};

/// What a finished run left that signatures and stories need beyond its
/// report: where files were mapped, and a crash's backtrace.
pub struct RunFacts {
    pub mappings: Vec<Mapping>,
    /// For a crash: the faulting instruction and the return addresses.
    pub backtrace: Vec<u64>,
    /// File name of the program's own object.
    pub exe_object: String,
    /// For a deadlock: each blocked thread's stack (where it stopped, then
    /// the return addresses), for the threads of the process the run
    /// ended in, so a wait inside a library is named by its caller.
    pub stacks: BTreeMap<u32, Vec<u64>>,
}

impl RunFacts {
    /// The facts of the run `vm` just made.
    pub fn of(vm: &Vm, report: &RunReport) -> RunFacts {
        let k = vm.kernel();
        let mappings = crate::report::mappings(k.mm());
        let backtrace = match &report.outcome {
            Outcome::Crashed { thread, .. } => stacks(vm, &mappings, [*thread])
                .remove(thread)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let stacks = match &report.outcome {
            Outcome::Deadlocked { threads, .. } => {
                stacks(vm, &mappings, threads.iter().map(|b| b.thread.0))
            }
            _ => BTreeMap::new(),
        };
        RunFacts {
            mappings,
            backtrace,
            exe_object: base_name(k.program()).to_string(),
            stacks,
        }
    }

    /// The failure signature of the run, its sites named as `naming` says
    /// (a new signature's: [`Naming::default`]; one to compare with a
    /// reproducer's: the reproducer's).
    pub fn signature(&self, report: &RunReport, sym: &mut Symbolizer, naming: Naming) -> Signature {
        let facts = signature::Facts {
            outcome: &report.outcome,
            failure: report.failure.as_ref(),
            potential_deadlocks: &report.potential_deadlocks,
            recent_events: &report.recent_events,
            backtrace: &self.backtrace,
            exe_object: &self.exe_object,
            stacks: &self.stacks,
            output: [&report.stdout, &report.stderr],
            naming,
        };
        let maps = &self.mappings;
        signature::compute(&facts, &mut |a, call| sym.locate_frame(maps, a, call))
    }
}

/// The stacks of `threads` (where each stopped, then its return
/// addresses), for those of the process the run ended in: the others'
/// memory is not the one mapped now.
pub fn stacks(
    vm: &Vm,
    mappings: &[Mapping],
    threads: impl IntoIterator<Item = u32>,
) -> BTreeMap<u32, Vec<u64>> {
    let k = vm.kernel();
    let here = k.threads().get(&k.current()).map(|t| t.pid);
    threads
        .into_iter()
        .filter_map(|tid| {
            let t = k.threads().get(&Tid(tid)).filter(|t| Some(t.pid) == here)?;
            let regs = unwind::Regs {
                rip: t.regs.rip,
                rsp: t.regs.rsp,
                rbp: t.regs.rbp,
            };
            let stack = unwind::backtrace(mappings, regs, &mut |a| k.mm().peek_u64(k.mem(), a));
            Some((tid, stack))
        })
        .collect()
}

/// A path's last component: an object's name in [`Location::object`].
///
/// [`Location::object`]: crate::report::symbols::Location::object
pub fn base_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Thread `tid`'s stack as a debugger prints it, a frame a line,
/// innermost first: `#0  0x401136 in lock_b (abba.c:20)`, a frame the
/// symbols cannot name by its object and offset. Empty for a thread that
/// has ended.
pub fn stack_text(k: &Kernel, tid: Tid, sym: &mut Symbolizer) -> String {
    let Some(t) = k.threads().get(&tid).filter(|t| t.is_alive()) else {
        return String::new();
    };
    let Some(space) = k.space_of(t.pid) else {
        return String::new();
    };
    let maps = crate::report::mappings(space);
    let regs = unwind::Regs {
        rip: t.regs.rip,
        rsp: t.regs.rsp,
        rbp: t.regs.rbp,
    };
    let frames = unwind::backtrace(&maps, regs, &mut |a| space.peek_u64(k.mem(), a));
    let mut out = String::new();
    for (i, addr) in frames.into_iter().enumerate() {
        let at = sym.locate_frame(&maps, addr, i > 0);
        out.push_str(&format!("#{i:<2} {addr:#014x} in {}\n", at.short()));
    }
    out
}
