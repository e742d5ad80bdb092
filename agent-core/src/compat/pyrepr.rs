//! CPython `repr()` of `str`, `list[str]` and `list[int]` (SPEC §8.3, appendix).
//!
//! The Python agent printed these reprs in the execution header and hashed them into legacy
//! marker names, so the bytes must be CPython's for every string, not an approximation.

use unicode_general_category::{GeneralCategory, get_general_category};

/// Code points first assigned in Unicode 16.0, as inclusive ranges.
///
/// The legacy agent ran on CPython 3.13, whose character database is Unicode 15.1, while the
/// `unicode-general-category` tables are Unicode 16.0. To CPython 3.13 these code points are
/// unassigned (`Cn`), hence not printable and escaped by `repr`; without this list they would be
/// printed literally and a legacy marker name would no longer match the one on the host.
/// Between 15.1 and 16.0 no assigned code point moved into or out of the printable set, so these
/// ranges are the whole difference (derived from the Unicode 15.1 and 16.0 UCD data).
const ASSIGNED_IN_UNICODE_16: &[(u32, u32)] = &[
    (0x0897, 0x0897),
    (0x1B4E, 0x1B4F),
    (0x1B7F, 0x1B7F),
    (0x1C89, 0x1C8A),
    (0x2427, 0x2429),
    (0x31E4, 0x31E5),
    (0xA7CB, 0xA7CD),
    (0xA7DA, 0xA7DC),
    (0x105C0, 0x105F3),
    (0x10D40, 0x10D65),
    (0x10D69, 0x10D85),
    (0x10D8E, 0x10D8F),
    (0x10EC2, 0x10EC4),
    (0x10EFC, 0x10EFC),
    (0x11380, 0x11389),
    (0x1138B, 0x1138B),
    (0x1138E, 0x1138E),
    (0x11390, 0x113B5),
    (0x113B7, 0x113C0),
    (0x113C2, 0x113C2),
    (0x113C5, 0x113C5),
    (0x113C7, 0x113CA),
    (0x113CC, 0x113D5),
    (0x113D7, 0x113D8),
    (0x113E1, 0x113E2),
    (0x116D0, 0x116E3),
    (0x11BC0, 0x11BE1),
    (0x11BF0, 0x11BF9),
    (0x11F5A, 0x11F5A),
    (0x13460, 0x143FA),
    (0x16100, 0x16139),
    (0x16D40, 0x16D79),
    (0x18CFF, 0x18CFF),
    (0x1CC00, 0x1CCF9),
    (0x1CD00, 0x1CEB3),
    (0x1E5D0, 0x1E5FA),
    (0x1E5FF, 0x1E5FF),
    (0x1F8B2, 0x1F8BB),
    (0x1F8C0, 0x1F8C1),
    (0x1FA89, 0x1FA89),
    (0x1FA8F, 0x1FA8F),
    (0x1FABE, 0x1FABE),
    (0x1FAC6, 0x1FAC6),
    (0x1FADC, 0x1FADC),
    (0x1FADF, 0x1FADF),
    (0x1FAE9, 0x1FAE9),
    (0x1FBCB, 0x1FBEF),
];

/// `repr(s)` exactly as CPython 3.13 prints it.
///
/// Printability follows CPython 3.13's Unicode 15.1 database even though the category tables
/// used here are newer (see `ASSIGNED_IN_UNICODE_16`). A CPython built on another Unicode
/// version escapes a different set of recently assigned code points; only those differ.
pub fn repr_str(s: &str) -> String {
    // SPEC appendix: `'` unless the string contains `'` and no `"`.
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => push_escape(&mut out, c),
        }
    }
    out.push(quote);
    out
}

/// `repr(list_of_str)`: `[` + items joined by `, ` + `]`.
pub fn repr_str_list(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| repr_str(s)).collect();
    format!("[{}]", parts.join(", "))
}

/// `repr(list_of_int)`.
pub fn repr_int_list(items: &[i64]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// CPython's `str.isprintable` for one code point, on CPython 3.13's Unicode version.
fn is_printable(c: char) -> bool {
    let cp = u32::from(c);
    // The first range that does not end before `cp` holds it, if any does.
    let i = ASSIGNED_IN_UNICODE_16.partition_point(|&(_, hi)| hi < cp);
    if ASSIGNED_IN_UNICODE_16
        .get(i)
        .is_some_and(|&(lo, _)| lo <= cp)
    {
        return false;
    }
    // SPEC appendix: Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than U+0020 are not printable.
    match get_general_category(c) {
        GeneralCategory::Control
        | GeneralCategory::Format
        | GeneralCategory::Surrogate
        | GeneralCategory::PrivateUse
        | GeneralCategory::Unassigned
        | GeneralCategory::LineSeparator
        | GeneralCategory::ParagraphSeparator => false,
        GeneralCategory::SpaceSeparator => c == ' ',
        _ => true,
    }
}

/// Appends `\xNN`, `\uNNNN` or `\UNNNNNNNN` (lowercase hex), the shortest form CPython uses.
fn push_escape(out: &mut String, c: char) {
    use std::fmt::Write as _;
    let cp = u32::from(c);
    let _ = if cp <= 0xff {
        write!(out, "\\x{cp:02x}")
    } else if cp <= 0xffff {
        write!(out, "\\u{cp:04x}")
    } else {
        write!(out, "\\U{cp:08x}")
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    use std::sync::OnceLock;

    /// Runs the local `python3` on `strings` and returns `repr(s)` of each, in order.
    fn python_reprs(strings: &[String]) -> Vec<String> {
        let script = "import sys, json\n\
                      strings = json.loads(sys.stdin.buffer.read().decode('utf-8'))\n\
                      sys.stdout.write(json.dumps([repr(s) for s in strings]))\n";
        let output = run_python(script, &serde_json::to_vec(strings).unwrap());
        let reprs: Vec<String> = serde_json::from_slice(&output).unwrap();
        assert_eq!(reprs.len(), strings.len());
        reprs
    }

    /// `repr(strings)` of the whole list, by the local `python3`.
    fn python_list_repr(strings: &[String]) -> String {
        let script = "import sys, json\n\
                      strings = json.loads(sys.stdin.buffer.read().decode('utf-8'))\n\
                      sys.stdout.write(json.dumps(repr(strings)))\n";
        let output = run_python(script, &serde_json::to_vec(strings).unwrap());
        serde_json::from_slice(&output).unwrap()
    }

    fn run_python(script: &str, stdin: &[u8]) -> Vec<u8> {
        let mut child = Command::new("python3")
            .args(["-c", script])
            .env("PYTHONIOENCODING", "utf-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 is required to check repr against CPython");
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "python3 failed: {}", output.status);
        output.stdout
    }

    /// What the local python3 knows about every code point: its Unicode version, and for each
    /// code point whether it is printable and whether it is assigned.
    struct PythonUnicode {
        version: String,
        printable: Vec<bool>,
        assigned: Vec<bool>,
    }

    fn python_unicode() -> &'static PythonUnicode {
        static PYTHON_UNICODE: OnceLock<PythonUnicode> = OnceLock::new();
        PYTHON_UNICODE.get_or_init(load_python_unicode)
    }

    fn load_python_unicode() -> PythonUnicode {
        let script = "import sys, unicodedata\n\
                      cps = [chr(c) for c in range(0x110000)]\n\
                      sys.stdout.write(unicodedata.unidata_version + '\\n')\n\
                      sys.stdout.write(''.join('1' if c.isprintable() else '0' for c in cps) + '\\n')\n\
                      sys.stdout.write(''.join('0' if unicodedata.category(c) == 'Cn' else '1' for c in cps))\n";
        let output = String::from_utf8(run_python(script, b"")).unwrap();
        let mut lines = output.split('\n');
        let version = lines.next().unwrap().to_owned();
        let bits = |line: &str| line.bytes().map(|b| b == b'1').collect::<Vec<bool>>();
        let printable = bits(lines.next().unwrap());
        let assigned = bits(lines.next().unwrap());
        assert_eq!(printable.len(), 0x11_0000);
        assert_eq!(assigned.len(), 0x11_0000);
        PythonUnicode {
            version,
            printable,
            assigned,
        }
    }

    impl PythonUnicode {
        /// Whether python3 and [`is_printable`] agree on `c`. They disagree only on code points
        /// assigned in a Unicode version newer than the local python3's (3.11 is Unicode 14.0,
        /// production 3.13 is 15.1); strings compared against python3 must avoid those.
        fn agrees(&self, c: char) -> bool {
            self.printable[u32::from(c) as usize] == is_printable(c)
        }
    }

    fn corpus() -> Vec<String> {
        let mut strings: Vec<String> = [
            "",
            "plain",
            "it's",
            "say \"hi\"",
            "it's \"both\"",
            "'",
            "\"",
            "'\"",
            "back\\slash",
            "\\",
            "tab\there",
            "line\nbreak",
            "cr\rlf\r\n",
            "del\x7f",
            "env:FOO",
            "a b",
            "é",
            "café naïve Ünïcödé",
            "Ελληνικά кириллица עברית العربية",
            "日本語の文字列 中文 한국어",
            "emoji 😀 👍🏽 🇫🇷 👨‍👩‍👧",
            "astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈",
            "nbsp\u{a0}soft\u{ad}hyphen",
            "line sep\u{2028}para sep\u{2029}",
            "zero width\u{200b}joiner\u{200d}rtl\u{202e}bom\u{feff}",
            "em space\u{2003}ideographic\u{3000}",
            "private\u{e000}\u{f8ff}\u{f0000}\u{10fffd}",
            "unassigned\u{378}\u{fffe}\u{ffff}\u{e0080}\u{10ffff}",
            "combining e\u{301} a\u{308}\u{20dd}",
            "tags\u{e0001}\u{e0041}",
            "replacement\u{fffd}",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        strings.push((0u8..0x20).map(char::from).collect());
        strings.push((0x80u32..0xa0).filter_map(char::from_u32).collect());
        strings.push((0xa0u32..0x100).filter_map(char::from_u32).collect());
        strings
    }

    #[test]
    fn quotes_single_by_default() {
        assert_eq!(repr_str("plain"), "'plain'");
        assert_eq!(repr_str(""), "''");
        assert_eq!(repr_str("say \"hi\""), "'say \"hi\"'");
    }

    #[test]
    fn quotes_double_when_only_single_quotes_inside() {
        assert_eq!(repr_str("it's"), "\"it's\"");
    }

    #[test]
    fn escapes_single_quote_when_both_quotes_inside() {
        assert_eq!(repr_str("it's \"x\""), "'it\\'s \"x\"'");
    }

    #[test]
    fn escapes_backslash_and_whitespace_controls() {
        assert_eq!(repr_str("a\\b\tc\nd\re"), "'a\\\\b\\tc\\nd\\re'");
    }

    #[test]
    fn escapes_other_controls_as_lowercase_hex() {
        assert_eq!(
            repr_str("\0\x1b\x7f\u{85}\u{9f}"),
            "'\\x00\\x1b\\x7f\\x85\\x9f'"
        );
    }

    #[test]
    fn escapes_non_printable_non_ascii_by_width() {
        assert_eq!(repr_str("\u{a0}\u{ad}"), "'\\xa0\\xad'");
        assert_eq!(
            repr_str("\u{2028}\u{2029}\u{feff}"),
            "'\\u2028\\u2029\\ufeff'"
        );
        assert_eq!(repr_str("\u{e000}\u{378}"), "'\\ue000\\u0378'");
        assert_eq!(repr_str("\u{f0000}\u{e0001}"), "'\\U000f0000\\U000e0001'");
    }

    #[test]
    fn keeps_printable_non_ascii_literal() {
        assert_eq!(repr_str("é日本😀e\u{301}"), "'é日本😀e\u{301}'");
    }

    #[test]
    fn escapes_code_points_unassigned_in_unicode_15_1() {
        // Assigned in Unicode 16.0 (Garay, Egyptian hieroglyphs ext-A), unassigned to CPython 3.13.
        assert_eq!(repr_str("\u{10d40}\u{13460}"), "'\\U00010d40\\U00013460'");
        // Assigned in Unicode 15.1 (CJK ext-I): printable to CPython 3.13.
        assert_eq!(repr_str("\u{2ebf0}"), "'\u{2ebf0}'");
    }

    #[test]
    fn category_tables_are_the_unicode_version_the_exceptions_were_derived_for() {
        // ASSIGNED_IN_UNICODE_16 is the 15.1 → 16.0 difference; a crate update to newer tables
        // must extend it with that version's new code points.
        assert_eq!(unicode_general_category::UNICODE_VERSION, (16, 0, 0));
        for &(lo, hi) in ASSIGNED_IN_UNICODE_16 {
            for cp in lo..=hi {
                let c = char::from_u32(cp).unwrap();
                assert_ne!(
                    get_general_category(c),
                    GeneralCategory::Unassigned,
                    "{cp:#x}"
                );
            }
        }
        assert!(ASSIGNED_IN_UNICODE_16.windows(2).all(|w| w[0].1 < w[1].0));
    }

    #[test]
    fn list_reprs() {
        assert_eq!(repr_str_list(&[]), "[]");
        assert_eq!(
            repr_str_list(&["plain".to_owned(), "it's".to_owned()]),
            "['plain', \"it's\"]"
        );
        assert_eq!(repr_int_list(&[0, 2]), "[0, 2]");
        assert_eq!(repr_int_list(&[]), "[]");
        assert_eq!(repr_int_list(&[-1, 255]), "[-1, 255]");
    }

    #[test]
    fn printability_differs_from_python3_only_on_newer_assignments() {
        let py = python_unicode();
        for cp in 0..0x11_0000u32 {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            if py.agrees(c) {
                continue;
            }
            // Python's database predates the assignment: it says Cn (not printable), ours says
            // printable. With CPython 3.13's database (15.1) there is no difference at all.
            assert!(
                py.version != "15.1.0" && !py.assigned[cp as usize] && is_printable(c),
                "printability of U+{cp:04X} differs from python3 (Unicode {})",
                py.version
            );
        }
    }

    #[test]
    fn corpus_matches_python3() {
        let py = python_unicode();
        let corpus: Vec<String> = corpus()
            .into_iter()
            // Code points assigned after the local python3's Unicode version are checked by
            // `printability_differs_from_python3_only_on_newer_assignments` instead.
            .map(|s| s.chars().filter(|&c| py.agrees(c)).collect())
            .collect();
        let expected = python_reprs(&corpus);
        for (s, want) in corpus.iter().zip(&expected) {
            assert_eq!(&repr_str(s), want, "repr of {s:?}");
        }
        assert_eq!(repr_str_list(&corpus), python_list_repr(&corpus));
    }

    #[test]
    fn arbitrary_strings_match_python3() {
        let py = python_unicode();
        let ch = proptest::prop_oneof![
            4 => proptest::char::any(),
            2 => proptest::char::range('\0', '\u{ff}'),
            2 => proptest::sample::select(vec!['\'', '"', '\\', '\t', '\n', '\r', ' ']),
            1 => proptest::char::range('\u{2000}', '\u{206f}'),
            1 => proptest::char::range('\u{e0000}', '\u{10ffff}'),
        ];
        let strategy = proptest::collection::vec(ch, 0..16).prop_map(|chars| {
            chars
                .into_iter()
                .filter(|&c| py.agrees(c))
                .collect::<String>()
        });
        // A fixed seed keeps the run reproducible; one python3 call checks the whole batch.
        let mut runner = TestRunner::deterministic();
        let strings: Vec<String> = (0..256)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect();
        let expected = python_reprs(&strings);
        for (s, want) in strings.iter().zip(&expected) {
            assert_eq!(&repr_str(s), want, "repr of {s:?}");
        }
    }
}
