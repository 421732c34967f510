//! Pseudoterminals: the multiplexer and its slaves, the line discipline
//! in canonical and raw mode, hangups, readiness. The expected results
//! are Linux's (tests/programs/ptys.c prints the same natively).

use super::{Bench, SCRATCH, Want, cases};
use libc::*;

const FDCWD: u64 = AT_FDCWD as u64;
const TIOCGPTN: u64 = 0x8004_5430;
const TIOCSPTLCK: u64 = 0x4004_5431;

/// Opens a master and unlocks it: (master, its number).
fn master(b: &mut Bench) -> (u64, u32) {
    let ptmx = b.str("/dev/ptmx");
    let m = b.ret(
        SYS_openat,
        [FDCWD, ptmx, (O_RDWR | O_NOCTTY) as u64, 0, 0, 0],
    ) as u64;
    let n = b.buf(4);
    assert_eq!(b.ret(SYS_ioctl, [m, TIOCGPTN, n, 0, 0, 0]), 0);
    let id = u32::from_le_bytes(b.read(n, 4).try_into().unwrap());
    let zero = b.bytes(&0u32.to_le_bytes());
    assert_eq!(b.ret(SYS_ioctl, [m, TIOCSPTLCK, zero, 0, 0, 0]), 0);
    (m, id)
}

/// A master and its slave, both non-blocking: (master, slave).
fn pair(b: &mut Bench) -> (u64, u64) {
    let (m, id) = master(b);
    let path = b.str(&format!("/dev/pts/{id}"));
    let flags = (O_RDWR | O_NOCTTY | O_NONBLOCK) as u64;
    let s = b.ret(SYS_openat, [FDCWD, path, flags, 0, 0, 0]) as u64;
    b.ret(SYS_fcntl, [m, F_SETFL as u64, O_NONBLOCK as u64, 0, 0, 0]);
    (m, s)
}

fn put(b: &mut Bench, fd: u64, bytes: &[u8]) {
    let at = b.bytes(bytes);
    assert_eq!(
        b.ret(SYS_write, [fd, at, bytes.len() as u64, 0, 0, 0]),
        bytes.len() as i64
    );
}

/// What a read of up to 256 bytes of `fd` returns: its bytes, or -errno.
fn take(b: &mut Bench, fd: u64) -> Result<Vec<u8>, i64> {
    let at = b.buf(256);
    match b.ret(SYS_read, [fd, at, 256, 0, 0, 0]) {
        n if n >= 0 => Ok(b.read(at, n as usize)),
        e => Err(e),
    }
}

/// Puts the slave `s` in raw mode, as `cfmakeraw` does.
fn make_raw(b: &mut Bench, s: u64) {
    let t = b.buf(36);
    assert_eq!(b.ret(SYS_ioctl, [s, TCGETS, t, 0, 0, 0]), 0);
    let mut raw = b.read(t, 36);
    let mut word = |i: usize, clear: u32, set: u32| {
        let v = u32::from_le_bytes(raw[i * 4..i * 4 + 4].try_into().unwrap());
        raw[i * 4..i * 4 + 4].copy_from_slice(&((v & !clear) | set).to_le_bytes());
    };
    word(
        0,
        IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON,
        0,
    );
    word(1, OPOST, 0);
    word(3, ECHO | ECHONL | ICANON | ISIG | IEXTEN, 0);
    word(2, CSIZE | PARENB, CS8);
    let t = b.bytes(&raw);
    assert_eq!(b.ret(SYS_ioctl, [s, TCSETS, t, 0, 0, 0]), 0);
}

/// Poll bits of `fd` for POLLIN | POLLOUT, with no waiting.
fn poll_bits(b: &mut Bench, fd: u64) -> i16 {
    let mut p = (fd as i32).to_le_bytes().to_vec();
    p.extend_from_slice(&(POLLIN | POLLOUT).to_le_bytes());
    p.extend_from_slice(&0i16.to_le_bytes());
    let at = b.bytes(&p);
    assert_eq!(b.ret(SYS_poll, [at, 1, 0, 0, 0, 0]), 1);
    i16::from_le_bytes(b.read(at + 6, 2).try_into().unwrap())
}

cases! {
    ptmx_opens_a_master_numbered_from_zero: SYS_ioctl, |b| {
        let ptmx = b.str("/dev/ptmx");
        let m = b.ret(SYS_openat, [FDCWD, ptmx, O_RDWR as u64, 0, 0, 0]) as u64;
        [m, TIOCGPTN, SCRATCH + 8192, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.read(SCRATCH + 8192, 4), 0u32.to_le_bytes());
    a_locked_slave_cannot_be_opened: SYS_openat, |b| {
        let ptmx = b.str("/dev/ptmx");
        b.ret(SYS_openat, [FDCWD, ptmx, O_RDWR as u64, 0, 0, 0]);
        [FDCWD, b.str("/dev/pts/0"), (O_RDWR | O_NOCTTY) as u64, 0, 0, 0]
    }, Want::Err(EIO);
    an_unlocked_slave_opens: SYS_openat, |b| {
        master(b);
        [FDCWD, b.str("/dev/pts/0"), (O_RDWR | O_NOCTTY) as u64, 0, 0, 0]
    }, Want::Ok;
    dev_tty_is_no_device_without_a_controlling_terminal: SYS_openat,
        |b| [FDCWD, b.str("/dev/tty"), (O_WRONLY | O_CREAT) as u64, 0o644, 0, 0], Want::Err(ENXIO);
    a_slave_with_no_pair_is_missing: SYS_openat,
        |b| [FDCWD, b.str("/dev/pts/3"), (O_RDWR | O_NOCTTY) as u64, 0, 0, 0], Want::Err(ENOENT);
    a_session_leader_opening_a_slave_as_its_controlling_terminal_is_unsupported: SYS_openat, |b| {
        master(b);
        [FDCWD, b.str("/dev/pts/0"), O_RDWR as u64, 0, 0, 0]
    }, Want::Unsupported;
    a_slave_is_a_terminal_and_a_file_is_not: SYS_ioctl, |b| {
        let (_, s) = pair(b);
        let t = b.buf(36);
        assert_eq!(b.ret(SYS_ioctl, [s, TCGETS, t, 0, 0, 0]), 0);
        [b.open("/data/hello.txt", O_RDONLY), TCGETS, b.buf(36), 0, 0, 0]
    }, Want::Err(ENOTTY);
    a_slave_starts_in_linuxs_canonical_mode: SYS_ioctl, |b| {
        let (_, s) = pair(b);
        [s, TCGETS, SCRATCH + 8192, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        let t = b.read(SCRATCH + 8192, 36);
        let word = |i: usize| u32::from_le_bytes(t[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!((word(0), word(1), word(2), word(3)), (0x500, 0x5, 0xbf, 0x8a3b));
        assert_eq!(&t[17..34], b"\x03\x1c\x7f\x15\x04\x00\x01\x00\x11\x13\x1a\x00\x12\x0f\x17\x16\x00");
    };
    canonical_input_is_a_line_at_a_time_with_cr_as_newline_and_echo: SYS_read, |b| {
        let (m, s) = pair(b);
        put(b, m, b"par");
        assert_eq!(take(b, s), Err(-(EAGAIN as i64)));
        put(b, m, b"tial\r");
        assert_eq!(take(b, s).unwrap(), b"partial\n");
        [m, SCRATCH + 8192, 64, 0, 0, 0]
    }, Want::Ret(9), then |b| assert_eq!(b.read(SCRATCH + 8192, 9), b"partial\r\n");
    a_canonical_read_never_crosses_a_line: SYS_read, |b| {
        let (m, s) = pair(b);
        put(b, m, b"one\ntwo\n");
        let two = b.buf(2);
        assert_eq!(b.ret(SYS_read, [s, two, 2, 0, 0, 0]), 2);
        assert_eq!(take(b, s).unwrap(), b"e\n");
        [s, SCRATCH + 8192, 64, 0, 0, 0]
    }, Want::Ret(4);
    erase_and_end_of_file_edit_a_canonical_line: SYS_read, |b| {
        let (m, s) = pair(b);
        put(b, m, b"ab\x7fc\x04");
        assert_eq!(take(b, s).unwrap(), b"ac");
        assert_eq!(take(b, m).unwrap(), b"ab\x08 \x08c");
        put(b, m, b"\x04");
        [s, SCRATCH + 8192, 64, 0, 0, 0]
    }, Want::Ret(0);
    erasing_a_tab_backs_up_to_where_it_began: SYS_read, |b| {
        let (m, s) = pair(b);
        put(b, m, b"ab\t\x7f\x15");
        assert_eq!(take(b, s), Err(-(EAGAIN as i64)));
        [m, SCRATCH + 8192, 64, 0, 0, 0]
    }, Want::Ret(15), then |b| {
        // Six columns back (the tab began at column 2), then each of
        // "ab" rubbed out.
        assert_eq!(b.read(SCRATCH + 8192, 15), b"ab\t\x08\x08\x08\x08\x08\x08\x08 \x08\x08 \x08");
    };
    an_interrupt_character_flushes_the_line_and_echoes: SYS_read, |b| {
        let (m, s) = pair(b);
        put(b, m, b"lost\x03kept\n");
        assert_eq!(take(b, s).unwrap(), b"kept\n");
        [m, SCRATCH + 8192, 64, 0, 0, 0]
    }, Want::Ret(12), then |b| assert_eq!(b.read(SCRATCH + 8192, 12), b"lost^Ckept\r\n");
    slave_output_gets_cr_before_newline: SYS_read, |b| {
        let (m, s) = pair(b);
        put(b, s, b"out\n\tx");
        [m, SCRATCH + 8192, 64, 0, 0, 0]
    }, Want::Ret(7), then |b| assert_eq!(b.read(SCRATCH + 8192, 7), b"out\r\n\tx");
    raw_mode_passes_bytes_through_both_ways: SYS_read, |b| {
        let (m, s) = pair(b);
        make_raw(b, s);
        put(b, s, b"a\nb\r\n");
        assert_eq!(take(b, m).unwrap(), b"a\nb\r\n");
        put(b, m, b"x\ry\n\x03\x7f");
        assert_eq!(take(b, s).unwrap(), b"x\ry\n\x03\x7f");
        [m, SCRATCH + 8192, 64, 0, 0, 0]
    }, Want::Err(EAGAIN);
    the_master_waits_for_a_slave_never_opened: SYS_read, |b| {
        let (m, _) = master(b);
        [m, b.buf(8), 8, 0, 0, 0]
    }, Want::Blocks;
    the_master_reads_what_is_left_then_eio_once_the_slave_is_closed: SYS_read, |b| {
        let (m, s) = pair(b);
        put(b, s, b"bye");
        b.ret(SYS_close, [s, 0, 0, 0, 0, 0]);
        assert_eq!(poll_bits(b, m), POLLIN | POLLOUT | POLLHUP);
        assert_eq!(take(b, m).unwrap(), b"bye");
        assert_eq!(poll_bits(b, m), POLLOUT | POLLHUP);
        b.ret(SYS_fcntl, [m, F_SETFL as u64, 0, 0, 0, 0]);
        [m, b.buf(8), 8, 0, 0, 0]
    }, Want::Err(EIO);
    a_slave_whose_master_closed_reads_end_of_file: SYS_read, |b| {
        let (m, s) = pair(b);
        b.ret(SYS_close, [m, 0, 0, 0, 0, 0]);
        assert_eq!(poll_bits(b, s), POLLIN | POLLOUT | POLLHUP | POLLERR);
        let x = b.bytes(b"x");
        assert_eq!(b.ret(SYS_write, [s, x, 1, 0, 0, 0]), -(EIO as i64));
        [s, b.buf(8), 8, 0, 0, 0]
    }, Want::Ret(0);
    a_slave_whose_master_closed_is_gone_by_name: SYS_openat, |b| {
        let (m, _) = master(b);
        b.ret(SYS_close, [m, 0, 0, 0, 0, 0]);
        [FDCWD, b.str("/dev/pts/0"), (O_RDWR | O_NOCTTY) as u64, 0, 0, 0]
    }, Want::Err(ENOENT);
    poll_sees_a_complete_line_only: SYS_write, |b| {
        let (m, s) = pair(b);
        assert_eq!(poll_bits(b, s), POLLOUT);
        put(b, m, b"half");
        assert_eq!(poll_bits(b, s), POLLOUT);
        [m, b.bytes(b"\n"), 1, 0, 0, 0]
    }, Want::Ret(1), then |b| {
        assert_eq!(poll_bits(b, 4), POLLIN | POLLOUT);
        assert_eq!(poll_bits(b, 3), POLLIN | POLLOUT);
    };
    the_window_size_set_on_the_master_is_the_slaves: SYS_ioctl, |b| {
        let (m, s) = pair(b);
        let ws = b.bytes(&[24, 0, 80, 0, 0, 0, 0, 0]);
        assert_eq!(b.ret(SYS_ioctl, [m, TIOCSWINSZ, ws, 0, 0, 0]), 0);
        [s, TIOCGWINSZ, SCRATCH + 8192, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.read(SCRATCH + 8192, 4), [24, 0, 80, 0]);
    fionread_counts_complete_lines_of_a_canonical_slave: SYS_ioctl, |b| {
        let (m, s) = pair(b);
        put(b, m, b"ab\ncd");
        [s, FIONREAD, SCRATCH + 8192, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.read(SCRATCH + 8192, 4), 3u32.to_le_bytes());
    timed_terminal_reads_are_unsupported: SYS_read, |b| {
        let (m, s) = pair(b);
        make_raw(b, s);
        let t = b.buf(36);
        b.ret(SYS_ioctl, [s, TCGETS, t, 0, 0, 0]);
        let mut raw = b.read(t, 36);
        raw[17 + VTIME] = 5;
        let t = b.bytes(&raw);
        b.ret(SYS_ioctl, [s, TCSETS, t, 0, 0, 0]);
        put(b, m, b"x");
        [s, b.buf(8), 8, 0, 0, 0]
    }, Want::Unsupported;
    making_a_terminal_controlling_is_unsupported: SYS_ioctl, |b| {
        let (_, s) = pair(b);
        [s, TIOCSCTTY, 0, 0, 0, 0]
    }, Want::Unsupported;
    a_slave_is_a_character_device_of_major_136: SYS_newfstatat, |b| {
        master(b);
        [FDCWD, b.str("/dev/pts/0"), SCRATCH + 8192, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        let (mode, rdev) = mode_and_rdev(&b.read(SCRATCH + 8192, 48));
        assert_eq!(mode & S_IFMT, S_IFCHR);
        assert_eq!(rdev, 136 << 8);
    };
    dev_pts_lists_the_open_pairs: SYS_close, |b| {
        let (first, _) = master(b);
        master(b);
        assert_eq!(pts_names(b), [".", "..", "ptmx", "0", "1"]);
        [first, 0, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(pts_names(b), [".", "..", "ptmx", "1"]);
    a_path_descriptor_of_ptmx_makes_no_pair: SYS_ioctl, |b| {
        b.open("/dev/ptmx", O_PATH);
        let (m, _) = master(b);
        [m, TIOCGPTN, SCRATCH + 8192, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.read(SCRATCH + 8192, 4), 0u32.to_le_bytes());
}

/// The names `/dev/pts` lists, in its order: each record of
/// `getdents64` by its length, the name from byte 19.
fn pts_names(b: &mut Bench) -> Vec<String> {
    let fd = b.open("/dev/pts", O_RDONLY | O_DIRECTORY);
    let buf = b.buf(4096);
    let n = b.ret(SYS_getdents64, [fd, buf, 4096, 0, 0, 0]);
    assert!(n > 0, "getdents64: {n}");
    let raw = b.read(buf, n as usize);
    b.ret(SYS_close, [fd, 0, 0, 0, 0, 0]);
    let mut names = Vec::new();
    let mut at = 0;
    while at < raw.len() {
        let len = u16::from_le_bytes([raw[at + 16], raw[at + 17]]) as usize;
        let name = &raw[at + 19..at + len];
        let end = name.iter().position(|c| *c == 0).unwrap_or(name.len());
        names.push(String::from_utf8_lossy(&name[..end]).into_owned());
        at += len;
    }
    names
}

/// `st_mode` and `st_rdev` of an x86-64 `struct stat`.
fn mode_and_rdev(raw: &[u8]) -> (u32, u64) {
    (
        u32::from_le_bytes(raw[24..28].try_into().unwrap()),
        u64::from_le_bytes(raw[40..48].try_into().unwrap()),
    )
}
