//! A bench column: one way of choosing schedules.

use crate::sched::StrategySpec;

/// The columns `rewind-fuzz bench` compares unless told otherwise.
pub const DEFAULT_COLUMNS: &str = "default,random,pct:1,pct:2,pct:3,pos,fuzz";

/// One way of choosing schedules, compared against the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    /// An engine strategy: schedule after schedule, each from its own seed.
    Strategy(StrategySpec),
    /// The coverage-guided fuzzer. Not wired in yet: its column says so
    /// instead of running, so a missing fuzzer never reads as "found
    /// nothing".
    Fuzz,
}

impl std::str::FromStr for Column {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "fuzz" {
            return Ok(Column::Fuzz);
        }
        match s.parse::<StrategySpec>() {
            Ok(StrategySpec::Schedule(_)) => Err(format!(
                "strategy {s:?} replays one fixed schedule and explores nothing; use default, random, pct:D, pos or fuzz"
            )),
            Ok(spec) => Ok(Column::Strategy(spec)),
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
            Column::Fuzz => f.write_str("fuzz"),
        }
    }
}

impl Column {
    /// Why the column cannot run, when it cannot.
    pub fn unavailable(&self) -> Option<&'static str> {
        match self {
            // The lead wires `fuzz::schedules_to_bug` in here once it exists.
            Column::Fuzz => {
                Some("not available: the coverage-guided fuzzer is not wired into bench yet")
            }
            Column::Strategy(_) => None,
        }
    }

    /// Schedules one trial runs at most. The default strategy has no
    /// randomness, so all its schedules are the same and one tells all.
    pub fn schedules_per_trial(&self, budget: u64) -> u64 {
        match self {
            Column::Strategy(StrategySpec::Default) => budget.min(1),
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
        assert_eq!(cols.last(), Some(&Column::Fuzz));
    }

    #[test]
    fn fuzz_says_it_is_not_available_and_strategies_are() {
        assert!(
            Column::Fuzz
                .unavailable()
                .unwrap()
                .contains("not available")
        );
        assert_eq!("pos".parse::<Column>().unwrap().unavailable(), None);
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
