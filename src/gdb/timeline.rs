//! Positions in a run, and moving between them forward and backward.
//!
//! A run is deterministic, so a point in it is named by how to get there
//! from the start: the step (the system call) after which the thread the
//! schedule chose starts its stretch, then *legs* inside that stretch, each
//! relative to where the previous one ended: so many instructions, the n-th
//! arrival at an address, or on to the end of the run. Going anywhere, back
//! included, is restoring the snapshot taken at the program's first
//! instruction and replaying forward; nothing is recorded, nothing is
//! guessed.
//!
//! An *arrival* at an address is the thread standing there after it ran at
//! least one instruction from where the leg began: the start of a leg is
//! never an arrival, and a thread that begins its stretch at an address
//! stands at the stretch's start position (no leg at all).

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::debug::{Event, Pace};
use crate::engine::{Vm, VmError};
use crate::ids::Tid;

/// One leg of a position, relative to where the previous leg ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leg {
    /// This many instructions of the running thread.
    Instructions(u64),
    /// On until the `nth` arrival at `addr`.
    Arrival { addr: u64, nth: u64 },
    /// On until the run ends.
    ToEnd,
}

/// A point in the run.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Position {
    /// The last step taken.
    pub step: u64,
    /// Where in the stretch after that step.
    pub legs: Vec<Leg>,
}

impl Position {
    /// The start of the stretch after `step`.
    pub fn at_step(step: u64) -> Position {
        Position {
            step,
            legs: Vec::new(),
        }
    }

    /// This position followed by `leg` (instruction counts merge).
    pub fn then(&self, leg: Leg) -> Position {
        let mut p = self.clone();
        p.push(leg);
        p
    }

    fn push(&mut self, leg: Leg) {
        match (self.legs.last_mut(), leg) {
            (_, Leg::Instructions(0)) => {}
            (Some(Leg::Instructions(a)), Leg::Instructions(b)) => *a += b,
            _ => self.legs.push(leg),
        }
    }

    /// Whether the position is the end of the run.
    pub fn is_end(&self) -> bool {
        self.legs.last() == Some(&Leg::ToEnd)
    }

    /// The legs that lead from `self` to `to`, when `to` lies ahead along
    /// the same path (so no restart is needed).
    fn legs_to(&self, to: &Position) -> Option<Vec<Leg>> {
        if self.is_end() {
            return None;
        }
        if self.step < to.step {
            // On to the step (from anywhere in an earlier stretch), then the legs.
            return Some(to.legs.clone());
        }
        if self.step > to.step || self.legs.len() > to.legs.len() {
            return None;
        }
        let n = self.legs.len();
        if n == 0 {
            return Some(to.legs.clone());
        }
        if self.legs[..n - 1] != to.legs[..n - 1] {
            return None;
        }
        let mut rest = Vec::new();
        match (self.legs[n - 1], to.legs[n - 1]) {
            (a, b) if a == b => {}
            (Leg::Instructions(a), Leg::Instructions(b)) if a < b => {
                rest.push(Leg::Instructions(b - a))
            }
            _ => return None,
        }
        rest.extend_from_slice(&to.legs[n..]);
        Some(rest)
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {}", self.step)?;
        for leg in &self.legs {
            match leg {
                Leg::Instructions(n) => write!(f, ", {n} instructions")?,
                Leg::Arrival { addr, nth } => write!(f, ", arrival {nth} at {addr:#x}")?,
                Leg::ToEnd => write!(f, ", the end")?,
            }
        }
        Ok(())
    }
}

/// Why moving stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Halt {
    /// The thread completed the instruction it was asked to.
    Stepped,
    /// A breakpoint: the thread stands at this address.
    Breakpoint(u64),
    /// The start of the stretch that was asked for.
    Reached,
    /// The end of the run.
    End,
    /// The beginning of the run (reverse execution found nothing earlier).
    Begin,
    /// gdb asked to stop (Ctrl-C); the run stands at the start of a stretch.
    Interrupted,
}

/// What to do at an arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Stop,
    Go,
}

/// A run under the debugger and where it stands.
pub struct Timeline {
    vm: Vm,
    pos: Position,
    /// Instructions in the stretch after each step, once counted.
    stretch_len: BTreeMap<u64, u64>,
    /// The auxiliary vector the program started with (gdb finds where the
    /// program and the dynamic linker were loaded in it).
    auxv: Vec<u8>,
}

impl Timeline {
    /// Takes a `Vm` made for debugging (snapshot at the start, no hint
    /// ring) and stops it before the program's first instruction.
    pub fn new(mut vm: Vm) -> Result<Timeline, VmError> {
        vm.debug_restart()?;
        let step = vm.debug_kernel().step();
        let auxv = initial_auxv(&vm);
        Ok(Timeline {
            vm,
            pos: Position::at_step(step),
            stretch_len: BTreeMap::new(),
            auxv,
        })
    }

    /// The auxiliary vector the program started with, as Linux's
    /// `/proc/PID/auxv` has it.
    pub fn auxv(&self) -> &[u8] {
        &self.auxv
    }

    /// The machine (for reading threads and memory).
    pub fn vm(&self) -> &Vm {
        &self.vm
    }

    /// Hands the machine back (to finish the run).
    pub fn into_vm(self) -> Vm {
        self.vm
    }

    /// Where the run stands.
    pub fn position(&self) -> &Position {
        &self.pos
    }

    /// The thread that runs (or ran last).
    pub fn current(&self) -> Tid {
        self.vm.debug_kernel().current()
    }

    fn rip(&self) -> u64 {
        let k = self.vm.debug_kernel();
        k.threads().get(&k.current()).map_or(0, |t| t.regs.rip)
    }

    fn at_end(&self) -> bool {
        self.vm.debug_kernel().outcome().is_some()
    }

    fn restart(&mut self) -> Result<(), VmError> {
        self.vm.debug_restart()?;
        self.pos = Position::at_step(self.vm.debug_kernel().step());
        Ok(())
    }

    /// Goes to `to`: forward from here when it lies ahead, otherwise from
    /// the start.
    pub fn goto(&mut self, to: &Position) -> Result<(), VmError> {
        let legs = match self.pos.legs_to(to) {
            Some(l) if self.pos.step == to.step => l,
            Some(_) => {
                self.run_to_step(to.step, &BTreeSet::new(), &mut |_, _| Flow::Go)?;
                to.legs.clone()
            }
            None => {
                self.restart()?;
                self.run_to_step(to.step, &BTreeSet::new(), &mut |_, _| Flow::Go)?;
                to.legs.clone()
            }
        };
        if self.at_end() && !self.pos.is_end() {
            self.pos.push(Leg::ToEnd);
        }
        for leg in legs {
            if self.at_end() {
                break;
            }
            self.walk(leg, &BTreeSet::new(), &mut |_, _| Flow::Go)?;
        }
        Ok(())
    }

    /// Goes to the start of the stretch after step `step` (or the end, if
    /// the run ends first).
    pub fn goto_step(&mut self, step: u64) -> Result<Halt, VmError> {
        self.goto(&Position::at_step(step))?;
        Ok(if self.at_end() {
            Halt::End
        } else {
            Halt::Reached
        })
    }

    /// Goes to the end of the run.
    pub fn goto_end(&mut self) -> Result<(), VmError> {
        if !self.at_end() {
            self.free_run(&BTreeSet::new(), None, &mut |_, _| Flow::Go)?;
        }
        Ok(())
    }

    /// Runs free until the stretch after `step` starts, calling `hit` at
    /// arrivals at `watch` on the way.
    fn run_to_step(
        &mut self,
        step: u64,
        watch: &BTreeSet<u64>,
        hit: &mut dyn FnMut(&Position, u64) -> Flow,
    ) -> Result<Halt, VmError> {
        if self.pos.step >= step && self.pos.legs.is_empty() {
            return Ok(Halt::Reached);
        }
        self.free_run(watch, Some(step), hit)
    }

    /// Walks one leg from here, calling `hit` at arrivals at `watch` before
    /// its end (the leg's own end is not reported).
    fn walk(
        &mut self,
        leg: Leg,
        watch: &BTreeSet<u64>,
        hit: &mut dyn FnMut(&Position, u64) -> Flow,
    ) -> Result<(), VmError> {
        match leg {
            Leg::Instructions(k) => {
                for i in 0..k {
                    match self.instruction()? {
                        Halt::Stepped => {}
                        _ => break,
                    }
                    let rip = self.rip();
                    if i + 1 < k && watch.contains(&rip) {
                        hit(&self.pos, rip);
                    }
                }
            }
            Leg::Arrival { addr, nth } => {
                let mut all = watch.clone();
                all.insert(addr);
                self.free_run(&all, None, &mut |p, a| {
                    let is_target = p.legs.last() == Some(&Leg::Arrival { addr, nth });
                    if is_target {
                        return Flow::Stop;
                    }
                    if watch.contains(&a) {
                        hit(p, a);
                    }
                    Flow::Go
                })?;
            }
            Leg::ToEnd => {
                self.free_run(watch, None, hit)?;
            }
        }
        Ok(())
    }

    /// One instruction of the current thread.
    fn instruction(&mut self) -> Result<Halt, VmError> {
        loop {
            match self.vm.debug_resume(Pace::Instruction, &BTreeSet::new())? {
                Event::Nothing => continue,
                Event::Instruction | Event::Breakpoint(_) => {
                    self.pos.push(Leg::Instructions(1));
                    return Ok(Halt::Stepped);
                }
                Event::Step => {
                    self.pos = Position::at_step(self.vm.debug_kernel().step());
                    return Ok(Halt::Stepped);
                }
                Event::End => {
                    self.pos = self.end_from(&self.pos.clone());
                    return Ok(Halt::End);
                }
            }
        }
    }

    /// Runs free with `int3` at `watch`. At each arrival `hit` says whether
    /// to stop; the run also stops at the start of the stretch after
    /// `until_step` and at the end.
    fn free_run(
        &mut self,
        watch: &BTreeSet<u64>,
        until_step: Option<u64>,
        hit: &mut dyn FnMut(&Position, u64) -> Flow,
    ) -> Result<Halt, VmError> {
        self.free_run_interruptible(watch, until_step, hit, &mut || false)
    }

    /// `free_run` that also stops at the start of a stretch once
    /// `interrupted` says so. Only there: a position inside a stretch is an
    /// arrival or an instruction count, and a stop at a moment the host
    /// picked would be neither.
    fn free_run_interruptible(
        &mut self,
        watch: &BTreeSet<u64>,
        until_step: Option<u64>,
        hit: &mut dyn FnMut(&Position, u64) -> Flow,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> Result<Halt, VmError> {
        let mut base = self.pos.clone();
        let mut arrivals: BTreeMap<u64, u64> = BTreeMap::new();
        // Standing on a watched address is not arriving there: step off.
        let mut step_off = watch.contains(&self.rip());
        loop {
            let event = if step_off {
                loop {
                    match self.vm.debug_resume(Pace::Instruction, &BTreeSet::new())? {
                        Event::Nothing => continue,
                        e => break e,
                    }
                }
            } else {
                self.vm.debug_resume(Pace::Free, watch)?
            };
            let arrived = match event {
                Event::Nothing => None,
                Event::Instruction => Some(self.rip()).filter(|r| watch.contains(r)),
                Event::Breakpoint(a) => Some(a),
                Event::Step => {
                    let step = self.vm.debug_kernel().step();
                    base = Position::at_step(step);
                    arrivals.clear();
                    self.pos = base.clone();
                    if until_step.is_some_and(|s| step >= s) {
                        return Ok(Halt::Reached);
                    }
                    if interrupted() {
                        return Ok(Halt::Interrupted);
                    }
                    let rip = self.rip();
                    if watch.contains(&rip) && hit(&self.pos, rip) == Flow::Stop {
                        return Ok(Halt::Breakpoint(rip));
                    }
                    step_off = watch.contains(&rip);
                    continue;
                }
                Event::End => {
                    self.pos = self.end_from(&base);
                    return Ok(Halt::End);
                }
            };
            if let Some(addr) = arrived {
                let n = arrivals.entry(addr).or_insert(0);
                *n += 1;
                self.pos = base.then(Leg::Arrival { addr, nth: *n });
                if hit(&self.pos, addr) == Flow::Stop {
                    return Ok(Halt::Breakpoint(addr));
                }
            }
            step_off = watch.contains(&self.rip());
        }
    }

    /// The position of the end the run just reached from `from`: when a
    /// step ended it (an exit, a deadlock), the end follows that step;
    /// otherwise (a crash) it lies inside the stretch, after `from`.
    fn end_from(&self, from: &Position) -> Position {
        let step = self.vm.debug_kernel().step();
        if step != from.step {
            Position::at_step(step).then(Leg::ToEnd)
        } else {
            from.then(Leg::ToEnd)
        }
    }

    /// Single-steps `tid`: one instruction when it is the running thread;
    /// otherwise the run goes on (stopping at breakpoints) until the
    /// schedule runs it.
    pub fn step(&mut self, tid: Tid, breakpoints: &BTreeSet<u64>) -> Result<Halt, VmError> {
        if self.at_end() {
            return Ok(Halt::End);
        }
        if self.current() != tid && self.vm.debug_kernel().threads().contains_key(&tid) {
            loop {
                let h = self.cont_until_stretch(breakpoints)?;
                if h != Halt::Reached || self.current() == tid {
                    return Ok(h);
                }
            }
        }
        self.instruction()
    }

    /// Runs on until a breakpoint, the end, or the first stretch after
    /// `interrupted` says so.
    pub fn cont(
        &mut self,
        breakpoints: &BTreeSet<u64>,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> Result<Halt, VmError> {
        if self.at_end() {
            return Ok(Halt::End);
        }
        self.free_run_interruptible(breakpoints, None, &mut |_, _| Flow::Stop, interrupted)
    }

    /// Runs on until a breakpoint, the end, or the start of the next stretch.
    fn cont_until_stretch(&mut self, breakpoints: &BTreeSet<u64>) -> Result<Halt, VmError> {
        let next = self.pos.step + 1;
        self.free_run(breakpoints, Some(next), &mut |_, _| Flow::Stop)
    }

    /// Goes back one instruction (of whichever thread ran it).
    pub fn reverse_step(&mut self) -> Result<Halt, VmError> {
        let Some(to) = self.one_back(&self.pos.clone())? else {
            self.restart()?;
            return Ok(Halt::Begin);
        };
        self.goto(&to)?;
        Ok(Halt::Stepped)
    }

    /// The position one instruction before `p`, or none at the start.
    fn one_back(&mut self, p: &Position) -> Result<Option<Position>, VmError> {
        let mut prefix = p.clone();
        let Some(last) = prefix.legs.pop() else {
            // The start of a stretch: the last instruction of the one before.
            if p.step <= self.start_step() {
                return Ok(None);
            }
            let prev = p.step - 1;
            let n = self.stretch_length(prev)?;
            return Ok(Some(Position::at_step(prev).then(Leg::Instructions(n - 1))));
        };
        if let Leg::Instructions(k) = last {
            return Ok(Some(prefix.then(Leg::Instructions(k - 1))));
        }
        let n = self.count_leg(&prefix, last)?;
        if n == 0 {
            // Nothing ran on this leg (a fault at its first instruction).
            return self.one_back(&prefix);
        }
        Ok(Some(prefix.then(Leg::Instructions(n - 1))))
    }

    fn start_step(&self) -> u64 {
        0
    }

    /// Instructions the stretch after `step` runs, its system call included.
    fn stretch_length(&mut self, step: u64) -> Result<u64, VmError> {
        if let Some(n) = self.stretch_len.get(&step) {
            return Ok(*n);
        }
        self.goto(&Position::at_step(step))?;
        let mut n = 0;
        while self.pos.step == step && !self.at_end() {
            self.instruction()?;
            n += 1;
        }
        self.stretch_len.insert(step, n);
        Ok(n)
    }

    /// Instructions from `from` to the end of `leg` (for the end of the
    /// run: the instructions completed before it ended).
    fn count_leg(&mut self, from: &Position, leg: Leg) -> Result<u64, VmError> {
        self.goto(from)?;
        let mut n = 0;
        let mut arrivals = 0;
        loop {
            if self.at_end() {
                return Ok(n);
            }
            let h = self.instruction()?;
            if h == Halt::End {
                return Ok(n);
            }
            n += 1;
            if let Leg::Arrival { addr, nth } = leg {
                if self.rip() == addr {
                    arrivals += 1;
                    if arrivals == nth {
                        return Ok(n);
                    }
                }
            }
        }
    }

    /// Goes back to the last breakpoint arrival before here, or to the start
    /// when there is none.
    pub fn reverse_cont(&mut self, breakpoints: &BTreeSet<u64>) -> Result<Halt, VmError> {
        let target = self.pos.clone();
        let hits = self.arrivals_before(&target, breakpoints)?;
        match hits.last() {
            Some((p, addr)) => {
                let (p, addr) = (p.clone(), *addr);
                self.goto(&p)?;
                Ok(Halt::Breakpoint(addr))
            }
            None => {
                self.restart()?;
                Ok(Halt::Begin)
            }
        }
    }

    /// Every arrival at `watch` from the start up to (not including) `to`,
    /// in order; the run then stands at `to`.
    fn arrivals_before(
        &mut self,
        to: &Position,
        watch: &BTreeSet<u64>,
    ) -> Result<Vec<(Position, u64)>, VmError> {
        self.restart()?;
        let start = self.pos.clone();
        let mut hits = Vec::new();
        if watch.contains(&self.rip()) && *to != start {
            hits.push((start.clone(), self.rip()));
        }
        let mut record = |p: &Position, a: u64| {
            hits.push((p.clone(), a));
            Flow::Go
        };
        self.run_to_step(to.step, watch, &mut record)?;
        let rip = self.rip();
        if !self.at_end()
            && !to.legs.is_empty()
            && self.pos != start
            && self.pos.legs.is_empty()
            && watch.contains(&rip)
        {
            // The stretch begins at a breakpoint: before `to`.
            record(&self.pos.clone(), rip);
        }
        for (i, leg) in to.legs.iter().enumerate() {
            if self.at_end() {
                break;
            }
            self.walk(*leg, watch, &mut record)?;
            let rip = self.rip();
            if i + 1 < to.legs.len() && watch.contains(&rip) && !self.at_end() {
                record(&self.pos.clone(), rip);
            }
        }
        Ok(hits)
    }
}

/// Reads the auxiliary vector from the main thread's initial stack (argc,
/// argv, NULL, envp, NULL, then key-value pairs up to `AT_NULL`).
fn initial_auxv(vm: &Vm) -> Vec<u8> {
    let k = vm.debug_kernel();
    let Some(main) = k.threads().get(&crate::kernel::MAIN_TID) else {
        return Vec::new();
    };
    let word = |at: u64| {
        let mut b = [0u8; 8];
        vm.debug_read(at, &mut b).then(|| u64::from_le_bytes(b))
    };
    let mut at = main.regs.rsp;
    let Some(argc) = word(at) else {
        return Vec::new();
    };
    at += 8 * (argc + 2);
    while let Some(w) = word(at) {
        at += 8;
        if w == 0 {
            break;
        }
    }
    let mut out = Vec::new();
    for _ in 0..64 {
        let (Some(key), Some(val)) = (word(at), word(at + 8)) else {
            break;
        };
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&val.to_le_bytes());
        at += 16;
        if key == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instruction_legs_merge_and_a_later_position_lies_ahead() {
        let p = Position::at_step(5).then(Leg::Instructions(2));
        let q = p.then(Leg::Instructions(3));
        assert_eq!(q.legs, vec![Leg::Instructions(5)]);
        assert_eq!(p.legs_to(&q), Some(vec![Leg::Instructions(3)]));
        assert_eq!(q.legs_to(&p), None);
        let r = q.then(Leg::Arrival { addr: 0x10, nth: 1 });
        assert_eq!(
            q.legs_to(&r),
            Some(vec![Leg::Arrival { addr: 0x10, nth: 1 }])
        );
        assert_eq!(r.legs_to(&Position::at_step(4)), None);
        assert!(Position::at_step(3).legs_to(&r).is_some());
        assert_eq!(p.then(Leg::ToEnd).legs_to(&r), None);
    }
}
