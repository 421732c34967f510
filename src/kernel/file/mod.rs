//! The kernel's open-file objects, apart from the system calls that reach
//! them: what each kind of open file does when it is read, written, polled,
//! stat'ed, sought or let go of, behind one interface.
//!
//! The system-call families (`sys_*.rs`) decode arguments and call these;
//! each kind's state and rules live in its own module here.

pub mod pipe;

use crate::kernel::Kernel;
use crate::kernel::files::Held;
use crate::kernel::ready::Ready;
use crate::kernel::thread::{ThreadState, Tid, Wait};

// ----- waiters and lifetimes

/// Takes up again the calls that waited on a pipe (and the polls) once
/// they can go on: each re-executes its `syscall` instruction. Called
/// after every system call. Only the waiters of what changed are looked
/// at, so a step costs the same however many threads wait beside it.
pub(in crate::kernel) fn settle(k: &mut Kernel) {
    k.sync_files();
    if k.pipes.is_idle() && k.sockets.is_empty() && k.epolls.is_empty() {
        // Nothing anyone could wait on exists: what was let go of or
        // touched is gone already.
        k.changes.take_dropped();
        k.changes.take_touched();
        return;
    }
    let ends = k.pipe_ends();
    k.pipes.ends_now(ends);
    let activity = k.pipes.take_activity();
    let any_activity = k.config.polls_retry_on_any_activity;
    let touched = k.changes.take_touched();
    let mut waiters: std::collections::BTreeSet<Tid> = touched
        .iter()
        .flat_map(|key| k.threads.waiting_on(key))
        .collect();
    if any_activity && activity {
        waiters.extend(k.threads.polls());
    }
    k.changes.count(waiters.len() as u64);
    let ready: Vec<(Tid, u64)> = waiters
        .into_iter()
        .filter_map(|tid| match k.threads[&tid].state() {
            ThreadState::Blocked(Wait::Pipe { id, write, len, nr }) => {
                pipe::can_go(k, *id, *write, *len).then_some((tid, *nr))
            }
            ThreadState::Blocked(Wait::Poll { nr, .. } | Wait::Readable { nr, .. }) => {
                (!any_activity || activity).then_some((tid, *nr))
            }
            _ => None,
        })
        .collect();
    for (tid, nr) in ready {
        k.restart(tid, nr);
    }
    if k.changes.any_dropped() {
        collect(k);
    }
}

/// Forgets the pipes, counters, epolls and bound sockets whose last
/// description went: only those some table let go of since the last
/// look, so a close costs the same however many descriptors are open.
fn collect(k: &mut Kernel) {
    let mut candidates = k.changes.take_dropped();
    while let Some(h) = candidates.pop() {
        if k.held_anywhere(h) {
            continue;
        }
        match h {
            Held::PipeEnd { id, write } => pipe::let_go_of_end(k, id, write),
            Held::Counter(id) => k.pipes.forget_counter(id),
            Held::Epoll(id) => super::sys_epoll::forget(k, id),
            Held::Bound(id) => {
                // Connections it never accepted go with it: their other
                // ends see the end at the next look.
                for (rx, tx) in super::sys_net::forget(k, id) {
                    k.touch(Ready::Pipe(rx));
                    k.touch(Ready::Pipe(tx));
                    candidates.push(Held::PipeEnd {
                        id: rx,
                        write: false,
                    });
                    candidates.push(Held::PipeEnd {
                        id: tx,
                        write: true,
                    });
                }
            }
        }
    }
}
