//! A bench column: one way of choosing schedules, at one level of sync
//! points.

use crate::code::SyncPoints;
use crate::fuzz::StrategyMix;
use crate::sched::{StrategyKind, StrategySpec};

/// The columns `rewind-fuzz bench` compares unless told otherwise.
pub const DEFAULT_COLUMNS: &str = "default,random,pct:1,pct:2,pct:3,pos,fuzz,fuzz:1.0:random";

/// The level a column runs at unless it names one (or a harness's bug
/// needs more, see [`Column::level_for`]).
pub const DEFAULT_LEVEL: SyncPoints = SyncPoints::Atomics;

/// How a column chooses schedules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Search {
    /// An engine strategy: schedule after schedule, each from its own seed.
    Strategy(StrategyKind),
    /// The coverage-guided fuzzer, one job, with its `--strategy-mix`
    /// (`fuzz` alone: the default mix; `fuzz:1.0:random`: every run a fresh
    /// random walk, no corpus, the baseline guidance has to beat).
    Fuzz { mix: String },
}

/// One way of choosing schedules at one level of sync points, compared
/// against the others. Written `STRATEGY[@LEVEL]` (`pos@globals`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub search: Search,
    /// The level it runs every harness at; `None`: the default level, or
    /// the level a harness's bug needs when that is higher.
    pub level: Option<SyncPoints>,
}

impl Column {
    /// The fuzzer's strategy mix, for a fuzz column.
    pub fn strategy_mix(&self) -> Option<StrategyMix> {
        match &self.search {
            Search::Fuzz { mix } if mix.is_empty() => Some(StrategyMix::default()),
            Search::Fuzz { mix } => mix.parse().ok(),
            Search::Strategy(_) => None,
        }
    }

    /// The level it runs a harness at whose bug needs `needed`.
    pub fn level_for(&self, needed: SyncPoints) -> SyncPoints {
        self.level.unwrap_or(DEFAULT_LEVEL.max(needed))
    }

    /// Schedules one trial runs at most. The default strategy has no
    /// randomness, so all its schedules are the same and one tells all.
    pub fn schedules_per_trial(&self, budget: u64) -> u64 {
        match self.search {
            Search::Strategy(kind) if !kind.is_seeded() => budget.min(1),
            _ => budget,
        }
    }
}

impl std::str::FromStr for Search {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "fuzz" {
            return Ok(Search::Fuzz { mix: String::new() });
        }
        if let Some(mix) = s.strip_prefix("fuzz:") {
            mix.parse::<StrategyMix>()?;
            return Ok(Search::Fuzz { mix: mix.into() });
        }
        match s.parse::<StrategySpec>() {
            Ok(StrategySpec::Schedule(_) | StrategySpec::Loaded(..)) => Err(format!(
                "strategy {s:?} replays one fixed schedule and explores nothing; use default, random, pct:D, pos or fuzz"
            )),
            Ok(StrategySpec::Kind(kind)) => Ok(Search::Strategy(kind)),
            Err(_) => Err(format!(
                "unknown strategy {s:?}: use default, random, pct:D (D >= 1), pos or fuzz"
            )),
        }
    }
}

impl std::fmt::Display for Search {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Search::Strategy(s) => s.fmt(f),
            Search::Fuzz { mix } if mix.is_empty() => f.write_str("fuzz"),
            Search::Fuzz { mix } => write!(f, "fuzz:{mix}"),
        }
    }
}

impl std::str::FromStr for Column {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (search, level) = match s.split_once('@') {
            Some((a, l)) => (a, Some(l.parse()?)),
            None => (s, None),
        };
        Ok(Column {
            search: search.parse()?,
            level,
        })
    }
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.search.fmt(f)?;
        if let Some(level) = self.level {
            write!(f, "@{level}")?;
        }
        Ok(())
    }
}

/// Parses a comma-separated list of columns, refusing repeats. A column
/// that names no level runs at each of `levels` (none: the default).
pub fn parse_columns(list: &[String], levels: &[SyncPoints]) -> Result<Vec<Column>, String> {
    let levels: Vec<Option<SyncPoints>> = if levels.is_empty() {
        vec![None]
    } else {
        levels.iter().copied().map(Some).collect()
    };
    let mut out: Vec<Column> = Vec::new();
    for s in list.iter().flat_map(|s| s.split(',')).map(str::trim) {
        let named = s.contains('@');
        let c: Column = s.parse()?;
        let columns = if named {
            vec![c]
        } else {
            levels
                .iter()
                .map(|l| Column {
                    level: *l,
                    ..c.clone()
                })
                .collect()
        };
        for c in columns {
            if out.contains(&c) {
                return Err(format!("strategy {c} is listed twice"));
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err("--strategies is empty; name at least one strategy".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ATOMICS: &[SyncPoints] = &[];

    #[test]
    fn the_default_columns_parse_and_print_back_the_same() {
        let cols = parse_columns(&[DEFAULT_COLUMNS.to_string()], ATOMICS).unwrap();
        let back: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
        assert_eq!(back.join(","), DEFAULT_COLUMNS);
        assert_eq!(
            cols.last().map(|c| &c.search),
            Some(&Search::Fuzz {
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
        assert!(parse_columns(&["random,random".into()], ATOMICS).is_err());
        assert!(parse_columns(&["".into()], ATOMICS).is_err());
        assert!("pos@fast".parse::<Column>().is_err());
    }

    #[test]
    fn a_column_without_a_level_runs_a_bug_at_the_level_it_needs() {
        let pos: Column = "pos".parse().unwrap();
        assert_eq!(pos.level_for(SyncPoints::Calls), SyncPoints::Atomics);
        assert_eq!(pos.level_for(SyncPoints::Globals), SyncPoints::Globals);
        let calls: Column = "pos@calls".parse().unwrap();
        assert_eq!(calls.level_for(SyncPoints::Globals), SyncPoints::Calls);
    }

    #[test]
    fn the_default_strategy_runs_one_schedule_per_trial() {
        let d: Column = "default".parse().unwrap();
        assert_eq!(d.schedules_per_trial(1000), 1);
        let r: Column = "pct:2".parse().unwrap();
        assert_eq!(r.schedules_per_trial(1000), 1000);
    }

    #[test]
    fn a_column_per_level_each_named_by_its_level() {
        let levels = [SyncPoints::Calls, SyncPoints::Atomics, SyncPoints::Globals];
        let cols = parse_columns(&["pos,fuzz@globals".into()], &levels).unwrap();
        let names: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            names,
            ["pos@calls", "pos@atomics", "pos@globals", "fuzz@globals"]
        );
        assert_eq!("pos@calls".parse::<Column>().unwrap(), cols[0]);
    }
}
