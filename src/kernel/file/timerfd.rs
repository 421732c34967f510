//! Timer descriptors (`timerfd`): reading the expirations of their timer
//! (the timers are `kernel::timers`').

use crate::ids::Pid;
use crate::kernel::files::FileKind;
use crate::kernel::ready::Ready;
use crate::kernel::timers::Slot;
use crate::kernel::{Kernel, SysResult, err};

/// The timer behind descriptor `fd`: its key and whether it counts on the
/// real-time clock.
pub(in crate::kernel) fn timer_of(k: &Kernel, fd: u64) -> Result<((Pid, Slot), bool), i32> {
    match k.files().get(fd as i32).map(|f| f.kind.clone()) {
        Some(FileKind::TimerFd { id, realtime }) => {
            let key = k.timers.fd_key(id).unwrap_or((k.pid, Slot::Fd(id)));
            Ok((key, realtime))
        }
        Some(_) => Err(libc::EINVAL),
        None => Err(libc::EBADF),
    }
}

/// `read` of a timer descriptor: the expirations since the last read.
pub(in crate::kernel) fn read(
    k: &mut Kernel,
    fd: i32,
    buf: u64,
    len: u64,
    nonblock: bool,
) -> SysResult {
    if len < 8 {
        return err(libc::EINVAL);
    }
    let (key, _) = match timer_of(k, fd as u64) {
        Ok(t) => t,
        Err(e) => return err(e),
    };
    let n = k.timers.get(&key).map_or(0, |t| t.expirations);
    if n == 0 {
        let Slot::Fd(id) = key.1 else {
            unreachable!("a timer descriptor's timer")
        };
        return super::wait_readable(nonblock, fd, Ready::Timer(id));
    }
    if k.write_u64(buf, n).is_err() {
        return err(libc::EFAULT);
    }
    k.timers.update(&key, |t| t.expirations = 0);
    SysResult::Ret(8)
}
