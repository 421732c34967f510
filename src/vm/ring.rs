//! The hint ring's bookkeeping (see `arch::abi`): before the engine resumes
//! a thread it publishes how far the shim may buffer hints, and at the next
//! exit it takes what the shim buffered, in order, as the steps they are.

use crate::arch::abi;
use crate::kernel::Kernel;

fn word(k: &mut Kernel, w: u64) -> u64 {
    k.read_u64(abi::RING_VA + w * 8).unwrap_or(0)
}

fn set_word(k: &mut Kernel, w: u64, v: u64) {
    let _ = k.write_u64(abi::RING_VA + w * 8, v);
}

/// Takes the hints the shim buffered since the last exit, oldest first:
/// each its operation, object, site and value.
pub fn take(k: &mut Kernel) -> Vec<[u64; 4]> {
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
        out.push(e);
    }
    if n > 0 {
        set_word(k, abi::RING_HEAD, tail);
    }
    out
}

/// Lets the shim buffer hints that would be steps below `limit_step`.
pub fn publish(k: &mut Kernel, limit_step: u64) {
    let step = k.observer().step();
    set_word(k, abi::RING_BASE_STEP, step);
    set_word(k, abi::RING_LIMIT_STEP, limit_step);
}
