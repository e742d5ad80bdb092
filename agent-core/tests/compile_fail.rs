//! Misuses of `#[agent_core::interrupt]` and of the interrupt traits are compile errors that
//! say what to write instead; each case in `tests/ui/` is checked against the exact message.
//! `TRYBUILD=overwrite cargo test -p agent-core --test compile_fail` rewrites the expectations
//! after a deliberate change.

#[test]
fn interrupt_declaration_mistakes_are_explained_by_the_compiler() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}

/// docs/interrupts.md's "Common mistakes" table quotes each message from the test beside it.
#[test]
fn the_common_mistakes_table_quotes_its_tests() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(repo.join("docs/interrupts.md")).unwrap();
    let table = doc
        .split("### Common mistakes")
        .nth(1)
        .expect("a Common mistakes section");
    let mut rows = 0;
    for line in table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| mistake"))
    {
        let cells: Vec<&str> = line.split(" | ").collect();
        assert_eq!(cells.len(), 3, "{line}");
        let message = first_code_span(cells[1]).unwrap_or_else(|| panic!("no message in {line}"));
        let file = first_code_span(cells[2]).unwrap_or_else(|| panic!("no test in {line}"));
        let file = file.trim_end_matches(" |");
        let text =
            std::fs::read_to_string(repo.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            text.contains(message),
            "{file} does not contain {message:?}"
        );
        rows += 1;
    }
    assert!(rows >= 15, "{rows} rows");
}

/// The content of the first Markdown code span (`` `a` `` or ``` `` a ` b `` ```).
fn first_code_span(cell: &str) -> Option<&str> {
    if let Some(start) = cell.find("`` ") {
        let rest = &cell[start + 3..];
        return rest.find(" ``").map(|end| &rest[..end]);
    }
    let start = cell.find('`')?;
    let rest = &cell[start + 1..];
    rest.find('`').map(|end| &rest[..end])
}

/// docs/interrupts.md's clippy.toml for a kind's crate is the one the example kind's crate
/// uses (and `cargo clippy -D warnings` of the workspace lints it with).
#[test]
fn the_documented_clippy_toml_is_the_example_kind_s() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(repo.join("docs/interrupts.md")).unwrap();
    let section = doc
        .split("### Lints for a kind's crate")
        .nth(1)
        .expect("a Lints section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a toml block");
    let file = std::fs::read_to_string(repo.join("examples/custom-interrupt/clippy.toml")).unwrap();
    assert_eq!(block, file);
    for banned in [
        "std::process::Command",
        "tokio::process::Command",
        "std::thread::sleep",
    ] {
        assert!(file.contains(&format!("path = \"{banned}\"")), "{banned}");
    }
}
