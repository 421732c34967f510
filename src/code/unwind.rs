//! Backtraces of a stopped guest thread, from the call-frame information
//! (`.eh_frame`) of the objects it runs.
//!
//! A crash report names the faulting instruction, which for `abort()` or a
//! bad `free()` is deep in the C library; the backtrace says which of the
//! program's own functions got there. The unwinder follows the CFA rules of
//! `.eh_frame` (which every x86-64 object carries, debug information or
//! not) for the stack pointer, the frame pointer and the return address, and
//! stops at the first frame it cannot explain. It needs no KVM: it takes the
//! mappings (with their files' bytes) and a function that reads the guest's
//! stack. The bytes may be hostile (a reproducer's): a broken object ends
//! the backtrace, never the program.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use gimli::{BaseAddresses, CfaRule, EhFrame, LittleEndian, RegisterRule, UnwindSection};
use object::{Object, ObjectSection, ObjectSegment};

use super::Mapping;

/// The registers an unwind starts from.
#[derive(Clone, Copy, Debug)]
pub struct Regs {
    pub rip: u64,
    pub rsp: u64,
    pub rbp: u64,
}

/// Frames a backtrace goes to at most.
pub const MAX_FRAMES: usize = 64;

/// The faulting instruction `regs.rip`, then the return addresses of the
/// frames above it, innermost first. `read` reads a guest word (`None` when
/// the address is not mapped).
pub fn backtrace(
    maps: &[Mapping],
    regs: Regs,
    read: &mut dyn FnMut(u64) -> Option<u64>,
) -> Vec<u64> {
    let mut frames = vec![regs.rip];
    let mut objects: HashMap<usize, Option<Cfi>> = HashMap::new();
    let mut ctx = gimli::UnwindContext::new();
    let (mut pc, mut rsp, mut rbp) = (regs.rip, regs.rsp, regs.rbp);
    while frames.len() < MAX_FRAMES {
        // A return address points after its call: look the call up.
        let probe = if frames.len() == 1 {
            pc
        } else {
            pc.wrapping_sub(1)
        };
        let Some(m) = maps.iter().find(|m| m.start <= probe && probe < m.end) else {
            break;
        };
        let cfi = objects
            .entry(std::sync::Arc::as_ptr(&m.data) as usize)
            .or_insert_with(|| Cfi::parse(&m.data));
        let Some(cfi) = cfi.as_ref() else { break };
        let Some(bias) = cfi.bias(m.start, m.file_offset, probe) else {
            break;
        };
        let Some(step) = cfi.step(&mut ctx, probe.wrapping_sub(bias), rsp, rbp, read) else {
            break;
        };
        // The stack grows down: a caller's frame is above its callee's.
        if step.ra == 0 || step.cfa <= rsp {
            break;
        }
        (pc, rsp, rbp) = (step.ra, step.cfa, step.rbp);
        frames.push(pc);
    }
    frames
}

/// One unwound frame: the caller's return address, stack and frame pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub ra: u64,
    pub cfa: u64,
    pub rbp: u64,
}

/// The parsed call-frame information of every object seen, kept for the
/// process (the engine unwinds a frame or two at many sync-site hits). The
/// `Arc` held beside each keeps its address unique.
type CfiCache =
    std::sync::Mutex<HashMap<usize, (std::sync::Arc<Vec<u8>>, Option<std::sync::Arc<Cfi>>)>>;

/// The caller of the frame at `pc`, which lies in a mapping of `data` that
/// starts at `start` with file offset `file_offset`: its return address,
/// stack pointer (the frame's CFA) and frame pointer. `interrupted` says
/// `pc` is the instruction the thread stopped at (else a return address).
#[allow(clippy::too_many_arguments)]
pub fn caller(
    data: &std::sync::Arc<Vec<u8>>,
    start: u64,
    file_offset: u64,
    pc: u64,
    interrupted: bool,
    rsp: u64,
    rbp: u64,
    read: &mut dyn FnMut(u64) -> Option<u64>,
) -> Option<Step> {
    rule(data, start, file_offset, pc, interrupted)?.caller(rsp, rbp, read)
}

/// How to find the caller of a frame at one address: what `.eh_frame`
/// says there, once looked up (the engine unwinds from the same few
/// addresses again and again, and keeps these).
#[derive(Clone, Copy, Debug)]
pub struct FrameRule(Rules);

impl FrameRule {
    /// The caller of a frame whose stack and frame pointers are `rsp` and
    /// `rbp`.
    pub fn caller(
        &self,
        rsp: u64,
        rbp: u64,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Option<Step> {
        let step = self.0.apply(rsp, rbp, read)?;
        (step.ra != 0 && step.cfa > rsp).then_some(step)
    }
}

/// The rule for the frame at `pc` (as for [`caller`]), if `.eh_frame`
/// gives one this unwinder follows.
pub fn rule(
    data: &std::sync::Arc<Vec<u8>>,
    start: u64,
    file_offset: u64,
    pc: u64,
    interrupted: bool,
) -> Option<FrameRule> {
    static CACHE: std::sync::OnceLock<CfiCache> = std::sync::OnceLock::new();
    let cfi = {
        let mut cache = CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        cache
            .entry(std::sync::Arc::as_ptr(data) as usize)
            .or_insert_with(|| (data.clone(), Cfi::parse(data).map(std::sync::Arc::new)))
            .1
            .clone()?
    };
    let probe = if interrupted { pc } else { pc.wrapping_sub(1) };
    let bias = cfi.bias(start, file_offset, probe)?;
    cfi.rules_at(None, probe.wrapping_sub(bias)).map(FrameRule)
}

/// What the unwinder keeps of one object: its load segments and its
/// `.eh_frame` with the addresses gimli needs to decode pointers.
struct Cfi {
    /// `(vaddr, file offset, file size)` of each `PT_LOAD` segment.
    segments: Vec<(u64, u64, u64)>,
    eh_frame: Vec<u8>,
    bases: BaseAddresses,
    /// The rules found for each address so far: finding an address's entry
    /// scans `.eh_frame`, and the engine asks about the same few addresses
    /// again and again.
    rows: std::sync::Mutex<HashMap<u64, Option<Rules>>>,
}

/// How to find a frame's caller at one address.
#[derive(Clone, Copy, Debug)]
struct Rules {
    /// The CFA: this register (RSP or RBP) plus an offset.
    cfa_from_rbp: bool,
    cfa_offset: i64,
    /// Where the return address is, from the CFA.
    ra_offset: i64,
    /// Where the caller's RBP is: saved at an offset from the CFA, equal to
    /// CFA plus an offset, or unchanged.
    rbp: RbpRule,
}

impl Rules {
    /// The caller of a frame whose stack and frame pointers are `rsp` and
    /// `rbp`.
    fn apply(&self, rsp: u64, rbp: u64, read: &mut dyn FnMut(u64) -> Option<u64>) -> Option<Step> {
        let base = if self.cfa_from_rbp { rbp } else { rsp };
        let cfa = base.wrapping_add_signed(self.cfa_offset);
        let ra = read(cfa.wrapping_add_signed(self.ra_offset))?;
        let rbp = match self.rbp {
            RbpRule::Saved(n) => read(cfa.wrapping_add_signed(n))?,
            RbpRule::Value(n) => cfa.wrapping_add_signed(n),
            RbpRule::Same => rbp,
        };
        Some(Step { ra, cfa, rbp })
    }
}

#[derive(Clone, Copy, Debug)]
enum RbpRule {
    Saved(i64),
    Value(i64),
    Same,
}

const RSP: gimli::Register = gimli::X86_64::RSP;
const RBP: gimli::Register = gimli::X86_64::RBP;
const RA: gimli::Register = gimli::X86_64::RA;

impl Cfi {
    fn parse(data: &[u8]) -> Option<Cfi> {
        catch_unwind(AssertUnwindSafe(|| {
            let file = object::read::elf::ElfFile64::<object::Endianness>::parse(data).ok()?;
            let segments = file
                .segments()
                .map(|s| {
                    let (offset, size) = s.file_range();
                    (s.address(), offset, size)
                })
                .collect();
            let eh = file.section_by_name(".eh_frame")?;
            let mut bases = BaseAddresses::default().set_eh_frame(eh.address());
            if let Some(text) = file.section_by_name(".text") {
                bases = bases.set_text(text.address());
            }
            if let Some(got) = file.section_by_name(".got") {
                bases = bases.set_got(got.address());
            }
            Some(Cfi {
                segments,
                eh_frame: eh.data().ok()?.to_vec(),
                bases,
                rows: Default::default(),
            })
        }))
        .ok()
        .flatten()
    }

    /// The load bias of the object mapped at `start` from `file_offset`,
    /// for the address `probe` in that mapping.
    fn bias(&self, start: u64, file_offset: u64, probe: u64) -> Option<u64> {
        let off = file_offset.checked_add(probe.checked_sub(start)?)?;
        let (vaddr, offset, _) = self
            .segments
            .iter()
            .find(|(_, o, size)| *o <= off && off < o.saturating_add(*size))?;
        Some(
            start
                .wrapping_sub(file_offset)
                .wrapping_sub(vaddr.wrapping_sub(*offset)),
        )
    }

    /// Unwinds one frame at object address `at`.
    fn step(
        &self,
        ctx: &mut gimli::UnwindContext<usize>,
        at: u64,
        rsp: u64,
        rbp: u64,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Option<Step> {
        self.rules_at(Some(ctx), at)?.apply(rsp, rbp, read)
    }

    /// The rules at object address `at`, looked up once (with `ctx`, or a
    /// context made for the lookup).
    fn rules_at(&self, ctx: Option<&mut gimli::UnwindContext<usize>>, at: u64) -> Option<Rules> {
        let cached = self
            .rows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&at)
            .copied();
        match cached {
            Some(r) => r,
            None => {
                let r = match ctx {
                    Some(ctx) => self.rules(ctx, at),
                    None => self.rules(&mut gimli::UnwindContext::new(), at),
                };
                self.rows
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(at, r);
                r
            }
        }
    }

    /// The rules `.eh_frame` gives for object address `at`, if it covers it
    /// in a form this unwinder follows.
    fn rules(&self, ctx: &mut gimli::UnwindContext<usize>, at: u64) -> Option<Rules> {
        let eh = EhFrame::new(&self.eh_frame, LittleEndian);
        let row = eh
            .unwind_info_for_address(&self.bases, ctx, at, EhFrame::cie_from_offset)
            .ok()?;
        let (cfa_from_rbp, cfa_offset) = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => match *register {
                RSP => (false, *offset),
                RBP => (true, *offset),
                _ => return None,
            },
            CfaRule::Expression(_) => return None,
        };
        let ra_offset = match row.register(RA) {
            RegisterRule::Offset(n) => n,
            _ => return None,
        };
        let rbp = match row.register(RBP) {
            RegisterRule::Offset(n) => RbpRule::Saved(n),
            RegisterRule::ValOffset(n) => RbpRule::Value(n),
            _ => RbpRule::Same,
        };
        Some(Rules {
            cfa_from_rbp,
            cfa_offset,
            ra_offset,
            rbp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_objects_end_the_backtrace_after_the_first_frame() {
        let maps = vec![Mapping {
            start: 0x1000,
            end: 0x2000,
            file_offset: 0,
            path: "/junk".into(),
            data: std::sync::Arc::new(vec![0x7f, b'E', b'L', b'F', 1, 2, 3]),
        }];
        let regs = Regs {
            rip: 0x1100,
            rsp: 0x8000,
            rbp: 0,
        };
        assert_eq!(backtrace(&maps, regs, &mut |_| Some(0)), vec![0x1100]);
        assert_eq!(backtrace(&[], regs, &mut |_| None), vec![0x1100]);
    }
}
