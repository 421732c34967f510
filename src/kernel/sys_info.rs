//! Identity and system information: fixed answers, the same on every machine.

use super::call::{SyscallDef, def};
use super::synth::RELEASE;
use super::{FpuAccess, Kernel, MAIN_TID, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_getuid, sys_zero, "the guest runs as root"),
    def(libc::SYS_geteuid, sys_zero, ""),
    def(libc::SYS_getgid, sys_zero, ""),
    def(libc::SYS_getegid, sys_zero, ""),
    def(libc::SYS_getresuid, sys_getres, ""),
    def(libc::SYS_getresgid, sys_getres, ""),
    def(libc::SYS_getgroups, sys_zero, ""),
    def(
        libc::SYS_setuid,
        sys_set_id,
        "to root (0) only: the guest runs as root",
    ),
    def(libc::SYS_setgid, sys_set_id, "to root (0) only"),
    def(
        libc::SYS_setreuid,
        sys_set_two_ids,
        "to root (0) or unchanged (-1) only",
    ),
    def(
        libc::SYS_setregid,
        sys_set_two_ids,
        "to root (0) or unchanged (-1) only",
    ),
    def(
        libc::SYS_setresuid,
        sys_set_ids,
        "to root (0) or unchanged (-1) only",
    ),
    def(
        libc::SYS_setresgid,
        sys_set_ids,
        "to root (0) or unchanged (-1) only",
    ),
    def(
        libc::SYS_setfsuid,
        sys_zero,
        "the file-system uid stays root's (0)",
    ),
    def(
        libc::SYS_setfsgid,
        sys_zero,
        "the file-system gid stays root's (0)",
    ),
    def(
        libc::SYS_setgroups,
        sys_set_groups,
        "to no supplementary group or root's only",
    ),
    def(libc::SYS_uname, sys_uname, ""),
    def(
        libc::SYS_capget,
        sys_capget,
        "root's capabilities, every one up to CAP_LAST_CAP (40)",
    ),
    def(libc::SYS_sysinfo, sys_sysinfo, ""),
    def(
        libc::SYS_prlimit64,
        sys_prlimit64,
        "limits are recorded, not enforced (except the stack size programs read)",
    ),
    def(libc::SYS_getrlimit, sys_getrlimit, ""),
    def(libc::SYS_setrlimit, sys_setrlimit, ""),
    def(
        libc::SYS_getrandom,
        sys_getrandom,
        "bytes come from the run's seed",
    ),
    def(libc::SYS_umask, sys_umask, ""),
    def(
        libc::SYS_personality,
        sys_personality,
        "the Linux domain, ADDR_NO_RANDOMIZE or not",
    ),
    def(libc::SYS_getpriority, sys_getpriority, ""),
    def(
        libc::SYS_setpriority,
        sys_zero,
        "accepted; the strategy decides who runs",
    ),
];

fn sys_zero(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(0)
}

fn sys_getres(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    for p in &a[..3] {
        if k.write_u32(*p, 0).is_err() {
            return err(libc::EFAULT);
        }
    }
    SysResult::Ret(0)
}

fn sys_set_id(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    sys_set_ids(k, cpu, [a[0], 0, 0, 0, 0, 0])
}

fn sys_set_two_ids(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    sys_set_ids(k, cpu, [a[0], a[1], 0, 0, 0, 0])
}

/// `setresuid` and relatives: the guest runs as root, and stays root; a
/// change to another user (which would drop privileges Linux then checks)
/// is not modelled, and says so rather than pretending.
fn sys_set_ids(_: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let ids = [a[0] as u32, a[1] as u32, a[2] as u32];
    match ids.iter().find(|id| **id != 0 && **id != u32::MAX) {
        None => SysResult::Ret(0),
        Some(id) => SysResult::Unsupported(format!(
            "changing to user or group {id}: the guest runs as root only"
        )),
    }
}

fn sys_set_groups(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let n = a[0] as i32;
    if !(0..=65536).contains(&n) {
        return err(libc::EINVAL);
    }
    for i in 0..n as u64 {
        match k.read_u32(a[1] + i * 4) {
            Ok(0) => {}
            Ok(g) => {
                return SysResult::Unsupported(format!(
                    "joining group {g}: the guest runs as root only"
                ));
            }
            Err(_) => return err(libc::EFAULT),
        }
    }
    SysResult::Ret(0)
}

fn sys_uname(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let fields = [
        "Linux",
        "rewind",
        RELEASE,
        "#1 SMP PREEMPT_DYNAMIC",
        "x86_64",
        "(none)",
    ];
    let mut buf = [0u8; 65 * 6];
    for (i, f) in fields.iter().enumerate() {
        buf[i * 65..i * 65 + f.len()].copy_from_slice(f.as_bytes());
    }
    match k.write(a[0], &buf) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

fn sys_sysinfo(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let mut b = [0u8; 112];
    let put =
        |b: &mut [u8; 112], off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    put(&mut b, 0, k.now / 1_000_000_000);
    let total = k.mem.size();
    let used = k.mm.allocator().in_use() * crate::arch::layout::PAGE_SIZE;
    put(&mut b, 32, total);
    put(&mut b, 40, total.saturating_sub(used));
    b[80..82].copy_from_slice(&(k.live_threads() as u16).to_le_bytes());
    b[104..108].copy_from_slice(&1u32.to_le_bytes());
    match k.write(a[0], &b) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

const RLIM_INFINITY: u64 = u64::MAX;
const RLIMIT_STACK: u32 = 3;
const RLIMIT_NOFILE: u32 = 7;
const RLIM_NLIMITS: u32 = 16;

/// The default limits, as a typical Linux login has them.
fn default_limit(resource: u32) -> (u64, u64) {
    match resource {
        RLIMIT_STACK => (8 << 20, RLIM_INFINITY),
        RLIMIT_NOFILE => (1024, 4096),
        4 => (0, RLIM_INFINITY),  // RLIMIT_CORE
        6 => (63_000, 63_000),    // RLIMIT_NPROC
        8 => (8 << 20, 8 << 20),  // RLIMIT_MEMLOCK
        11 => (63_000, 63_000),   // RLIMIT_SIGPENDING
        12 => (819_200, 819_200), // RLIMIT_MSGQUEUE
        _ => (RLIM_INFINITY, RLIM_INFINITY),
    }
}

fn prlimit(k: &mut Kernel, resource: u32, new: u64, old: u64) -> SysResult {
    if resource >= RLIM_NLIMITS {
        return err(libc::EINVAL);
    }
    let cur = *k
        .process_entry()
        .limits
        .get(&resource)
        .unwrap_or(&default_limit(resource));
    if old != 0 && (k.write_u64(old, cur.0).is_err() || k.write_u64(old + 8, cur.1).is_err()) {
        return err(libc::EFAULT);
    }
    if new != 0 {
        let (Ok(soft), Ok(hard)) = (k.read_u64(new), k.read_u64(new + 8)) else {
            return err(libc::EFAULT);
        };
        if soft > hard {
            return err(libc::EINVAL);
        }
        k.process_entry_mut().limits.insert(resource, (soft, hard));
        if resource == RLIMIT_NOFILE {
            k.files_mut().limit = soft.min(1 << 20) as i32;
        }
    }
    SysResult::Ret(0)
}

fn sys_prlimit64(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] != 0 && a[0] != MAIN_TID.0 as u64 {
        return err(libc::ESRCH);
    }
    prlimit(k, a[1] as u32, a[2], a[3])
}

fn sys_getrlimit(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    prlimit(k, a[0] as u32, 0, a[1])
}

fn sys_setrlimit(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    prlimit(k, a[0] as u32, a[1], 0)
}

fn sys_getrandom(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    const NONBLOCK: u64 = 1;
    const RANDOM: u64 = 2;
    const INSECURE: u64 = 4;
    let flags = a[2];
    if flags & !(NONBLOCK | RANDOM | INSECURE) != 0
        || flags & (RANDOM | INSECURE) == RANDOM | INSECURE
    {
        return err(libc::EINVAL);
    }
    let n = (a[1] as usize).min(32 << 20);
    let mut buf = vec![0u8; n];
    k.random_bytes(&mut buf);
    match k.write(a[0], &buf) {
        Ok(()) => SysResult::Ret(n as i64),
        Err(_) => err(libc::EFAULT),
    }
}

fn sys_umask(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let old = k.vfs.umask;
    k.vfs.umask = a[0] as u32 & 0o777;
    SysResult::Ret(old as i64)
}

/// `ADDR_NO_RANDOMIZE`: what the machine does anyway, since its layout
/// never depends on chance.
const ADDR_NO_RANDOMIZE: u32 = 0x0004_0000;

/// `personality`: the Linux domain, with or without address
/// randomization, which the machine never does either way. Other
/// domains and flags (a 32-bit layout, READ_IMPLIES_EXEC, ...) change
/// what the machine would have to do and are named.
fn sys_personality(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let pid = k.pid;
    let Some(p) = k.procs.get_mut(&pid) else {
        return err(libc::ESRCH);
    };
    let old = p.options.personality;
    match a[0] as u32 {
        0xffff_ffff => SysResult::Ret(i64::from(old)),
        new if new & !ADDR_NO_RANDOMIZE == 0 => {
            p.options.personality = new;
            SysResult::Ret(i64::from(old))
        }
        new => SysResult::Unsupported(format!("personality({new:#x})")),
    }
}

fn sys_getpriority(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    // The raw call returns 20 - nice; nice is 0.
    SysResult::Ret(20)
}

/// `_LINUX_CAPABILITY_VERSION_3`, the version with two 32-bit words.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// The capabilities of root: every one Linux 6.1 has (0 to 40), effective
/// and permitted; none inheritable.
fn sys_capget(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let mut header = [0u8; 8];
    if k.read(a[0], &mut header).is_err() {
        return err(libc::EFAULT);
    }
    let version = u32::from_le_bytes(header[0..4].try_into().unwrap());
    let pid = i32::from_le_bytes(header[4..8].try_into().unwrap());
    if version != CAPABILITY_VERSION_3 {
        // Linux writes the version it prefers back and refuses.
        if k.write(a[0], &CAPABILITY_VERSION_3.to_le_bytes()).is_err() {
            return err(libc::EFAULT);
        }
        return err(libc::EINVAL);
    }
    if pid < 0 {
        return err(libc::EINVAL);
    }
    if pid > 1 {
        return err(libc::ESRCH);
    }
    if a[1] == 0 {
        return SysResult::Ret(0);
    }
    // Two {effective, permitted, inheritable} triples: bits 0-31, 32-40.
    let words: [u32; 6] = [u32::MAX, u32::MAX, 0, 0x1ff, 0x1ff, 0];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    match k.write(a[1], &bytes) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}
