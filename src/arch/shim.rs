//! The guest's pthread preload shim, built from `guest/shim.c` by `build.rs`.

/// The pthread preload shim, `librewind-shim.so`: an x86-64 ELF shared object
/// that the monitor serves at [`crate::arch::abi::SHIM_PATH`] and preloads
/// (`LD_PRELOAD`) into every dynamically linked target.
///
/// It wraps the synchronisation operations that never enter the kernel on
/// their fast path (mutexes, rwlocks, condition variables, semaphores,
/// barriers, spinlocks, thread creation, join and exit, and the C11 `mtx_*`,
/// `cnd_*` and `thrd_*` functions), so that each becomes a scheduling point:
/// before the real operation it makes the private system call
/// [`crate::arch::abi::HINT_SYSCALL`] carrying a [`crate::arch::abi::HintOp`], the
/// object's address and the call site, and try and timed operations report
/// their result afterwards with [`crate::arch::abi::HintOp::TryResult`]. It depends
/// only on glibc 2.34 or later. Run natively, the hints fail with `ENOSYS`
/// and change nothing, not even `errno`.
pub const SHIM_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/librewind-shim.so"));

#[cfg(test)]
mod tests {
    use super::SHIM_SO;
    use crate::arch::abi::{HINT_SYSCALL, HintOp};
    use object::read::elf::ElfFile64;
    use object::{Endianness, Object, ObjectSymbol, elf};
    use std::collections::BTreeMap;

    /// Every function the shim exports, sorted.
    const WRAPPED: &[&str] = &[
        "cnd_broadcast",
        "cnd_signal",
        "cnd_timedwait",
        "cnd_wait",
        "mtx_lock",
        "mtx_timedlock",
        "mtx_trylock",
        "mtx_unlock",
        "pthread_barrier_wait",
        "pthread_cond_broadcast",
        "pthread_cond_clockwait",
        "pthread_cond_signal",
        "pthread_cond_timedwait",
        "pthread_cond_wait",
        "pthread_create",
        "pthread_exit",
        "pthread_join",
        "pthread_mutex_clocklock",
        "pthread_mutex_lock",
        "pthread_mutex_timedlock",
        "pthread_mutex_trylock",
        "pthread_mutex_unlock",
        "pthread_rwlock_clockrdlock",
        "pthread_rwlock_clockwrlock",
        "pthread_rwlock_rdlock",
        "pthread_rwlock_timedrdlock",
        "pthread_rwlock_timedwrlock",
        "pthread_rwlock_tryrdlock",
        "pthread_rwlock_trywrlock",
        "pthread_rwlock_unlock",
        "pthread_rwlock_wrlock",
        "pthread_spin_lock",
        "pthread_spin_trylock",
        "pthread_spin_unlock",
        "sem_clockwait",
        "sem_post",
        "sem_timedwait",
        "sem_trywait",
        "sem_wait",
        "thrd_create",
        "thrd_exit",
        "thrd_join",
    ];

    fn parse() -> ElfFile64<'static, Endianness> {
        ElfFile64::parse(SHIM_SO).expect("the shim parses as a 64-bit ELF file")
    }

    /// The `#define NAME VALUE` lines of `guest/shim.c`.
    fn c_defines() -> BTreeMap<String, String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/guest/shim.c");
        let source = std::fs::read_to_string(path).expect("guest/shim.c is readable");
        source
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                if words.next() != Some("#define") {
                    return None;
                }
                let name = words.next()?;
                let value = words.next()?;
                Some((name.to_string(), value.to_string()))
            })
            .collect()
    }

    fn c_number(text: &str) -> u64 {
        match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        }
        .unwrap_or_else(|_| panic!("{text:?} is not a number"))
    }

    /// `mutex-lock` becomes `HINT_OP_MUTEX_LOCK`.
    fn c_name(op: HintOp) -> String {
        format!("HINT_OP_{}", op.name().to_uppercase().replace('-', "_"))
    }

    #[test]
    fn the_shim_is_an_x86_64_elf_shared_object() {
        assert_eq!(&SHIM_SO[..4], b"\x7fELF");
        assert_eq!(SHIM_SO[4], 2, "ELFCLASS64");
        assert_eq!(SHIM_SO[5], 1, "ELFDATA2LSB");
        let file = parse();
        let header = file.elf_header();
        assert_eq!(header.e_type.get(file.endian()), elf::ET_DYN);
        assert_eq!(header.e_machine.get(file.endian()), elf::EM_X86_64);
    }

    #[test]
    fn the_shim_exports_exactly_the_wrappers() {
        let file = parse();
        let mut exported: Vec<&str> = file
            .dynamic_symbols()
            .filter(|symbol| symbol.is_definition() && symbol.is_global())
            .map(|symbol| symbol.name().expect("symbol names are UTF-8"))
            .collect();
        exported.sort_unstable();
        assert_eq!(exported, WRAPPED);
    }

    #[test]
    fn the_shim_needs_only_libc() {
        let file = parse();
        let table = file
            .elf_section_table()
            .dynamic_table(file.endian(), file.data())
            .expect("the dynamic section parses");
        let needed: Vec<&[u8]> = table
            .iter()
            .filter(|entry| entry.tag == elf::DT_NEEDED)
            .map(|entry| table.string(entry).expect("DT_NEEDED names a string"))
            .collect();
        assert_eq!(needed, [b"libc.so.6"]);
    }

    #[test]
    fn the_hint_number_in_the_c_source_matches_the_abi() {
        let defines = c_defines();
        let value = defines
            .get("HINT_SYSCALL")
            .expect("guest/shim.c defines HINT_SYSCALL");
        assert_eq!(c_number(value), HINT_SYSCALL);
    }

    #[test]
    fn the_ring_layout_in_the_c_source_matches_the_abi() {
        use crate::arch::abi::*;
        let defines = c_defines();
        for (name, value) in [
            ("AT_REWIND_RING", AT_REWIND_RING),
            ("RING_MAGIC", RING_MAGIC),
            ("RING_LIMIT_STEP", RING_LIMIT_STEP),
            ("RING_BASE_STEP", RING_BASE_STEP),
            ("RING_HEAD", RING_HEAD),
            ("RING_TAIL", RING_TAIL),
            ("RING_CAPACITY", RING_CAPACITY),
            ("RING_BUSY", RING_BUSY),
            ("RING_HEADER_WORDS", RING_HEADER_WORDS),
        ] {
            let v = defines
                .get(name)
                .unwrap_or_else(|| panic!("guest/shim.c lacks {name}"));
            assert_eq!(c_number(v.trim_end_matches("UL")), value, "{name}");
        }
        assert_eq!(
            RING_ENTRY_WORDS, 4,
            "the C source writes four words per entry"
        );
    }

    #[test]
    fn every_hint_op_number_in_the_c_source_matches_the_abi() {
        let defines = c_defines();
        let mut ops = 0;
        for n in 1.. {
            let Some(op) = HintOp::from_u64(n) else { break };
            ops += 1;
            let name = c_name(op);
            let value = defines
                .get(&name)
                .unwrap_or_else(|| panic!("guest/shim.c lacks {name}"));
            assert_eq!(c_number(value), op as u64, "{name}");
        }
        // And the C source defines no operation the ABI does not know.
        let c_ops: Vec<&String> = defines
            .keys()
            .filter(|name| name.starts_with("HINT_OP_"))
            .collect();
        assert_eq!(
            c_ops.len(),
            ops,
            "HINT_OP_* defines in guest/shim.c: {c_ops:?}"
        );
        assert!(ops >= 28);
    }
}
