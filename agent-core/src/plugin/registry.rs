//! The registry of interrupt kinds, for listing, for naming every known type in errors, and
//! for the startup self-check.
//!
//! typetag keeps its own registry for deserialization; this parallel one (collected with
//! `inventory`, like vector's component descriptions) carries what a listing needs: summary,
//! module and an example payload. [`macro@crate::interrupt`] fills both from one declaration,
//! and [`codec::check`](crate::plugin::codec::check) proves at startup that they agree.

use std::any::TypeId;
use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use crate::plugin::contract::{DuplicateKind, InterruptKind, field_names};

/// What `agent interrupts list` shows of one kind.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct InterruptDescriptor {
    /// The wire name (`"type"` in INTERRUPT_DATA).
    #[serde(rename = "type")]
    pub type_name: &'static str,
    pub summary: &'static str,
    /// `module_path!()` of the declaration: says which crate provides the kind.
    pub module: &'static str,
    /// An example JSON payload.
    pub example: &'static str,
    /// The Rust type of the kind.
    #[serde(skip)]
    pub type_id: fn() -> TypeId,
    /// The payload fields the kind accepts, when it has a fixed list.
    #[serde(skip)]
    pub fields: fn() -> Option<&'static [&'static str]>,
}

impl InterruptDescriptor {
    /// Emitted by [`macro@crate::interrupt`].
    pub const fn new<T: InterruptKind + DeserializeOwned>(module: &'static str) -> Self {
        Self {
            type_name: T::TYPE,
            summary: T::SUMMARY,
            module,
            example: T::EXAMPLE,
            type_id: TypeId::of::<T>,
            fields: field_names::<T>,
        }
    }
}

inventory::collect!(InterruptDescriptor);

/// Every registered kind, sorted by type name.
pub fn kinds() -> Vec<&'static InterruptDescriptor> {
    let mut all: Vec<_> = inventory::iter::<InterruptDescriptor>.into_iter().collect();
    all.sort_by_key(|d| (d.type_name, d.module));
    all
}

/// Every registered type name, sorted and unique.
pub(crate) fn type_names() -> Vec<&'static str> {
    let mut names: Vec<_> = kinds().into_iter().map(|d| d.type_name).collect();
    names.dedup();
    names
}

/// Look a kind up by wire name.
pub fn find(type_name: &str) -> Option<&'static InterruptDescriptor> {
    kinds().into_iter().find(|d| d.type_name == type_name)
}

/// Every kind registered under `type_name` (more than one is a [`DuplicateKind`]).
pub(crate) fn find_all(type_name: &str) -> Vec<&'static InterruptDescriptor> {
    kinds()
        .into_iter()
        .filter(|d| d.type_name == type_name)
        .collect()
}

/// The descriptor of kind `T`, if this binary registered it.
pub fn descriptor_of<T: InterruptKind>() -> Option<&'static InterruptDescriptor> {
    find_all(T::TYPE)
        .into_iter()
        .find(|d| (d.type_id)() == TypeId::of::<T>())
}

/// SPEC §9.5: two kinds with one name are detected at startup.
pub fn check_unique() -> Result<(), DuplicateKind> {
    check_unique_in(kinds())
}

pub(crate) fn check_unique_in<'a>(
    kinds: impl IntoIterator<Item = &'a InterruptDescriptor>,
) -> Result<(), DuplicateKind> {
    let mut seen: BTreeMap<&'static str, &'static str> = BTreeMap::new();
    for d in kinds {
        if let Some(first) = seen.insert(d.type_name, d.module) {
            return Err(DuplicateKind {
                type_name: d.type_name,
                first,
                second: d.module,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(type_name: &'static str, module: &'static str) -> InterruptDescriptor {
        InterruptDescriptor {
            type_name,
            summary: "",
            module,
            example: "{}",
            type_id: TypeId::of::<()>,
            fields: || None,
        }
    }

    #[test]
    fn duplicate_names_are_reported_with_both_modules() {
        let list = [d("a", "x::a"), d("b", "y::b"), d("a", "z::a")];
        assert_eq!(
            check_unique_in(&list).unwrap_err().to_string(),
            r#"interrupt type "a" is registered twice: by x::a and by z::a"#
        );
        assert!(check_unique_in(&list[..2]).is_ok());
    }
}
