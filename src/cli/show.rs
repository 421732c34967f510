//! `rewind-fuzz show FILE.rwd`: the story of a failure, for a person.

use std::path::PathBuf;

use clap::Args;

use super::UserError;
use super::common::check_output;
use crate::rwd::Rwd;
use crate::rwd::story::{DEFAULT_LANE_STEPS, StoryTeller};

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The reproducer to describe.
    #[arg(value_name = "FILE.rwd")]
    pub file: PathBuf,
    /// How many of the last steps to show in the thread lanes.
    #[arg(long, default_value_t = DEFAULT_LANE_STEPS, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub steps: u64,
    /// Also draw the thread lanes as an SVG picture in FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// List the files the reproducer holds (path, size, digest) and those
    /// left out of it, and nothing else.
    #[arg(long)]
    pub files: bool,
}

pub fn show(a: ShowArgs) -> Result<u8, UserError> {
    check_output("--svg", a.svg.as_deref())?;
    // Reading needs no KVM and tolerates another CPU model: it only tells.
    let rwd = Rwd::load(&a.file).map_err(|e| UserError::bad_input(e.to_string()))?;
    // The story is told from strings anyone could have written.
    let rwd = rwd.for_display();
    if a.files {
        print!("{}", crate::escape::text(&files_table(&rwd)));
        return Ok(0);
    }
    let mut teller = StoryTeller::new(&rwd);
    let steps = a.steps as usize;
    print!("{}", crate::escape::text(&teller.text(steps)));
    if let Some(svg) = &a.svg {
        crate::fsutil::write_atomically(svg, teller.svg(steps).as_bytes()).map_err(|e| {
            UserError::bad_input(format!("cannot write --svg {}: {e}", svg.display()))
        })?;
        eprintln!("rewind-fuzz: drew the thread lanes in {}", svg.display());
    }
    Ok(0)
}

/// Every host lookup the reproducer holds, what it found, and those left
/// out of it: what handing it to someone hands them. Files with their
/// size and digest, files whose metadata alone was recorded, symlinks with
/// their targets, directory listings, paths found missing, and the bytes
/// of mappings that no file entry names.
fn files_table(r: &Rwd) -> String {
    use crate::rwd::format::WireNode;
    use std::fmt::Write;
    let mut out = String::new();
    let (mut held, mut bytes, mut left_out, mut others) = (0usize, 0u64, 0usize, 0usize);
    let mut named = std::collections::BTreeSet::new();
    let _ = writeln!(out, "{:>12}  {:<32}  path", "bytes", "xxh3-128");
    for f in &r.files {
        let how = if f.follow { "" } else { " (not followed)" };
        match &f.node {
            WireNode::File { content, mode } => {
                let size = r.blob(*content).map_or(0, |b| b.len() as u64);
                let private = if mode & 0o004 == 0 { "  (private)" } else { "" };
                let _ = writeln!(out, "{size:>12}  {content:032x}  {}{how}{private}", f.path);
                if named.insert(*content) {
                    held += 1;
                    bytes += size;
                }
            }
            WireNode::Host => {
                let _ = writeln!(
                    out,
                    "{:>12}  {:<32}  {}{how}",
                    "-", "left out: read from the host", f.path
                );
                left_out += 1;
            }
            WireNode::Unread { size, .. } => {
                let _ = writeln!(out, "{size:>12}  {:<32}  {}{how}", "metadata only", f.path);
                others += 1;
            }
            WireNode::Symlink { target } => {
                let _ = writeln!(
                    out,
                    "{:>12}  {:<32}  {}{how} -> {target}",
                    "-", "symlink", f.path
                );
                others += 1;
            }
            WireNode::Dir {
                entries: Some(e), ..
            } => {
                let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
                let _ = writeln!(
                    out,
                    "{:>12}  {:<32}  {}/{how}: {}",
                    "-",
                    format!("directory of {}", e.len()),
                    f.path.trim_end_matches('/'),
                    names.join(" ")
                );
                others += 1;
            }
            WireNode::Dir { entries: None, .. } => {
                let dir = f.path.trim_end_matches('/');
                let _ = writeln!(out, "{:>12}  {:<32}  {dir}/{how}", "-", "directory");
                others += 1;
            }
            WireNode::Missing => {
                let _ = writeln!(out, "{:>12}  {:<32}  {}{how}", "-", "missing", f.path);
                others += 1;
            }
        }
    }
    for m in &r.story.mappings {
        if named.insert(m.content) {
            let size = r.blob(m.content).map_or(0, |b| b.len() as u64);
            let _ = writeln!(
                out,
                "{size:>12}  {:032x}  {} (mapped at {:#x})",
                m.content, m.path, m.start
            );
            held += 1;
            bytes += size;
        }
    }
    let _ = writeln!(
        out,
        "{held} file(s) held ({bytes} bytes before compression), {left_out} left out, {others} other lookup(s); mapped code: {} mapping(s)",
        r.story.mappings.len()
    );
    out
}
