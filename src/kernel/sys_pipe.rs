//! Pipes, socket pairs and event counters: the calls that make them (the
//! objects are `file::pipe`'s).

use super::call::{SyscallDef, def};
use super::files::{FileKind, OpenFile};
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_pipe, sys_pipe, ""),
    def(
        libc::SYS_pipe2,
        sys_pipe2,
        "O_CLOEXEC and O_NONBLOCK; not O_DIRECT",
    ),
    def(
        libc::SYS_socketpair,
        sys_socketpair,
        "AF_UNIX stream and datagram pairs, as two pipes (message bounds are not kept)",
    ),
    def(libc::SYS_eventfd, sys_eventfd, ""),
    def(libc::SYS_eventfd2, sys_eventfd2, ""),
];

fn sys_pipe(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    sys_pipe2(k, cpu, [a[0], 0, 0, 0, 0, 0])
}

fn sys_pipe2(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let flags = a[1] as i32;
    if flags & !(libc::O_CLOEXEC | libc::O_NONBLOCK) != 0 {
        return err(libc::EINVAL);
    }
    let capacity = match k.pipes.room_for(1) {
        Ok(c) => c,
        Err(e) => return err(e),
    };
    let id = k.pipes.next_id();
    let end = |write: bool| OpenFile {
        kind: FileKind::Pipe { id, write },
        path: String::new(),
        offset: 0,
        flags: (if write {
            libc::O_WRONLY
        } else {
            libc::O_RDONLY
        }) | (flags & libc::O_NONBLOCK),
        shared: None,
    };
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let read = match k.files_mut().install(end(false), cloexec, 0) {
        Ok(fd) => fd,
        Err(e) => return err(e),
    };
    let write = match k.files_mut().install(end(true), cloexec, 0) {
        Ok(fd) => fd,
        Err(e) => {
            k.files_mut().close(read);
            return err(e);
        }
    };
    let mut fds = read.to_le_bytes().to_vec();
    fds.extend_from_slice(&write.to_le_bytes());
    if k.write(a[0], &fds).is_err() {
        k.files_mut().close(read);
        k.files_mut().close(write);
        return err(libc::EFAULT);
    }
    k.pipes.create(id, 1, capacity);
    SysResult::Ret(0)
}

/// A connected pair of unix sockets: two pipes, one each way.
fn sys_socketpair(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let kind = a[1] as i32 & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    if a[0] as i32 != libc::AF_UNIX {
        return err(libc::EAFNOSUPPORT);
    }
    if !matches!(
        kind,
        libc::SOCK_STREAM | libc::SOCK_DGRAM | libc::SOCK_SEQPACKET
    ) {
        return err(libc::EINVAL);
    }
    let capacity = match k.pipes.room_for(2) {
        Ok(c) => c,
        Err(e) => return err(e),
    };
    let (one, two) = (k.pipes.next_id(), k.pipes.next_id() + 1);
    let end = |rx: u64, tx: u64| OpenFile {
        kind: FileKind::SocketPair { rx, tx },
        path: String::new(),
        offset: 0,
        flags: libc::O_RDWR | (a[1] as i32 & libc::SOCK_NONBLOCK),
        shared: None,
    };
    let cloexec = a[1] as i32 & libc::SOCK_CLOEXEC != 0;
    let first = match k.files_mut().install(end(one, two), cloexec, 0) {
        Ok(fd) => fd,
        Err(e) => return err(e),
    };
    let second = match k.files_mut().install(end(two, one), cloexec, 0) {
        Ok(fd) => fd,
        Err(e) => {
            k.files_mut().close(first);
            return err(e);
        }
    };
    let mut fds = first.to_le_bytes().to_vec();
    fds.extend_from_slice(&second.to_le_bytes());
    if k.write(a[3], &fds).is_err() {
        k.files_mut().close(first);
        k.files_mut().close(second);
        return err(libc::EFAULT);
    }
    k.pipes.create(one, 2, capacity);
    SysResult::Ret(0)
}

fn sys_eventfd(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    sys_eventfd2(k, cpu, [a[0], 0, 0, 0, 0, 0])
}

fn sys_eventfd2(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let flags = a[1] as i32;
    if flags & !(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK | libc::EFD_SEMAPHORE) != 0 {
        return err(libc::EINVAL);
    }
    let id = k.pipes.next_id();
    let file = OpenFile {
        kind: FileKind::EventFd {
            id,
            semaphore: flags & libc::EFD_SEMAPHORE != 0,
        },
        path: String::new(),
        offset: 0,
        flags: libc::O_RDWR | (flags & libc::O_NONBLOCK),
        shared: None,
    };
    match k
        .files_mut()
        .install(file, flags & libc::EFD_CLOEXEC != 0, 0)
    {
        Ok(fd) => {
            k.pipes.create_counter(id, a[0] & 0xffff_ffff);
            SysResult::Ret(fd.into())
        }
        Err(e) => err(e),
    }
}
