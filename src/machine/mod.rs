//! The machine: one KVM vCPU in 64-bit long mode over the guest's memory.
//!
//! The guest runs only user code. Its `syscall` instruction and every
//! exception enter the entry stub (`guest/entry.S`), which leaves to the
//! monitor with one `out`; the monitor always resumes the guest through the
//! stub's `iretq` with a frame it wrote itself. Registers move through KVM's
//! sync-regs area, so an exit costs one `KVM_RUN` and no other ioctl.
//!
//! This module is the only one that talks to KVM.

mod cpuid;
mod tsc;
mod watchdog;

use std::time::Duration;

use kvm_bindings::{
    KVM_MEM_LOG_DIRTY_PAGES, Msrs, kvm_msr_entry, kvm_regs, kvm_segment, kvm_sregs,
    kvm_userspace_memory_region, kvm_vcpu_events, kvm_xsave,
};
use kvm_ioctls::{Cap, Kvm, SyncReg, VcpuExit, VcpuFd, VmFd};

pub use cpuid::MODEL_NAME as CPU_MODEL_NAME;
pub use tsc::TscTrap;
pub use watchdog::Cancel;
use watchdog::Watchdog;

use crate::arch::cpu::{
    ExtendedState, RFLAGS_FIXED, RFLAGS_IF, RFLAGS_TF, RFLAGS_USER_MASK, UserRegs, XSAVE_SIZE,
};
use crate::arch::layout::*;
use crate::memory::PhysMemory;

unsafe extern "C" {
    static rewind_stub_start: u8;
    static rewind_stub_iret: u8;
    static rewind_stub_vectors: u8;
    static rewind_stub_end: u8;
}
std::arch::global_asm!(
    include_str!("../../guest/entry.S"),
    ring_bp_rip = const crate::arch::abi::RING_VA + crate::arch::abi::RING_BP_RIP * 8,
    dispatcher = const crate::arch::abi::SITES_VA,
    sites_on = const PHYS_STUB_DATA - PHYS_STUB,
    options(att_syntax)
);

/// I/O port of the system-call door.
const PORT_SYSCALL: u16 = 0x10;
/// I/O port of exception vector 0; vector v uses `PORT_VECTOR0 + v`.
const PORT_VECTOR0: u16 = 0x80;
/// Offset of the `iretq` door in the stub.
const STUB_IRET: u64 = 0x8;
/// Offset of exception vector 0's door; each takes 8 bytes.
const STUB_VECTORS: u64 = 0x100;
/// Where `syscall` enters (MSR_LSTAR).
const SYSCALL_DOOR: u64 = kernel_virt(PHYS_STUB);
const VECTOR_PAGE_FAULT: u8 = 14;

/// MSR numbers.
const MSR_EFER: u32 = 0xc000_0080;
const MSR_STAR: u32 = 0xc000_0081;
const MSR_LSTAR: u32 = 0xc000_0082;
const MSR_SFMASK: u32 = 0xc000_0084;
const MSR_FS_BASE: u32 = 0xc000_0100;
const MSR_GS_BASE: u32 = 0xc000_0101;
const MSR_KERNEL_GS_BASE: u32 = 0xc000_0102;

const CR0_PE: u64 = 1;
const CR0_MP: u64 = 1 << 1;
const CR0_ET: u64 = 1 << 4;
const CR0_NE: u64 = 1 << 5;
const CR0_WP: u64 = 1 << 16;
const CR0_PG: u64 = 1 << 31;
const CR4_TSD: u64 = 1 << 2;
const CR4_PAE: u64 = 1 << 5;
const CR4_OSFXSR: u64 = 1 << 9;
const CR4_OSXMMEXCPT: u64 = 1 << 10;
const CR4_OSXSAVE: u64 = 1 << 18;
const EFER_SCE: u64 = 1;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;
const EFER_NXE: u64 = 1 << 11;
/// RFLAGS bits `syscall` clears on entry: TF, DF, IF, IOPL, AC, NT.
const SFMASK: u64 = 0x47700;

/// Exceptions that push an error code.
const fn has_error_code(vector: u8) -> bool {
    matches!(vector, 8 | 10 | 11 | 12 | 13 | 14 | 17 | 21 | 29 | 30)
}

/// Errors of the machine. Each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// `/dev/kvm` is missing or cannot be opened.
    #[error(
        "cannot open {0} ({1}): rewind-fuzz needs KVM; run on Linux with KVM enabled and read/write access to /dev/kvm (root or the kvm group)"
    )]
    NoKvm(String, String),
    /// KVM lacks a capability the machine needs.
    #[error("this KVM lacks {0}, which rewind-fuzz needs; use a newer host kernel")]
    MissingCapability(&'static str),
    /// The host CPU cannot present the fixed CPU model.
    #[error("{0}")]
    CpuModel(String),
    /// A KVM call failed.
    #[error("KVM {0} failed: {1}")]
    Kvm(&'static str, kvm_ioctls::Error),
    /// The guest reached a state the monitor never puts it in.
    #[error("internal error: {0}")]
    Internal(String),
}

fn kvm_err(what: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> MachineError {
    move |e| MachineError::Kvm(what, e)
}

/// Why the guest stopped running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The current thread executed `syscall`; its registers are in the
    /// argument of [`Machine::user_regs`].
    Syscall,
    /// A CPU exception in user mode.
    Exception {
        vector: u8,
        error_code: u64,
        /// CR2 for page faults.
        fault_addr: u64,
    },
    /// The wall-clock watchdog fired: no progress for its whole limit.
    TimedOut,
}

/// The KVM virtual machine with its single vCPU.
pub struct Machine {
    vm: VmFd,
    vcpu: VcpuFd,
    mem_size: u64,
    mem_host: u64,
    /// The page behind the flush slot (see [`Machine::invalidate_translations`]).
    flush_page: Box<FlushPage>,
    loaded_fs_base: u64,
    /// The page-table root (CR3) the vCPU was last given.
    loaded_root: u64,
    /// How often the root changed (address-space switches).
    pub root_switches: u64,
    /// The system registers and event state of the vCPU standing at a door
    /// (ring 0, nothing pending): what an exit from outside puts back.
    door_state: Option<(kvm_sregs, kvm_vcpu_events)>,
    watchdog: Watchdog,
    /// The last exit's user registers are read from the kernel stack for
    /// exceptions; this records which kind of exit is pending.
    last_exit: Option<Exit>,
    /// Whether the last system call arrived as a fault on the syscall door.
    syscall_via_fault: bool,
    /// Exits taken since the machine was made.
    pub exits: u64,
    /// Translation invalidations performed.
    pub invalidations: u64,
}

impl Machine {
    /// Creates the VM over `mem` and writes the system tables and the entry
    /// stub into it. The vCPU is left ready to enter user mode at the first
    /// [`Machine::resume`].
    pub fn new(mem: &PhysMemory) -> Result<Self, MachineError> {
        let path = kvm_device();
        let kvm = Kvm::new_with_path(std::ffi::CString::new(path.clone()).unwrap_or_default())
            .map_err(|e| MachineError::NoKvm(path, e.to_string()))?;
        for (cap, name) in [
            (Cap::SyncRegs, "KVM_CAP_SYNC_REGS"),
            (Cap::Xsave, "KVM_CAP_XSAVE"),
            (Cap::Xcrs, "KVM_CAP_XCRS"),
            (Cap::ImmediateExit, "KVM_CAP_IMMEDIATE_EXIT"),
        ] {
            if !kvm.check_extension(cap) {
                return Err(MachineError::MissingCapability(name));
            }
        }
        let cpuid = cpuid::fixed_model().map_err(MachineError::CpuModel)?;
        let vm = kvm.create_vm().map_err(kvm_err("KVM_CREATE_VM"))?;
        // Only used by Intel's real-mode emulation, but KVM wants it set.
        vm.set_tss_address(0xfffb_d000)
            .map_err(kvm_err("KVM_SET_TSS_ADDR"))?;
        let machine_vcpu = vm.create_vcpu(0).map_err(kvm_err("KVM_CREATE_VCPU"))?;
        machine_vcpu
            .set_cpuid2(&cpuid)
            .map_err(kvm_err("KVM_SET_CPUID2"))?;
        let mut m = Machine {
            vm,
            vcpu: machine_vcpu,
            mem_size: mem.size(),
            mem_host: mem.host_base() as u64,
            flush_page: Box::new(FlushPage([0; 4096])),
            loaded_fs_base: 0,
            loaded_root: PHYS_PML4,
            root_switches: 0,
            door_state: None,
            watchdog: Watchdog::new(),
            last_exit: None,
            syscall_via_fault: false,
            exits: 0,
            invalidations: 0,
        };
        m.register_memory()?;
        m.set_flush_slot(true)?;
        write_system_tables(mem);
        m.init_vcpu()?;
        Ok(m)
    }

    fn register_memory(&mut self) -> Result<(), MachineError> {
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: KVM_MEM_LOG_DIRTY_PAGES,
            guest_phys_addr: 0,
            memory_size: self.mem_size,
            userspace_addr: self.mem_host,
        };
        // SAFETY: the region is the guest memory mapping, which the owner of
        // this machine keeps alive (and unmoved) for as long as the VM exists.
        unsafe { self.vm.set_user_memory_region(region) }
            .map_err(kvm_err("KVM_SET_USER_MEMORY_REGION"))
    }

    /// Adds or deletes the flush slot: one page just above guest memory that
    /// no page table maps, there only to be deleted.
    fn set_flush_slot(&mut self, present: bool) -> Result<(), MachineError> {
        let region = kvm_userspace_memory_region {
            slot: FLUSH_SLOT,
            flags: 0,
            guest_phys_addr: self.mem_size,
            memory_size: if present { 4096 } else { 0 },
            userspace_addr: self.flush_page.0.as_ptr() as u64,
        };
        // SAFETY: the region is `flush_page`, a page-aligned allocation this
        // machine owns for as long as the VM exists; the guest never maps it.
        unsafe { self.vm.set_user_memory_region(region) }
            .map_err(kvm_err("KVM_SET_USER_MEMORY_REGION"))
    }

    fn init_vcpu(&mut self) -> Result<(), MachineError> {
        let mut sregs = self.vcpu.get_sregs().map_err(kvm_err("KVM_GET_SREGS"))?;
        let code = kvm_segment {
            base: 0,
            limit: 0xffff_ffff,
            selector: SEL_KERNEL_CS,
            type_: 11,
            present: 1,
            dpl: 0,
            db: 0,
            s: 1,
            l: 1,
            g: 1,
            ..Default::default()
        };
        let data = kvm_segment {
            selector: SEL_KERNEL_DS,
            type_: 3,
            l: 0,
            db: 1,
            ..code
        };
        sregs.cs = code;
        sregs.ds = data;
        sregs.es = data;
        sregs.ss = data;
        sregs.fs = kvm_segment {
            selector: 0,
            ..data
        };
        sregs.gs = kvm_segment {
            selector: 0,
            ..data
        };
        sregs.tr = kvm_segment {
            base: kernel_virt(PHYS_TSS),
            limit: 103,
            selector: SEL_TSS,
            type_: 11,
            present: 1,
            dpl: 0,
            db: 0,
            s: 0,
            l: 0,
            g: 0,
            ..Default::default()
        };
        sregs.gdt.base = kernel_virt(PHYS_GDT);
        sregs.gdt.limit = 10 * 8 - 1;
        sregs.idt.base = kernel_virt(PHYS_IDT);
        sregs.idt.limit = 32 * 16 - 1;
        sregs.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_PG;
        sregs.cr3 = PHYS_PML4;
        sregs.cr4 = CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT | CR4_OSXSAVE | CR4_TSD;
        sregs.efer = EFER_SCE | EFER_LME | EFER_LMA | EFER_NXE;
        self.vcpu
            .set_sregs(&sregs)
            .map_err(kvm_err("KVM_SET_SREGS"))?;

        let stub = SYSCALL_DOOR;
        let star = ((SEL_USER_CS as u64 - 16) << 48) | ((SEL_KERNEL_CS as u64) << 32);
        let msrs = [
            (MSR_STAR, star),
            (MSR_LSTAR, stub),
            (MSR_SFMASK, SFMASK),
            (MSR_FS_BASE, 0),
            (MSR_GS_BASE, 0),
            (MSR_KERNEL_GS_BASE, 0),
            (MSR_EFER, sregs.efer),
        ];
        let entries: Vec<kvm_msr_entry> = msrs
            .iter()
            .map(|&(index, data)| kvm_msr_entry {
                index,
                data,
                ..Default::default()
            })
            .collect();
        let msrs =
            Msrs::from_entries(&entries).map_err(|e| MachineError::Internal(format!("{e:?}")))?;
        let n = self.vcpu.set_msrs(&msrs).map_err(kvm_err("KVM_SET_MSRS"))?;
        if n != entries.len() {
            return Err(MachineError::Internal(format!(
                "KVM accepted {n} of {} MSRs",
                entries.len()
            )));
        }
        let mut xcrs = self.vcpu.get_xcrs().map_err(kvm_err("KVM_GET_XCRS"))?;
        xcrs.nr_xcrs = 1;
        xcrs.xcrs[0].xcr = 0;
        xcrs.xcrs[0].value = cpuid::guest_xcr0();
        self.vcpu.set_xcrs(&xcrs).map_err(kvm_err("KVM_SET_XCRS"))?;
        self.set_extended_state(&ExtendedState::initial())?;

        self.vcpu.set_sync_valid_reg(SyncReg::Register);
        self.vcpu.set_sync_valid_reg(SyncReg::SystemRegister);
        // KVM fills the sync area only at exits; seed it so that the first
        // `resume` and `set_fs_base` edit real values, not zeros.
        let sregs = self.vcpu.get_sregs().map_err(kvm_err("KVM_GET_SREGS"))?;
        self.vcpu.sync_regs_mut().sregs = sregs;
        let events = self
            .vcpu
            .get_vcpu_events()
            .map_err(kvm_err("KVM_GET_VCPU_EVENTS"))?;
        self.door_state = Some((sregs, events));
        Ok(())
    }

    /// Puts the vCPU back at a door after it was stopped from outside.
    ///
    /// Every other exit leaves through the entry stub, in ring 0 with nothing
    /// pending, which is where [`Machine::resume`] expects the vCPU. The
    /// watchdog's signal can stop it anywhere: in user mode (user code and
    /// stack segments loaded), or halfway through delivering an exception.
    /// Resuming from there would run the stub at ring 3 and fault, so the
    /// next run would crash where a fresh one would not.
    fn return_to_door(&mut self) -> Result<(), MachineError> {
        let (sregs, events) = self.door_state.expect("set when the vCPU was made");
        self.vcpu
            .set_vcpu_events(&events)
            .map_err(kvm_err("KVM_SET_VCPU_EVENTS"))?;
        self.vcpu.sync_regs_mut().sregs = sregs;
        self.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
        // The FS base and CR3 just went back to the door's: reload the
        // thread's.
        self.loaded_fs_base = u64::MAX;
        self.loaded_root = u64::MAX;
        self.last_exit = None;
        Ok(())
    }

    /// Arranges for the next [`Machine::run`] to enter user mode with `regs`.
    pub fn resume(&mut self, mem: &PhysMemory, regs: &UserRegs) {
        let frame = PHYS_KSTACK_TOP - 40;
        let rflags = (regs.rflags & RFLAGS_USER_MASK) | RFLAGS_FIXED | RFLAGS_IF;
        let words = [
            regs.rip,
            SEL_USER_CS as u64,
            rflags,
            regs.rsp,
            SEL_USER_DS as u64,
        ];
        let mut bytes = [0u8; 40];
        for (i, w) in words.iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        mem.write(frame, &bytes);
        let sync = self.vcpu.sync_regs_mut();
        sync.regs = kvm_regs {
            rax: regs.rax,
            rbx: regs.rbx,
            rcx: regs.rcx,
            rdx: regs.rdx,
            rsi: regs.rsi,
            rdi: regs.rdi,
            rsp: kernel_virt(frame),
            rbp: regs.rbp,
            r8: regs.r8,
            r9: regs.r9,
            r10: regs.r10,
            r11: regs.r11,
            r12: regs.r12,
            r13: regs.r13,
            r14: regs.r14,
            r15: regs.r15,
            rip: kernel_virt(PHYS_STUB + STUB_IRET),
            rflags: RFLAGS_FIXED,
        };
        self.vcpu.set_sync_dirty_reg(SyncReg::Register);
    }

    /// Makes the next [`Machine::run`] execute one user instruction and
    /// leave through the debug-exception door (vector 1): sets the trap flag
    /// in the frame [`Machine::resume`] wrote, never in the thread's own
    /// registers. For the debugger only.
    pub fn trap_after_one_instruction(&mut self, mem: &PhysMemory) {
        let at = PHYS_KSTACK_TOP - 40 + 16;
        mem.write_u64(at, mem.read_u64(at) | RFLAGS_TF);
    }

    /// Forgets what the vCPU was last loaded with (after a snapshot restore),
    /// so the next loads write it whatever it is.
    pub fn forget_loaded_state(&mut self) {
        self.loaded_fs_base = u64::MAX;
        self.loaded_root = u64::MAX;
    }

    /// Sets the FS base (thread pointer) the guest will run with.
    pub fn set_fs_base(&mut self, base: u64) {
        if base != self.loaded_fs_base {
            let sync = self.vcpu.sync_regs_mut();
            sync.sregs.fs.base = base;
            self.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
            self.loaded_fs_base = base;
        }
    }

    /// Sets the page-table root (CR3) the guest will run with: each process
    /// has its own address space.
    pub fn set_page_table_root(&mut self, root: u64) {
        if root != self.loaded_root {
            let sync = self.vcpu.sync_regs_mut();
            sync.sregs.cr3 = root;
            self.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
            self.loaded_root = root;
            self.root_switches += 1;
        }
    }

    /// Runs the guest until it leaves to the monitor.
    pub fn run(&mut self) -> Result<Exit, MachineError> {
        // Held already for a whole run by the engine: then this is free.
        let _tsc = TscTrap::hold();
        loop {
            if self.watchdog.fired() {
                self.return_to_door()?;
                return Ok(Exit::TimedOut);
            }
            self.exits += 1;
            self.watchdog.in_guest(true);
            let result = self.vcpu.run();
            self.watchdog.in_guest(false);
            let outcome = match result {
                Ok(VcpuExit::IoOut(port, _)) => Ok(Some(port)),
                Ok(VcpuExit::Intr) => Ok(None),
                Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => Ok(None),
                Ok(VcpuExit::Hlt) => Err(
                    "the guest reached hlt: the monitor did not redirect it after a door"
                        .to_string(),
                ),
                Ok(other) => Err(format!("unexpected KVM exit {other:?}")),
                Err(e) => return Err(MachineError::Kvm("KVM_RUN", e)),
            };
            let exit = match outcome {
                Ok(Some(port)) => Some(self.door(port)?),
                Ok(None) => None,
                Err(what) => {
                    let rip = self.vcpu.sync_regs().regs.rip;
                    return Err(MachineError::Internal(format!("{what} (rip {rip:#x})")));
                }
            };
            // KVM_RUN clears the dirty flags only when it ran; keep them for
            // an interrupted run so the registers still get loaded.
            if let Some(exit) = exit {
                self.vcpu.clear_sync_dirty_reg(SyncReg::Register);
                self.vcpu.clear_sync_dirty_reg(SyncReg::SystemRegister);
                self.last_exit = Some(exit);
                return Ok(exit);
            }
        }
    }

    fn door(&mut self, port: u16) -> Result<Exit, MachineError> {
        if port == PORT_SYSCALL {
            self.syscall_via_fault = false;
            return Ok(Exit::Syscall);
        }
        if (PORT_VECTOR0..PORT_VECTOR0 + 32).contains(&port) {
            let vector = (port - PORT_VECTOR0) as u8;
            let sync = self.vcpu.sync_regs();
            let rsp = sync.regs.rsp;
            let error_code = if has_error_code(vector) {
                self.kernel_stack_word(rsp, 0)?
            } else {
                0
            };
            if vector == VECTOR_PAGE_FAULT
                && sync.sregs.cr2 == SYSCALL_DOOR
                && self.kernel_stack_word(rsp, 1)? == SYSCALL_DOOR
            {
                // The nested KVM of the development machines jumps to LSTAR
                // without entering ring 0, so the fetch of the supervisor-only
                // door faults. RCX and R11 hold what `syscall` saved all the
                // same: it is a system call, taken by another door.
                self.syscall_via_fault = true;
                return Ok(Exit::Syscall);
            }
            return Ok(Exit::Exception {
                vector,
                error_code,
                fault_addr: sync.sregs.cr2,
            });
        }
        Err(MachineError::Internal(format!(
            "guest wrote to unknown port {port:#x}"
        )))
    }

    fn kernel_stack_word(&self, rsp: u64, index: u64) -> Result<u64, MachineError> {
        let at = rsp.wrapping_sub(KERNEL_VIRT_BASE) + index * 8;
        if !(PHYS_KSTACK_BOTTOM..PHYS_KSTACK_TOP).contains(&at) {
            return Err(MachineError::Internal(format!(
                "exception frame outside the kernel stack (rsp {rsp:#x})"
            )));
        }
        // SAFETY: `at` was checked to lie in the kernel stack, inside the
        // guest memory mapping, which outlives the machine; the vCPU is not
        // running (we hold `&self` between runs).
        let v = unsafe { std::ptr::read_unaligned((self.mem_host + at) as *const u64) };
        Ok(v)
    }

    /// The user registers at the last exit.
    pub fn user_regs(&self) -> Result<UserRegs, MachineError> {
        let sync = self.vcpu.sync_regs();
        let r = &sync.regs;
        let mut u = UserRegs {
            r15: r.r15,
            r14: r.r14,
            r13: r.r13,
            r12: r.r12,
            rbp: r.rbp,
            rbx: r.rbx,
            r11: r.r11,
            r10: r.r10,
            r9: r.r9,
            r8: r.r8,
            rax: r.rax,
            rcx: r.rcx,
            rdx: r.rdx,
            rsi: r.rsi,
            rdi: r.rdi,
            rip: 0,
            rflags: 0,
            rsp: r.rsp,
        };
        match self.last_exit {
            Some(Exit::Syscall) => {
                // `syscall` saved the return address in RCX and the flags in
                // R11, and left RSP alone (or the fault frame holds it).
                u.rip = r.rcx;
                u.rflags = r.r11;
                if self.syscall_via_fault {
                    u.rsp = self.kernel_stack_word(r.rsp, 4)?;
                }
            }
            Some(Exit::Exception { vector, .. }) => {
                let skip = has_error_code(vector) as u64;
                let cs = self.kernel_stack_word(r.rsp, skip + 1)?;
                if cs & 3 != 3 {
                    let rip = self.kernel_stack_word(r.rsp, skip)?;
                    return Err(MachineError::Internal(format!(
                        "exception {vector} in the entry stub at {rip:#x}"
                    )));
                }
                u.rip = self.kernel_stack_word(r.rsp, skip)?;
                u.rflags = self.kernel_stack_word(r.rsp, skip + 2)?;
                u.rsp = self.kernel_stack_word(r.rsp, skip + 3)?;
            }
            _ => {
                return Err(MachineError::Internal(
                    "no exit to read registers from".into(),
                ));
            }
        }
        Ok(u)
    }

    /// Where the guest is, as of the last exit (for reports of runs stopped
    /// from outside, like the watchdog's).
    pub fn guest_rip(&self) -> u64 {
        self.vcpu.sync_regs().regs.rip
    }

    /// Reads the extended (FPU/SSE/AVX) state.
    pub fn extended_state(&self) -> Result<ExtendedState, MachineError> {
        let x = self.vcpu.get_xsave().map_err(kvm_err("KVM_GET_XSAVE"))?;
        let mut bytes = Box::new([0u8; XSAVE_SIZE]);
        for (i, w) in x.region.iter().enumerate() {
            bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        Ok(ExtendedState(bytes))
    }

    /// Loads the extended (FPU/SSE/AVX) state.
    pub fn set_extended_state(&mut self, s: &ExtendedState) -> Result<(), MachineError> {
        let mut x = kvm_xsave::default();
        for (i, w) in x.region.iter_mut().enumerate() {
            *w = u32::from_le_bytes(s.0[i * 4..i * 4 + 4].try_into().unwrap());
        }
        // SAFETY: `x` is a complete, initialized kvm_xsave of the legacy
        // 4096-byte size, which is what KVM_SET_XSAVE reads.
        unsafe { self.vcpu.set_xsave(&x) }.map_err(kvm_err("KVM_SET_XSAVE"))
    }

    /// Makes the guest see every page-table change made since it last ran.
    ///
    /// On the nested, shadow-paging KVM of the development machines neither a
    /// guest TLB flush (a CR3 reload or `invlpg` in the entry stub, both
    /// tried) nor KVM_SET_SREGS drops stale translations; deleting a memory
    /// slot does, since KVM then zaps every shadow page of the VM. The slot
    /// deleted is the one-page flush slot, not guest memory's: deleting that
    /// one also frees and rebuilds its per-page metadata and dirty log, a
    /// cost that grows with `--memory` (5.6 ms at 4 GiB against ~50 us for
    /// the page). On bare metal a cheaper path (a flush in the entry stub)
    /// would do; this is the one place to change.
    pub fn invalidate_translations(&mut self) -> Result<(), MachineError> {
        self.set_flush_slot(false)?;
        self.set_flush_slot(true)?;
        self.invalidations += 1;
        Ok(())
    }

    fn dirty_log_raw(&self) -> Result<Vec<u64>, MachineError> {
        self.vm
            .get_dirty_log(0, self.mem_size as usize)
            .map_err(kvm_err("KVM_GET_DIRTY_LOG"))
    }

    /// Pages the guest wrote since the last call, as a bitmap of 64-page
    /// words; the log is cleared.
    pub fn take_dirty_log(&mut self) -> Result<Vec<u64>, MachineError> {
        self.dirty_log_raw()
    }

    /// Starts the wall-clock watchdog: when [`Machine::progress`] is not
    /// called for `limit`, the guest is interrupted and [`Machine::run`]
    /// returns [`Exit::TimedOut`].
    pub fn arm_watchdog(&mut self, limit: Duration, cancel: &Cancel) {
        self.watchdog.arm(limit, cancel);
    }

    /// Whether the last [`Exit::TimedOut`] was a cancellation from outside.
    pub fn cancelled(&self) -> bool {
        self.watchdog.cancelled()
    }

    /// Tells the watchdog the guest made progress.
    pub fn progress(&self) {
        self.watchdog.progress();
    }

    /// Stops the watchdog.
    pub fn disarm_watchdog(&mut self) {
        self.watchdog.disarm();
    }
}

/// The KVM device: `/dev/kvm`, or `$REWIND_KVM_DEVICE` (for hosts that put it
/// elsewhere, and for testing the message given when it is missing).
pub fn kvm_device() -> String {
    std::env::var("REWIND_KVM_DEVICE").unwrap_or_else(|_| "/dev/kvm".into())
}

/// The memory slot [`Machine::invalidate_translations`] deletes and adds.
const FLUSH_SLOT: u32 = 1;

/// The host page behind the flush slot (KVM wants it page-aligned).
#[repr(align(4096))]
struct FlushPage([u8; 4096]);

/// Where the entry stub's switch for sync sites without an exit lives in
/// guest-physical memory: a byte, 1 to let the breakpoint handler send a
/// sync site's `int3` to the site dispatcher (see `arch::abi`), 0 to make it
/// an exit like any other exception.
pub const SITES_SWITCH_PHYS: u64 = PHYS_STUB_DATA;

/// The entry stub's bytes, as assembled into this binary.
fn stub_bytes() -> &'static [u8] {
    // SAFETY: the four symbols are labels in one section of `guest/entry.S`,
    // start before end; the bytes between them are initialized read-only data
    // for the life of the program.
    unsafe {
        let start = &raw const rewind_stub_start;
        let end = &raw const rewind_stub_end;
        debug_assert_eq!(
            (&raw const rewind_stub_iret).offset_from(start),
            STUB_IRET as isize
        );
        debug_assert_eq!(
            (&raw const rewind_stub_vectors).offset_from(start),
            STUB_VECTORS as isize
        );
        std::slice::from_raw_parts(start, end.offset_from(start) as usize)
    }
}

/// Writes the GDT, IDT, TSS, kernel page tables and the entry stub.
fn write_system_tables(mem: &PhysMemory) {
    let stub = stub_bytes();
    assert!(
        stub.len() as u64 > STUB_VECTORS + 32 * 8 && stub.len() < 0x1000,
        "entry stub layout changed"
    );
    mem.write(PHYS_STUB, stub);

    // GDT, Linux's layout: 0x10 kernel code, 0x18 kernel data, 0x20 user
    // code32 (unused), 0x28 user data, 0x30 user code, 0x40 TSS.
    let tss = kernel_virt(PHYS_TSS);
    let tss_low = 103 | ((tss & 0xff_ffff) << 16) | (0x89u64 << 40) | (((tss >> 24) & 0xff) << 56);
    let gdt: [u64; 10] = [
        0,
        0,
        0x00af_9b00_0000_ffff,
        0x00cf_9300_0000_ffff,
        0x00cf_fb00_0000_ffff,
        0x00cf_f300_0000_ffff,
        0x00af_fb00_0000_ffff,
        0,
        tss_low,
        tss >> 32,
    ];
    for (i, e) in gdt.iter().enumerate() {
        mem.write_u64(PHYS_GDT + i as u64 * 8, *e);
    }

    // TSS: RSP0 is where exceptions from user mode push their frame; no I/O
    // bitmap (its offset points past the limit).
    let mut t = [0u8; 104];
    t[4..12].copy_from_slice(&kernel_virt(PHYS_KSTACK_TOP).to_le_bytes());
    t[102..104].copy_from_slice(&104u16.to_le_bytes());
    mem.write(PHYS_TSS, &t);

    // IDT: 32 interrupt gates to the vector doors. Breakpoint and overflow
    // are reachable from user mode (`int3`, `into`), as on Linux.
    for v in 0..32u64 {
        let handler = kernel_virt(PHYS_STUB + STUB_VECTORS + v * 8);
        let dpl: u64 = if v == 3 || v == 4 { 3 } else { 0 };
        let kind = 0x8e | (dpl << 5);
        let low = (handler & 0xffff)
            | ((SEL_KERNEL_CS as u64) << 16)
            | (kind << 40)
            | (((handler >> 16) & 0xffff) << 48);
        mem.write_u64(PHYS_IDT + v * 16, low);
        mem.write_u64(PHYS_IDT + v * 16 + 8, handler >> 32);
    }

    // Kernel half: PML4[511] -> PDPT[0] -> PD[0], one supervisor 2 MiB page
    // over guest-physical 0 (the system area). User code cannot touch it.
    use crate::memory::paging::{PTE_A, PTE_D, PTE_G, PTE_P, PTE_PS, PTE_W};
    mem.write_u64(
        PHYS_PML4 + 511 * 8,
        PHYS_KERNEL_PDPT | PTE_P | PTE_W | PTE_A,
    );
    mem.write_u64(PHYS_KERNEL_PDPT, PHYS_KERNEL_PD | PTE_P | PTE_W | PTE_A);
    mem.write_u64(
        PHYS_KERNEL_PD,
        PTE_P | PTE_W | PTE_PS | PTE_G | PTE_A | PTE_D,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_stub_has_the_layout_the_monitor_expects() {
        let s = stub_bytes();
        assert_eq!(&s[0..2], &[0xe6, PORT_SYSCALL as u8]);
        assert_eq!(
            &s[STUB_IRET as usize..STUB_IRET as usize + 2],
            &[0x48, 0xcf]
        );
        for v in (0..32).filter(|v| *v != 3) {
            let at = (STUB_VECTORS + v * 8) as usize;
            assert_eq!(&s[at..at + 2], &[0xe6, PORT_VECTOR0 as u8 + v as u8]);
        }
        // The breakpoint's door jumps to its handler, which ends in the
        // same exit when sync sites are off.
        let bp = (STUB_VECTORS + 3 * 8) as usize;
        assert_eq!(s[bp], 0xe9);
        let handler = bp + 5 + i32::from_le_bytes(s[bp + 1..bp + 5].try_into().unwrap()) as usize;
        // cmpb $0, disp32(%rip): the switch, on the stub's data page.
        assert_eq!(&s[handler..handler + 2], &[0x80, 0x3d]);
        let disp = i32::from_le_bytes(s[handler + 2..handler + 6].try_into().unwrap());
        let next = handler as i64 + 7;
        assert_eq!(
            PHYS_STUB as i64 + next + disp as i64,
            SITES_SWITCH_PHYS as i64
        );
        let exit = s[handler..]
            .windows(2)
            .position(|w| w == [0xe6, PORT_VECTOR0 as u8 + 3]);
        assert!(exit.is_some(), "the breakpoint handler has no exit");
    }
}
