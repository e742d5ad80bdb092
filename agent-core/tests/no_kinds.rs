//! A test binary that links no interrupt kind (as a plugin's test binary that does not name the
//! crate providing its kinds): the decoder says so instead of listing nothing.

use agent_core::Interrupt;

#[test]
fn an_unknown_type_with_no_kinds_linked_says_so() {
    let err = <dyn Interrupt>::from_json_bytes(br#"{"type":"sysctl_reload"}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"unknown interrupt "sysctl_reload": this binary links no interrupt kinds (name the crate that provides it: `use the_crate as _;`)"#
    );
}
