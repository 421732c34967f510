//! The files the monitor makes up from its own state: `/proc/self`,
//! `/proc/cpuinfo`, the CPU lists of `/sys` and the devices of `/dev`.

use super::Kernel;
use super::files::FileKind;

/// `/proc/self` under any of its names.
pub(super) fn proc_self(path: &str) -> Option<&str> {
    for prefix in ["/proc/self", "/proc/thread-self", "/proc/1"] {
        if let Some(rest) = path.strip_prefix(prefix) {
            if rest.is_empty() || rest.starts_with('/') {
                return Some(rest);
            }
        }
    }
    None
}

/// The contents of a file the monitor makes up, if `path` is one.
pub(super) fn synthetic(k: &mut Kernel, path: &str) -> Option<Vec<u8>> {
    let cpus = k.config.cpus;
    let range = if cpus == 1 {
        "0\n".to_string()
    } else {
        format!("0-{}\n", cpus - 1)
    };
    if let Some(rest) = proc_self(path) {
        return match rest {
            "/maps" => Some(k.mm.maps_text().into_bytes()),
            "/cgroup" => Some(b"0::/\n".to_vec()),
            "/cmdline" => Some(
                k.config
                    .argv
                    .iter()
                    .flat_map(|a| format!("{a}\0").into_bytes())
                    .collect(),
            ),
            "/comm" => Some(format!("{}\n", k.cur().name).into_bytes()),
            "/environ" => Some(
                k.config
                    .env
                    .iter()
                    .flat_map(|a| format!("{a}\0").into_bytes())
                    .collect(),
            ),
            "/status" => Some(status_text(k).into_bytes()),
            "/stat" => {
                let (name, n) = (k.cur().name.clone(), k.live_threads());
                Some(
                    format!("1 ({name}) R 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 {n} 0 0 0 0\n")
                        .into_bytes(),
                )
            }
            _ => None,
        };
    }
    match path {
        "/sys/devices/system/cpu/online"
        | "/sys/devices/system/cpu/possible"
        | "/sys/devices/system/cpu/present" => Some(range.into_bytes()),
        "/proc/cpuinfo" => Some(cpuinfo(cpus).into_bytes()),
        "/proc/meminfo" => {
            let total = k.mem.size() >> 10;
            Some(format!("MemTotal:       {total} kB\nMemFree:        {total} kB\nMemAvailable:   {total} kB\n").into_bytes())
        }
        "/proc/sys/kernel/osrelease" => {
            Some(format!("{}\n", super::sys_info::RELEASE).into_bytes())
        }
        "/proc/stat" => {
            let mut s = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
            for c in 0..cpus {
                s.push_str(&format!("cpu{c} 0 0 0 0 0 0 0 0 0 0\n"));
            }
            Some(s.into_bytes())
        }
        _ => None,
    }
}

fn status_text(k: &mut Kernel) -> String {
    let name = k.cur().name.clone();
    let n = k.live_threads();
    let cpus = k.config.cpus;
    format!(
        "Name:\t{name}\nState:\tR (running)\nTgid:\t1\nPid:\t1\nPPid:\t0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nThreads:\t{n}\nCpus_allowed_list:\t0-{}\n",
        cpus.saturating_sub(1)
    )
}

fn cpuinfo(cpus: u32) -> String {
    let mut s = String::new();
    for c in 0..cpus {
        s.push_str(&format!(
            "processor\t: {c}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: rewind-fuzz virtual CPU (x86-64-v3)\nstepping\t: 4\ncpu MHz\t\t: 1000.000\ncache size\t: 32768 KB\nphysical id\t: 0\nsiblings\t: {cpus}\ncore id\t\t: {c}\ncpu cores\t: {cpus}\napicid\t\t: {c}\nfpu\t\t: yes\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 sep pge mca cmov pat clflush mmx fxsr sse sse2 syscall nx lm pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c lahf_lm abm bmi1 avx2 bmi2 erms adx\nbogomips\t: 2000.00\nclflush size\t: 64\naddress sizes\t: 48 bits physical, 48 bits virtual\n\n"
        ));
    }
    s
}

/// The guest's own descriptors under their `/dev` names: `/dev/stdin`,
/// `/dev/stdout`, `/dev/stderr` and `/dev/fd/N` are Linux's links into
/// `/proc/self/fd`. Looked up on the host they would name the monitor's
/// own descriptors (a file or a pipe, depending on how it was started).
pub(super) fn fd_alias(path: &str) -> Option<String> {
    let n = match path {
        "/dev/stdin" => "0",
        "/dev/stdout" => "1",
        "/dev/stderr" => "2",
        "/dev/fd" => return Some("/proc/self/fd".into()),
        p => p.strip_prefix("/dev/fd/")?,
    };
    Some(format!("/proc/self/fd/{n}"))
}

/// The special files of `/dev`.
pub(super) fn device(path: &str) -> Option<FileKind> {
    Some(match path {
        "/dev/null" => FileKind::Null,
        "/dev/zero" => FileKind::Zero,
        "/dev/urandom" | "/dev/random" => FileKind::Random,
        _ => return None,
    })
}

/// Whether a path lies in the monitor's own trees (never the host's).
pub(super) fn is_virtual_tree(path: &str) -> bool {
    path == "/proc" || path.starts_with("/proc/") || path == "/sys" || path.starts_with("/sys/")
}
