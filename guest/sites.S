/*
 * The site dispatcher: user-mode code a sync site reaches without leaving
 * the guest (see `arch::abi`, "Sync sites taken without an exit"). It runs
 * at native speed, in every process with sync sites, at the fixed address
 * SITES_VA, and has two doors:
 *
 * - rewind_sites_start, where the guest's breakpoint handler returns after
 *   a site's `int3`, with every register the program's and the site's
 *   address after the `int3` in the ring's `bp_rip`: the site's descriptor
 *   is found in the process's table;
 * - rewind_sites_jump, where a site's trampoline jumps (`code::trampoline`):
 *   the program's rax already saved in the first data word, rax the
 *   address of the site's descriptor, every other register the program's.
 *
 * It saves every register in the sites data (nothing on the program's
 * stack: the red zone below rsp belongs to the program) and, when the step
 * it would be may be buffered (the shim's rule: below the ring's limit,
 * room left, no shim entry half written), records it in the hint ring with
 * a side record of registers and operand, then puts every register back and
 * jumps to the site's copy: its instruction out of line, then a jump back
 * after it (after the instructions its trampoline moved, for a jump).
 * Otherwise it puts every register back and executes `ud2` at
 * rewind_sites_miss, which the monitor takes as the breakpoint itself.
 *
 * A descriptor (the table's entries and the trampolines' alike) says where
 * the site and its copy are relative to the descriptor itself, so that a
 * trampoline's descriptor means the same wherever its object is mapped.
 *
 * Only reads of the program's memory may fault (the site's code, the
 * operand, the stack window): the entry is not counted yet, and the monitor
 * takes the breakpoint from the saved registers, as after the `ud2`.
 *
 * Assembled into the monitor (never executed there) and copied into guest
 * memory; the operands in braces are `arch::abi`'s constants.
 */
    .pushsection .rodata.rewind_sites, "a"
    .balign 4096
    .globl rewind_sites_start
rewind_sites_start:
    movabs %rax, {data}
    movabs $0, %rax
    jmp 1f
    /* The trampolines' door, at the offset `arch::abi` names. */
    .balign {jump_door}, 0xcc
    .globl rewind_sites_jump
rewind_sites_jump:
1:  movabs %rax, {data} + {desc}
    movabs ${data}, %rax
    mov %rcx, 8(%rax)
    mov %rdx, 16(%rax)
    mov %rbx, 24(%rax)
    mov %rsp, 32(%rax)
    mov %rbp, 40(%rax)
    mov %rsi, 48(%rax)
    mov %rdi, 56(%rax)
    mov %r8, 64(%rax)
    mov %r9, 72(%rax)
    mov %r10, 80(%rax)
    mov %r11, 88(%rax)
    mov %r12, 96(%rax)
    mov %r13, 104(%rax)
    mov %r14, 112(%rax)
    mov %r15, 120(%rax)
    lea {stack_top}(%rax), %rsp
    pushfq
    popq 128(%rax)
    cld
    mov %rax, %rbp

    /* The site: its trampoline's descriptor says where it is, or the
       breakpoint handler where the `int3` was. */
    movabs ${ring}, %rbx
    mov {desc}(%rbp), %r10
    test %r10, %r10
    jz 20f
    mov (%r10), %rdx
    add %r10, %rdx
    jmp 21f
20: mov 56(%rbx), %rdx
    dec %rdx
21: mov %rdx, 136(%rbp)

    /* Whether its step may be buffered. */
    cmpq $0, 48(%rbx)
    jne 9f
    mov 32(%rbx), %rsi
    sub 24(%rbx), %rsi
    cmp 40(%rbx), %rsi
    jae 9f
    inc %rsi
    add 16(%rbx), %rsi
    cmp 8(%rbx), %rsi
    jae 9f
    test %r10, %r10
    jnz 2f

    /* A breakpoint's table entry (open addressing, Fibonacci hash): the
       entry whose site is the one sought. */
    mov %rdx, %rdi
    movabs ${hash_mul}, %rax
    imul %rax, %rdi
    shr ${hash_shift}, %rdi
    movabs ${table}, %r9
1:  mov %rdi, %r10
    shl $5, %r10
    add %r9, %r10
    mov (%r10), %r11
    test %r11, %r11
    jz 9f
    add %r10, %r11
    cmp %rdx, %r11
    je 22f
    inc %rdi
    and ${slot_mask}, %rdi
    jmp 1b
    /* The code must still be what the entry was made from. */
22: mov 1(%rdx), %rax
    cmp 24(%r10), %rax
    jne 9f

    /* A step that gives way is buffered only while nothing could take
       the thread's place (%rsi is still its step number): a spin's, and a
       retry-loop atomic's when the thread retries it (its previous step,
       the ring's last entry or the one published, was this site). */
2:  movzbl 18(%r10), %eax
    testb ${yield_flag}, %al
    jnz 25f
    testb ${retry_flag}, %al
    jz 24f
    cmpq $0, {retry_always}(%rbp)
    jne 25f
    mov 32(%rbx), %rax
    cmp 24(%rbx), %rax
    je 26f
    dec %rax
    xor %edx, %edx
    divq 40(%rbx)
    shl $5, %rdx
    lea 64(%rbx,%rdx), %rax
    mov 136(%rbp), %rdx
    cmpq ${op_site}, (%rax)
    jne 24f
    cmp 16(%rax), %rdx
    je 25f
    jmp 24f
26: cmp {last_site}(%rbp), %rdx
    jne 24f
25: cmp {yield_limit}(%rbp), %rsi
    jae 9f

    /* The operand's address: displacement + base + (index << scale), or
       the descriptor's address + displacement for a RIP-relative one. */
24: mov 8(%r10), %r12
    testb ${riprel_flag}, 18(%r10)
    jz 23f
    add %r10, %r12
23: movzbl 16(%r10), %eax
    cmp $16, %eax
    jae 3f
    add (%rbp,%rax,8), %r12
3:  movzbl 17(%r10), %eax
    cmp $16, %eax
    jae 4f
    mov (%rbp,%rax,8), %r13
    movzbl 18(%r10), %ecx
    and $3, %ecx
    shl %cl, %r13
    add %r13, %r12
4:  xor %r15d, %r15d
    xor %r14d, %r14d
    movzbl 19(%r10), %eax
    test %eax, %eax
    jz 8f
    cmp $1, %eax
    jne 5f
    movzbq (%r12), %r14
    jmp 8f
5:  cmp $2, %eax
    jne 6f
    movzwq (%r12), %r14
    jmp 8f
6:  cmp $4, %eax
    jne 7f
    movl (%r12), %r14d
    jmp 8f
7:  mov (%r12), %r14
    cmp $16, %eax
    jne 8f
    mov 8(%r12), %r15

    /* The ring entry, at slot tail % capacity, and its side record. */
8:  mov 32(%rbx), %rax
    xor %edx, %edx
    divq 40(%rbx)
    mov %rdx, %rax
    shl $5, %rax
    lea 64(%rbx,%rax), %rax
    movq ${op_site}, (%rax)
    mov %r12, 8(%rax)
    mov 136(%rbp), %rcx
    mov %rcx, 16(%rax)
    mov %r14, 24(%rax)
    /* The side record goes by the entry's place in this batch (the monitor
       takes every entry at each exit), so batches reuse the same pages. */
    mov 32(%rbx), %rdi
    sub 24(%rbx), %rdi
    imul ${side_bytes}, %rdi, %rdi
    lea {side_offset}(%rbp,%rdi), %rdi
    mov %rbp, %rsi
    mov $17, %ecx
    rep movsq
    mov %r14, (%rdi)
    mov %r15, 8(%rdi)
    /* A site inside a runtime: the stack window, for unwinding, up to the
       end of the stack's mapping (whose bounds the monitor published).
       Other sites record an empty one. */
    movq $0, 16(%rdi)
    testb ${runtime_flag}, 18(%r10)
    jz 12f
    mov 32(%rbp), %rsi
    cmp {stack_lo}(%rbp), %rsi
    jb 9f
    mov {stack_hi}(%rbp), %rcx
    sub %rsi, %rcx
    jbe 9f
    shr $3, %rcx
    cmp ${window_words}, %rcx
    jbe 13f
    mov ${window_words}, %ecx
13: lea 0(,%rcx,8), %rax
    mov %rax, 16(%rdi)
    lea 24(%rdi), %rdi
    rep movsq
12: movslq 20(%r10), %rax
    add %r10, %rax
    mov %rax, 144(%rbp)
    /* The tail last: the entry is whole once it counts. */
    incq 32(%rbx)
    jmp 10f

9:  movabs $({code} + (rewind_sites_miss - rewind_sites_start)), %rax
    mov %rax, 144(%rbp)

    /* Every register back, then on to the target. */
10: mov %rbp, %rax
    pushq 128(%rax)
    popfq
    mov 8(%rax), %rcx
    mov 16(%rax), %rdx
    mov 24(%rax), %rbx
    mov 40(%rax), %rbp
    mov 48(%rax), %rsi
    mov 56(%rax), %rdi
    mov 64(%rax), %r8
    mov 72(%rax), %r9
    mov 80(%rax), %r10
    mov 88(%rax), %r11
    mov 96(%rax), %r12
    mov 104(%rax), %r13
    mov 112(%rax), %r14
    mov 120(%rax), %r15
    mov 32(%rax), %rsp
    mov (%rax), %rax
    /* jmp *target(%rip), with the target word's guest address. */
    .byte 0xff, 0x25
    .long {data} + 144 - ({code} + (11f - rewind_sites_start))
11:
    .globl rewind_sites_miss
rewind_sites_miss:
    ud2
    .globl rewind_sites_end
rewind_sites_end:
    .popsection
