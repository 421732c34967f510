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
    if n == 0 {
        return Vec::new();
    }
    // The entries in at most two runs (the ring wraps), each read at once.
    let mut words = vec![0u64; (n * abi::RING_ENTRY_WORDS) as usize];
    let first = head % abi::RING_ENTRIES;
    let run = n.min(abi::RING_ENTRIES - first);
    let entries = abi::RING_VA + abi::RING_HEADER_WORDS * 8;
    let split = (run * abi::RING_ENTRY_WORDS) as usize;
    read_words(
        k,
        entries + first * abi::RING_ENTRY_WORDS * 8,
        &mut words[..split],
    );
    read_words(k, entries, &mut words[split..]);
    let out = words
        .chunks_exact(abi::RING_ENTRY_WORDS as usize)
        .enumerate()
        .map(|(i, e)| match e[0] {
            abi::RING_OP_SITE => Buffered::Site(site_record(k, i as u64, e[1], e[2])),
            _ => Buffered::Hint([e[0], e[1], e[2], e[3]]),
        })
        .collect();
    set_word(k, abi::RING_HEAD, tail);
    out
}

fn read_words(k: &mut Kernel, at: u64, words: &mut [u64]) {
    if words.is_empty() {
        return;
    }
    let mut bytes = vec![0u8; words.len() * 8];
    let _ = k.read(at, &mut bytes);
    for (w, b) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_le_bytes(b.try_into().unwrap());
    }
}

/// Words of a side record before its stack window: the 16 registers and
/// rflags, the operand's 16 bytes, the window's length.
const SIDE_HEAD_WORDS: usize = 20;

/// A site entry (operand address `addr`, site `va`) with its side record
/// (by its place in the batch): the registers at the breakpoint and the
/// operand as the dispatcher read it.
fn site_record(k: &mut Kernel, place: u64, addr: u64, va: u64) -> BufferedSite {
    let at = abi::SITES_DATA_VA + abi::SITES_SIDE_OFFSET + place * abi::SITES_SIDE_WORDS * 8;
    let mut w = [0u64; SIDE_HEAD_WORDS];
    read_words(k, at, &mut w);
    let mut operand = [0u8; 16];
    operand[..8].copy_from_slice(&w[17].to_le_bytes());
    operand[8..].copy_from_slice(&w[18].to_le_bytes());
    let regs: [u64; 17] = w[..17].try_into().unwrap();
    BufferedSite {
        va,
        regs: UserRegs::from_x86_order(&regs, va),
        addr,
        operand,
        stack_at: at + SIDE_HEAD_WORDS as u64 * 8,
        // Empty but for a site inside a runtime.
        stack_len: w[19].min(abi::SITES_STACK_WINDOW),
    }
}

/// Lets the shim and the dispatcher buffer steps below `limit_step`.
pub fn publish(k: &mut Kernel, limit_step: u64) {
    let step = k.step();
    set_word(k, abi::RING_BASE_STEP, step);
    set_word(k, abi::RING_LIMIT_STEP, limit_step);
}
