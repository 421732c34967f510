//! The machine's doors, exercised with a few hand-assembled instructions.

use rewind_fuzz::arch::cpu::UserRegs;
use rewind_fuzz::machine::{Exit, Machine};
use rewind_fuzz::memory::{Access, AddressSpace, Backing, PhysMemory, Placement, Prot};

#[test]
fn user_code_reaches_every_door_and_demand_paging_works() {
    let mem = PhysMemory::new(64 << 20).unwrap();
    let mut space = AddressSpace::new(&mem);
    let mut m = Machine::new(&mem).expect("KVM must be usable for this test");
    let code: Vec<u8> = [
        &[0x48, 0xc7, 0xc0, 0x27, 0, 0, 0][..],      // mov rax, 39
        &[0x0f, 0x05],                               // syscall
        &[0x48, 0x8b, 0x1c, 0x25, 0, 0, 0x50, 0],    // mov rbx, [0x500000]
        &[0x48, 0x89, 0x04, 0x25, 8, 0, 0x50, 0],    // mov [0x500008], rax
        &[0x64, 0x48, 0x8b, 0x0c, 0x25, 0, 0, 0, 0], // mov rcx, fs:[0]
        &[0x0f, 0x31],                               // rdtsc
        &[0x0f, 0x0b],                               // ud2
    ]
    .concat();
    let rx = Prot {
        read: true,
        write: false,
        exec: true,
    };
    let data = std::sync::Arc::new(code);
    space
        .map(
            &mem,
            Placement::Fixed(0x40_0000),
            4096,
            rx,
            Backing::file(data, 0),
            "code",
        )
        .unwrap();
    space
        .map(
            &mem,
            Placement::Fixed(0x50_0000),
            1 << 20,
            Prot::RW,
            Backing::Anon,
            "",
        )
        .unwrap();
    space.write_u64(&mem, 0x50_0000 + 0x8_0000, 0x1234).unwrap(); // fs:[0]
    let mut regs = UserRegs {
        rip: 0x40_0000,
        rsp: 0x50_1000,
        rflags: 2,
        ..Default::default()
    };
    m.set_fs_base(0x58_0000);
    m.resume(&mem, &regs);
    assert_eq!(m.run().unwrap(), Exit::Syscall);
    regs = m.user_regs().unwrap();
    assert_eq!(regs.rax, 39);
    assert_eq!(regs.rip, 0x40_0009);
    regs.rax = 777;
    m.resume(&mem, &regs);
    // The data page is not present yet: a page fault, served on demand.
    let e = m.run().unwrap();
    let Exit::Exception {
        vector: 14,
        fault_addr,
        ..
    } = e
    else {
        panic!("{e:?}")
    };
    assert_eq!(fault_addr, 0x50_0000);
    space.fault(&mem, fault_addr, Access::Read).unwrap();
    assert!(!space.take_needs_invalidate());
    regs = m.user_regs().unwrap();
    m.resume(&mem, &regs);
    // rdtsc faults (#GP): CR4.TSD keeps time virtual.
    let e = m.run().unwrap();
    regs = m.user_regs().unwrap();
    assert_eq!(regs.rcx, 0x1234, "fs base");
    assert_eq!(space.read_u64(&mem, 0x50_0008).unwrap(), 777);
    assert!(matches!(e, Exit::Exception { vector: 13, .. }), "{e:?}");
    assert_eq!(regs.rip, 0x40_0022);
    regs.rip += 2;
    m.resume(&mem, &regs);
    let e = m.run().unwrap();
    assert!(matches!(e, Exit::Exception { vector: 6, .. }), "{e:?}");
}

#[test]
fn a_remapped_page_is_seen_only_after_invalidation() {
    let mem = PhysMemory::new(64 << 20).unwrap();
    let mut space = AddressSpace::new(&mem);
    let mut m = Machine::new(&mem).unwrap();
    // loop: mov rax, [0x500000]; syscall; jmp loop
    let code: Vec<u8> = [
        &[0x48, 0x8b, 0x04, 0x25, 0, 0, 0x50, 0][..],
        &[0x0f, 0x05],
        &[0xeb, 0xf4],
    ]
    .concat();
    let rx = Prot {
        read: true,
        write: false,
        exec: true,
    };
    let file = |data: Vec<u8>| Backing::file(std::sync::Arc::new(data), 0);
    space
        .map(
            &mem,
            Placement::Fixed(0x40_0000),
            4096,
            rx,
            file(code),
            "code",
        )
        .unwrap();
    let mut regs = UserRegs {
        rip: 0x40_0000,
        rsp: 0x60_0000,
        rflags: 2,
        ..Default::default()
    };
    for i in 0..20u8 {
        space.unmap(&mem, 0x50_0000, 4096).ok();
        // Keep the freed frame busy so that the new mapping gets another one.
        let hold = 0x70_0000 + i as u64 * 4096;
        space
            .map(
                &mem,
                Placement::Fixed(hold),
                4096,
                Prot::RW,
                Backing::Anon,
                "",
            )
            .unwrap();
        space.write(&mem, hold, b"x").unwrap();
        space
            .map(
                &mem,
                Placement::Fixed(0x50_0000),
                4096,
                Prot::RW,
                file(vec![i; 4096]),
                "data",
            )
            .unwrap();
        assert_eq!(
            space.take_needs_invalidate(),
            i > 0,
            "only a translation the guest used needs invalidating"
        );
        if i > 0 {
            m.invalidate_translations().unwrap();
        }
        m.resume(&mem, &regs);
        assert_eq!(m.run().unwrap(), Exit::Syscall);
        regs = m.user_regs().unwrap();
        assert_eq!(regs.rax & 0xff, i as u64);
    }
}

#[test]
fn rdtsc_and_rdtscp_always_fault_so_time_stays_virtual() {
    // rdtsc first, after an exception, after a system call; then rdtscp.
    let code: Vec<u8> = vec![
        0x0f, 0x31, 0x0f, 0x0b, 0x0f, 0x31, 0x0f, 0x05, 0x0f, 0x31, 0x0f, 0x01, 0xf9,
    ];
    let mem = PhysMemory::new(64 << 20).unwrap();
    let mut space = AddressSpace::new(&mem);
    let mut m = Machine::new(&mem).unwrap();
    let rx = Prot {
        read: true,
        write: false,
        exec: true,
    };
    let data = std::sync::Arc::new(code);
    space
        .map(
            &mem,
            Placement::Fixed(0x40_0000),
            4096,
            rx,
            Backing::file(data, 0),
            "c",
        )
        .unwrap();
    let mut regs = UserRegs {
        rip: 0x40_0000,
        rsp: 0x60_0000,
        rflags: 2,
        ..Default::default()
    };
    let expect = [
        (13, 0x0),
        (6, 0x2),
        (13, 0x4),
        (255, 0x8),
        (13, 0x8),
        (13, 0xa),
    ];
    for (vector, at) in expect {
        m.resume(&mem, &regs);
        let e = m.run().unwrap();
        regs = m.user_regs().unwrap();
        match e {
            Exit::Syscall => assert_eq!(vector, 255),
            Exit::Exception { vector: v, .. } => assert_eq!(v, vector, "at {at:#x}"),
            e => panic!("{e:?}"),
        }
        if vector != 255 {
            assert_eq!(regs.rip, 0x40_0000 + at);
            regs.rip += if at == 0xa { 3 } else { 2 };
        }
    }
    // The monitor's own clock still works after the guest ran.
    let _ = std::time::Instant::now();
}

#[test]
fn pages_written_before_an_invalidation_stay_in_the_dirty_log() {
    let mem = PhysMemory::new(64 << 20).unwrap();
    let mut space = AddressSpace::new(&mem);
    let mut m = Machine::new(&mem).unwrap();
    // loop: mov [0x500000], rax; inc rax; syscall; jmp loop
    let code: Vec<u8> = [
        &[0x48, 0x89, 0x04, 0x25, 0, 0, 0x50, 0][..],
        &[0x48, 0xff, 0xc0],
        &[0x0f, 0x05],
        &[0xeb, 0xf1],
    ]
    .concat();
    let rx = Prot {
        read: true,
        write: false,
        exec: true,
    };
    let file = |data: Vec<u8>| Backing::file(std::sync::Arc::new(data), 0);
    space
        .map(
            &mem,
            Placement::Fixed(0x40_0000),
            4096,
            rx,
            file(code),
            "code",
        )
        .unwrap();
    space
        .map(
            &mem,
            Placement::Fixed(0x50_0000),
            4096,
            Prot::RW,
            Backing::Anon,
            "data",
        )
        .unwrap();
    space.fault(&mem, 0x40_0000, Access::Exec).unwrap();
    space.fault(&mem, 0x50_0000, Access::Write).unwrap();
    let data_page = space.page_of(&mem, 0x50_0000).expect("mapped");
    let mut regs = UserRegs {
        rip: 0x40_0000,
        rsp: 0x60_0000,
        rflags: 2,
        ..Default::default()
    };
    m.take_dirty_log().unwrap();
    for round in 0..3 {
        m.resume(&mem, &regs);
        assert_eq!(m.run().unwrap(), Exit::Syscall);
        regs = m.user_regs().unwrap();
        m.invalidate_translations().unwrap();
        let log = m.take_dirty_log().unwrap();
        let page = (data_page / 4096) as usize;
        assert!(
            log[page / 64] >> (page % 64) & 1 == 1,
            "round {round}: the write before the invalidation is logged"
        );
        assert_eq!(space.read_u64(&mem, 0x50_0000).unwrap(), round);
    }
}
