//! Server-supplied text made safe to show: bounded in bytes and stripped of characters that
//! change how the text around them reads.
//!
//! A server chooses its tool names, `serverInfo`, error messages and SSE payloads. Shown as is,
//! one 1 MiB name makes every status page and log line that mentions it 1 MiB; a raw ESC rewrites
//! a terminal, a NUL or BEL upsets log pipelines, a newline forges a log line, and a bidi override
//! (U+202E) makes `evil_tool` read as another name. Everything that stores or prints such a string
//! for a person (the status board, log lines) passes it through [`bounded`] once, where it is
//! kept. HTML or JSON escaping still happens where the text is rendered: this is not that.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is replaced by its escape: every C0 control (tab and newline included: a newline
/// in a server string forges a log line), DEL, every C1 control, the bidi embedding, override and
/// isolate controls, the implicit direction marks, and the line and paragraph separators.
pub fn is_hostile(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        | '\u{200e}' | '\u{200f}' | '\u{061c}'
        | '\u{2028}' | '\u{2029}')
}

/// Bytes `c` takes in the output.
fn width(c: char) -> usize {
    if is_hostile(c) {
        // `\u{` + 1..=6 hex digits + `}`
        4 + (32 - (c as u32).leading_zeros()).div_ceil(4).max(1) as usize
    } else {
        c.len_utf8()
    }
}

fn push(out: &mut String, c: char) {
    if is_hostile(c) {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    } else {
        out.push(c);
    }
}

/// The marker that ends a truncated string: an ellipsis and the original length in bytes.
fn marker(original_bytes: usize) -> String {
    format!("…({original_bytes} bytes)")
}

/// `s`, safe to show: every [`is_hostile`] character replaced by a visible escape (`\u{1b}`), and
/// at most `max_bytes` long. A longer string keeps a prefix (cut on a character boundary, never
/// inside an escape) and ends with `…(N bytes)`, N the length of `s`; when `max_bytes` is smaller
/// than that marker, the result is the marker alone. Borrows when nothing needs changing.
pub fn bounded(s: &str, max_bytes: usize) -> Cow<'_, str> {
    if s.len() <= max_bytes && !s.chars().any(is_hostile) {
        return Cow::Borrowed(s);
    }
    // Does the escaped whole fit? Stop counting as soon as it does not.
    let mut total = 0usize;
    let fits = s.chars().all(|c| {
        total += width(c);
        total <= max_bytes
    });
    let (budget, tail) = if fits {
        (max_bytes, String::new())
    } else {
        let m = marker(s.len());
        (max_bytes.saturating_sub(m.len()), m)
    };
    let mut out = String::with_capacity(budget.min(s.len() * 2) + tail.len());
    for c in s.chars() {
        if out.len() + width(c) > budget {
            break;
        }
        push(&mut out, c);
    }
    out.push_str(&tail);
    Cow::Owned(out)
}

/// At most `max` items of `items` joined by `", "` (each already safe), then `… and N more` for
/// the rest: a list a person reads, bounded in count.
pub fn list<S: AsRef<str>>(items: &[S], max: usize) -> String {
    joined(
        items.iter().map(|i| Cow::Borrowed(i.as_ref())),
        items.len(),
        max,
    )
}

/// [`list`] of server-supplied items: each one shown also passes through [`bounded`], so the
/// list is bounded in bytes too (at most about `max × (max_item_bytes + 2)`).
pub fn bounded_list<S: AsRef<str>>(items: &[S], max: usize, max_item_bytes: usize) -> String {
    let shown = items.iter().map(|i| bounded(i.as_ref(), max_item_bytes));
    joined(shown, items.len(), max)
}

/// The first `max` of `shown` joined, then how many of `total` were left out.
fn joined<'a>(shown: impl Iterator<Item = Cow<'a, str>>, total: usize, max: usize) -> String {
    let mut out = shown.take(max).collect::<Vec<_>>().join(", ");
    let more = total.saturating_sub(max);
    if more > 0 {
        let _ = write!(out, "{}… and {more} more", if max > 0 { " " } else { "" });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_short_text_is_borrowed_unchanged() {
        let s = "search_v2 (kb 1.4.0)";
        assert!(matches!(bounded(s, 64), Cow::Borrowed(x) if x == s));
        assert!(matches!(bounded("", 0), Cow::Borrowed("")));
        // Non-ASCII that is not a control stays.
        assert_eq!(bounded("café ☕", 64), "café ☕");
    }

    #[test]
    fn controls_and_bidi_become_visible_escapes() {
        let s = "a\0b\x1b[31mc\x07d\ne\tf\x7fg\u{85}h\u{202e}i\u{2066}j\u{200f}k\u{61c}l\u{2028}m";
        let out = bounded(s, 1024);
        assert_eq!(
            out,
            "a\\u{0}b\\u{1b}[31mc\\u{7}d\\u{a}e\\u{9}f\\u{7f}g\\u{85}h\\u{202e}i\\u{2066}j\\u{200f}k\\u{61c}l\\u{2028}m"
        );
        assert!(!out.chars().any(is_hostile), "{out:?}");
    }

    #[test]
    fn every_control_and_bidi_char_is_neutralised() {
        let hostile: Vec<char> = (0u32..=0x10ffff)
            .filter_map(char::from_u32)
            .filter(|c| is_hostile(*c))
            .collect();
        // C0 (32) + DEL (1) + C1 (32) + 202A–202E (5) + 2066–2069 (4) + 200E/200F + 061C + 2028/2029
        assert_eq!(hostile.len(), 32 + 1 + 32 + 5 + 4 + 2 + 1 + 2);
        for c in hostile {
            let out = bounded(&c.to_string(), 64).into_owned();
            assert!(out.is_ascii() && out.starts_with("\\u{"), "{c:?} → {out:?}");
            assert_eq!(out.len(), width(c), "{c:?}");
        }
    }

    #[test]
    fn long_text_is_cut_on_a_char_boundary_with_its_length() {
        let s = "é".repeat(1000); // 2000 bytes
        let out = bounded(&s, 100);
        assert!(out.len() <= 100, "{}", out.len());
        assert!(out.ends_with("…(2000 bytes)"), "{out}");
        assert!(out.starts_with("éé"));
        // A 1 MiB name becomes a short one.
        let huge = "x".repeat(1 << 20);
        let out = bounded(&huge, 160);
        assert!(
            out.len() <= 160 && out.ends_with("…(1048576 bytes)"),
            "{out}"
        );
    }

    #[test]
    fn escapes_count_against_the_cap_and_are_never_split() {
        let s = "\x1b".repeat(100); // 100 bytes in, 600 escaped
        let out = bounded(&s, 50);
        assert!(out.len() <= 50, "{out}");
        let body = out.strip_suffix("…(100 bytes)").expect("marker");
        assert_eq!(body, "\\u{1b}".repeat(body.len() / 6));
        // Exactly at the cap: kept whole, no marker.
        assert_eq!(bounded("ab\x07", 7), "ab\\u{7}");
    }

    #[test]
    fn a_cap_below_the_marker_yields_the_marker() {
        assert_eq!(bounded("abcdefghijklmnop", 3), "…(16 bytes)");
    }

    #[test]
    fn lists_are_capped_in_count() {
        assert_eq!(list(&["a", "b"], 5), "a, b");
        assert_eq!(list(&["a", "b", "c", "d"], 2), "a, b … and 2 more");
        assert_eq!(list(&["a"], 0), "… and 1 more");
        assert_eq!(list::<&str>(&[], 3), "");
    }
}
