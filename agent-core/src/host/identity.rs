//! Resource ID → package identity (SPEC §4), and the one rule for every name that becomes a
//! path component (SPEC §5).

/// Why a resource ID or name was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "resource ID {0:?} must end in _PACKAGE_VERSION (SKYHOOK_RESOURCE_ID is \
         <prefix>_<package>_<version>, e.g. sk1-uid_pkg_1.0.0)"
    )]
    Shape(String),
    #[error(
        "SKYHOOK_RESOURCE_ID is not set: expected <prefix>_<package>_<version>, e.g. \
         sk1-uid_pkg_1.0.0 (the operator sets it on the agent's pod)"
    )]
    Unset,
    #[error(transparent)]
    Component(#[from] NotAComponent),
}

/// A name that becomes one path component (a package name or version, a resource ID, an
/// operation) but is not one (SPEC §5). `what` names the field or option it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value:?} must be a single path component")]
pub struct NotAComponent {
    pub what: &'static str,
    pub value: String,
}

/// The package name and version carried by `SKYHOOK_RESOURCE_ID`
/// (`<prefix>_<package>_<version>`). They name the banner's directories and interrupt logs;
/// they can differ from config.json's names (the operator's package key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceId {
    pub id: String,
    pub package: String,
    pub version: String,
}

impl ResourceId {
    /// SPEC §4: `v` = last `_`; `p` = first `_` before `v`; valid iff `p > 0`, `p < v-1`,
    /// `v < len-1`. Underscores inside the package name survive.
    pub fn parse(id: &str) -> Result<Self, IdentityError> {
        if id.is_empty() {
            return Err(IdentityError::Unset);
        }
        let shape = || IdentityError::Shape(id.to_owned());
        let v = id.rfind('_').ok_or_else(shape)?;
        let p = id[..v].find('_').ok_or_else(shape)?;
        if p == 0 || p + 1 >= v || v + 1 >= id.len() {
            return Err(shape());
        }
        let package = &id[p + 1..v];
        let version = &id[v + 1..];
        path_component("package name", package)?;
        path_component("package version", version)?;
        Ok(Self {
            id: id.to_owned(),
            package: package.to_owned(),
            version: version.to_owned(),
        })
    }

    /// Interrupt markers live in a directory named after the whole ID (SPEC §4, §9.3).
    pub fn check_directory_name(&self) -> Result<(), IdentityError> {
        Ok(path_component("resource ID", &self.id)?)
    }
}

/// Longest directory entry name Linux filesystems accept (`NAME_MAX`).
pub(crate) const NAME_MAX: usize = 255;

/// SPEC §5: the one rule for a name that becomes a path component, wherever it comes from
/// (config.json, INTERRUPT_DATA, the environment, a subcommand's options): `value` must pass
/// [`is_single_component`]. Callers check before anything is read or removed.
///
/// # Errors
/// [`NotAComponent`] naming `what` and the value.
pub fn path_component(what: &'static str, value: &str) -> Result<(), NotAComponent> {
    if is_single_component(value) {
        Ok(())
    } else {
        Err(NotAComponent {
            what,
            value: value.to_owned(),
        })
    }
}

/// Non-empty, not `.` or `..`, no `/`, no NUL, at most `NAME_MAX` bytes: safe as one directory
/// entry name (a longer one would fail only after state was written).
pub fn is_single_component(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_prefix_package_and_version() {
        let id = ResourceId::parse("abc_pkg_1.0.0").unwrap();
        assert_eq!((id.package.as_str(), id.version.as_str()), ("pkg", "1.0.0"));
    }

    #[test]
    fn underscores_inside_the_package_name_survive() {
        let id = ResourceId::parse("nodewright-uid-1_package_with_underscores_1.2.3").unwrap();
        assert_eq!(id.package, "package_with_underscores");
        assert_eq!(id.version, "1.2.3");
    }

    #[test]
    fn rejects_ids_without_package_and_version() {
        for bad in [
            "abc", "abc_1.0", "_pkg_1.0", "abc__1.0", "abc_pkg_", "__", "a_b_",
        ] {
            assert_eq!(
                ResourceId::parse(bad).unwrap_err().to_string(),
                format!(
                    "resource ID {bad:?} must end in _PACKAGE_VERSION (SKYHOOK_RESOURCE_ID is \
                     <prefix>_<package>_<version>, e.g. sk1-uid_pkg_1.0.0)"
                ),
                "{bad}"
            );
        }
        assert_eq!(
            ResourceId::parse("").unwrap_err().to_string(),
            "SKYHOOK_RESOURCE_ID is not set: expected <prefix>_<package>_<version>, e.g. \
             sk1-uid_pkg_1.0.0 (the operator sets it on the agent's pod)"
        );
    }

    #[test]
    fn rejects_path_components_in_names() {
        assert_eq!(
            ResourceId::parse("abc_../x_1.0").unwrap_err().to_string(),
            r#"package name "../x" must be a single path component"#
        );
        assert_eq!(
            ResourceId::parse("abc_.._1.0").unwrap_err().to_string(),
            r#"package name ".." must be a single path component"#
        );
        assert_eq!(
            ResourceId::parse("abc_pkg_1/0").unwrap_err().to_string(),
            r#"package version "1/0" must be a single path component"#
        );
    }

    #[test]
    fn names_longer_than_a_file_name_are_rejected() {
        let long = "p".repeat(256);
        assert_eq!(
            ResourceId::parse(&format!("abc_{long}_1.0")).unwrap_err(),
            IdentityError::Component(NotAComponent {
                what: "package name",
                value: long.clone(),
            })
        );
        let id = ResourceId::parse(&format!("{}_pkg_1.0", "a".repeat(250))).unwrap();
        assert!(id.check_directory_name().is_err());
        assert!(is_single_component(&"p".repeat(255)));
    }

    #[test]
    fn one_rule_refuses_empty_dot_dot_slash_and_nul() {
        for bad in ["", ".", "..", "a/b", "/", "../x", "a\0b", &"n".repeat(256)] {
            let err = path_component("--package", bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("--package {bad:?} must be a single path component")
            );
        }
        for good in ["pkg", "1.0.0", "a..b", ".hidden", "node_restart_0", "a b"] {
            assert!(path_component("--package", good).is_ok(), "{good}");
        }
    }

    #[test]
    fn whole_id_must_be_a_directory_name_for_interrupts() {
        let id = ResourceId::parse("a/b_pkg_1.0").unwrap();
        assert_eq!(
            id.check_directory_name().unwrap_err().to_string(),
            r#"resource ID "a/b_pkg_1.0" must be a single path component"#
        );
        assert!(
            ResourceId::parse("abc_pkg_1.0")
                .unwrap()
                .check_directory_name()
                .is_ok()
        );
    }
}
