//! Sockets on a machine where nothing listens.

use super::{Want, cases};
use libc::*;

/// A `sockaddr_un` for `path`.
fn unix_addr(path: &str) -> Vec<u8> {
    let mut a = (AF_UNIX as u16).to_le_bytes().to_vec();
    a.extend_from_slice(path.as_bytes());
    a.push(0);
    a
}

/// A `sockaddr_in` for `ip`:80.
fn inet_addr(ip: [u8; 4]) -> Vec<u8> {
    let mut a = (AF_INET as u16).to_le_bytes().to_vec();
    a.extend_from_slice(&80u16.to_be_bytes());
    a.extend_from_slice(&ip);
    a.extend_from_slice(&[0; 8]);
    a
}

cases! {
    a_unix_stream_socket_is_a_descriptor: SYS_socket,
        |_b| [AF_UNIX as u64, (SOCK_STREAM | SOCK_CLOEXEC) as u64, 0, 0, 0, 0], Want::Ret(3);
    an_unknown_family_is_eafnosupport: SYS_socket,
        |_b| [AF_PACKET as u64, SOCK_RAW as u64, 0, 0, 0, 0], Want::Err(EAFNOSUPPORT);
    connecting_to_a_missing_unix_path_is_enoent: SYS_connect, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/var/run/nscd/socket");
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ENOENT);
    connecting_to_an_existing_path_finds_nobody_listening: SYS_connect, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/data/hello.txt");
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ECONNREFUSED);
    connecting_to_loopback_is_refused: SYS_connect, |b| {
        let fd = b.ret(SYS_socket, [AF_INET as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = inet_addr([127, 0, 0, 1]);
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ECONNREFUSED);
    connecting_elsewhere_finds_no_network: SYS_connect, |b| {
        let fd = b.ret(SYS_socket, [AF_INET as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = inet_addr([192, 0, 2, 1]);
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ENETUNREACH);
    connect_on_a_file_is_enotsock: SYS_connect, |b| {
        let fd = b.open("/data/hello.txt", O_RDONLY);
        let a = unix_addr("/x");
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ENOTSOCK);
    reading_an_unconnected_socket_is_enotconn: SYS_read, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        [fd, b.buf(8), 8, 0, 0, 0]
    }, Want::Err(ENOTCONN);
    so_type_says_the_sockets_type: SYS_getsockopt, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_DGRAM as u64, 0, 0, 0, 0]) as u64;
        let val = b.buf(4);
        let len = b.bytes(&4i32.to_le_bytes());
        [fd, SOL_SOCKET as u64, SO_TYPE as u64, val, len, 0]
    }, Want::Ret(0);
}

/// A unix stream socket bound to `path` and listening; its descriptor.
fn listening(b: &mut super::Bench, path: &str, flags: i32) -> u64 {
    let fd = b.ret(
        SYS_socket,
        [AF_UNIX as u64, (SOCK_STREAM | flags) as u64, 0, 0, 0, 0],
    ) as u64;
    let a = unix_addr(path);
    let at = b.bytes(&a);
    assert_eq!(b.ret(SYS_bind, [fd, at, a.len() as u64, 0, 0, 0]), 0);
    assert_eq!(b.ret(SYS_listen, [fd, 8, 0, 0, 0, 0]), 0);
    fd
}

cases! {
    binding_twice_is_einval: SYS_bind, |b| {
        let fd = listening(b, "/tmp/one", 0);
        let a = unix_addr("/tmp/two");
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(EINVAL);
    binding_a_name_in_use_is_eaddrinuse: SYS_bind, |b| {
        listening(b, "/tmp/one", 0);
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/one");
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(EADDRINUSE);
    binding_over_an_existing_file_is_eaddrinuse: SYS_bind, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/data/hello.txt");
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(EADDRINUSE);
    binding_to_another_hosts_address_is_eaddrnotavail: SYS_bind, |b| {
        let fd = b.ret(SYS_socket, [AF_INET as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = inet_addr([10, 0, 0, 1]);
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(EADDRNOTAVAIL);
    binding_from_a_bad_pointer_is_efault: SYS_bind, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        [fd, super::UNMAPPED, 16, 0, 0, 0]
    }, Want::Err(EFAULT);
    binding_a_file_that_is_no_socket_is_enotsock: SYS_bind, |b| {
        let a = unix_addr("/tmp/x");
        [1, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ENOTSOCK);
    a_datagram_socket_cannot_listen: SYS_listen, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_DGRAM as u64, 0, 0, 0, 0]) as u64;
        [fd, 1, 0, 0, 0, 0]
    }, Want::Err(EOPNOTSUPP);
    accepting_on_a_socket_not_listening_is_einval: SYS_accept4, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        [fd, 0, 0, 0, 0, 0]
    }, Want::Err(EINVAL);
    accepting_with_unknown_flags_is_einval: SYS_accept4, |b| {
        let fd = listening(b, "/tmp/l", 0);
        [fd, 0, 0, 1, 0, 0]
    }, Want::Err(EINVAL);
    accepting_nothing_without_blocking_is_eagain: SYS_accept4, |b| {
        let fd = listening(b, "/tmp/l", SOCK_NONBLOCK);
        [fd, 0, 0, 0, 0, 0]
    }, Want::Err(EAGAIN);
    accepting_nothing_blocks: SYS_accept, |b| {
        let fd = listening(b, "/tmp/l", 0);
        [fd, 0, 0, 0, 0, 0]
    }, Want::Blocks;
    accepting_on_a_bad_descriptor_is_ebadf: SYS_accept, |b| [77, 0, 0, 0, 0, 0], Want::Err(EBADF);
    a_connection_is_accepted_and_carries_bytes: SYS_read, |b| {
        let l = listening(b, "/tmp/l", 0);
        let c = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/l");
        let at = b.bytes(&a);
        assert_eq!(b.ret(SYS_connect, [c, at, a.len() as u64, 0, 0, 0]), 0);
        let s = b.ret(SYS_accept4, [l, 0, 0, SOCK_CLOEXEC as u64, 0, 0]) as u64;
        let hi = b.bytes(b"hi");
        assert_eq!(b.ret(SYS_write, [c, hi, 2, 0, 0, 0]), 2);
        [s, super::SCRATCH + 8192, 16, 0, 0, 0]
    }, Want::Ret(2), then |b| assert_eq!(b.read(super::SCRATCH + 8192, 2), b"hi");
    connecting_a_connected_socket_is_eisconn: SYS_connect, |b| {
        listening(b, "/tmp/l", 0);
        let c = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/l");
        let at = b.bytes(&a);
        assert_eq!(b.ret(SYS_connect, [c, at, a.len() as u64, 0, 0, 0]), 0);
        [c, at, a.len() as u64, 0, 0, 0]
    }, Want::Err(EISCONN);
    shutdown_with_an_unknown_direction_is_einval: SYS_shutdown, |b| [0, 7, 0, 0, 0, 0], Want::Err(EINVAL);
    a_shut_down_peer_reads_the_end: SYS_read, |b| {
        let l = listening(b, "/tmp/l", 0);
        let c = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/l");
        let at = b.bytes(&a);
        assert_eq!(b.ret(SYS_connect, [c, at, a.len() as u64, 0, 0, 0]), 0);
        let s = b.ret(SYS_accept, [l, 0, 0, 0, 0, 0]) as u64;
        assert_eq!(b.ret(SYS_shutdown, [c, SHUT_WR as u64, 0, 0, 0, 0]), 0);
        [s, b.buf(8), 8, 0, 0, 0]
    }, Want::Ret(0);
}

/// A `msghdr` in scratch memory over one buffer, with `control_len`.
fn msghdr(b: &mut super::Bench, buf: u64, len: u64, control_len: u64) -> u64 {
    let iov = b.bytes(&[buf.to_le_bytes(), len.to_le_bytes()].concat());
    let control = b.buf(64);
    let mut m = Vec::new();
    for w in [0, 0, iov, 1, control, control_len, 0] {
        m.extend_from_slice(&w.to_le_bytes());
    }
    b.bytes(&m)
}

cases! {
    a_datagram_to_a_missing_unix_path_is_enoent: SYS_sendto, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_DGRAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/nobody");
        let data = b.bytes(b"x");
        [fd, data, 1, 0, b.bytes(&a), a.len() as u64]
    }, Want::Err(ENOENT);
    a_udp_datagram_to_nobody_is_sent_and_lost: SYS_sendto, |b| {
        let fd = b.ret(SYS_socket, [AF_INET as u64, SOCK_DGRAM as u64, 0, 0, 0, 0]) as u64;
        let a = inet_addr([127, 0, 0, 1]);
        let data = b.bytes(b"xy");
        [fd, data, 2, 0, b.bytes(&a), a.len() as u64]
    }, Want::Ret(2);
    a_datagram_without_an_address_or_peer_is_edestaddrreq: SYS_sendto, |b| {
        let fd = b.ret(SYS_socket, [AF_INET as u64, SOCK_DGRAM as u64, 0, 0, 0, 0]) as u64;
        let data = b.bytes(b"x");
        [fd, data, 1, 0, 0, 0]
    }, Want::Err(EDESTADDRREQ);
    receiving_nothing_without_blocking_is_eagain: SYS_recvfrom, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, (SOCK_DGRAM | SOCK_NONBLOCK) as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/d");
        let at = b.bytes(&a);
        assert_eq!(b.ret(SYS_bind, [fd, at, a.len() as u64, 0, 0, 0]), 0);
        [fd, b.buf(8), 8, 0, 0, 0]
    }, Want::Err(EAGAIN);
    receiving_nothing_blocks: SYS_recvfrom, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_DGRAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/d");
        let at = b.bytes(&a);
        assert_eq!(b.ret(SYS_bind, [fd, at, a.len() as u64, 0, 0, 0]), 0);
        [fd, b.buf(8), 8, 0, 0, 0]
    }, Want::Blocks;
    sendmsg_with_control_data_is_unsupported: SYS_sendmsg, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_DGRAM as u64, 0, 0, 0, 0]) as u64;
        let buf = b.bytes(b"x");
        let m = msghdr(b, buf, 1, 24);
        [fd, m, 0, 0, 0, 0]
    }, Want::Unsupported;
    sendmsg_from_a_bad_header_is_efault: SYS_sendmsg, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_DGRAM as u64, 0, 0, 0, 0]) as u64;
        [fd, super::UNMAPPED, 0, 0, 0, 0]
    }, Want::Err(EFAULT);
    recvmsg_on_a_file_that_is_no_socket_is_enotsock: SYS_recvmsg, |b| {
        let buf = b.buf(8);
        let m = msghdr(b, buf, 8, 0);
        [1, m, 0, 0, 0, 0]
    }, Want::Err(ENOTSOCK);
    a_bound_path_is_a_socket_node: SYS_newfstatat, |b| {
        listening(b, "/tmp/s", 0);
        [AT_FDCWD as u64, b.str("/tmp/s"), super::SCRATCH + 8192, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        let mode = u32::from_le_bytes(b.read(super::SCRATCH + 8192 + 24, 4).try_into().unwrap());
        assert_eq!(mode & S_IFMT, S_IFSOCK, "mode {mode:o}");
    };
    opening_a_socket_node_is_enxio: SYS_openat, |b| {
        listening(b, "/tmp/s", 0);
        [AT_FDCWD as u64, b.str("/tmp/s"), O_RDONLY as u64, 0, 0, 0]
    }, Want::Err(ENXIO);
    binding_in_a_missing_directory_is_enoent: SYS_bind, |b| {
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/no/s");
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ENOENT);
    an_unlinked_socket_path_is_enoent: SYS_connect, |b| {
        listening(b, "/tmp/s", 0);
        let s = b.str("/tmp/s");
        assert_eq!(b.ret(SYS_unlink, [s, 0, 0, 0, 0, 0]), 0);
        let c = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/s");
        [c, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ENOENT);
    an_unlinked_socket_path_can_be_bound_again: SYS_bind, |b| {
        listening(b, "/tmp/s", 0);
        let s = b.str("/tmp/s");
        assert_eq!(b.ret(SYS_unlink, [s, 0, 0, 0, 0, 0]), 0);
        let fd = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/s");
        [fd, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Ret(0);
    a_closed_listeners_path_stays_and_refuses: SYS_connect, |b| {
        let l = listening(b, "/tmp/s", 0);
        assert_eq!(b.ret(SYS_close, [l, 0, 0, 0, 0, 0]), 0);
        super::super::file::settle(&mut b.k);
        let c = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/s");
        [c, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Err(ECONNREFUSED);
    a_renamed_socket_is_reached_at_its_new_path: SYS_connect, |b| {
        listening(b, "/tmp/s", 0);
        let (from, to) = (b.str("/tmp/s"), b.str("/tmp/t"));
        assert_eq!(b.ret(SYS_rename, [from, to, 0, 0, 0, 0]), 0);
        let c = b.ret(SYS_socket, [AF_UNIX as u64, SOCK_STREAM as u64, 0, 0, 0, 0]) as u64;
        let a = unix_addr("/tmp/t");
        [c, b.bytes(&a), a.len() as u64, 0, 0, 0]
    }, Want::Ret(0);
}
