//! Finding where a hunk's old lines sit in a file.
//!
//! Four passes, each accepted only when it finds exactly one place: exact bytes, then ignoring
//! trailing whitespace, then ignoring surrounding whitespace (case X18b), then also treating
//! typographic punctuation as its ASCII twin (case X39: a model writes `-` and `'` where the
//! file has an en dash and a curly apostrophe; see [`ascii_punctuation`]). Two or more places in a
//! pass is an ambiguity and stops the search: a looser pass never breaks a tie of a stricter one.
//! Codex's `seek_sequence` has the same passes but takes the first hit; Spaces refuses instead,
//! so a patch never lands on a place its author did not mean.
//!
//! The exact pass is the one nearly every hunk ends in. Without an [`Index`] it compares the
//! pattern at every line after `from` (one pass over the rest of the file per hunk); with one, it
//! only tries the places where the pattern's rarest line occurs, and finds the same places.

use std::collections::HashMap;

use super::lines::Line;

/// Where each distinct line text of a file occurs (0-based, ascending): the exact pass looks the
/// pattern's rarest line up here instead of scanning. Built in one pass over the file; worth it
/// when a file gets several hunks (see `update`).
pub(crate) struct Index<'a> {
    at: HashMap<&'a [u8], Vec<usize>>,
}

impl<'a> Index<'a> {
    /// The index of `file`'s lines.
    pub(crate) fn new(file: &[Line<'a>]) -> Self {
        let mut at: HashMap<&'a [u8], Vec<usize>> = HashMap::with_capacity(file.len());
        for (i, line) in file.iter().enumerate() {
            at.entry(line.text).or_default().push(i);
        }
        Self { at }
    }

    /// The starts in `first..=last` where every line of `pattern` equals the file's, ascending:
    /// what the exact pass's scan of that range finds.
    fn exact_starts(&self, file: &[Line<'_>], pattern: &[&[u8]], first: usize, last: usize) -> Vec<usize> {
        let mut rarest: Option<(usize, &[usize])> = None;
        for (offset, line) in pattern.iter().enumerate() {
            let Some(places) = self.at.get(line) else { return Vec::new() };
            if rarest.is_none_or(|(_, r)| places.len() < r.len()) {
                rarest = Some((offset, places));
            }
        }
        let Some((offset, places)) = rarest else { return Vec::new() };
        let begin = places.partition_point(|&p| p < first + offset);
        places[begin..]
            .iter()
            .map(|&p| p - offset)
            .take_while(|&at| at <= last)
            .filter(|&at| pattern.iter().zip(&file[at..]).all(|(p, l)| l.text == *p))
            .collect()
    }
}

/// Outcome of a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seek {
    /// The pattern starts at this 0-based line.
    Found(usize),
    /// No pass found it.
    NotFound,
    /// A pass found it at several 0-based lines (all of them, ascending).
    Ambiguous(Vec<usize>),
}

#[derive(Debug, Clone, Copy)]
enum Pass {
    Exact,
    TrimEnd,
    Trim,
    Punctuation,
}

fn same(pass: Pass, file: &[u8], patch: &[u8]) -> bool {
    match pass {
        Pass::Exact => file == patch,
        Pass::TrimEnd => file.trim_ascii_end() == patch.trim_ascii_end(),
        Pass::Trim => file.trim_ascii() == patch.trim_ascii(),
        Pass::Punctuation => {
            let (f, p) = (String::from_utf8_lossy(file), String::from_utf8_lossy(patch));
            ascii_punctuation(f.trim()).trim() == ascii_punctuation(p.trim()).trim()
        }
    }
}

/// `text` with typographic punctuation spelled in ASCII: dashes and minus signs as `-`, curly
/// single quotes as `'`, curly double quotes as `"`, the ellipsis as `...`, and non-breaking and
/// other Unicode spaces as a space. Only for matching: the file's own characters are kept.
pub(crate) fn ascii_punctuation(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}' => out.push('-'),
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '\u{FF07}' => out.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{FF02}' => out.push('"'),
            '\u{2026}' => out.push_str("..."),
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => out.push(' '),
            other => out.push(other),
        }
    }
    out
}

/// Where `pattern` (non-empty) occurs in `file` at or after line `from`. With `end_of_file`, only
/// the place ending at the file's last line counts (case X18a).
pub(crate) fn seek(file: &[Line<'_>], pattern: &[&[u8]], from: usize, end_of_file: bool) -> Seek {
    seek_in(file, None, pattern, from, end_of_file)
}

/// [`seek`], the exact pass through `index` when given (an index of this very `file`).
pub(crate) fn seek_in(file: &[Line<'_>], index: Option<&Index<'_>>, pattern: &[&[u8]], from: usize, end_of_file: bool) -> Seek {
    for pass in [Pass::Exact, Pass::TrimEnd, Pass::Trim, Pass::Punctuation] {
        let mut hits = match (pass, index) {
            (Pass::Exact, Some(index)) => indexed(file, index, pattern, from, end_of_file),
            _ => starts(file, pattern, from, end_of_file, pass),
        };
        match hits.len() {
            0 => continue,
            1 => return Seek::Found(hits.remove(0)),
            _ => return Seek::Ambiguous(hits),
        }
    }
    Seek::NotFound
}

fn indexed(file: &[Line<'_>], index: &Index<'_>, pattern: &[&[u8]], from: usize, end_of_file: bool) -> Vec<usize> {
    let Some(last) = file.len().checked_sub(pattern.len()) else {
        return Vec::new();
    };
    let first = if end_of_file { last.max(from) } else { from };
    if pattern.is_empty() {
        return starts(file, pattern, from, end_of_file, Pass::Exact);
    }
    if first > last {
        return Vec::new();
    }
    index.exact_starts(file, pattern, first, last)
}

fn starts(file: &[Line<'_>], pattern: &[&[u8]], from: usize, end_of_file: bool, pass: Pass) -> Vec<usize> {
    let Some(last) = file.len().checked_sub(pattern.len()) else {
        return Vec::new();
    };
    let first = if end_of_file { last.max(from) } else { from };
    (first..=last).filter(|&at| pattern.iter().zip(&file[at..]).all(|(p, l)| same(pass, l.text, p))).collect()
}

/// Lines at or after `from` equal to `line` ignoring surrounding whitespace and typographic
/// punctuation: hints for a hunk that matched nowhere.
pub(crate) fn near(file: &[Line<'_>], line: &[u8], from: usize) -> Vec<usize> {
    file.iter().enumerate().skip(from).filter(|(_, l)| same(Pass::Punctuation, l.text, line)).map(|(i, _)| i).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::lines::split;
    use super::*;

    fn find(file: &[u8], pattern: &[&str], from: usize, eof: bool) -> Seek {
        let pattern: Vec<&[u8]> = pattern.iter().map(|p| p.as_bytes()).collect();
        seek(&split(file), &pattern, from, eof)
    }

    #[test]
    fn exact_unique_wins_over_looser_candidates() {
        assert_eq!(find(b"a \nb\na\nb\n", &["a", "b"], 0, false), Seek::Found(2));
    }

    #[test]
    fn exact_ties_are_ambiguous() {
        assert_eq!(find(b"a\nb\na\nb\n", &["a", "b"], 0, false), Seek::Ambiguous(vec![0, 2]));
        assert_eq!(find(b"a\nb\na\nb\n", &["a", "b"], 1, false), Seek::Found(2));
    }

    #[test]
    fn looser_passes_apply_in_order() {
        assert_eq!(find(b"x\n  a  \n", &["a"], 0, false), Seek::Found(1));
        assert_eq!(find(b"a \n a\n", &["a"], 0, false), Seek::Found(0));
        assert_eq!(find(b"a \na\n", &["a  "], 0, false), Seek::Ambiguous(vec![0, 1]));
        assert_eq!(find(b"a \na\t\n", &["a"], 0, false), Seek::Ambiguous(vec![0, 1]));
        assert_eq!(find(b"b\n", &["a"], 0, false), Seek::NotFound);
        assert_eq!(find(b"a\n", &["a", "b"], 0, false), Seek::NotFound);
    }

    #[test]
    fn end_of_file_only_counts_the_last_place() {
        assert_eq!(find(b"m\ne\nx\nm\ne\n", &["m", "e"], 0, true), Seek::Found(3));
        assert_eq!(find(b"m\ne\nx\n", &["m", "e"], 0, true), Seek::NotFound);
    }

    #[test]
    fn typographic_punctuation_matches_its_ascii_twin_only_when_unique() {
        let file = "timeout = 5  # seconds \u{2013} don\u{2019}t lower\n".as_bytes();
        assert_eq!(find(file, &["timeout = 5  # seconds - don't lower"], 0, false), Seek::Found(0));
        let twice = "a \u{2013} b\nx\na \u{2014} b\n".as_bytes();
        assert_eq!(find(twice, &["a - b"], 0, false), Seek::Ambiguous(vec![0, 2]));
        assert_eq!(ascii_punctuation("\u{201C}q\u{201D}\u{2026}\u{00A0}"), "\"q\"... ");
    }

    #[test]
    fn the_index_finds_what_the_scan_finds() {
        let file = b"a\nb\na\nb\n a\nc\nb\n";
        let lines = split(file);
        let index = Index::new(&lines);
        for pattern in
            [&["a", "b"][..], &["b"], &["a"], &[" a", "c"], &["c", "b"], &["x"], &["b", "x"], &["a", "b", "a", "b", " a", "c", "b", "b"]]
        {
            let pattern: Vec<&[u8]> = pattern.iter().map(|p| p.as_bytes()).collect();
            for from in 0..=lines.len() + 1 {
                for eof in [false, true] {
                    assert_eq!(
                        seek_in(&lines, Some(&index), &pattern, from, eof),
                        seek(&lines, &pattern, from, eof),
                        "{pattern:?} from {from} eof {eof}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// Over random files of few distinct lines (many repeats, so ties and near-ties are
        /// common), every search through the index has the scan's outcome.
        #[test]
        fn indexed_search_agrees_with_the_scan(
            file in proptest::collection::vec(proptest::sample::select(vec!["a", "b", " a", "a ", "c", ""]), 0..40),
            pattern in proptest::collection::vec(proptest::sample::select(vec!["a", "b", " a", "a ", "c", ""]), 1..4),
            from in 0usize..45,
            eof: bool,
        ) {
            let text: String = file.iter().map(|l| format!("{l}\n")).collect();
            let lines = split(text.as_bytes());
            let index = Index::new(&lines);
            let pattern: Vec<&[u8]> = pattern.iter().map(|p| p.as_bytes()).collect();
            proptest::prop_assert_eq!(seek_in(&lines, Some(&index), &pattern, from, eof), seek(&lines, &pattern, from, eof));
        }
    }

    #[test]
    fn near_lists_loose_matches_of_one_line() {
        assert_eq!(near(&split(b"a\n a\nb\na\n"), b"a", 1), vec![1, 3]);
    }
}
