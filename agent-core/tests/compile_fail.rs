//! Misuses of `#[agent_core::interrupt]` and of the interrupt traits are compile errors that
//! say what to write instead; each case in `tests/ui/` is checked against the exact message.
//! `TRYBUILD=overwrite cargo test -p agent-core --test compile_fail` rewrites the expectations
//! after a deliberate change.

#[test]
fn interrupt_declaration_mistakes_are_explained_by_the_compiler() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
