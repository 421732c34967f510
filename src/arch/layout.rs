//! Where things live in the guest: the contract between the machine (which
//! builds the system tables and the entry stub) and the memory manager (which
//! owns every other page). Both sides must agree on every constant here.

/// Size of a guest page.
pub const PAGE_SIZE: u64 = 4096;

/// Rounds `x` down to a page boundary.
pub const fn page_floor(x: u64) -> u64 {
    x & !(PAGE_SIZE - 1)
}

/// Rounds `x` up to a page boundary (saturating at the last page).
pub const fn page_ceil(x: u64) -> u64 {
    match x.checked_add(PAGE_SIZE - 1) {
        Some(v) => v & !(PAGE_SIZE - 1),
        None => !(PAGE_SIZE - 1),
    }
}

// Guest-physical layout of the system area (the first 1 MiB).
/// Global descriptor table.
pub const PHYS_GDT: u64 = 0x1000;
/// Interrupt descriptor table (32 vectors).
pub const PHYS_IDT: u64 = 0x2000;
/// Task-state segment (holds RSP0, the stack exceptions from user mode use).
pub const PHYS_TSS: u64 = 0x3000;
/// The entry stub copied from `guest/entry.S`.
pub const PHYS_STUB: u64 = 0x4000;
/// Data the entry stub reads (kept off the stub's page: a write to a page
/// of ring-0 code costs the emulated ring 0 its translations).
pub const PHYS_STUB_DATA: u64 = 0x5000;
/// Top of the single ring-0 stack (grows down to `PHYS_KSTACK_BOTTOM`).
pub const PHYS_KSTACK_TOP: u64 = 0x10000;
/// Bottom of the ring-0 stack.
pub const PHYS_KSTACK_BOTTOM: u64 = 0x8000;
/// The top-level page table (PML4).
pub const PHYS_PML4: u64 = 0x10000;
/// Page-directory-pointer table of the kernel half.
pub const PHYS_KERNEL_PDPT: u64 = 0x11000;
/// Page directory of the kernel half (one 2 MiB page mapping physical 0).
pub const PHYS_KERNEL_PD: u64 = 0x12000;
/// First guest-physical byte the page allocator hands out.
pub const PHYS_POOL_START: u64 = 0x10_0000;

/// Where the kernel half maps guest-physical 0 (PML4 slot 511, supervisor only).
pub const KERNEL_VIRT_BASE: u64 = 0xffff_ff80_0000_0000;

/// Kernel-virtual address of a system-area physical address.
pub const fn kernel_virt(phys: u64) -> u64 {
    KERNEL_VIRT_BASE + phys
}

/// Segment selectors, the same as Linux's so signal frames and debuggers see
/// familiar values.
pub const SEL_KERNEL_CS: u16 = 0x10;
pub const SEL_KERNEL_DS: u16 = 0x18;
pub const SEL_USER_DS: u16 = 0x2b;
pub const SEL_USER_CS: u16 = 0x33;
pub const SEL_TSS: u16 = 0x40;

/// Exclusive upper end of user virtual addresses (the canonical lower half,
/// minus the last page as Linux does).
pub const USER_END: u64 = 0x7fff_ffff_f000;
/// Top of the main thread's stack.
pub const STACK_TOP: u64 = 0x7fff_ffff_f000;
/// Size reserved for the main thread's stack (grows on demand within it).
pub const STACK_SIZE: u64 = 8 << 20;
/// Top-down mmap allocations start below this address (Linux leaves a gap
/// below the stack; we use a fixed one so layouts are the same everywhere).
pub const MMAP_BASE: u64 = STACK_TOP - (128 << 20);
/// Load address of position-independent executables (Linux's ELF_ET_DYN_BASE
/// without randomization).
pub const PIE_BASE: u64 = 0x5555_5555_4000;
/// Lowest address a mapping may use (Linux's default vm.mmap_min_addr).
pub const MMAP_MIN_ADDR: u64 = 0x1_0000;
