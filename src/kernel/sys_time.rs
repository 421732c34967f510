//! Virtual time: clocks that advance a fixed quantum per step and jump to
//! the next timer when every thread sleeps.

use super::call::deadline;
use super::call::{SyscallDef, def};
use super::thread::Wait;
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(
        libc::SYS_clock_gettime,
        sys_clock_gettime,
        "CPU-time clocks read virtual time",
    ),
    def(libc::SYS_clock_getres, sys_clock_getres, ""),
    def(libc::SYS_gettimeofday, sys_gettimeofday, ""),
    def(libc::SYS_time, sys_time, ""),
    def(libc::SYS_nanosleep, sys_nanosleep, ""),
    def(libc::SYS_clock_nanosleep, sys_clock_nanosleep, ""),
    def(libc::SYS_times, sys_times, ""),
    def(
        libc::SYS_getrusage,
        sys_getrusage,
        "user time is virtual time; other fields are zero",
    ),
];

fn is_realtime(clock: u64) -> Option<bool> {
    match clock {
        0 | 5 | 8 | 11 => Some(true),       // REALTIME, _COARSE, _ALARM, TAI
        1 | 4 | 6 | 7 | 9 => Some(false),   // MONOTONIC, _RAW, _COARSE, BOOTTIME, _ALARM
        2 | 3 => Some(false),               // process and thread CPU time
        c if (c as i64) < 0 => Some(false), // per-thread/process CPU clocks (clockid from pid)
        _ => None,
    }
}

fn write_timespec(k: &mut Kernel, ptr: u64, ns: u64) -> SysResult {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
    b[8..].copy_from_slice(&(ns % 1_000_000_000).to_le_bytes());
    match k.write(ptr, &b) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

fn sys_clock_gettime(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let Some(real) = is_realtime(a[0]) else {
        return err(libc::EINVAL);
    };
    let ns = if real { k.realtime() } else { k.now };
    write_timespec(k, a[1], ns)
}

fn sys_clock_getres(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if is_realtime(a[0]).is_none() {
        return err(libc::EINVAL);
    }
    if a[1] == 0 {
        return SysResult::Ret(0);
    }
    write_timespec(k, a[1], 1)
}

fn sys_gettimeofday(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] != 0 {
        let ns = k.realtime();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
        b[8..].copy_from_slice(&((ns % 1_000_000_000) / 1000).to_le_bytes());
        if k.write(a[0], &b).is_err() {
            return err(libc::EFAULT);
        }
    }
    if a[1] != 0 && k.write(a[1], &[0u8; 8]).is_err() {
        return err(libc::EFAULT);
    }
    SysResult::Ret(0)
}

fn sys_time(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let secs = k.realtime() / 1_000_000_000;
    if a[0] != 0 && k.write_u64(a[0], secs).is_err() {
        return err(libc::EFAULT);
    }
    SysResult::Ret(secs as i64)
}

fn sleep_until(d: Option<u64>) -> SysResult {
    match d {
        Some(deadline) => SysResult::Block(Wait::Sleep { deadline }),
        None => err(libc::EFAULT),
    }
}

fn sys_nanosleep(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] == 0 {
        return err(libc::EFAULT);
    }
    match deadline(k, a[0], false, false) {
        Ok(d) => sleep_until(d),
        Err(e) => err(e),
    }
}

const TIMER_ABSTIME: u64 = 1;

fn sys_clock_nanosleep(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let Some(real) = is_realtime(a[0]) else {
        return err(libc::EINVAL);
    };
    if a[2] == 0 {
        return err(libc::EFAULT);
    }
    match deadline(k, a[2], a[1] & TIMER_ABSTIME != 0, real) {
        Ok(Some(d)) if d <= k.now => SysResult::Yield(0),
        Ok(d) => sleep_until(d),
        Err(e) => err(e),
    }
}

fn sys_times(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let ticks = k.now / 10_000_000; // CLK_TCK = 100
    if a[0] != 0 {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&ticks.to_le_bytes());
        if k.write(a[0], &b).is_err() {
            return err(libc::EFAULT);
        }
    }
    SysResult::Ret(ticks as i64)
}

fn sys_getrusage(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let mut b = [0u8; 144];
    let ns = k.now;
    b[..8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
    b[8..16].copy_from_slice(&((ns % 1_000_000_000) / 1000).to_le_bytes());
    match k.write(a[1], &b) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}
