//! Scheduling: at every step a strategy chooses which runnable thread runs
//! next. The kernel says who can run; only the strategy says who does.

use crate::kernel::Tid;

/// What a strategy sees at a scheduling point.
#[derive(Debug)]
pub struct SchedView<'a> {
    /// The step just taken.
    pub step: u64,
    /// The thread that took it.
    pub current: Tid,
    /// Whether that thread can go on running.
    pub current_runnable: bool,
    /// Whether it asked to give up the CPU (`sched_yield`).
    pub yielded: bool,
    /// Every runnable thread, in thread-id order (never empty).
    pub runnable: &'a [Tid],
}

/// A scheduling policy.
pub trait Strategy: Send {
    /// Its name as the command line spells it.
    fn name(&self) -> String;
    /// Chooses the next thread; must be one of `view.runnable`.
    fn pick(&mut self, view: &SchedView) -> Tid;
}

/// The next runnable thread after `after` in thread-id order, wrapping.
pub fn round_robin_after(after: Tid, runnable: &[Tid]) -> Tid {
    *runnable
        .iter()
        .find(|t| **t > after)
        .unwrap_or(&runnable[0])
}

/// Runs the current thread until it blocks or yields, then the next one in
/// thread-id order: no preemption, like a uniprocessor with cooperative
/// threads.
#[derive(Debug, Default, Clone)]
pub struct RunUntilBlocked;

impl Strategy for RunUntilBlocked {
    fn name(&self) -> String {
        "default".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        if v.current_runnable && !v.yielded {
            return v.current;
        }
        round_robin_after(v.current, v.runnable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(current: u32, runnable: bool, yielded: bool, all: &'a [Tid]) -> SchedView<'a> {
        SchedView {
            step: 1,
            current: Tid(current),
            current_runnable: runnable,
            yielded,
            runnable: all,
        }
    }

    #[test]
    fn the_default_keeps_the_running_thread_until_it_blocks_or_yields() {
        let all = [Tid(1), Tid(2), Tid(3)];
        let mut s = RunUntilBlocked;
        assert_eq!(s.pick(&view(2, true, false, &all)), Tid(2));
        assert_eq!(s.pick(&view(2, true, true, &all)), Tid(3));
        assert_eq!(s.pick(&view(3, true, true, &all)), Tid(1));
        let rest = [Tid(1)];
        assert_eq!(s.pick(&view(2, false, false, &rest)), Tid(1));
    }

    #[test]
    fn a_yielding_thread_alone_keeps_running() {
        let all = [Tid(4)];
        assert_eq!(RunUntilBlocked.pick(&view(4, true, true, &all)), Tid(4));
    }
}
