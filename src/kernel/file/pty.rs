//! Pseudoterminals: `/dev/ptmx` makes a pair, whose slave is
//! `/dev/pts/N`. What the master writes is the slave's input, through the
//! line discipline of the slave's terminal settings (canonical lines and
//! their editing, echo, `\r` to `\n`); what the slave writes is the
//! master's input, through output processing (`\n` to `\r\n`). Raw mode
//! (`cfmakeraw`) passes bytes through unchanged.
//!
//! The ends hang up as Linux's do: once every slave description is
//! closed the master reads what is left and then EIO (how a build tool
//! knows its builder ended); once the master is closed the slave reads 0
//! and fails writes with EIO, and its name is gone.
//!
//! Nothing here comes from the host: the pairs are numbered from 0 in
//! the order they are made (the lowest free number, as Linux), and the
//! settings start from Linux's defaults. What a terminal does that the
//! machine does not (controlling terminals and the signals they send,
//! flow control, timed reads, some editing characters) is a named
//! unsupported call, never a silent difference.

use std::collections::{BTreeMap, VecDeque};

use crate::kernel::files::Held;
use crate::kernel::ready::Ready;
use crate::kernel::{Kernel, SysResult, err};

/// Bytes a direction holds before a writer waits (Linux's pty buffers
/// hold about as much).
const CAPACITY: usize = 65536;

/// The longest canonical input line (Linux's `N_TTY_BUF_SIZE - 1`).
const MAX_LINE: usize = 4095;

/// The major device numbers of the multiplexer and of the slaves.
const PTMX_MAJOR: u64 = 5;
const PTS_MAJOR: u64 = 136;

// Terminal settings' bits (asm-generic/termbits.h).
const IGNCR: u32 = 0o200;
const ICRNL: u32 = 0o400;
const INLCR: u32 = 0o100;
const ISTRIP: u32 = 0o040;
const IUCLC: u32 = 0o1000;
const IXON: u32 = 0o2000;
const IUTF8: u32 = 0o40000;
const OPOST: u32 = 0o1;
const OLCUC: u32 = 0o2;
const ONLCR: u32 = 0o4;
const OCRNL: u32 = 0o10;
const ONOCR: u32 = 0o20;
const ONLRET: u32 = 0o40;
const TABDLY: u32 = 0o14000;
const XTABS: u32 = 0o14000;
const ISIG: u32 = 0o1;
const ICANON: u32 = 0o2;
const XCASE: u32 = 0o4;
const ECHO: u32 = 0o10;
const ECHOE: u32 = 0o20;
const ECHOK: u32 = 0o40;
const ECHONL: u32 = 0o100;
const NOFLSH: u32 = 0o200;
const ECHOCTL: u32 = 0o1000;
const ECHOPRT: u32 = 0o2000;
const ECHOKE: u32 = 0o4000;
const FLUSHO: u32 = 0o10000;
const PENDIN: u32 = 0o40000;
const IEXTEN: u32 = 0o100000;
const EXTPROC: u32 = 0o200000;

// Indexes into `c_cc`.
const VINTR: usize = 0;
const VQUIT: usize = 1;
const VERASE: usize = 2;
const VKILL: usize = 3;
const VEOF: usize = 4;
const VTIME: usize = 5;
const VMIN: usize = 6;
const VSTART: usize = 8;
const VSTOP: usize = 9;
const VSUSP: usize = 10;
const VEOL: usize = 11;
const VREPRINT: usize = 12;
const VWERASE: usize = 14;
const VLNEXT: usize = 15;
const VEOL2: usize = 16;

/// A terminal's settings: the kernel's `struct termios` (the speeds of
/// `termios2` are B38400's, as a pty's always are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Termios {
    pub iflag: u32,
    pub oflag: u32,
    pub cflag: u32,
    pub lflag: u32,
    pub line: u8,
    pub cc: [u8; 19],
}

impl Termios {
    /// Linux's settings for a new slave (`tty_std_termios`, with a pty's
    /// `B38400 | CS8 | CREAD`).
    fn linux_default() -> Termios {
        let mut cc = [0u8; 19];
        cc[..17].copy_from_slice(
            b"\x03\x1c\x7f\x15\x04\x00\x01\x00\x11\x13\x1a\x00\x12\x0f\x17\x16\x00",
        );
        Termios {
            iflag: ICRNL | IXON,
            oflag: OPOST | ONLCR,
            cflag: 0o17 | 0o60 | 0o200,
            lflag: ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE | IEXTEN,
            line: 0,
            cc,
        }
    }

    /// The kernel's `struct termios` (36 bytes), or `termios2` (44) with
    /// the speeds.
    pub fn to_bytes(self, with_speeds: bool) -> Vec<u8> {
        let mut b = Vec::with_capacity(44);
        for v in [self.iflag, self.oflag, self.cflag, self.lflag] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.push(self.line);
        b.extend_from_slice(&self.cc);
        if with_speeds {
            b.extend_from_slice(&38400u32.to_le_bytes());
            b.extend_from_slice(&38400u32.to_le_bytes());
        }
        b
    }

    /// Settings from the kernel's `struct termios` (its first 36 bytes).
    pub fn from_bytes(b: &[u8]) -> Termios {
        let word = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
        Termios {
            iflag: word(0),
            oflag: word(1),
            cflag: word(2),
            lflag: word(3),
            line: b[16],
            cc: b[17..36].try_into().unwrap(),
        }
    }

    /// What these settings ask that the machine's terminals do not do, if
    /// anything.
    pub fn unsupported(&self) -> Option<String> {
        let named = [
            (self.iflag & IUCLC, "IUCLC"),
            (self.oflag & OLCUC, "OLCUC"),
            (self.lflag & XCASE, "XCASE"),
            (self.lflag & ECHOPRT, "ECHOPRT"),
            (self.lflag & FLUSHO, "FLUSHO"),
            (self.lflag & PENDIN, "PENDIN"),
            (self.lflag & EXTPROC, "EXTPROC"),
            (
                u32::from(self.line != 0),
                "a line discipline other than N_TTY",
            ),
        ];
        let what: Vec<&str> = named
            .iter()
            .filter(|(v, _)| *v != 0)
            .map(|(_, n)| *n)
            .collect();
        (!what.is_empty()).then(|| format!("terminal settings {}", what.join(", ")))
    }

    fn has(&self, lflag: u32) -> bool {
        self.lflag & lflag != 0
    }

    /// Whether `c` is the (enabled) special character at `c_cc[i]`.
    fn is(&self, i: usize, c: u8) -> bool {
        self.cc[i] != 0 && self.cc[i] == c
    }
}

/// A pseudoterminal pair.
#[derive(Clone, Debug)]
struct Pair {
    termios: Termios,
    winsize: [u16; 4],
    /// Whether the slave may be opened (`TIOCSPTLCK`).
    locked: bool,
    /// Whether the slave was ever opened: before that the master waits
    /// for it rather than reading EIO.
    slave_opened: bool,
    /// The slave's input ready to be read (complete lines in canonical
    /// mode).
    input: VecDeque<u8>,
    /// In canonical mode, the lengths of the lines in `input` (a read
    /// never crosses one; an empty one is an end of file).
    lines: VecDeque<usize>,
    /// The canonical line being edited.
    partial: Vec<u8>,
    /// The master's input: what the slave wrote, processed, and echoes.
    output: VecDeque<u8>,
    /// The output column, for tabs and `ONOCR`.
    column: u32,
    /// The output column where the canonical line being edited began,
    /// for erasing a tab.
    line_column: u32,
}

/// The pseudoterminal pairs, by number.
#[derive(Clone, Debug, Default)]
pub struct Ptys {
    pairs: BTreeMap<u32, Pair>,
}

impl Ptys {
    /// Whether no pair exists.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

/// Which end of a pair a description is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Master,
    Slave,
}

fn held(id: u32, end: End) -> Held {
    match end {
        End::Master => Held::PtyMaster(id),
        End::Slave => Held::PtySlave(id),
    }
}

fn open_anywhere(k: &Kernel, id: u32, end: End) -> bool {
    k.held_anywhere(held(id, end))
}

/// Whether the master of pair `id` is closed: the slave is hung up.
fn hung_up(k: &Kernel, id: u32) -> bool {
    !open_anywhere(k, id, End::Master)
}

/// Whether the slave of pair `id` was opened and every description of it
/// is closed now.
fn slave_gone(k: &Kernel, id: u32) -> bool {
    k.ptys.pairs.get(&id).is_some_and(|p| p.slave_opened) && !open_anywhere(k, id, End::Slave)
}

/// A new pair (for an open of `/dev/ptmx`): its number, the lowest free.
pub fn create(k: &mut Kernel) -> u32 {
    let id = (0..)
        .find(|n| !k.ptys.pairs.contains_key(n))
        .expect("a free number");
    k.ptys.pairs.insert(
        id,
        Pair {
            termios: Termios::linux_default(),
            winsize: [0; 4],
            locked: true,
            slave_opened: false,
            input: VecDeque::new(),
            lines: VecDeque::new(),
            partial: Vec::new(),
            output: VecDeque::new(),
            column: 0,
            line_column: 0,
        },
    );
    id
}

/// What opening slave `id` (`/dev/pts/N`) finds: ENOENT once its master
/// is gone, EIO while it is locked.
pub fn open_slave(k: &mut Kernel, id: u32) -> Result<(), i32> {
    if !k.ptys.pairs.contains_key(&id) || hung_up(k, id) {
        return Err(libc::ENOENT);
    }
    let p = k.ptys.pairs.get_mut(&id).expect("looked up");
    if p.locked {
        return Err(libc::EIO);
    }
    p.slave_opened = true;
    Ok(())
}

/// The number of `/dev/pts/N`, if it names a pair whose master is open.
pub fn slave_named(k: &Kernel, path: &str) -> Option<u32> {
    let n: u32 = path.strip_prefix("/dev/pts/")?.parse().ok()?;
    (n.to_string() == path["/dev/pts/".len()..] && k.ptys.pairs.contains_key(&n) && !hung_up(k, n))
        .then_some(n)
}

/// The names in `/dev/pts`: `ptmx` and the slaves whose master is open.
pub fn names(k: &Kernel) -> Vec<String> {
    let mut v = vec!["ptmx".to_string()];
    v.extend(
        k.ptys
            .pairs
            .keys()
            .filter(|id| !hung_up(k, **id))
            .map(u32::to_string),
    );
    v
}

/// The device number of an end (`st_rdev`), as glibc's `makedev`.
pub fn rdev(id: u32, end: End) -> u64 {
    let (major, minor) = match end {
        End::Master => (PTMX_MAJOR, 2),
        End::Slave => (PTS_MAJOR, u64::from(id)),
    };
    ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12)
}

/// Pair `id` goes when neither end is held anywhere.
pub fn let_go_of_end(k: &mut Kernel, id: u32) {
    if !open_anywhere(k, id, End::Master) && !open_anywhere(k, id, End::Slave) {
        k.ptys.pairs.remove(&id);
    }
}

/// A change of pair `id` that may let a waiter go on.
fn changed(k: &mut Kernel, id: u32) {
    k.pipes.note_activity();
    k.touch(Ready::Pty(id));
}

fn wait(nonblock: bool, fd: i32, id: u32, nr: i64) -> SysResult {
    if nonblock {
        err(libc::EAGAIN)
    } else {
        SysResult::Block(crate::kernel::thread::Wait::Readable {
            fd,
            nr: nr as u64,
            on: Ready::Pty(id),
        })
    }
}

/// `read` of an end of pair `id` into `buf`.
pub fn read(
    k: &mut Kernel,
    fd: i32,
    id: u32,
    end: End,
    nonblock: bool,
    buf: u64,
    len: u64,
) -> SysResult {
    let nr = libc::SYS_read;
    let Some(p) = k.ptys.pairs.get(&id) else {
        return err(libc::EIO);
    };
    let data: Vec<u8> = match end {
        End::Master => {
            if p.output.is_empty() {
                if slave_gone(k, id) {
                    return err(libc::EIO);
                }
                return wait(nonblock, fd, id, nr);
            }
            let n = p.output.len().min(len as usize);
            p.output.iter().take(n).copied().collect()
        }
        End::Slave => {
            if hung_up(k, id) {
                return SysResult::Ret(0);
            }
            if len == 0 {
                return SysResult::Ret(0);
            }
            let t = p.termios;
            if t.has(ICANON) {
                let Some(&line) = p.lines.front() else {
                    return wait(nonblock, fd, id, nr);
                };
                let n = line.min(len as usize);
                p.input.iter().take(n).copied().collect()
            } else {
                let (min, time) = (t.cc[VMIN] as usize, t.cc[VTIME]);
                if time != 0 {
                    return SysResult::Unsupported("terminal reads with a timeout (VTIME)".into());
                }
                if min > 0 && p.input.len() < min.min(len as usize) {
                    return wait(nonblock, fd, id, nr);
                }
                let n = p.input.len().min(len as usize);
                p.input.iter().take(n).copied().collect()
            }
        }
    };
    if k.write(buf, &data).is_err() {
        return err(libc::EFAULT);
    }
    let p = k.ptys.pairs.get_mut(&id).expect("looked up");
    let n = data.len();
    match end {
        End::Master => {
            p.output.drain(..n);
        }
        End::Slave => {
            p.input.drain(..n);
            if p.termios.has(ICANON) {
                if n == p.lines[0] {
                    p.lines.pop_front();
                } else {
                    p.lines[0] -= n;
                }
            }
        }
    }
    changed(k, id);
    SysResult::Ret(n as i64)
}

/// `write` to an end of pair `id`: the master's bytes are the slave's
/// input, the slave's the master's (processed). A write that does not
/// fit waits for all of it to fit (Linux's blocking terminal writes
/// finish whole), or takes what fits when it is larger than a buffer.
pub fn write(k: &mut Kernel, fd: i32, id: u32, end: End, nonblock: bool, data: &[u8]) -> SysResult {
    let nr = libc::SYS_write;
    let Some(p) = k.ptys.pairs.get(&id) else {
        return err(libc::EIO);
    };
    let room = match end {
        End::Master => CAPACITY.saturating_sub(p.input.len() + p.partial.len()),
        End::Slave => {
            if hung_up(k, id) {
                return err(libc::EIO);
            }
            CAPACITY.saturating_sub(p.output.len())
        }
    };
    if data.is_empty() {
        return SysResult::Ret(0);
    }
    // Processing may double a byte (`\n` to `\r\n`, echoes).
    let fits = room / 2;
    let n = if data.len() <= fits {
        data.len()
    } else if fits > 0 && (nonblock || data.len() > CAPACITY / 2) {
        fits
    } else {
        return wait(nonblock, fd, id, nr);
    };
    let p = k.ptys.pairs.get_mut(&id).expect("looked up");
    let r = match end {
        End::Master => data[..n].iter().try_for_each(|&c| receive(p, c)),
        End::Slave => {
            for &c in &data[..n] {
                put_out(p, c);
            }
            Ok(())
        }
    };
    changed(k, id);
    match r {
        Ok(()) => SysResult::Ret(n as i64),
        Err(what) => SysResult::Unsupported(what),
    }
}

/// Output processing of byte `c` on its way to the master (`OPOST`).
fn put_out(p: &mut Pair, c: u8) {
    let t = p.termios;
    if t.oflag & OPOST == 0 {
        p.output.push_back(c);
        return;
    }
    match c {
        b'\n' => {
            if t.oflag & ONLCR != 0 {
                p.output.push_back(b'\r');
                p.column = 0;
            } else if t.oflag & ONLRET != 0 {
                p.column = 0;
            }
            p.output.push_back(b'\n');
        }
        b'\r' => {
            if t.oflag & ONOCR != 0 && p.column == 0 {
                return;
            }
            if t.oflag & OCRNL != 0 {
                if t.oflag & ONLRET != 0 {
                    p.column = 0;
                }
                p.output.push_back(b'\n');
            } else {
                p.column = 0;
                p.output.push_back(b'\r');
            }
        }
        b'\t' => {
            let spaces = 8 - (p.column % 8);
            p.column += spaces;
            if t.oflag & TABDLY == XTABS {
                p.output.extend(std::iter::repeat_n(b' ', spaces as usize));
            } else {
                p.output.push_back(b'\t');
            }
        }
        8 => {
            p.column = p.column.saturating_sub(1);
            p.output.push_back(c);
        }
        _ => {
            let continuation = t.iflag & IUTF8 != 0 && c & 0xc0 == 0x80;
            if !c.is_ascii_control() && !continuation {
                p.column += 1;
            }
            p.output.push_back(c);
        }
    }
}

/// Echoes input byte `c` (as `^X` for a control character with
/// `ECHOCTL`).
fn echo(p: &mut Pair, c: u8) {
    let t = p.termios;
    if t.has(ECHOCTL) && c != b'\t' && c != b'\n' && (c < 32 || c == 0x7f) {
        put_out(p, b'^');
        put_out(p, c ^ 0o100);
    } else {
        put_out(p, c);
    }
}

/// Erases the last character of the canonical line, on the screen too
/// as Linux's `eraser` does: `\b \b` (twice for a control character
/// shown as `^X`), back to the tab's column for a tab, or the erase
/// character itself without ECHOE.
fn erase_one(p: &mut Pair) {
    let t = p.termios;
    let Some(mut c) = p.partial.pop() else {
        return;
    };
    if t.iflag & IUTF8 != 0 {
        while c & 0xc0 == 0x80 {
            match p.partial.pop() {
                Some(b) => c = b,
                None => break,
            }
        }
    }
    if !t.has(ECHO) {
        return;
    }
    if !t.has(ECHOE) {
        echo(p, t.cc[VERASE]);
        return;
    }
    let control = c < 32 || c == 0x7f;
    if c == b'\t' {
        // Where the tab began: the line's start column plus what the
        // line before it shows.
        let mut col = p.line_column;
        for &b in &p.partial {
            if b == b'\t' {
                col = (col | 7) + 1;
            } else if b < 32 || b == 0x7f {
                if t.has(ECHOCTL) {
                    col += 2;
                }
            } else if !(t.iflag & IUTF8 != 0 && b & 0xc0 == 0x80) {
                col += 1;
            }
        }
        for _ in 0..(8 - (col & 7)).min(p.column) {
            put_out(p, 8);
        }
        return;
    }
    let width = match (control, t.has(ECHOCTL)) {
        (true, true) => 2,
        (true, false) => 0,
        (false, _) => 1,
    };
    for _ in 0..width {
        put_out(p, 8);
        put_out(p, b' ');
        put_out(p, 8);
    }
}

/// The line discipline's handling of input byte `c` (written on the
/// master); `Err` names what it would need that the machine lacks.
fn receive(p: &mut Pair, mut c: u8) -> Result<(), String> {
    let t = p.termios;
    if t.iflag & ISTRIP != 0 {
        c &= 0x7f;
    }
    if c == b'\r' {
        if t.iflag & IGNCR != 0 {
            return Ok(());
        }
        if t.iflag & ICRNL != 0 {
            c = b'\n';
        }
    } else if c == b'\n' && t.iflag & INLCR != 0 {
        c = b'\r';
    }
    if t.has(ISIG) && (t.is(VINTR, c) || t.is(VQUIT, c) || t.is(VSUSP, c)) {
        // No process has the machine's terminals as its controlling one,
        // so no process group gets the signal, as on Linux: the input is
        // flushed and the character echoed. Linux also drops echoes the
        // master's side has not taken in yet, which depends on when its
        // worker ran; here the master has taken in all it was sent.
        if !t.has(NOFLSH) {
            p.input.clear();
            p.lines.clear();
            p.partial.clear();
        }
        if t.has(ECHO) {
            echo(p, c);
        }
        return Ok(());
    }
    if t.iflag & IXON != 0 && (t.is(VSTART, c) || t.is(VSTOP, c)) {
        return Err("terminal flow control (IXON's start and stop characters)".into());
    }
    if !t.has(ICANON) {
        p.input.push_back(c);
        if t.has(ECHO) {
            echo(p, c);
        }
        return Ok(());
    }
    if t.has(IEXTEN) {
        for (i, name) in [
            (VWERASE, "word-erase"),
            (VREPRINT, "reprint"),
            (VLNEXT, "literal-next"),
        ] {
            if t.is(i, c) {
                return Err(format!("the terminal's {name} character"));
            }
        }
    }
    if t.is(VERASE, c) {
        erase_one(p);
        return Ok(());
    }
    if t.is(VKILL, c) && p.partial.is_empty() {
        return Ok(());
    }
    if t.is(VKILL, c) {
        // As Linux's: the line erased on the screen only with ECHOK,
        // ECHOKE and ECHOE all on; else the kill character echoed, and a
        // newline after it with ECHOK.
        if !t.has(ECHO) {
            p.partial.clear();
        } else if !(t.has(ECHOK) && t.has(ECHOKE) && t.has(ECHOE)) {
            p.partial.clear();
            echo(p, c);
            if t.has(ECHOK) {
                put_out(p, b'\n');
            }
        } else {
            while !p.partial.is_empty() {
                erase_one(p);
            }
        }
        return Ok(());
    }
    let eol = c == b'\n' || t.is(VEOL, c) || (t.has(IEXTEN) && t.is(VEOL2, c));
    if t.is(VEOF, c) {
        end_line(p);
        return Ok(());
    }
    if eol {
        if t.has(ECHO) || (c == b'\n' && t.has(ECHONL)) {
            echo(p, c);
        }
        p.partial.push(c);
        end_line(p);
        return Ok(());
    }
    if p.partial.len() >= MAX_LINE {
        return Err(format!(
            "a terminal input line longer than {MAX_LINE} bytes"
        ));
    }
    if p.partial.is_empty() {
        p.line_column = p.column;
    }
    if t.has(ECHO) {
        echo(p, c);
    }
    p.partial.push(c);
    Ok(())
}

/// The canonical line being edited becomes readable.
fn end_line(p: &mut Pair) {
    p.lines.push_back(p.partial.len());
    p.input.extend(p.partial.drain(..));
}

/// Poll readiness of an end of pair `id`: `(readable, writable, hung
/// up, error)`.
pub fn poll_state(k: &Kernel, id: u32, end: End) -> (bool, bool, bool, bool) {
    let Some(p) = k.ptys.pairs.get(&id) else {
        return (true, true, true, true);
    };
    match end {
        End::Master => {
            let room = CAPACITY > p.input.len() + p.partial.len();
            (!p.output.is_empty(), room, slave_gone(k, id), false)
        }
        End::Slave => {
            if hung_up(k, id) {
                return (true, true, true, true);
            }
            let t = p.termios;
            let readable = if t.has(ICANON) {
                !p.lines.is_empty()
            } else {
                let min = if t.cc[VTIME] == 0 {
                    t.cc[VMIN] as usize
                } else {
                    1
                };
                p.input.len() >= min.max(1)
            };
            (readable, CAPACITY > p.output.len(), false, false)
        }
    }
}

/// Bytes a read of an end would find now (`FIONREAD`): complete lines
/// only, in canonical mode.
pub fn available(k: &Kernel, id: u32, end: End) -> u64 {
    k.ptys.pairs.get(&id).map_or(0, |p| match end {
        End::Master => p.output.len() as u64,
        End::Slave => p.input.len() as u64,
    })
}

// ----- ioctl

const TCGETS: u64 = 0x5401;
const TCSETS: u64 = 0x5402;
const TCSETSW: u64 = 0x5403;
const TCSETSF: u64 = 0x5404;
const TCSBRK: u64 = 0x5409;
const TCXONC: u64 = 0x540a;
const TCFLSH: u64 = 0x540b;
const TIOCSCTTY: u64 = 0x540e;
const TIOCGPGRP: u64 = 0x540f;
const TIOCSPGRP: u64 = 0x5410;
const TIOCOUTQ: u64 = 0x5411;
const TIOCGWINSZ: u64 = 0x5413;
const TIOCSWINSZ: u64 = 0x5414;
const TIOCPKT: u64 = 0x5420;
const TIOCNOTTY: u64 = 0x5422;
const TIOCGETD: u64 = 0x5424;
const TCSBRKP: u64 = 0x5425;
const TIOCSBRK: u64 = 0x5427;
const TIOCCBRK: u64 = 0x5428;
const TIOCGSID: u64 = 0x5429;
const TCGETS2: u64 = 0x802c_542a;
const TCSETS2: u64 = 0x402c_542b;
const TCSETSW2: u64 = 0x402c_542c;
const TCSETSF2: u64 = 0x402c_542d;
const TIOCGPTN: u64 = 0x8004_5430;
const TIOCSPTLCK: u64 = 0x4004_5431;
const TIOCGPTLCK: u64 = 0x8004_5439;
const TIOCGPKT: u64 = 0x8004_5438;
const TIOCGPTPEER: u64 = 0x5441;

/// What an ioctl on an end of a pair does, once it is decoded: most
/// are done here; opening the peer needs the descriptor table.
pub enum Ioctl {
    Done(SysResult),
    /// `TIOCGPTPEER`: open the slave with these flags.
    OpenPeer(i32),
}

fn done(r: Result<i64, i32>) -> Ioctl {
    Ioctl::Done(match r {
        Ok(v) => SysResult::Ret(v),
        Err(e) => err(e),
    })
}

/// `ioctl` request `req` with argument `arg` on an end of pair `id`.
/// Settings and window size are the slave's from either end, as Linux's.
pub fn ioctl(k: &mut Kernel, id: u32, end: End, req: u64, arg: u64) -> Ioctl {
    if !k.ptys.pairs.contains_key(&id) || (end == End::Slave && hung_up(k, id)) {
        return done(Err(libc::EIO));
    }
    match req {
        TCGETS | TCGETS2 => {
            let t = k.ptys.pairs[&id].termios;
            done(fault(k.write(arg, &t.to_bytes(req == TCGETS2))))
        }
        TCSETS | TCSETSW | TCSETSF | TCSETS2 | TCSETSW2 | TCSETSF2 => {
            let mut raw = [0u8; 36];
            if k.read(arg, &mut raw).is_err() {
                return done(Err(libc::EFAULT));
            }
            let t = Termios::from_bytes(&raw);
            if let Some(what) = t.unsupported() {
                return Ioctl::Done(SysResult::Unsupported(what));
            }
            let p = k.ptys.pairs.get_mut(&id).expect("looked up");
            if req == TCSETSF || req == TCSETSF2 {
                flush_input(p);
            }
            set_termios(p, t);
            changed(k, id);
            done(Ok(0))
        }
        TIOCGWINSZ => {
            let w = k.ptys.pairs[&id].winsize;
            let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
            done(fault(k.write(arg, &bytes)))
        }
        TIOCSWINSZ => {
            let mut raw = [0u8; 8];
            if k.read(arg, &mut raw).is_err() {
                return done(Err(libc::EFAULT));
            }
            // SIGWINCH would go to the foreground process group, which
            // no machine terminal has.
            let w = std::array::from_fn(|i| u16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]));
            k.ptys.pairs.get_mut(&id).expect("looked up").winsize = w;
            done(Ok(0))
        }
        TIOCOUTQ => done(fault(k.write(arg, &0u32.to_le_bytes()))),
        TCFLSH => {
            // Input is what this end reads, output what it writes.
            let (input, output) = match arg {
                0 => (true, false),
                1 => (false, true),
                2 => (true, true),
                _ => return done(Err(libc::EINVAL)),
            };
            let p = k.ptys.pairs.get_mut(&id).expect("looked up");
            let (slave_input, master_input) = match end {
                End::Slave => (input, output),
                End::Master => (output, input),
            };
            if slave_input {
                flush_input(p);
            }
            if master_input {
                p.output.clear();
            }
            changed(k, id);
            done(Ok(0))
        }
        // Draining waits for nothing: output is in the other end at once,
        // and a pty ignores breaks.
        TCSBRK | TCSBRKP | TIOCSBRK | TIOCCBRK => done(Ok(0)),
        TIOCGETD => done(fault(k.write(arg, &0u32.to_le_bytes()))),
        TIOCGPTN | TIOCSPTLCK | TIOCGPTLCK | TIOCGPKT | TIOCGPTPEER if end == End::Slave => {
            done(Err(libc::ENOTTY))
        }
        TIOCGPTN => done(fault(k.write(arg, &id.to_le_bytes()))),
        TIOCSPTLCK => {
            let Ok(v) = k.read_u32(arg) else {
                return done(Err(libc::EFAULT));
            };
            k.ptys.pairs.get_mut(&id).expect("looked up").locked = v != 0;
            done(Ok(0))
        }
        TIOCGPTLCK => {
            let v = u32::from(k.ptys.pairs[&id].locked);
            done(fault(k.write(arg, &v.to_le_bytes())))
        }
        TIOCGPKT => done(fault(k.write(arg, &0u32.to_le_bytes()))),
        TIOCPKT => match k.read_u32(arg) {
            Ok(0) => done(Ok(0)),
            Ok(_) => Ioctl::Done(SysResult::Unsupported("pty packet mode (TIOCPKT)".into())),
            Err(_) => done(Err(libc::EFAULT)),
        },
        TIOCGPTPEER => Ioctl::OpenPeer(arg as i32),
        // No machine terminal is a controlling terminal: the slave's
        // questions about its session are ENOTTY, as for any terminal
        // not the caller's; the master's are answered for the slave,
        // which has no process group.
        TIOCGPGRP if end == End::Master => done(fault(k.write(arg, &0u32.to_le_bytes()))),
        TIOCGPGRP | TIOCSPGRP | TIOCGSID | TIOCNOTTY => done(Err(libc::ENOTTY)),
        TIOCSCTTY => Ioctl::Done(SysResult::Unsupported(
            "controlling terminals (TIOCSCTTY)".into(),
        )),
        TCXONC => Ioctl::Done(SysResult::Unsupported(
            "terminal flow control (TCXONC)".into(),
        )),
        _ => Ioctl::Done(SysResult::Unsupported(format!(
            "terminal ioctl {req:#x} on a pseudoterminal"
        ))),
    }
}

/// 0, or EFAULT when the caller's memory could not be written.
fn fault<E>(r: Result<(), E>) -> Result<i64, i32> {
    r.map(|()| 0).map_err(|_| libc::EFAULT)
}

fn flush_input(p: &mut Pair) {
    p.input.clear();
    p.lines.clear();
    p.partial.clear();
}

/// New settings; a switch into or out of canonical mode regroups the
/// input as Linux's does: what was typed becomes readable.
fn set_termios(p: &mut Pair, t: Termios) {
    let was = p.termios.has(ICANON);
    p.termios = t;
    match (was, t.has(ICANON)) {
        (true, false) => {
            p.input.extend(p.partial.drain(..));
            p.lines.clear();
        }
        (false, true) => {
            p.lines.clear();
            if !p.input.is_empty() {
                p.lines.push_back(p.input.len());
            }
        }
        _ => {}
    }
}
