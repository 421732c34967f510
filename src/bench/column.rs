//! A bench column: one way of choosing schedules.

use crate::fuzz::StrategyMix;
use crate::sched::{StrategyKind, StrategySpec};

/// The columns `rewind-fuzz bench` compares unless told otherwise.
pub const DEFAULT_COLUMNS: &str = "default,random,pct:1,pct:2,pct:3,pos,fuzz,fuzz:1.0:random";

/// One way of choosing schedules, compared against the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    /// An engine strategy: schedule after schedule, each from its own seed.
    Strategy(StrategyKind),
    /// The coverage-guided fuzzer, one job, with its `--strategy-mix`
    /// (`fuzz` alone: the default mix; `fuzz:1.0:random`: every run a fresh
    /// random walk, no corpus, the baseline guidance has to beat).
    Fuzz { mix: String },
}

impl Column {
    /// The fuzzer's strategy mix, for a fuzz column.
    pub fn strategy_mix(&self) -> Option<StrategyMix> {
        match self {
            Column::Fuzz { mix } if mix.is_empty() => Some(StrategyMix::default()),
            Column::Fuzz { mix } => mix.parse().ok(),
            Column::Strategy(_) => None,
        }
    }
}

impl std::str::FromStr for Column {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "fuzz" {
            return Ok(Column::Fuzz { mix: String::new() });
        }
        if let Some(mix) = s.strip_prefix("fuzz:") {
            mix.parse::<StrategyMix>()?;
            return Ok(Column::Fuzz { mix: mix.into() });
        }
        match s.parse::<StrategySpec>() {
            Ok(StrategySpec::Schedule(_)) => Err(format!(
                "strategy {s:?} replays one fixed schedule and explores nothing; use default, random, pct:D, pos or fuzz"
            )),
            Ok(StrategySpec::Kind(kind)) => Ok(Column::Strategy(kind)),
            Err(_) => Err(format!(
                "unknown strategy {s:?}: use default, random, pct:D (D >= 1), pos or fuzz"
            )),
        }
    }
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Column::Strategy(s) => s.fmt(f),
            Column::Fuzz { mix } if mix.is_empty() => f.write_str("fuzz"),
            Column::Fuzz { mix } => write!(f, "fuzz:{mix}"),
        }
    }
}

impl Column {
    /// Schedules one trial runs at most. The default strategy has no
    /// randomness, so all its schedules are the same and one tells all.
    pub fn schedules_per_trial(&self, budget: u64) -> u64 {
        match self {
            Column::Strategy(kind) if !kind.is_seeded() => budget.min(1),
            _ => budget,
        }
    }
}

/// Parses a comma-separated list of columns, refusing repeats.
pub fn parse_columns(list: &[String]) -> Result<Vec<Column>, String> {
    let mut out: Vec<Column> = Vec::new();
    for s in list.iter().flat_map(|s| s.split(',')).map(str::trim) {
        let c: Column = s.parse()?;
        if out.contains(&c) {
            return Err(format!("strategy {s:?} is listed twice"));
        }
        out.push(c);
    }
    if out.is_empty() {
        return Err("--strategies is empty; name at least one strategy".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_columns_parse_and_print_back_the_same() {
        let cols = parse_columns(&[DEFAULT_COLUMNS.to_string()]).unwrap();
        let back: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
        assert_eq!(back.join(","), DEFAULT_COLUMNS);
        assert_eq!(
            cols.last(),
            Some(&Column::Fuzz {
                mix: "1.0:random".into()
            })
        );
    }

    #[test]
    fn a_fuzz_column_carries_its_strategy_mix() {
        let guided: Column = "fuzz".parse().unwrap();
        assert_eq!(guided.strategy_mix().unwrap().fresh, 0.2);
        let random: Column = "fuzz:1.0:random".parse().unwrap();
        assert_eq!(random.strategy_mix().unwrap().fresh, 1.0);
        assert!("fuzz:2.0".parse::<Column>().is_err());
        assert!("pos".parse::<Column>().unwrap().strategy_mix().is_none());
    }

    #[test]
    fn replays_unknown_names_and_repeats_are_refused() {
        assert!("schedule:/tmp/x".parse::<Column>().is_err());
        assert!("fast".parse::<Column>().unwrap_err().contains("fast"));
        assert!(parse_columns(&["random,random".into()]).is_err());
        assert!(parse_columns(&["".into()]).is_err());
    }

    #[test]
    fn the_default_strategy_runs_one_schedule_per_trial() {
        let d: Column = "default".parse().unwrap();
        assert_eq!(d.schedules_per_trial(1000), 1);
        let r: Column = "pct:2".parse().unwrap();
        assert_eq!(r.schedules_per_trial(1000), 1000);
    }
}
