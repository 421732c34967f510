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
}

pub fn show(a: ShowArgs) -> Result<u8, UserError> {
    check_output("--svg", a.svg.as_deref())?;
    // Reading needs no KVM and tolerates another CPU model: it only tells.
    let rwd = Rwd::load(&a.file).map_err(|e| UserError::bad_input(e.to_string()))?;
    // The story is told from strings anyone could have written.
    let rwd = rwd.for_display();
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
