//! The hint ring's bookkeeping (see `arch::abi`): before the engine resumes
//! a thread it publishes how far the shim and the site dispatcher may
//! buffer steps, and at the next exit it takes what they buffered, in
//! order, as the steps they are.

use crate::arch::abi;
use crate::arch::cpu::UserRegs;
use crate::kernel::Kernel;
use crate::kernel::site_path::BufferedSite;

/// A step buffered in the ring.
#[derive(Clone, Debug)]
pub enum Buffered {
    /// A shim hint: its operation, object, site and value.
    Hint([u64; 4]),
    /// A sync site the dispatcher took.
    Site(BufferedSite),
}

fn word(k: &mut Kernel, w: u64) -> u64 {
    k.read_u64(abi::RING_VA + w * 8).unwrap_or(0)
}

fn set_word(k: &mut Kernel, w: u64, v: u64) {
    let _ = k.write_u64(abi::RING_VA + w * 8, v);
}

/// Takes the steps buffered since the last exit, oldest first.
pub fn take(k: &mut Kernel) -> Vec<Buffered> {
    let (head, tail) = (word(k, abi::RING_HEAD), word(k, abi::RING_TAIL));
    let n = tail.wrapping_sub(head).min(abi::RING_ENTRIES);
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let slot = (head + i) % abi::RING_ENTRIES;
        let at = abi::RING_VA + (abi::RING_HEADER_WORDS + slot * abi::RING_ENTRY_WORDS) * 8;
        let mut e = [0u64; 4];
        for (j, w) in e.iter_mut().enumerate() {
            *w = k.read_u64(at + j as u64 * 8).unwrap_or(0);
        }
        out.push(match e[0] {
            abi::RING_OP_SITE => Buffered::Site(site_record(k, i, e)),
            _ => Buffered::Hint(e),
        });
    }
    if n > 0 {
        set_word(k, abi::RING_HEAD, tail);
    }
    out
}

/// A site entry with its side record (by its place in the batch): the
/// registers at the breakpoint and the operand as the dispatcher read it.
fn site_record(k: &mut Kernel, place: u64, [_, addr, va, _]: [u64; 4]) -> BufferedSite {
    let at = abi::SITES_DATA_VA + abi::SITES_SIDE_OFFSET + place * abi::SITES_SIDE_WORDS * 8;
    let mut w = [0u64; 17];
    for (j, v) in w.iter_mut().enumerate() {
        *v = k.read_u64(at + j as u64 * 8).unwrap_or(0);
    }
    let mut operand = [0u8; 16];
    let _ = k.read(at + 17 * 8, &mut operand);
    // Empty but for a site inside a runtime.
    let len = k
        .read_u64(at + 19 * 8)
        .unwrap_or(0)
        .min(abi::SITES_STACK_WINDOW);
    let mut stack = vec![0u8; len as usize];
    let _ = k.read(at + 20 * 8, &mut stack);
    BufferedSite {
        va,
        regs: UserRegs::from_x86_order(&w, va),
        addr,
        operand,
        stack,
    }
}

/// Lets the shim and the dispatcher buffer steps below `limit_step`.
pub fn publish(k: &mut Kernel, limit_step: u64) {
    let step = k.observer().step();
    set_word(k, abi::RING_BASE_STEP, step);
    set_word(k, abi::RING_LIMIT_STEP, limit_step);
}
