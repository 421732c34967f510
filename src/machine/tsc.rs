//! Keeping the guest's `rdtsc` faulting without paying for it on every exit.
//!
//! CR4.TSD is set in the guest's control registers, which bare-metal KVM
//! honours on its own. The nested KVM of the development machines runs guest
//! user code with the host thread's own CR4, so the thread that calls
//! `KVM_RUN` must ask its kernel for TSD too (`PR_SET_TSC`). Each request is
//! a CR4 write, itself emulated there; asking around every `KVM_RUN` cost a
//! fifth of an exit. So the engine asks once per run.
//!
//! The monitor's own code on that thread still reads the TSC meanwhile: the
//! vDSO's `clock_gettime` (behind `Instant::now`) executes `rdtsc`, which now
//! faults with SIGSEGV. A process-wide handler recognises those faults,
//! lifts TSD for the one instruction, executes it and puts TSD back; any
//! other SIGSEGV goes to the handler that was there before (Rust's
//! stack-overflow report) or to the default action.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    /// How many `TscTrap`s this thread holds.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

static INSTALL: Once = Once::new();

/// The SIGSEGV disposition before ours, to pass other faults on to.
static mut PREVIOUS: Option<libc::sigaction> = None;

/// Makes `rdtsc` fault for guest code run from this thread while it lives;
/// the monitor's own `rdtsc` keeps working. Nested traps cost nothing, so
/// the engine holds one for a whole run and `KVM_RUN` one more for itself.
///
/// The kernel keeps the request across `fork` and `execve`, so nothing may
/// start a process while a trap is held: a program started with it would
/// fault in its dynamic linker's first `rdtsc`.
pub struct TscTrap(());

impl TscTrap {
    pub fn hold() -> TscTrap {
        if DEPTH.get() == 0 {
            INSTALL.call_once(install_handler);
            set_tsd(true);
        }
        DEPTH.set(DEPTH.get() + 1);
        TscTrap(())
    }
}

impl Drop for TscTrap {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get() - 1);
        if DEPTH.get() == 0 {
            set_tsd(false);
        }
    }
}

fn set_tsd(on: bool) {
    let mode = if on {
        libc::PR_TSC_SIGSEGV
    } else {
        libc::PR_TSC_ENABLE
    };
    // SAFETY: prctl with integer arguments; it only changes this thread's
    // TSC-access flag, and the handler serves the faults it causes.
    unsafe { libc::prctl(libc::PR_SET_TSC, mode, 0, 0, 0) };
}

fn install_handler() {
    // SAFETY: a zeroed sigaction is a valid value to fill in; the handler is
    // async-signal-safe (it reads memory it knows is mapped, edits the
    // context it is given and makes two prctl calls). PREVIOUS is written
    // here, once, before the handler can run, and only read afterwards.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigsegv as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGSEGV, &action, &mut previous);
        PREVIOUS = Some(previous);
    }
}

/// Which TSC instruction starts at `rip`, if any: its length and whether it
/// is `rdtscp`.
///
/// # Safety
/// `rip` must be the address of a faulting instruction, so that the three
/// bytes from it are mapped.
unsafe fn tsc_instruction_at(rip: *const u8) -> Option<(u64, bool)> {
    // SAFETY: the caller's contract; the code the CPU fetched is mapped.
    let bytes = unsafe { std::ptr::read_unaligned(rip as *const [u8; 3]) };
    match bytes {
        [0x0f, 0x31, _] => Some((2, false)),
        [0x0f, 0x01, 0xf9] => Some((3, true)),
        _ => None,
    }
}

extern "C" fn on_sigsegv(signal: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid ucontext for an SA_SIGINFO handler;
    // RIP points at the instruction that faulted.
    unsafe {
        let uc = &mut *(context as *mut libc::ucontext_t);
        let gregs = &mut uc.uc_mcontext.gregs;
        let rip = gregs[libc::REG_RIP as usize] as u64;
        // In user mode these fault only under TSD, so the thread asked for
        // it (or was started by one that did: the flag is inherited).
        if let Some((len, with_aux)) = tsc_instruction_at(rip as *const u8) {
            let (value, aux) = read_tsc_once(with_aux);
            gregs[libc::REG_RAX as usize] = (value & 0xffff_ffff) as i64;
            gregs[libc::REG_RDX as usize] = (value >> 32) as i64;
            if with_aux {
                gregs[libc::REG_RCX as usize] = aux as i64;
            }
            gregs[libc::REG_RIP as usize] = (rip + len) as i64;
            return;
        }
        pass_on(signal, info, context);
    }
}

/// Reads the TSC (and TSC_AUX) with TSD lifted for this one instruction.
/// The thread is known to hold TSD: the instruction faulted.
fn read_tsc_once(with_aux: bool) -> (u64, u32) {
    set_tsd(false);
    let mut aux = 0u32;
    // SAFETY: rdtsc and rdtscp only read counters.
    let value = unsafe {
        if with_aux {
            core::arch::x86_64::__rdtscp(&mut aux)
        } else {
            core::arch::x86_64::_rdtsc()
        }
    };
    set_tsd(true);
    (value, aux)
}

/// Hands a fault that is not ours to the previous disposition.
///
/// # Safety
/// Called from the SIGSEGV handler with its own arguments.
unsafe fn pass_on(signal: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: PREVIOUS was written before the handler was installed.
    let previous = unsafe { (*std::ptr::addr_of!(PREVIOUS)).as_ref().copied() };
    let handler = previous.map_or(libc::SIG_DFL, |p| p.sa_sigaction);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Returning re-executes the faulting instruction, which now takes the
        // default action: the process ends with SIGSEGV, as it would have.
        // SAFETY: restoring the default disposition is always valid.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
        return;
    }
    let flags = previous.map_or(0, |p| p.sa_flags);
    // SAFETY: the previous handler was installed for this signal, with the
    // calling convention its flags say.
    unsafe {
        if flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(signal, info, context);
        } else {
            let f: extern "C" fn(i32) = std::mem::transmute(handler);
            f(signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsc_mode() -> i32 {
        let mut mode = 0;
        // SAFETY: PR_GET_TSC writes one int through the pointer.
        unsafe { libc::prctl(libc::PR_GET_TSC, &mut mode as *mut i32, 0, 0, 0) };
        mode
    }

    #[test]
    fn the_monitor_reads_the_tsc_and_the_clock_while_holding_tsd() {
        // A thread of its own: the flag stays with the thread that asked.
        std::thread::spawn(|| {
            let outer = TscTrap::hold();
            let inner = TscTrap::hold();
            assert_eq!(tsc_mode(), libc::PR_TSC_SIGSEGV, "the thread holds TSD");
            let t0 = std::time::Instant::now();
            // SAFETY: rdtsc and rdtscp only read counters.
            let (a, b) = unsafe {
                let a = core::arch::x86_64::_rdtsc();
                let mut aux = 0;
                (a, core::arch::x86_64::__rdtscp(&mut aux))
            };
            assert!(b > a, "the TSC moves forward: {a} then {b}");
            assert!(t0.elapsed() < std::time::Duration::from_secs(5));
            drop(inner);
            assert_eq!(tsc_mode(), libc::PR_TSC_SIGSEGV, "the outer trap holds");
            drop(outer);
            assert_eq!(tsc_mode(), libc::PR_TSC_ENABLE, "released with the last");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn other_faults_still_end_the_process_with_sigsegv() {
        use std::os::unix::process::ExitStatusExt;
        if std::env::var_os("REWIND_TSC_FAULT_CHILD").is_some() {
            let _trap = TscTrap::hold();
            // SAFETY: deliberately not safe: the child must die of it.
            unsafe { std::ptr::write_volatile(std::ptr::dangling_mut::<u64>(), 1) };
            unreachable!();
        }
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "machine::tsc::tests::other_faults_still_end_the_process_with_sigsegv",
            ])
            .env("REWIND_TSC_FAULT_CHILD", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // A handler that returned without passing the fault on would make
        // the child fault forever: fail instead of waiting for it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("the fault did not end the child");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}");
    }
}
