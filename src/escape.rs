//! Text from outside (a reproducer, the guest, a sync directory) made safe
//! for a terminal.
//!
//! A thread name, a signal name or an origin string in a hostile reproducer
//! can hold escape sequences (retitle or clear the terminal, move the
//! cursor), a carriage return or a newline (forge a line of the report), or
//! Unicode's bidirectional controls (make text read backwards). Every such
//! character is shown as an escape instead: `\e`, `\r`, `\n`, `\x07`,
//! `\u{202e}`. Printable text, tabs and ordinary Unicode pass unchanged.

use std::borrow::Cow;

/// `s` for a single line: every control character escaped, newlines too.
pub fn line(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Bytes that may not be UTF-8 (a path from a file) for a single line: as
/// [`line()`], and each byte that is not UTF-8 as `\xNN`.
pub fn bytes_line(b: &[u8]) -> String {
    let mut shown = String::new();
    for chunk in b.utf8_chunks() {
        shown.push_str(&line(chunk.valid()));
        for byte in chunk.invalid() {
            shown.push_str(&format!("\\x{byte:02x}"));
        }
    }
    shown
}

/// `s` for several lines: every control character but the newline
/// escaped.
pub fn text(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// `s` as one word of a POSIX shell command line: as it is when it holds
/// nothing a shell would read otherwise, else in single quotes (a single
/// quote in it as `'\''`). A printed command then runs as printed.
pub fn shell_word(s: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%^".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")))
}

/// Words as a shell command line (see [`shell_word`]), escaped for one
/// line of a terminal.
pub fn shell_words<S: AsRef<str>>(words: &[S]) -> String {
    let joined: Vec<String> = words
        .iter()
        .map(|w| shell_word(w.as_ref()).into_owned())
        .collect();
    line(&joined.join(" ")).into_owned()
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| needs_escape(c) && !(keep_newlines && c == '\n');
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !unsafe_char(c) {
            out.push(c);
            continue;
        }
        match c {
            '\x1b' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// C0 and C1 controls but the tab, DEL, and the bidirectional overrides,
/// embeddings and isolates.
fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_a_shell_would_read_them_otherwise() {
        assert_eq!(shell_word("--exact"), "--exact");
        assert_eq!(shell_word("tests::a_b"), "tests::a_b");
        assert_eq!(shell_word("/tmp/out dir/x.rwd"), "'/tmp/out dir/x.rwd'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("$HOME"), "'$HOME'");
        assert_eq!(shell_words(&["a b", "c"]), "'a b' c");
    }

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(line("plain name"), "plain name");
        assert!(matches!(line("plain"), Cow::Borrowed(_)));
        assert_eq!(line("\x1b]0;pwned\x07"), "\\e]0;pwned\\x07");
        assert_eq!(line("a\nb\rc"), "a\\nb\\rc");
        assert_eq!(text("a\nb\rc"), "a\nb\\rc");
        assert_eq!(line("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(line("\u{9b}2J"), "\\x9b2J");
        assert_eq!(line("tab\there é"), "tab\there é");
        assert_eq!(line("\x7f"), "\\x7f");
        assert_eq!(bytes_line(b"/lib/ld-\xff\x1b.so"), "/lib/ld-\\xff\\e.so");
    }
}
