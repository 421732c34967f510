//! Time: clocks, sleeps, process times. All virtual.

use super::{UNMAPPED, Want, cases};
use libc::*;

fn timespec(b: &mut super::Bench, sec: i64, nsec: i64) -> u64 {
    b.bytes(&[sec.to_le_bytes(), nsec.to_le_bytes()].concat())
}

cases! {
    clock_gettime_of_an_unknown_clock_is_einval: SYS_clock_gettime, |b| [99, b.buf(16), 0, 0, 0, 0], Want::Err(EINVAL);
    clock_gettime_into_an_unmapped_buffer_is_efault: SYS_clock_gettime,
        |_b| [CLOCK_MONOTONIC as u64, UNMAPPED, 0, 0, 0, 0], Want::Err(EFAULT);
    clock_gettime_realtime_starts_at_the_epoch: SYS_clock_gettime,
        |_b| [CLOCK_REALTIME as u64, super::SCRATCH + 4096, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), b.k.config().epoch);
    clock_getres_is_one_nanosecond: SYS_clock_getres,
        |_b| [CLOCK_MONOTONIC as u64, super::SCRATCH + 4096, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!((b.u64_at(super::SCRATCH + 4096), b.u64_at(super::SCRATCH + 4104)), (0, 1));
    nanosleep_blocks_until_its_deadline: SYS_nanosleep, |b| [timespec(b, 0, 1000), 0, 0, 0, 0, 0], Want::Blocks;
    nanosleep_with_negative_nanoseconds_is_einval: SYS_nanosleep, |b| [timespec(b, 0, -1), 0, 0, 0, 0, 0], Want::Err(EINVAL);
    nanosleep_with_a_whole_second_of_nanoseconds_is_einval: SYS_nanosleep,
        |b| [timespec(b, 0, 1_000_000_000), 0, 0, 0, 0, 0], Want::Err(EINVAL);
    nanosleep_from_an_unmapped_request_is_efault: SYS_nanosleep, |_b| [UNMAPPED, 0, 0, 0, 0, 0], Want::Err(EFAULT);
    clock_nanosleep_until_a_time_passed_only_yields: SYS_clock_nanosleep,
        |b| [CLOCK_MONOTONIC as u64, TIMER_ABSTIME as u64, timespec(b, 0, 0), 0, 0, 0], Want::Yields(0);
    clock_nanosleep_on_an_unknown_clock_is_einval: SYS_clock_nanosleep,
        |b| [99, 0, timespec(b, 0, 10), 0, 0, 0], Want::Err(EINVAL);
    gettimeofday_starts_at_the_epoch: SYS_gettimeofday, |_b| [super::SCRATCH + 4096, 0, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), b.k.config().epoch);
    time_returns_the_epoch_in_seconds: SYS_time, |_b| [0; 6], Want::Ret(1_767_225_600);
}
