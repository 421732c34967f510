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
