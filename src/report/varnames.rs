//! Names of places inside global variables, from the debug information:
//! `forks+0x28` becomes `forks[1]`, `accounts+0x30` becomes
//! `accounts[1].lock`. A story names locks by what the program calls them.
//!
//! The variable is found by its symbol's name among the `DW_TAG_variable`
//! entries, and the offset is walked down its type: arrays give an index,
//! structures the member holding the offset. A lock is usually a member or
//! an element itself, so the walk stops at the first type it starts at
//! (a `pthread_mutex_t` is not split into its fields) once something was
//! named. The file may be hostile: anything unexpected gives no name.

use std::borrow::Cow;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use gimli::{AttributeValue, EndianSlice, LittleEndian, Unit, UnitOffset, constants};
use object::{Object, ObjectSection};

type R<'a> = EndianSlice<'a, LittleEndian>;

/// How deep a type is walked at most (against cyclic or absurd types).
const MAX_DEPTH: usize = 16;

/// `symbol` followed by the path to byte `offset` inside it (`[1].lock`),
/// or `None` when the debug information does not say.
pub fn describe(elf: &[u8], symbol: &str, offset: u64) -> Option<String> {
    catch_unwind(AssertUnwindSafe(|| walk_file(elf, symbol, offset)))
        .ok()
        .flatten()
}

fn walk_file(elf: &[u8], symbol: &str, offset: u64) -> Option<String> {
    let file = object::read::elf::ElfFile64::<object::Endianness>::parse(elf).ok()?;
    file.section_by_name(".debug_info")?;
    // Every section gimli asks for, read first (some may be compressed).
    let mut sections: HashMap<gimli::SectionId, Cow<[u8]>> = HashMap::new();
    let _ = gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
        if let Some(data) = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
        {
            sections.insert(id, data);
        }
        Ok(EndianSlice::new(&[], LittleEndian))
    });
    let dwarf = gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
        Ok(EndianSlice::new(
            sections.get(&id).map_or(&[][..], |d| d.as_ref()),
            LittleEndian,
        ))
    })
    .ok()?;
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let mut entries = unit.entries();
        while let Ok(Some((_, entry))) = entries.next_dfs() {
            if entry.tag() != constants::DW_TAG_variable {
                continue;
            }
            let named = entry
                .attr_value(constants::DW_AT_name)
                .ok()
                .flatten()
                .and_then(|v| dwarf.attr_string(&unit, v).ok())
                .is_some_and(|n| n.slice() == symbol.as_bytes());
            if !named {
                continue;
            }
            let Some(ty) = type_of(entry.attr_value(constants::DW_AT_type).ok()?) else {
                continue;
            };
            let mut path = String::new();
            walk_type(&dwarf, &unit, ty, offset, &mut path, 0, 0)?;
            return Some(format!("{symbol}{path}"));
        }
    }
    None
}

fn type_of(v: Option<AttributeValue<R<'_>>>) -> Option<UnitOffset> {
    match v? {
        AttributeValue::UnitRef(o) => Some(o),
        _ => None,
    }
}

/// Appends to `path` the way to byte `rem` of the type at `ty`.
fn walk_type(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    ty: UnitOffset,
    rem: u64,
    path: &mut String,
    named: usize,
    depth: usize,
) -> Option<()> {
    use std::fmt::Write as _;
    let rest = |path: &mut String, rem: u64| {
        if rem > 0 {
            let _ = write!(path, "+{rem:#x}");
        }
        Some(())
    };
    if depth > MAX_DEPTH {
        return rest(path, rem);
    }
    let e = unit.entry(ty).ok()?;
    match e.tag() {
        constants::DW_TAG_typedef
        | constants::DW_TAG_const_type
        | constants::DW_TAG_volatile_type
        | constants::DW_TAG_atomic_type
        | constants::DW_TAG_restrict_type => {
            match type_of(e.attr_value(constants::DW_AT_type).ok()?) {
                Some(inner) => walk_type(dwarf, unit, inner, rem, path, named, depth + 1),
                None => rest(path, rem),
            }
        }
        constants::DW_TAG_array_type => {
            let Some(elem) = type_of(e.attr_value(constants::DW_AT_type).ok()?) else {
                return rest(path, rem);
            };
            let size = byte_size(unit, elem, 0).filter(|s| *s > 0);
            let Some(size) = size else {
                return rest(path, rem);
            };
            let _ = write!(path, "[{}]", rem / size);
            // An element is the thing itself: a structure element is still
            // walked into (`accounts[1].lock`).
            walk_type(dwarf, unit, elem, rem % size, path, named, depth + 1)
        }
        constants::DW_TAG_structure_type | constants::DW_TAG_class_type
            if rem > 0 || named == 0 =>
        {
            member_at(dwarf, unit, ty, rem, path, named, depth)
        }
        constants::DW_TAG_union_type if rem > 0 => {
            member_at(dwarf, unit, ty, rem, path, named, depth)
        }
        _ => rest(path, rem),
    }
}

/// The member of the structure at `ty` that holds byte `rem`.
fn member_at(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    ty: UnitOffset,
    rem: u64,
    path: &mut String,
    named: usize,
    depth: usize,
) -> Option<()> {
    use std::fmt::Write as _;
    let mut tree = unit.entries_tree(Some(ty)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let m = child.entry();
        if m.tag() != constants::DW_TAG_member {
            continue;
        }
        let Some(at) = m
            .attr(constants::DW_AT_data_member_location)
            .ok()
            .flatten()
            .and_then(|a| a.udata_value())
        else {
            continue;
        };
        let Some(mty) = type_of(m.attr_value(constants::DW_AT_type).ok().flatten()) else {
            continue;
        };
        let size = byte_size(unit, mty, 0).unwrap_or(0);
        if rem < at || rem >= at.saturating_add(size) {
            continue;
        }
        let name = m
            .attr_value(constants::DW_AT_name)
            .ok()
            .flatten()
            .and_then(|v| dwarf.attr_string(unit, v).ok())
            .map(|n| String::from_utf8_lossy(n.slice()).into_owned());
        // An anonymous member adds no name: its members are the
        // structure's own.
        if let Some(n) = name {
            let _ = write!(path, ".{n}");
        }
        return walk_type(dwarf, unit, mty, rem - at, path, named + 1, depth + 1);
    }
    if rem > 0 {
        let _ = write!(path, "+{rem:#x}");
    }
    Some(())
}

/// The size in bytes of the type at `ty`.
fn byte_size(unit: &Unit<R<'_>>, ty: UnitOffset, depth: usize) -> Option<u64> {
    if depth > MAX_DEPTH {
        return None;
    }
    let e = unit.entry(ty).ok()?;
    if let Some(s) = e
        .attr(constants::DW_AT_byte_size)
        .ok()
        .flatten()
        .and_then(|a| a.udata_value())
    {
        return Some(s);
    }
    let inner = type_of(e.attr_value(constants::DW_AT_type).ok().flatten());
    match e.tag() {
        constants::DW_TAG_array_type => {
            let elem = byte_size(unit, inner?, depth + 1)?;
            let mut count: u64 = 1;
            let mut tree = unit.entries_tree(Some(ty)).ok()?;
            let root = tree.root().ok()?;
            let mut children = root.children();
            while let Ok(Some(child)) = children.next() {
                let s = child.entry();
                if s.tag() != constants::DW_TAG_subrange_type {
                    continue;
                }
                let n = match s
                    .attr(constants::DW_AT_count)
                    .ok()
                    .flatten()
                    .and_then(|a| a.udata_value())
                {
                    Some(n) => n,
                    None => s
                        .attr(constants::DW_AT_upper_bound)
                        .ok()
                        .flatten()
                        .and_then(|a| a.udata_value())?
                        .checked_add(1)?,
                };
                count = count.checked_mul(n)?;
            }
            elem.checked_mul(count)
        }
        _ => byte_size(unit, inner?, depth + 1),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn garbage_has_no_names() {
        assert_eq!(super::describe(b"\x7fELF garbage", "forks", 8), None);
        assert_eq!(super::describe(&[], "forks", 0), None);
    }
}
