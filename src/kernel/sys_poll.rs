//! Waiting for descriptors: poll, ppoll, select and pselect6.

use super::call::{SyscallDef, def};
use super::file::{POLLERR, POLLHUP, POLLIN, POLLNVAL, POLLOUT, readiness, ready_keys};
use super::signal::{read_call_mask, with_call_mask};
use super::thread::Wait;
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(
        libc::SYS_poll,
        sys_poll,
        "pipes end a wait too (the call is taken again); an unconnected stream socket never becomes ready",
    ),
    def(
        libc::SYS_ppoll,
        sys_ppoll,
        "as poll, with the signal mask in force for the call",
    ),
    def(
        libc::SYS_select,
        sys_select,
        "as poll; the timeout is not updated with the time left",
    ),
    def(
        libc::SYS_pselect6,
        sys_pselect6,
        "as select, with the signal mask in force for the call",
    ),
];

// ----- poll

fn poll(k: &mut Kernel, fds: u64, n: u64, deadline: Option<Option<u64>>, nr: u64) -> SysResult {
    if n > k.files().limit as u64 {
        return err(libc::EINVAL);
    }
    let mut ready = 0;
    let mut on = Vec::new();
    for i in 0..n {
        let at = fds + i * 8;
        let mut b = [0u8; 8];
        if k.read(at, &mut b).is_err() {
            return err(libc::EFAULT);
        }
        let fd = i32::from_le_bytes(b[0..4].try_into().unwrap());
        let events = i16::from_le_bytes(b[4..6].try_into().unwrap());
        let revents = if fd < 0 {
            0
        } else {
            readiness(k, fd).map_or(POLLNVAL, |r| r & (events | POLLERR | POLLHUP))
        };
        if revents != 0 {
            ready += 1;
        } else if ready == 0 && fd >= 0 {
            on.extend(ready_keys(k, fd, k.pid));
        }
        if k.write(at + 6, &revents.to_le_bytes()).is_err() {
            return err(libc::EFAULT);
        }
    }
    match deadline {
        _ if ready > 0 => SysResult::Ret(ready),
        Some(Some(d)) if d <= k.now => SysResult::Ret(0),
        Some(d) => SysResult::Block(Wait::Poll {
            deadline: d,
            nr,
            on,
        }),
        None => SysResult::Ret(0),
    }
}

fn sys_poll(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let ms = a[2] as i32;
    let deadline = match ms {
        0 => None,
        ms if ms < 0 => Some(None),
        ms => Some(Some(k.now + ms as u64 * 1_000_000)),
    };
    poll(k, a[0], a[1], deadline, libc::SYS_poll as u64)
}

fn sys_ppoll(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let mask = match read_call_mask(k, a[3], a[4]) {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    let deadline = if a[2] == 0 {
        Some(None)
    } else {
        match super::call::deadline(k, a[2], false, false) {
            Ok(Some(d)) if d == k.now => None,
            Ok(d) => Some(d),
            Err(e) => return err(e),
        }
    };
    with_call_mask(k, mask, |k| {
        poll(k, a[0], a[1], deadline, libc::SYS_ppoll as u64)
    })
}

// ----- select

/// `select` and `pselect6`: the descriptors of three sets (`nfds` bits
/// each) that are ready to read, to write, or with an exceptional
/// condition (never: no descriptor here has out-of-band data).
fn select(
    k: &mut Kernel,
    nfds: u64,
    sets: [u64; 3],
    deadline: Option<Option<u64>>,
    nr: u64,
) -> SysResult {
    if nfds > k.files().limit as u64 || (nfds as i64) < 0 {
        return err(libc::EINVAL);
    }
    let bytes = (nfds as usize).div_ceil(64) * 8;
    let mut wanted = [vec![0u8; bytes], vec![0u8; bytes], vec![0u8; bytes]];
    for (set, want) in sets.iter().zip(wanted.iter_mut()) {
        if *set != 0 && k.read(*set, want).is_err() {
            return err(libc::EFAULT);
        }
    }
    let mut got = [vec![0u8; bytes], vec![0u8; bytes], vec![0u8; bytes]];
    let mut ready = 0;
    let mut on = Vec::new();
    for fd in 0..nfds as usize {
        let (byte, bit) = (fd / 8, 1u8 << (fd % 8));
        let asked: Vec<bool> = wanted.iter().map(|w| w[byte] & bit != 0).collect();
        if !asked.iter().any(|a| *a) {
            continue;
        }
        let Some(r) = readiness(k, fd as i32) else {
            return err(libc::EBADF);
        };
        let now = [
            r & (POLLIN | POLLHUP | POLLERR) != 0,
            r & (POLLOUT | POLLERR) != 0,
            false,
        ];
        for i in 0..3 {
            if asked[i] && now[i] {
                got[i][byte] |= bit;
                ready += 1;
            }
        }
        if ready == 0 {
            on.extend(ready_keys(k, fd as i32, k.pid));
        }
    }
    let give_back = |k: &mut Kernel, got: &[Vec<u8>; 3]| -> Result<(), i32> {
        for (set, g) in sets.iter().zip(got.iter()) {
            if *set != 0 {
                k.write(*set, g).map_err(|_| libc::EFAULT)?;
            }
        }
        Ok(())
    };
    let result = match deadline {
        _ if ready > 0 => ready,
        Some(Some(d)) if d <= k.now => 0,
        // The sets are left as they are: the call is taken up again.
        Some(d) => {
            return SysResult::Block(Wait::Poll {
                deadline: d,
                nr,
                on,
            });
        }
        None => 0,
    };
    match give_back(k, &got) {
        Ok(()) => SysResult::Ret(result),
        Err(e) => err(e),
    }
}

fn sys_select(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let deadline = if a[4] == 0 {
        Some(None)
    } else {
        match super::call::read_timeval(k, a[4]) {
            Ok(0) => None,
            Ok(t) => Some(Some(k.now + t)),
            Err(e) => return err(e),
        }
    };
    select(
        k,
        a[0],
        [a[1], a[2], a[3]],
        deadline,
        libc::SYS_select as u64,
    )
}

fn sys_pselect6(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    // The sixth argument points at { const sigset_t *set; size_t size; }.
    let mask = if a[5] == 0 {
        Ok(None)
    } else {
        match (k.read_u64(a[5]), k.read_u64(a[5] + 8)) {
            (Ok(set), Ok(size)) => read_call_mask(k, set, size),
            _ => Err(libc::EFAULT),
        }
    };
    let mask = match mask {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    let deadline = if a[4] == 0 {
        Some(None)
    } else {
        match super::call::deadline(k, a[4], false, false) {
            Ok(Some(d)) if d == k.now => None,
            Ok(d) => Some(d),
            Err(e) => return err(e),
        }
    };
    with_call_mask(k, mask, |k| {
        select(
            k,
            a[0],
            [a[1], a[2], a[3]],
            deadline,
            libc::SYS_pselect6 as u64,
        )
    })
}
