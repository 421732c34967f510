//! What a finished run left that its signature and its story need beyond
//! its report: where files were mapped, and a crash's backtrace.

use crate::code::unwind;
use crate::ids::Tid;
use crate::observe::outcome::Outcome;
use crate::report::signature::{self, Signature};
use crate::report::symbols::{Mapping, Symbolizer};
use crate::vm::{RunReport, Vm};

/// What a finished run left that signatures and stories need beyond its
/// report: where files were mapped, and a crash's backtrace.
pub struct RunFacts {
    pub mappings: Vec<Mapping>,
    /// For a crash: the faulting instruction and the return addresses.
    pub backtrace: Vec<u64>,
    /// File name of the program's own object.
    pub exe_object: String,
}

impl RunFacts {
    /// The facts of the run `vm` just made.
    pub fn of(vm: &Vm, report: &RunReport) -> RunFacts {
        let k = vm.kernel();
        let mappings = crate::report::mappings(k.mm());
        let backtrace = match &report.outcome {
            Outcome::Crashed { thread, .. } => match k.threads().get(&Tid(*thread)) {
                Some(t) => unwind::backtrace(
                    &mappings,
                    unwind::Regs {
                        rip: t.regs.rip,
                        rsp: t.regs.rsp,
                        rbp: t.regs.rbp,
                    },
                    &mut |a| k.mm().peek_u64(k.mem(), a),
                ),
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        RunFacts {
            mappings,
            backtrace,
            exe_object: base_name(&k.config().exe).to_string(),
        }
    }

    /// The failure signature of the run.
    pub fn signature(&self, report: &RunReport, sym: &mut Symbolizer) -> Signature {
        let facts = signature::Facts {
            outcome: &report.outcome,
            potential_deadlocks: &report.potential_deadlocks,
            recent_events: &report.recent_events,
            backtrace: &self.backtrace,
            exe_object: &self.exe_object,
        };
        let maps = &self.mappings;
        signature::compute(&facts, &mut |a, call| {
            if call {
                sym.locate_call_site(maps, a)
            } else {
                sym.locate(maps, a)
            }
        })
    }
}

fn base_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}
