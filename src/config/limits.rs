//! Bounds on the configuration text, checked before the YAML parser sees it.
//!
//! Why a pre-scan: the YAML parser's cost per token grows with the nesting depth (its
//! simple-key bookkeeping walks every open flow level), so a 200 KB file of `[` nested
//! 100,000 deep cost 83 s of CPU before the deserializer's own recursion limit could refuse
//! it. A reload must not be that easy to stall. The checks here are one linear pass: a file
//! larger than [`MAX_CONFIG_BYTES`] or nested deeper than [`MAX_NESTING_DEPTH`] is refused
//! with its line and column, and the parser only ever sees text whose parse is cheap.
//!
//! The depth scan is not a YAML parser. It counts open flow collections (`[`, `{`) and open
//! block collections (by indentation and the `- `, `? `, `key:` indicators) and skips what
//! cannot nest: quoted scalars (also over several lines), comments, block scalars (`|`, `>`)
//! and the continuation lines of plain scalars, so brackets inside text never count. Line
//! breaks are the parser's: `\n`, `\r`, `\r\n` and the YAML 1.1 NEL, LS and PS. A refusal
//! of a valid configuration would be worse than a loose count, so where the scan cannot tell,
//! it does not count; the deserializer's recursion limit (128) still stands behind it.

use std::fmt;

/// Largest configuration file accepted: 4 MiB. A fleet at the connection cap
/// ([`MAX_TOTAL_CONNECTIONS`] targets of one connection), each written out with a URL, two
/// headers and a comment, is about 1.5 MB; 4 MiB leaves room for 400 bytes per target.
/// The parser's cost is linear in the size once the depth is bounded, but not small: the
/// costliest 4 MiB measured (dense flow collections 62 deep) takes about 3.5 s of CPU in a
/// release build, a realistic 1.5 MB file of 10,000 targets 0.16 s. Anything larger is a
/// mistake (a log or a binary passed as `--config.file`) or an attack.
pub const MAX_CONFIG_BYTES: usize = 4 * 1024 * 1024;

/// Deepest nesting of collections accepted: 64 levels. A configuration needs 5 (document,
/// `targets`, a target, `probes`, a probe) and 7 with `expect.structured`; the rest is left to
/// a probe's `arguments`, which real tools nest a few levels at most. The parser's cost per
/// token grows with the depth: 100,000 levels cost 83 s, 64 levels about twice what
/// 8 levels cost.
pub const MAX_NESTING_DEPTH: usize = 64;

/// Most connections one exporter runs, summed over targets (`connections` of each): 10,000,
/// the scale the exporter is designed and measured for (memory per connection, file
/// descriptors under `LimitNOFILE`). A larger fleet is split over several exporters.
pub const MAX_TOTAL_CONNECTIONS: u32 = 10_000;

/// Most `args` of a command target: 256. An MCP server's command line is a handful of flags;
/// far more is a mistake, and every argument is held for as long as the target is configured.
pub const MAX_COMMAND_ARGS: usize = 256;

/// Most bytes of a command target's `args`, summed: 64 KiB. With [`MAX_COMMAND_ENV_BYTES`]
/// that stays well within what `execve` accepts for arguments and environment together (on
/// Linux a quarter of the stack limit, 2 MiB by default), next to the exporter's own
/// environment, which the program inherits.
pub const MAX_COMMAND_ARG_BYTES: usize = 64 * 1024;

/// Most `env` entries of a command target: 64. A server reads a few variables; more is a
/// mistake, and each value is a secret held for as long as the target is configured.
pub const MAX_COMMAND_ENV: usize = 64;

/// Most bytes of a command target's `env`, names and values (after `${VAR}` expansion)
/// summed: 64 KiB, as for `args`.
pub const MAX_COMMAND_ENV_BYTES: usize = 64 * 1024;

/// Where the text nests deeper than [`MAX_NESTING_DEPTH`] (1-based line and column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for TooDeep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nested deeper than {MAX_NESTING_DEPTH} levels (lists and mappings inside each \
             other); refused before parsing, a configuration needs fewer than 10"
        )
    }
}

/// Checks that no collection in `text` is nested deeper than [`MAX_NESTING_DEPTH`].
/// Linear in the length of `text`.
pub fn check_nesting(text: &str) -> Result<(), TooDeep> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut scan = Scan {
        blocks: Vec::new(),
        flow: 0,
        in_plain: false,
        quote: None,
        skip_above: None,
        line: 0,
    };
    for (index, line) in Lines(text.as_bytes()).enumerate() {
        scan.line = index + 1;
        scan.line_bytes(line)?;
    }
    Ok(())
}

/// The lines of a YAML text, split at every line break the parser knows.
struct Lines<'a>(&'a [u8]);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let text = self.0;
        for i in 0..text.len() {
            let width = match &text[i..] {
                [b'\r', b'\n', ..] => 2,
                [b'\r' | b'\n', ..] => 1,
                [0xC2, 0x85, ..] => 2,
                [0xE2, 0x80, 0xA8 | 0xA9, ..] => 3,
                _ => continue,
            };
            self.0 = &text[i + width..];
            return Some(&text[..i]);
        }
        self.0 = &[];
        Some(text)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Seq,
    Map,
}

/// One open block collection: the column of its entries and its kind.
#[derive(Clone, Copy)]
struct Block {
    column: usize,
    kind: Kind,
}

struct Scan {
    /// Open block collections, innermost last.
    blocks: Vec<Block>,
    /// Open flow collections.
    flow: usize,
    /// Inside a plain scalar of a flow collection (a quote there is text, not a quote).
    in_plain: bool,
    /// Inside a quoted scalar that continues on the next line.
    quote: Option<u8>,
    /// Lines indented more than this column are the content of a block scalar or the
    /// continuation of a plain scalar (-1: the whole document).
    skip_above: Option<isize>,
    /// The current line, 1-based.
    line: usize,
}

fn is_blank(b: Option<&u8>) -> bool {
    matches!(b, None | Some(b' ' | b'\t'))
}

fn skip_blanks(line: &[u8], mut i: usize) -> usize {
    while matches!(line.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

impl Scan {
    fn too_deep(&self, column: usize) -> TooDeep {
        TooDeep {
            line: self.line,
            column: column + 1,
        }
    }

    fn depth(&self) -> usize {
        self.blocks.len() + self.flow
    }

    fn line_bytes(&mut self, line: &[u8]) -> Result<(), TooDeep> {
        let mut start = 0;
        if let Some(q) = self.quote {
            match close_quote(line, 0, q) {
                Some(end) => {
                    self.quote = None;
                    start = end;
                }
                None => return Ok(()),
            }
            if self.flow == 0 {
                return self.after_node(line, start);
            }
        }
        if self.flow > 0 {
            return match self.flow_from(line, start)? {
                Some(end) => self.after_node(line, end),
                None => Ok(()),
            };
        }
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        let content = skip_blanks(line, indent);
        if content == line.len() {
            return Ok(()); // blank lines belong to whatever is open
        }
        if indent == 0
            && (line.starts_with(b"---") || line.starts_with(b"..."))
            && is_blank(line.get(3))
        {
            self.blocks.clear();
            self.skip_above = None;
            let next = skip_blanks(line, 3);
            return if next < line.len() && line.starts_with(b"---") {
                self.node(line, next)
            } else {
                Ok(())
            };
        }
        if let Some(above) = self.skip_above {
            if indent as isize > above {
                return Ok(());
            }
            self.skip_above = None;
        }
        if line[content] == b'#' || (indent == 0 && line[0] == b'%') {
            return Ok(()); // a comment or a directive
        }
        while self.blocks.last().is_some_and(|b| b.column > indent) {
            self.blocks.pop();
        }
        self.node(line, content)
    }

    /// The column of the innermost open block collection, -1 at the top level.
    fn parent(&self) -> isize {
        self.blocks.last().map_or(-1, |b| b.column as isize)
    }

    /// Makes sure a block collection of `kind` is open at `column`.
    fn open(&mut self, column: usize, kind: Kind) -> Result<(), TooDeep> {
        if let Some(top) = self.blocks.last()
            && top.column == column
        {
            if top.kind == kind {
                return Ok(());
            }
            if top.kind == Kind::Seq {
                // A key after a sequence written at its key's own indentation: the
                // sequence has ended.
                self.blocks.pop();
                return self.open(column, kind);
            }
        }
        self.blocks.push(Block { column, kind });
        if self.depth() > MAX_NESTING_DEPTH {
            return Err(self.too_deep(column));
        }
        Ok(())
    }

    /// A block node starting at `i` (after the indentation or after a `- `).
    fn node(&mut self, line: &[u8], mut i: usize) -> Result<(), TooDeep> {
        // Where the node starts, in front of its anchor or tag: a key opens a mapping there.
        let mut column = i;
        loop {
            let Some(&c) = line.get(i) else {
                return Ok(());
            };
            match c {
                b'-' | b'?' | b':' if is_blank(line.get(i + 1)) => {
                    let kind = if c == b'-' { Kind::Seq } else { Kind::Map };
                    self.open(i, kind)?;
                    i = skip_blanks(line, i + 1);
                    column = i;
                }
                b'&' | b'!' => i = self.properties(line, i),
                b'[' | b'{' | b'#' | b'|' | b'>' | b'*' => return self.value(line, i),
                b'\'' | b'"' => {
                    let Some(end) = close_quote(line, i + 1, c) else {
                        self.quote = Some(c);
                        return Ok(());
                    };
                    let after = skip_blanks(line, end);
                    if line.get(after) == Some(&b':') && is_blank(line.get(after + 1)) {
                        self.open(column, Kind::Map)?;
                        return self.value(line, skip_blanks(line, after + 1));
                    }
                    return self.after_node(line, end);
                }
                _ => match plain_key_end(line, i) {
                    Some(colon) => {
                        self.open(column, Kind::Map)?;
                        return self.value(line, skip_blanks(line, colon + 1));
                    }
                    None => return self.value(line, i),
                },
            }
        }
    }

    /// Skips anchors (`&a`) and tags (`!t`) in front of a node; returns where the node starts.
    fn properties(&self, line: &[u8], mut i: usize) -> usize {
        while line.get(i).is_some_and(|b| !matches!(b, b' ' | b'\t')) {
            i += 1;
        }
        skip_blanks(line, i)
    }

    /// The value of a block mapping entry (or a scalar sequence entry) at `i`: no block
    /// collection can start here, only a flow collection or a scalar.
    fn value(&mut self, line: &[u8], mut i: usize) -> Result<(), TooDeep> {
        loop {
            let Some(&c) = line.get(i) else {
                return Ok(()); // the value is on the next lines
            };
            match c {
                b'#' => return Ok(()),
                b'&' | b'!' => i = self.properties(line, i),
                b'[' | b'{' => {
                    self.in_plain = false;
                    return match self.flow_from(line, i)? {
                        Some(end) => self.after_node(line, end),
                        None => Ok(()),
                    };
                }
                b'\'' | b'"' => {
                    return match close_quote(line, i + 1, c) {
                        Some(end) => self.after_node(line, end),
                        None => {
                            self.quote = Some(c);
                            Ok(())
                        }
                    };
                }
                b'|' | b'>' => {
                    self.skip_above = Some(self.parent());
                    return Ok(());
                }
                b'*' => return Ok(()),
                _ => {
                    // A plain scalar; more indented lines that follow continue it.
                    self.skip_above = Some(self.parent());
                    return Ok(());
                }
            }
        }
    }

    /// After a flow collection or a quoted scalar in block context: a comment, a `:` (the node
    /// was a key) or, in a broken file, more collections, which are counted.
    fn after_node(&mut self, line: &[u8], i: usize) -> Result<(), TooDeep> {
        let i = skip_blanks(line, i);
        match line.get(i) {
            Some(b':') => self.value(line, skip_blanks(line, i + 1)),
            Some(b'[' | b'{') => self.value(line, i),
            _ => Ok(()),
        }
    }

    /// Scans flow content from `i`. Returns the index after the bracket that closed the
    /// outermost flow collection, or `None` when the line ends with a collection still open.
    fn flow_from(&mut self, line: &[u8], mut i: usize) -> Result<Option<usize>, TooDeep> {
        while i < line.len() {
            let c = line[i];
            let after_blank = i == 0 || matches!(line[i - 1], b' ' | b'\t');
            match c {
                b'#' if after_blank => {
                    self.in_plain = false;
                    return Ok(None);
                }
                b'[' | b'{' => {
                    self.in_plain = false;
                    self.flow += 1;
                    if self.depth() > MAX_NESTING_DEPTH {
                        return Err(self.too_deep(i));
                    }
                }
                b']' | b'}' => {
                    self.in_plain = false;
                    self.flow = self.flow.saturating_sub(1);
                    if self.flow == 0 {
                        return Ok(Some(i + 1));
                    }
                }
                b',' => self.in_plain = false,
                b':' if !self.in_plain
                    || is_blank(line.get(i + 1))
                    || matches!(line.get(i + 1), Some(b',' | b'[' | b']' | b'{' | b'}')) =>
                {
                    self.in_plain = false;
                }
                b'\'' | b'"' if !self.in_plain => match close_quote(line, i + 1, c) {
                    Some(end) => {
                        i = end;
                        continue;
                    }
                    None => {
                        self.quote = Some(c);
                        return Ok(None);
                    }
                },
                b' ' | b'\t' => {}
                _ => self.in_plain = true,
            }
            i += 1;
        }
        Ok(None)
    }
}

/// The index just after the quote that closes a scalar opened by `quote`, searching from `i`.
/// `''` inside single quotes and `\` escapes inside double quotes do not close it.
fn close_quote(line: &[u8], mut i: usize, quote: u8) -> Option<usize> {
    while i < line.len() {
        let c = line[i];
        if quote == b'"' && c == b'\\' {
            i += 2;
            continue;
        }
        if c == quote {
            if quote == b'\'' && line.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// For a plain scalar at `i` in block context: the index of the `:` that makes it a mapping
/// key (`: `, or `:` at the end of the line), if any before a comment.
fn plain_key_end(line: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    while j < line.len() {
        match line[j] {
            b':' if is_blank(line.get(j + 1)) => return Some(j),
            b'#' if j > i && matches!(line[j - 1], b' ' | b'\t') => return None,
            _ => {}
        }
        j += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str) {
        if let Err(e) = check_nesting(text) {
            panic!("refused at line {} column {}: {text:?}", e.line, e.column);
        }
    }

    fn refused_at(text: &str) -> (usize, usize) {
        let e = check_nesting(text).expect_err("should be refused");
        (e.line, e.column)
    }

    /// `n` flow sequences inside each other: `[[[...]]]`.
    fn flow(n: usize) -> String {
        format!("{}{}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn flow_nesting_is_counted() {
        depth_ok(&flow(MAX_NESTING_DEPTH));
        assert_eq!(refused_at(&flow(MAX_NESTING_DEPTH + 1)), (1, 65));
        assert_eq!(refused_at(&flow(100_000)), (1, 65));
        let maps = "{a: ".repeat(100) + &"}".repeat(100);
        assert_eq!(refused_at(&maps), (1, 4 * 64 + 1));
        // over several lines, behind a key
        let text = format!("targets:\n  - name: x\n    url: {}\n", "[\n".repeat(70));
        assert_eq!(refused_at(&text).0, 3 + 64 - 3);
    }

    #[test]
    fn block_nesting_is_counted() {
        // compact sequences on one line
        let dashes = "- ".repeat(100_000) + "x\n";
        assert_eq!(refused_at(&dashes), (1, 2 * 64 + 1));
        depth_ok(&("- ".repeat(MAX_NESTING_DEPTH) + "x\n"));
        // one level per line, one more space each
        let mut text = String::new();
        for level in 0..100 {
            text.push_str(&format!("{}a{level}:\n", " ".repeat(level)));
        }
        assert_eq!(refused_at(&text), (65, 65));
        // a sequence at its key's indentation is a level too
        let mut text = String::new();
        for level in 0..40 {
            text.push_str(&format!(
                "{}k:\n{}- ",
                " ".repeat(2 * level),
                " ".repeat(2 * level)
            ));
            text.push('\n');
        }
        assert!(check_nesting(&text).is_err());
        // mixed: block levels and flow levels add up
        let text = format!("{}v: {}\n", "- ".repeat(40), flow(30));
        assert!(check_nesting(&text).is_err());
        depth_ok(&format!("{}v: {}\n", "- ".repeat(30), flow(30)));
    }

    #[test]
    fn every_yaml_line_break_counts() {
        for br in ["\n", "\r", "\r\n", "\u{85}", "\u{2028}", "\u{2029}"] {
            let mut text = String::new();
            for level in 0..100 {
                text.push_str(&format!("{}a:{br}", " ".repeat(level)));
            }
            assert!(check_nesting(&text).is_err(), "{br:?}");
        }
    }

    #[test]
    fn brackets_in_text_are_not_counted() {
        let many = "[".repeat(200);
        let braces = "{".repeat(200);
        for text in [
            format!("a: \"{many}\"\n"),
            format!("a: '{many}'\n"),
            format!("a: '{many}''{braces}'\n"),
            format!("a: \"\\\"{many}\"\n"),
            format!("a: b{many}\n"),
            format!("a: x # {many}\n"),
            format!("# {many}\n"),
            format!("a: |\n  {many}\n  {braces}\nb: 1\n"),
            format!("a: >-\n    {many}\n\n    {many}\nb: 1\n"),
            format!("- |\n  {many}\n- x\n"),
            format!("- k: |2\n   {many}\n  j: 1\n"),
            format!("a: plain\n  {many}\nb: 1\n"),
            format!("a: \"two\n  {many} lines\"\nb: 1\n"),
            format!("a: 'two\n  {many}\n  lines'\n"),
            format!("a: [x, \"{many}\", '{braces}', y]\n"),
            format!("a: [x, \"multi\n {many}\n\"]\n"),
            format!("a: {{k: it's, j: \"{many}\"}}\n"),
            format!("a: [it's ok, \"{many}\"]\n"),
            format!("a: [x # {many}\n  ]\n"),
            format!("'{many}': 1\n\"{braces}\": 2\n"),
            format!("x{many}: 1\n"),
            format!("url: http://[::1]:8080/{many}\n"),
            format!("|\n{many}\n"),
            format!("--- |\n  {many}\n"),
            format!("%YAML 1.2\n---\na: 1\n# {many}\n"),
            format!("\u{feff}a: '{many}'\n"),
        ] {
            depth_ok(&text);
        }
    }

    #[test]
    fn text_after_a_scalar_ends_is_counted_again() {
        let deep = flow(100);
        for text in [
            format!("a: |\n  text\nb: {deep}\n"),
            format!("a: plain\n  more\nb: {deep}\n"),
            format!("a: 'x\n y'\nb: {deep}\n"),
            format!("a: \"x\n y\" \nb: {deep}\n"),
            format!("- k: |\n   t\n  j: {deep}\n"),
            format!("a: [x, 'y\n z', {deep}]\n"),
            format!("a: [x\n  , {deep}]\n"),
            format!("|\n  text\n---\n{deep}\n"),
            format!("a: [] {deep}\n"),
            format!("[a]: {deep}\n"),
        ] {
            assert!(check_nesting(&text).is_err(), "not refused: {text:?}");
        }
    }

    #[test]
    fn realistic_configurations_pass() {
        depth_ok(include_str!("../../example.yml"));
        // probe arguments nested 50 levels under a probe
        let args = "{a: ".repeat(50) + "1" + &"}".repeat(50);
        depth_ok(&format!(
            "targets:\n  - name: kb\n    url: https://kb.example/\n    probes:\n      - tool: t\n        arguments: {args}\n        expect:\n          structured:\n            /a: {{b: [1, 2]}}\n"
        ));
    }
}
