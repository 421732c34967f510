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
 *          (vector 3 jumps to rewind_stub_breakpoint, after the table)
 *
 * On the nested KVM of the development machines `syscall` jumps to LSTAR
 * without entering ring 0; fetching the supervisor-only syscall door then
 * page-faults, and the monitor recognises that fault as the system call (the
 * registers `syscall` saves are the same). Either way it is one exit.
 *
 * The text is assembled into the monitor binary (never executed there) and
 * copied into guest memory; its only absolute addresses are the hint ring's
 * and the site dispatcher's, the same in every process.
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
    .irp v, 0,1,2
    outb %al, $(0x80 + \v)
    hlt
    .balign 8, 0xf4
    .endr
    jmp rewind_stub_breakpoint
    .balign 8, 0xf4
    .irp v, 4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    outb %al, $(0x80 + \v)
    hlt
    .balign 8, 0xf4
    .endr

/*
 * The breakpoint (`int3`) of a sync site. When the monitor has set the
 * switch (a byte of the stub's data page, after the stub's) for the process
 * about to run, the address after
 * the `int3` goes to the hint ring's `bp_rip` word and the thread returns
 * to user mode at the site dispatcher (`guest/sites.S`), which takes the
 * step without leaving the guest or ends at a `ud2` the monitor knows.
 * Otherwise it is an exit like every other vector's. Ring-0 instructions
 * are emulated on nested KVM, so the path is kept to a few.
 */
    .globl rewind_stub_breakpoint
rewind_stub_breakpoint:
    cmpb $0, (rewind_stub_start + {sites_on})(%rip)
    je 1f
    push %rax
    mov 8(%rsp), %rax
    movabs %rax, {ring_bp_rip}
    movabs ${dispatcher}, %rax
    mov %rax, 8(%rsp)
    pop %rax
    iretq
1:  outb %al, $0x83
    hlt
    .globl rewind_stub_end
rewind_stub_end:
    .popsection
