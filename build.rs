//! Builds the guest's pthread preload shim, `guest/shim.c`, into
//! `$OUT_DIR/librewind-shim.so`, which `src/arch/shim.rs` embeds.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const SOURCE: &str = "guest/shim.c";
const OUTPUT: &str = "librewind-shim.so";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest_dir = PathBuf::from(
        env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set by cargo"),
    );
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let output = out_dir.join(OUTPUT);

    // The source is named relative to the crate root, so that no absolute path
    // can end up in the library and its bytes do not depend on where the crate
    // lives.
    let result = Command::new("gcc")
        .current_dir(&manifest_dir)
        .args([
            "-std=gnu11",
            "-O2",
            "-fPIC",
            "-shared",
            "-fvisibility=hidden",
            "-Wall",
            "-Wextra",
            "-g0",
            "-s",
            "-Wl,-soname,librewind-shim.so",
            "-Wl,-z,defs",
            "-Wl,-z,now",
            "-Wl,-z,noexecstack",
            "-Wl,--build-id=none",
            "-o",
        ])
        .arg(&output)
        .arg(SOURCE)
        .output();

    let result = match result {
        Ok(result) => result,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            panic!(
                "building the guest shim ({SOURCE}) needs `gcc`, which is not installed or not on PATH \
                 (on Debian or Ubuntu: apt-get install gcc)"
            )
        }
        Err(err) => panic!("could not run `gcc` to build the guest shim ({SOURCE}): {err}"),
    };

    let stderr = String::from_utf8_lossy(&result.stderr);
    if !result.status.success() {
        panic!(
            "`gcc` failed to build the guest shim ({SOURCE}), {}:\n{stderr}",
            result.status
        );
    }
    for line in stderr.lines().filter(|line| !line.trim().is_empty()) {
        println!("cargo:warning=shim: {line}");
    }
}
