//! Work spread over threads, results streamed back to the caller.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use super::{Runner, schedule_seed};
use crate::engine::{RunConfig, RunReport, VmError};
use crate::kernel::vfs::SharedSource;
use crate::sched::Strategy;

/// Runs `work(i, state)` for every `i` in `0..n` on `jobs` threads, each
/// with its own `state` from `init` (a machine, say), and hands each result
/// to `each` on the calling thread as it arrives, in completion order.
/// The first error, or `each` breaking, stops the rest: no new item starts.
pub fn for_each_parallel<S, T, E>(
    n: usize,
    jobs: usize,
    init: impl Fn() -> S + Sync,
    work: impl Fn(usize, &mut S) -> Result<T, E> + Sync,
    mut each: impl FnMut(usize, T) -> ControlFlow<()>,
) -> Result<(), E>
where
    T: Send,
    E: Send,
{
    let next = AtomicUsize::new(0);
    let stop = || next.store(usize::MAX / 2, Ordering::Relaxed);
    // Bounded, so that workers run at most one item ahead of the caller
    // and a break stops the work soon.
    let (tx, rx) = mpsc::sync_channel::<(usize, Result<T, E>)>(jobs.max(1));
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, n.max(1)) {
            let tx = tx.clone();
            let (next, init, work) = (&next, &init, &work);
            scope.spawn(move || {
                let mut state = init();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = work(i, &mut state);
                    let failed = r.is_err();
                    if tx.send((i, r)).is_err() || failed {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            match r {
                Ok(v) => {
                    if each(i, v).is_break() {
                        stop();
                    }
                }
                Err(e) => {
                    stop();
                    return Err(e);
                }
            }
        }
        Ok(())
    })
}

/// Runs `f(i)` for every `i` in `0..n` on `jobs` threads and returns the
/// results in item order; the first error stops the rest.
pub fn map_parallel<T: Send, E: Send>(
    n: usize,
    jobs: usize,
    f: impl Fn(usize) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for_each_parallel(
        n,
        jobs,
        || (),
        |i, _| f(i),
        |i, v| {
            out[i] = Some(v);
            ControlFlow::Continue(())
        },
    )?;
    Ok(out
        .into_iter()
        .map(|v| v.expect("every item ran"))
        .collect())
}

/// Runs schedules `0..n` of one program on `jobs` machines (each restored
/// from its snapshot between schedules), schedule `i` chosen by
/// `strategy(schedule_seed(seed, i))`, and streams `(i, report)` to `each`
/// as they finish.
pub fn run_schedules<E: Send + From<VmError>>(
    cfg: &RunConfig,
    source: &SharedSource,
    jobs: usize,
    n: u64,
    seed: u64,
    strategy: impl Fn(u64) -> Result<Box<dyn Strategy>, E> + Sync,
    each: impl FnMut(u64, RunReport) -> ControlFlow<()>,
) -> Result<(), E> {
    let mut each = each;
    for_each_parallel(
        n as usize,
        jobs,
        || Runner::new(cfg.clone(), source.clone()),
        |i, runner| {
            let s = strategy(schedule_seed(seed, i as u64))?;
            Ok(runner.run(s)?)
        },
        |i, r| each(i as u64, r),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_runs_once_and_comes_back_in_item_order() {
        let v: Vec<usize> = map_parallel(100, 4, |i| Ok::<_, ()>(i * 2)).unwrap();
        assert_eq!(v, (0..100).map(|i| i * 2).collect::<Vec<_>>());
    }

    #[test]
    fn the_first_error_stops_the_work() {
        let ran = AtomicUsize::new(0);
        let r = map_parallel(1000, 2, |i| {
            ran.fetch_add(1, Ordering::Relaxed);
            if i == 5 { Err(i) } else { Ok(i) }
        });
        assert_eq!(r, Err(5));
        assert!(ran.load(Ordering::Relaxed) < 1000);
    }

    #[test]
    fn breaking_out_stops_new_items() {
        let mut seen = 0;
        for_each_parallel(
            1000,
            1,
            || (),
            |i, _| Ok::<_, ()>(i),
            |_, _| {
                seen += 1;
                if seen == 10 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        )
        .unwrap();
        assert!(seen < 1000);
    }
}
