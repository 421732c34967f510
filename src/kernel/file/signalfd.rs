//! Signal descriptors (`signalfd`): reading the pending signals of a mask
//! as `signalfd_siginfo` records.

use crate::kernel::ready::Ready;
use crate::kernel::signal;
use crate::kernel::thread::Tid;
use crate::kernel::{Kernel, SysResult, err};

/// Whether a signal of `mask` waits for the current process (its thread
/// first, as Linux reads the thread's queue before the process's).
pub(in crate::kernel) fn signal_waiting(k: &Kernel, mask: u64) -> bool {
    k.threads.with_pending(k.pid).any(|t| {
        k.threads[&t]
            .pending()
            .iter()
            .any(|s| mask & signal::bit(s.signo) != 0)
    })
}

/// `read` of a signal descriptor: takes pending signals of its mask, one
/// `signalfd_siginfo` (128 bytes) each.
pub(in crate::kernel) fn read(
    k: &mut Kernel,
    fd: i32,
    mask: u64,
    buf: u64,
    len: u64,
    nonblock: bool,
) -> SysResult {
    if len < 128 {
        return err(libc::EINVAL);
    }
    let pid = k.pid;
    let me = k.current;
    // Only threads with signals pending have any to give.
    let mut order: Vec<Tid> = vec![me];
    order.extend(k.threads.with_pending(pid).filter(|t| *t != me));
    k.changes.count(order.len() as u64);
    let mut out = Vec::new();
    for tid in order {
        while out.len() as u64 + 128 <= len {
            let Some(t) = k.threads.get(&tid) else {
                break;
            };
            let Some(i) = t
                .pending()
                .iter()
                .position(|s| mask & signal::bit(s.signo) != 0)
            else {
                break;
            };
            let Some(s) = k.threads.take_pending(tid, i) else {
                break;
            };
            let mut info = [0u8; 128];
            info[0..4].copy_from_slice(&s.signo.to_le_bytes());
            info[8..12].copy_from_slice(&s.code.to_le_bytes());
            info[12..16].copy_from_slice(&s.sender.to_le_bytes());
            info[56..64].copy_from_slice(&s.addr.to_le_bytes());
            out.extend_from_slice(&info);
        }
    }
    if out.is_empty() {
        return super::wait_readable(nonblock, fd, Ready::Signals(pid));
    }
    if k.write(buf, &out).is_err() {
        return err(libc::EFAULT);
    }
    SysResult::Ret(out.len() as i64)
}
