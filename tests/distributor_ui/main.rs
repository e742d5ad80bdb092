//! SPEC §9.5: a distributor's binary names the kinds it adds, so a kind that is not linked is
//! a compile error, not a payload refused on a node. Each case in this directory is checked
//! against the exact compiler message; `TRYBUILD=overwrite cargo test -p agent-cli --test
//! distributor_compile_fail` rewrites the expectations after a deliberate change.

#![forbid(unsafe_code)]

#[test]
fn a_distributor_that_names_a_kind_it_does_not_link_does_not_compile() {
    trybuild::TestCases::new().compile_fail("../tests/distributor_ui/fail/*.rs");
}
