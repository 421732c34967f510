//! Names for data addresses: a lock or counter by the symbol of the
//! object it lies in, and its member when debug information says.

use std::collections::BTreeMap;
use std::sync::Arc;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use super::symbols::Mapping;

/// Names data addresses (locks, counters) by the symbols of the objects
/// mapped: `forks+0x28`.
pub struct DataSymbols {
    objects: Vec<DataObject>,
}

struct DataObject {
    /// The object's bytes (for its debug information).
    data: Arc<Vec<u8>>,
    /// What was added to the object's addresses to place it.
    bias: u64,
    /// `[start, end)` of its loaded segments, in its own addresses.
    span: (u64, u64),
    /// Data symbols sorted by start: `(start, end, name)`.
    symbols: Vec<(u64, u64, String)>,
}

impl DataSymbols {
    pub fn new(maps: &[Mapping]) -> Self {
        let mut by_path: BTreeMap<&str, &Mapping> = BTreeMap::new();
        for m in maps {
            let e = by_path.entry(&m.path).or_insert(m);
            if m.start < e.start {
                *e = m;
            }
        }
        let objects = by_path
            .values()
            .filter_map(|m| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| DataObject::parse(m)))
                    .ok()
                    .flatten()
            })
            .collect();
        DataSymbols { objects }
    }

    /// The symbol (and member, from debug information) at `a`.
    pub fn name(&self, a: u64) -> Option<String> {
        for o in &self.objects {
            let v = a.wrapping_sub(o.bias);
            if v < o.span.0 || v >= o.span.1 {
                continue;
            }
            let i = o.symbols.partition_point(|s| s.0 <= v);
            let (start, end, name) = &o.symbols[i.checked_sub(1)?];
            if v >= *end {
                return None;
            }
            if let Some(n) = super::varnames::describe(&o.data, name, v - start) {
                return Some(n);
            }
            let name = demangled(name);
            return Some(if v == *start {
                name
            } else {
                format!("{name}+{:#x}", v - start)
            });
        }
        None
    }
}

/// A data symbol's name as the program's source spells it: Rust's (legacy
/// and v0 mangling, without the hash) and C++'s demangled, others as they
/// are.
fn demangled(name: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        return format!("{rust:#}");
    }
    if name.starts_with("_Z")
        && let Ok(cpp) = cpp_demangle::Symbol::new(name)
        && let Ok(text) = cpp.demangle(&cpp_demangle::DemangleOptions::new().no_params())
    {
        return text;
    }
    name.to_string()
}

impl DataObject {
    fn parse(m: &Mapping) -> Option<DataObject> {
        let file = object::read::elf::ElfFile64::<object::Endianness>::parse(&m.data[..]).ok()?;
        let segs: Vec<(u64, u64, u64, u64)> = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (s.address(), s.size(), off, size)
            })
            .collect();
        let (vaddr, _, off, _) = segs
            .iter()
            .find(|(_, _, off, size)| {
                *off <= m.file_offset && m.file_offset < off.saturating_add((*size).max(1))
            })
            .or_else(|| segs.first())?;
        let bias = m
            .start
            .wrapping_sub(m.file_offset)
            .wrapping_sub(vaddr.wrapping_sub(*off));
        let span = (
            segs.iter().map(|s| s.0).min()?,
            segs.iter().map(|s| s.0.saturating_add(s.1)).max()?,
        );
        let mut symbols: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| matches!(s.kind(), SymbolKind::Data | SymbolKind::Tls) && s.size() > 0)
            .filter_map(|s| {
                let name = s.name().ok()?;
                let name = name.split('@').next().unwrap_or(name);
                (!name.is_empty()).then(|| {
                    (
                        s.address(),
                        s.address().saturating_add(s.size()),
                        name.to_string(),
                    )
                })
            })
            .collect();
        symbols.sort();
        symbols.dedup_by_key(|s| s.0);
        Some(DataObject {
            data: m.data.clone(),
            bias,
            span,
            symbols,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_symbols_are_named_as_the_source_spells_them() {
        assert_eq!(
            demangled("_RNvNtNtCsjrHSEGnQ3l9_3std2io5stdio6STDOUT"),
            "std::io::stdio::STDOUT"
        );
        assert_eq!(
            demangled("_ZN3std2io5stdio6STDOUT17h0123456789abcdefE"),
            "std::io::stdio::STDOUT"
        );
        assert_eq!(demangled("_ZN5Queue5mutexE"), "Queue::mutex");
        assert_eq!(demangled("forks"), "forks");
    }
}
