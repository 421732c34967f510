//! The ELF loader: maps a static or dynamic x86-64 program (and its
//! interpreter) and builds the initial stack, as Linux's `execve` does, with
//! a fixed layout and no vDSO (so time-related calls are real system calls).

use std::sync::Arc;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};

use super::Kernel;
use super::vfs::Resolved;
use crate::arch::cpu::UserRegs;
use crate::arch::layout::{PAGE_SIZE, PIE_BASE, page_ceil, page_floor};
use crate::memory::{Backing, MemError, Placement, Prot};

type Header = elf::FileHeader64<object::LittleEndian>;

/// Why a program could not be loaded. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}: no such file; check the --target path")]
    NotFound(String),
    #[error(
        "{0} asks for the interpreter {1}, which is not there: the program was built for another system, or its file is damaged"
    )]
    NoInterpreter(String, String),
    #[error(
        "the arguments and environment take {0} bytes, more than Linux lets a program start with ({MAX_ARGS_BYTES} bytes, a quarter of the stack; {MAX_ARG_BYTES} for one string)"
    )]
    ArgsTooLong(usize),
    #[error("{0} is a directory; give the path of an executable file")]
    IsDirectory(String),
    #[error("{0} is not an ELF executable; rewind-fuzz runs Linux x86-64 ELF binaries")]
    NotElf(String),
    #[error(
        "{0} is a 32-bit ELF; rewind-fuzz runs 64-bit x86-64 binaries only (rebuild without -m32)"
    )]
    Not64Bit(String),
    #[error("{0} is an ELF for machine {1}, not x86-64; build it for x86_64-linux")]
    WrongMachine(String, u16),
    #[error("{0} is an ELF of type {1} (not an executable or shared object)")]
    NotExecutable(String, u16),
    #[error("{0}: malformed ELF: {1}")]
    Malformed(String, String),
    #[error("loading {0}: {1:?}")]
    Memory(String, MemError),
}

/// What the arguments and environment of a program may take together, as
/// Linux allows (a quarter of the 8 MiB stack), and one string alone
/// (`MAX_ARG_STRLEN`); past either, `execve` fails with E2BIG.
pub const MAX_ARGS_BYTES: usize = 2 << 20;
pub const MAX_ARG_BYTES: usize = 32 * 4096;

/// Checks that `argv` and `env` fit a new program's stack as Linux
/// requires (the strings, their NULs and the pointers to them).
pub fn check_args(argv: &[String], env: &[String]) -> Result<(), LoadError> {
    let strings = argv.iter().chain(env);
    let total: usize = strings.clone().map(|s| s.len() + 1 + 8).sum::<usize>() + 16;
    if total > MAX_ARGS_BYTES || strings.clone().any(|s| s.len() + 1 > MAX_ARG_BYTES) {
        return Err(LoadError::ArgsTooLong(total));
    }
    Ok(())
}

/// The interpreter an ELF file asks for (`PT_INTERP`), if any: its path,
/// and the path as it may be shown (bytes that are not UTF-8 escaped).
pub fn interpreter_of(path: &str, data: &[u8]) -> Result<Option<(String, String)>, LoadError> {
    let bad = |e: object::read::Error| LoadError::Malformed(path.into(), e.to_string());
    let h = Header::parse(data).map_err(bad)?;
    let endian = h.endian().map_err(bad)?;
    let phdrs = h.program_headers(endian, data).map_err(bad)?;
    let Some(p) = phdrs.iter().find(|p| p.p_type(endian) == elf::PT_INTERP) else {
        return Ok(None);
    };
    let b = p
        .data(endian, data)
        .map_err(|_| LoadError::Malformed(path.into(), "PT_INTERP outside the file".into()))?;
    let b = b.split(|c| *c == 0).next().unwrap_or_default();
    let shown = crate::escape::bytes_line(b);
    Ok(Some((String::from_utf8_lossy(b).into_owned(), shown)))
}

/// An interpreter's path and contents.
type Interpreter = (String, Arc<Vec<u8>>);

/// Reads the interpreter of `path` (whose contents are `data`), if it asks
/// for one: missing, it is [`LoadError::NoInterpreter`].
fn open_interpreter(
    k: &mut Kernel,
    path: &str,
    data: &[u8],
) -> Result<Option<Interpreter>, LoadError> {
    let Some((interp, shown)) = interpreter_of(path, data)? else {
        return Ok(None);
    };
    match open_elf(k, &interp) {
        Ok(d) => Ok(Some((interp, d))),
        Err(LoadError::NotFound(_)) => Err(LoadError::NoInterpreter(
            crate::escape::line(path).into_owned(),
            shown,
        )),
        Err(e) => Err(e),
    }
}

/// Checks, before an `execve` lets go of the old program, that the new one
/// can start: its arguments fit (E2BIG) and its interpreter is there
/// (ENOENT), as Linux checks.
pub fn check_exec(k: &mut Kernel, path: &str, data: &[u8], exec: &Exec) -> Result<(), i32> {
    check_args(&exec.argv, &exec.env).map_err(|_| libc::E2BIG)?;
    match open_interpreter(k, path, data) {
        Ok(_) => Ok(()),
        Err(LoadError::NoInterpreter(..) | LoadError::NotFound(_)) => Err(libc::ENOENT),
        Err(_) => Err(libc::ENOEXEC),
    }
}

/// A mapped ELF image.
struct Image {
    base: u64,
    entry: u64,
    phdr: u64,
    phnum: u64,
    end: u64,
}

/// Reads and checks an ELF file from the guest's filesystem.
fn open_elf(k: &mut Kernel, path: &str) -> Result<Arc<Vec<u8>>, LoadError> {
    let data = read_program(k, path)?;
    check_elf(path, &data)?;
    Ok(data)
}

/// Reads a file to run from the guest's filesystem.
pub fn read_program(k: &mut Kernel, path: &str) -> Result<Arc<Vec<u8>>, LoadError> {
    let p = k.absolute(path);
    let data = match k.vfs.resolve(&p, true) {
        Resolved::HostFile { .. } => k
            .vfs
            .host_contents(&p, true)
            .ok_or_else(|| LoadError::NotFound(path.into()))?,
        Resolved::OverlayFile { .. } => {
            Arc::new(k.file_bytes(&p).map(|d| d.to_vec()).unwrap_or_default())
        }
        Resolved::HostDir { .. } | Resolved::OverlayDir { .. } => {
            return Err(LoadError::IsDirectory(path.into()));
        }
        _ => return Err(LoadError::NotFound(path.into())),
    };
    Ok(data)
}

/// Checks that `data` is an x86-64 ELF executable or shared object.
pub fn check_elf(path: &str, data: &[u8]) -> Result<(), LoadError> {
    if data.len() < 16 || &data[..4] != b"\x7fELF" {
        return Err(LoadError::NotElf(path.into()));
    }
    if data[4] != elf::ELFCLASS64.0 {
        return Err(LoadError::Not64Bit(path.into()));
    }
    let h = Header::parse(data).map_err(|e| LoadError::Malformed(path.into(), e.to_string()))?;
    let endian = h
        .endian()
        .map_err(|e| LoadError::Malformed(path.into(), e.to_string()))?;
    let machine = h.e_machine(endian);
    if machine != elf::EM_X86_64 {
        return Err(LoadError::WrongMachine(path.into(), machine.0));
    }
    let ty = h.e_type(endian);
    if ty != elf::ET_EXEC && ty != elf::ET_DYN {
        return Err(LoadError::NotExecutable(path.into(), ty.0));
    }
    Ok(())
}

fn map_image(
    k: &mut Kernel,
    path: &str,
    data: Arc<Vec<u8>>,
    main: bool,
) -> Result<Image, LoadError> {
    let bad = |e: object::read::Error| LoadError::Malformed(path.into(), e.to_string());
    let mem_err = |e: MemError| LoadError::Memory(path.into(), e);
    let h = Header::parse(data.as_slice()).map_err(bad)?;
    let endian = h.endian().map_err(bad)?;
    let phdrs = h.program_headers(endian, data.as_slice()).map_err(bad)?;
    let loads: Vec<_> = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD)
        .collect();
    if loads.is_empty() {
        return Err(LoadError::Malformed(
            path.into(),
            "no loadable segments".into(),
        ));
    }
    let lo = page_floor(loads.iter().map(|p| p.p_vaddr(endian)).min().unwrap());
    let hi = page_ceil(
        loads
            .iter()
            .map(|p| p.p_vaddr(endian) + p.p_memsz(endian))
            .max()
            .unwrap(),
    );
    let dynamic = h.e_type(endian) == elf::ET_DYN;
    // Reserve the whole span first so segments land at fixed offsets.
    let base = if dynamic {
        let placement = if main {
            Placement::Fixed(PIE_BASE)
        } else {
            Placement::Hint(0)
        };
        let at =
            k.mm.map(&k.mem, placement, hi - lo, Prot::NONE, Backing::Anon, path)
                .map_err(mem_err)?;
        at - lo
    } else {
        0
    };
    for p in &loads {
        let (vaddr, memsz, filesz, off) = (
            base + p.p_vaddr(endian),
            p.p_memsz(endian),
            p.p_filesz(endian),
            p.p_offset(endian),
        );
        if off
            .checked_add(filesz)
            .is_none_or(|e| e > data.len() as u64)
            || filesz > memsz
        {
            return Err(LoadError::Malformed(
                path.into(),
                "segment outside the file".into(),
            ));
        }
        let flags = p.p_flags(endian);
        let prot = Prot {
            read: flags.0 & elf::PF_R.0 != 0,
            write: flags.0 & elf::PF_W.0 != 0,
            exec: flags.0 & elf::PF_X.0 != 0,
        };
        let start = page_floor(vaddr);
        let file_end = vaddr + filesz;
        if filesz > 0 {
            let sites = prot.exec.then(|| k.sites_for(path, &data)).flatten();
            let backing = Backing::File {
                data: data.clone(),
                offset: page_floor(off),
                sites: sites.clone(),
                jumps: false,
            };
            let len = page_ceil(file_end) - start;
            k.mm.map(&k.mem, Placement::Fixed(start), len, prot, backing, path)
                .map_err(mem_err)?;
            if let Some(table) = &sites {
                k.add_site_path(start, len, page_floor(off), table);
            }
            // The rest of the last file page is the start of .bss: zero it.
            let tail = page_ceil(file_end) - file_end;
            if tail > 0 && tail < PAGE_SIZE && memsz > filesz {
                k.mm.poke(&k.mem, file_end, &vec![0u8; tail as usize])
                    .map_err(mem_err)?;
            }
        }
        let bss_start = if filesz > 0 {
            page_ceil(file_end)
        } else {
            start
        };
        let bss_end = page_ceil(vaddr + memsz);
        if bss_end > bss_start {
            k.mm.map(
                &k.mem,
                Placement::Fixed(bss_start),
                bss_end - bss_start,
                prot,
                Backing::Anon,
                "",
            )
            .map_err(mem_err)?;
        }
    }
    // Where the program headers are in memory: PT_PHDR, or the first
    // segment that covers e_phoff.
    let phoff = h.e_phoff(endian);
    let phdr = phdrs
        .iter()
        .find(|p| p.p_type(endian) == elf::PT_PHDR)
        .map(|p| base + p.p_vaddr(endian))
        .or_else(|| {
            loads.iter().find_map(|p| {
                let o = p.p_offset(endian);
                (phoff >= o && phoff < o + p.p_filesz(endian))
                    .then(|| base + p.p_vaddr(endian) + (phoff - o))
            })
        })
        .unwrap_or(0);
    Ok(Image {
        base,
        entry: base + h.e_entry(endian),
        phdr,
        phnum: phdrs.len() as u64,
        end: base + hi,
    })
}

// Auxiliary vector keys.
const AT_NULL: u64 = 0;
const AT_PHDR: u64 = 3;
const AT_PHENT: u64 = 4;
const AT_PHNUM: u64 = 5;
const AT_PAGESZ: u64 = 6;
const AT_BASE: u64 = 7;
const AT_FLAGS: u64 = 8;
const AT_ENTRY: u64 = 9;
const AT_UID: u64 = 11;
const AT_EUID: u64 = 12;
const AT_GID: u64 = 13;
const AT_EGID: u64 = 14;
const AT_PLATFORM: u64 = 15;
const AT_HWCAP: u64 = 16;
const AT_CLKTCK: u64 = 17;
const AT_SECURE: u64 = 23;
const AT_RANDOM: u64 = 25;
const AT_HWCAP2: u64 = 26;
const AT_EXECFN: u64 = 31;
const AT_MINSIGSTKSZ: u64 = 51;

/// Leaf-1 EDX of the fixed CPU model (`machine::cpuid`), which Linux passes
/// as AT_HWCAP.
pub const HWCAP: u64 = 0x078b_f9ff;

/// What to run: the program's path (the ELF file to load), the path
/// `execve` was given (a script's, for AT_EXECFN), its arguments and its
/// environment.
#[derive(Clone, Debug)]
pub struct Exec {
    pub exe: String,
    pub execfn: String,
    pub argv: Vec<String>,
    pub env: Vec<String>,
}

/// Loads a program into the (empty) current address space; returns its
/// first thread's first registers.
pub fn load(k: &mut Kernel, exec: &Exec) -> Result<UserRegs, LoadError> {
    let exe = exec.exe.clone();
    let data = open_elf(k, &exe)?;
    check_args(&exec.argv, &exec.env)?;
    let interp = open_interpreter(k, &exe, &data)?;
    let main = map_image(k, &exe, data, true)?;
    k.mm.init_brk(main.end);
    let (entry, interp_base) = match &interp {
        Some((path, idata)) => {
            let i = map_image(k, path, idata.clone(), false)?;
            (i.entry, i.base)
        }
        None => (main.entry, 0),
    };
    let mut env = exec.env.clone();
    if interp.is_some() && !k.config.preload.is_empty() {
        env.retain(|e| !e.starts_with("LD_PRELOAD="));
        env.push(format!("LD_PRELOAD={}", k.config.preload.join(":")));
    }
    let top =
        k.mm.map_stack(&k.mem)
            .map_err(|e| LoadError::Memory("the stack".into(), e))?;
    let rsp = build_stack(k, top, &main, interp_base, &exec.execfn, &exec.argv, &env)
        .map_err(|e| LoadError::Memory("the stack".into(), e))?;
    Ok(UserRegs {
        rip: entry,
        rsp,
        rflags: 0x202,
        ..Default::default()
    })
}

fn build_stack(
    k: &mut Kernel,
    top: u64,
    main: &Image,
    interp_base: u64,
    execfn: &str,
    args: &[String],
    env: &[String],
) -> Result<u64, MemError> {
    let mut sp = top;
    let mut push_bytes = |k: &mut Kernel, bytes: &[u8]| -> Result<u64, MemError> {
        sp -= bytes.len() as u64;
        k.write(sp, bytes)?;
        Ok(sp)
    };
    let execfn = push_bytes(k, format!("{execfn}\0").as_bytes())?;
    let mut envp = Vec::new();
    for e in env.iter().rev() {
        envp.push(push_bytes(k, format!("{e}\0").as_bytes())?);
    }
    envp.reverse();
    let mut argv = Vec::new();
    for a in args.iter().rev() {
        argv.push(push_bytes(k, format!("{a}\0").as_bytes())?);
    }
    argv.reverse();
    let platform = push_bytes(k, b"x86_64\0")?;
    let mut random = [0u8; 16];
    k.random_bytes(&mut random);
    let random_at = push_bytes(k, &random)?;

    let auxv: Vec<(u64, u64)> = vec![
        (AT_HWCAP, HWCAP),
        (AT_PAGESZ, PAGE_SIZE),
        (AT_CLKTCK, 100),
        (AT_PHDR, main.phdr),
        (AT_PHENT, 56),
        (AT_PHNUM, main.phnum),
        (AT_BASE, interp_base),
        (AT_FLAGS, 0),
        (AT_ENTRY, main.entry),
        (AT_UID, 0),
        (AT_EUID, 0),
        (AT_GID, 0),
        (AT_EGID, 0),
        (AT_SECURE, 0),
        (AT_RANDOM, random_at),
        (AT_HWCAP2, 0),
        (AT_EXECFN, execfn),
        (AT_PLATFORM, platform),
        (AT_MINSIGSTKSZ, 2048),
        (crate::arch::abi::AT_REWIND_RING, crate::arch::abi::RING_VA),
        (AT_NULL, 0),
    ];
    let mut words: Vec<u64> = Vec::new();
    words.push(argv.len() as u64);
    words.extend(&argv);
    words.push(0);
    words.extend(&envp);
    words.push(0);
    for (a, b) in auxv {
        words.push(a);
        words.push(b);
    }
    let mut start = (sp - words.len() as u64 * 8) & !15;
    let rsp = start;
    for w in words {
        k.write_u64(start, w)?;
        start += 8;
    }
    Ok(rsp)
}
