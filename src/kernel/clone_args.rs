//! What a `clone`, `clone3`, `fork` or `vfork` call asks for, decoded once
//! for the thread and the process families.

use super::Kernel;

pub(super) const CLONE_VM: u64 = 0x100;
pub(super) const CLONE_FS: u64 = 0x200;
pub(super) const CLONE_FILES: u64 = 0x400;
pub(super) const CLONE_SIGHAND: u64 = 0x800;
pub(super) const CLONE_VFORK: u64 = 0x4000;
pub(super) const CLONE_THREAD: u64 = 0x10000;
pub(super) const CLONE_SYSVSEM: u64 = 0x40000;
pub(super) const CLONE_SETTLS: u64 = 0x80000;
pub(super) const CLONE_PARENT_SETTID: u64 = 0x100000;
pub(super) const CLONE_CHILD_CLEARTID: u64 = 0x200000;
pub(super) const CLONE_DETACHED: u64 = 0x400000;
pub(super) const CLONE_CHILD_SETTID: u64 = 0x1000000;
pub(super) const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

/// What `clone` and `clone3` ask for, for a thread or a process.
#[derive(Default)]
pub(super) struct CloneArgs {
    pub flags: u64,
    /// The signal the parent gets when a child process ends.
    pub exit_signal: u32,
    pub stack: u64,
    pub parent_tid: u64,
    pub child_tid: u64,
    pub tls: u64,
}

impl CloneArgs {
    /// `clone`'s registers, in x86-64 order: flags, stack, parent_tid,
    /// child_tid, tls.
    pub fn of_clone(a: [u64; 6]) -> CloneArgs {
        CloneArgs {
            flags: a[0] & !0xff, // the low byte is the exit signal
            exit_signal: (a[0] & 0xff) as u32,
            stack: a[1],
            parent_tid: a[2],
            child_tid: a[3],
            tls: a[4],
        }
    }

    /// `clone3`'s `struct clone_args` of `size` bytes at `ptr`.
    pub fn read_clone3(k: &mut Kernel, ptr: u64, size: u64) -> Result<CloneArgs, i32> {
        if size < 64 {
            return Err(libc::EINVAL);
        }
        let mut w = [0u64; 8];
        for (i, v) in w.iter_mut().enumerate() {
            *v = k.read_u64(ptr + i as u64 * 8).map_err(|_| libc::EFAULT)?;
        }
        // struct clone_args: flags, pidfd, child_tid, parent_tid,
        // exit_signal, stack, stack_size, tls.
        let stack = if w[5] != 0 { w[5] + w[6] } else { 0 };
        Ok(CloneArgs {
            flags: w[0],
            exit_signal: w[4] as u32,
            stack,
            parent_tid: w[3],
            child_tid: w[2],
            tls: w[7],
        })
    }
}
