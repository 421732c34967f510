/*
 * The guest's only ring-0 code: the doors from user mode into the monitor.
 *
 * Ring-0 instructions are expensive (emulated on nested KVM), so every door is
 * a single `out` whose port says which door was taken. The monitor reads the
 * user registers from KVM's sync-regs area (the doors touch none of them),
 * implements whatever the door stands for, and always resumes the guest at
 * `rewind_stub_iret` with an `iretq` frame it wrote itself. The `hlt` after
 * each `out` is never reached unless the monitor forgot to redirect the guest;
 * it then ends the run with an internal error instead of running on.
 *
 * Layout (offsets from rewind_stub_start, checked by the monitor at start-up):
 *   0x000  syscall entry (MSR_LSTAR)          out to port 0x10
 *   0x008  iret door                          iretq
 *   0x100  exception vector v, 8 bytes each   out to port 0x80 + v
 *
 * On the nested KVM of the development machines `syscall` jumps to LSTAR
 * without entering ring 0; fetching the supervisor-only syscall door then
 * page-faults, and the monitor recognises that fault as the system call (the
 * registers `syscall` saves are the same). Either way it is one exit.
 *
 * The text is assembled into the monitor binary (never executed there) and
 * copied into guest memory; it holds no absolute addresses.
 */
    .pushsection .rodata.rewind_stub, "a"
    .balign 4096
    .globl rewind_stub_start
rewind_stub_start:
    outb %al, $0x10
    hlt
    .balign 8, 0xf4
    .globl rewind_stub_iret
rewind_stub_iret:
    iretq
    hlt
    .balign 0x100, 0xf4
    .globl rewind_stub_vectors
rewind_stub_vectors:
    .irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    outb %al, $(0x80 + \v)
    hlt
    .balign 8, 0xf4
    .endr
    .globl rewind_stub_end
rewind_stub_end:
    .popsection
