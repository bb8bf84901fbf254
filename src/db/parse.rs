//! Reading one record file: TOML syntax, then the typed record, collecting every problem.
//!
//! Strict and typed: an unknown key is a problem (found with `serde_ignored`), a bad value
//! names its key (found with `serde_path_to_error`) and its line (from the spans the TOML
//! parser keeps). To report more than the first bad value of a file, the offending key is
//! removed from the parsed document and the record is read again; problems that only follow
//! from such a removal are not reported.

use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::problem::{KeyPath, Problem, ProblemKind, Seg};

/// A parsed document with the spans of every key and value.
pub(crate) type Doc<'a> = Spanned<DeTable<'a>>;

/// Repairs after which a file is given up on: enough for any real record.
const MAX_ATTEMPTS: usize = 64;

/// The 1-based line of a byte offset.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Parses `text` as TOML, reporting every syntax error.
pub(crate) fn parse_doc<'a>(file: &str, text: &'a str, problems: &mut Vec<Problem>) -> Option<Doc<'a>> {
    let (doc, errors) = DeTable::parse_recoverable(text);
    if errors.is_empty() {
        return Some(doc);
    }
    for e in errors {
        problems.push(Problem {
            file: file.to_string(),
            line: e.span().map(|s| line_of(text, s.start)),
            key: KeyPath::default(),
            kind: ProblemKind::Syntax,
            message: format!("not valid TOML: {}", e.message().trim()),
        });
    }
    None
}

/// Reads the typed record `T` from `doc`, reporting unknown keys and every bad value.
/// Returns the record only when it could be read without repairs.
pub(crate) fn read_record<T: DeserializeOwned>(
    file: &str,
    text: &str,
    doc: &Doc<'_>,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let mut work = doc.clone();
    // Elements removed from arrays, as (array path, original index), to map the indices of
    // later errors back to the file.
    let mut removed: Vec<(KeyPath, usize)> = Vec::new();
    let mut removed_keys: Vec<KeyPath> = Vec::new();
    let mut unknown: Vec<KeyPath> = Vec::new();
    let mut repaired = false;
    let mut result = None;

    for _ in 0..MAX_ATTEMPTS {
        let mut ignored = Vec::new();
        let de = toml::de::Deserializer::from(work.clone());
        let mut track = |p: serde_ignored::Path<'_>| ignored.push(ignored_path(&p));
        let de = serde_ignored::Deserializer::new(de, &mut track);
        let outcome: Result<T, _> = serde_path_to_error::deserialize(de);
        for p in ignored {
            let p = original_path(&p, &removed);
            if !unknown.contains(&p) {
                unknown.push(p);
            }
        }
        match outcome {
            Ok(value) => {
                if !repaired {
                    result = Some(value);
                }
                break;
            }
            Err(err) => {
                repaired = true;
                let at = converted_path(err.path());
                let inner = err.into_inner();
                let message = inner.message().trim().to_string();
                let (kind, key, bad) = match missing_field(&message) {
                    Some(field) => (ProblemKind::MissingKey, at.join(field), at.clone()),
                    None => (ProblemKind::BadValue, at.clone(), at.clone()),
                };
                let orig_key = original_path(&key, &removed);
                let consequence = removed_keys.contains(&orig_key);
                if !consequence {
                    let span = inner
                        .span()
                        .or_else(|| value_span(doc, &original_path(&bad, &removed)));
                    let message = match kind {
                        ProblemKind::MissingKey => {
                            format!("required key `{}` is missing", last_key(&key))
                        }
                        _ => message,
                    };
                    problems.push(Problem {
                        file: file.to_string(),
                        line: span.map(|s| line_of(text, s.start)),
                        key: orig_key,
                        kind,
                        message,
                    });
                }
                // Repair: drop the bad value (or, for a missing key, the table that lacks
                // it) and read again. The root cannot be dropped.
                if bad.is_root() {
                    break;
                }
                removed_keys.push(original_path(&bad, &removed));
                if let Some(Seg::Index(i)) = bad.0.last() {
                    let array = KeyPath(bad.0[..bad.0.len() - 1].to_vec());
                    removed.push((
                        original_path(&array, &removed),
                        original_index(&array, *i, &removed),
                    ));
                }
                if !remove(&mut work, &bad) {
                    break;
                }
            }
        }
    }

    for key in unknown {
        problems.push(Problem {
            file: file.to_string(),
            line: key_span(doc, &key).map(|s| line_of(text, s.start)),
            message: format!(
                "unknown key `{}`: the schema has no such key (see compat-db/README.md)",
                last_key(&key)
            ),
            key,
            kind: ProblemKind::UnknownKey,
        });
    }
    if result.is_some() {
        check_unverified(file, text, doc.get_ref(), &KeyPath::default(), problems);
    }
    result
}

/// `unverified` must name keys of the same table.
fn check_unverified(file: &str, text: &str, table: &DeTable<'_>, at: &KeyPath, problems: &mut Vec<Problem>) {
    if let Some(list) = table.get("unverified").and_then(|v| v.get_ref().as_array()) {
        for (i, item) in list.iter().enumerate() {
            let Some(name) = item.get_ref().as_str() else {
                continue;
            };
            let known = table.contains_key(name) && !["unverified", "sources", "notes"].contains(&name);
            if !known {
                problems.push(Problem {
                    file: file.to_string(),
                    line: Some(line_of(text, item.span().start)),
                    key: at.join("unverified").index(i),
                    kind: ProblemKind::BadValue,
                    message: format!("`unverified` names `{name}`, which is not a fact of this table"),
                });
            }
        }
    }
    for (k, v) in table.iter() {
        if let Some(arr) = v.get_ref().as_array() {
            for (i, item) in arr.iter().enumerate() {
                if let Some(t) = item.get_ref().as_table() {
                    check_unverified(file, text, t, &at.join(k.get_ref()).index(i), problems);
                }
            }
        } else if let Some(t) = v.get_ref().as_table() {
            check_unverified(file, text, t, &at.join(k.get_ref()), problems);
        }
    }
}

fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

fn last_key(path: &KeyPath) -> String {
    match path.0.last() {
        Some(Seg::Key(k)) => k.clone(),
        _ => path.to_string(),
    }
}

fn ignored_path(p: &serde_ignored::Path<'_>) -> KeyPath {
    use serde_ignored::Path;
    let mut segs = Vec::new();
    let mut cur = p;
    loop {
        match cur {
            Path::Root => break,
            Path::Seq { parent, index } => {
                segs.push(Seg::Index(*index));
                cur = parent;
            }
            Path::Map { parent, key } => {
                segs.push(Seg::Key(key.clone()));
                cur = parent;
            }
            Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => {
                cur = parent;
            }
        }
    }
    segs.reverse();
    KeyPath(segs)
}

fn converted_path(p: &serde_path_to_error::Path) -> KeyPath {
    use serde_path_to_error::Segment;
    KeyPath(
        p.iter()
            .filter_map(|s| match s {
                Segment::Seq { index } => Some(Seg::Index(*index)),
                Segment::Map { key } => Some(Seg::Key(key.clone())),
                _ => None,
            })
            .collect(),
    )
}

/// Maps an index in the repaired document back to the file's.
fn original_index(array: &KeyPath, index: usize, removed: &[(KeyPath, usize)]) -> usize {
    let array = original_path(array, removed);
    let mut gone: Vec<usize> = removed
        .iter()
        .filter(|(a, _)| *a == array)
        .map(|(_, i)| *i)
        .collect();
    gone.sort_unstable();
    let mut orig = index;
    for g in gone {
        if g <= orig {
            orig += 1;
        }
    }
    orig
}

/// Maps a path in the repaired document back to the file's.
fn original_path(path: &KeyPath, removed: &[(KeyPath, usize)]) -> KeyPath {
    if removed.is_empty() {
        return path.clone();
    }
    let mut out = KeyPath::default();
    for seg in &path.0 {
        match seg {
            Seg::Key(k) => out.0.push(Seg::Key(k.clone())),
            Seg::Index(i) => {
                let mut gone: Vec<usize> = removed
                    .iter()
                    .filter(|(a, _)| *a == out)
                    .map(|(_, i)| *i)
                    .collect();
                gone.sort_unstable();
                let mut orig = *i;
                for g in gone {
                    if g <= orig {
                        orig += 1;
                    }
                }
                out.0.push(Seg::Index(orig));
            }
        }
    }
    out
}

fn child<'d, 'a>(v: &'d DeValue<'a>, seg: &Seg) -> Option<(&'d Spanned<DeValue<'a>>, Option<Range<usize>>)> {
    match (v, seg) {
        (DeValue::Table(t), Seg::Key(k)) => t
            .get_key_value(k.as_str())
            .map(|(key, val)| (val, Some(key.span()))),
        (DeValue::Array(a), Seg::Index(i)) => a.get(*i).map(|val| (val, None)),
        _ => None,
    }
}

fn walk<'d, 'a>(
    doc: &'d Doc<'a>,
    path: &KeyPath,
) -> Option<(&'d Spanned<DeValue<'a>>, Option<Range<usize>>)> {
    let mut segs = path.0.iter();
    let first = segs.next()?;
    let Seg::Key(k) = first else { return None };
    let (key, mut cur) = doc.get_ref().get_key_value(k.as_str())?;
    let mut key_span = Some(key.span());
    for seg in segs {
        let (next, ks) = child(cur.get_ref(), seg)?;
        cur = next;
        key_span = ks.or(key_span);
    }
    Some((cur, key_span))
}

/// The span of the value at `path`, or of its nearest existing parent.
pub(crate) fn value_span(doc: &Doc<'_>, path: &KeyPath) -> Option<Range<usize>> {
    let mut p = path.clone();
    loop {
        if p.is_root() {
            return None;
        }
        if let Some((v, key_span)) = walk(doc, &p) {
            // An array of tables' span can start at its first header; the key is clearer.
            return Some(if v.get_ref().is_table() {
                key_span.unwrap_or(v.span())
            } else {
                v.span()
            });
        }
        p.0.pop();
    }
}

/// The span of the key at `path` (for unknown keys), or of its nearest existing parent.
pub(crate) fn key_span(doc: &Doc<'_>, path: &KeyPath) -> Option<Range<usize>> {
    walk(doc, path)
        .and_then(|(v, k)| k.or(Some(v.span())))
        .or_else(|| value_span(doc, path))
}

/// Removes the value at `path` from `doc`; false when there is nothing to remove.
fn remove(doc: &mut Doc<'_>, path: &KeyPath) -> bool {
    let Some((last, parents)) = path.0.split_last() else {
        return false;
    };
    let mut cur: &mut DeValue<'_> = match parents.first() {
        None => {
            return match last {
                Seg::Key(k) => doc.get_mut().remove(k.as_str()).is_some(),
                Seg::Index(_) => false,
            };
        }
        Some(Seg::Key(k)) => match doc.get_mut().get_mut(k.as_str()) {
            Some(v) => v.get_mut(),
            None => return false,
        },
        Some(Seg::Index(_)) => return false,
    };
    for seg in &parents[1..] {
        cur = match (cur, seg) {
            (DeValue::Table(t), Seg::Key(k)) => match t.get_mut(k.as_str()) {
                Some(v) => v.get_mut(),
                None => return false,
            },
            (DeValue::Array(a), Seg::Index(i)) => match a.get_mut(*i) {
                Some(v) => v.get_mut(),
                None => return false,
            },
            _ => return false,
        };
    }
    match (cur, last) {
        (DeValue::Table(t), Seg::Key(k)) => t.remove(k.as_str()).is_some(),
        (DeValue::Array(a), Seg::Index(i)) if *i < a.len() => {
            let old = std::mem::replace(a, toml::de::DeArray::new());
            *a = old
                .into_iter()
                .enumerate()
                .filter(|(j, _)| j != i)
                .map(|(_, v)| v)
                .collect();
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        tag: crate::model::Variant,
        cuda: Option<crate::model::CudaVersion>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Rec {
        version: crate::model::CudaVersion,
        driver: crate::model::DriverVersion,
        #[serde(default)]
        unverified: Vec<String>,
        variants: Vec<Inner>,
    }

    fn run(text: &str) -> (Option<Rec>, Vec<Problem>) {
        let mut problems = Vec::new();
        let doc = parse_doc("t.toml", text, &mut problems).expect("valid toml");
        let rec = read_record::<Rec>("t.toml", text, &doc, &mut problems);
        (rec, problems)
    }

    #[test]
    fn clean_record() {
        let (rec, problems) =
            run("version = \"12.4.0\"\ndriver = \"550.54.14\"\n[[variants]]\ntag = \"cu124\"\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(rec.unwrap().version.to_string(), "12.4.0");
    }

    #[test]
    fn every_problem_with_line_and_key() {
        let text = "version = \"12.x\"\ndriver = \"abc\"\ncolour = 1\nunverified = [\"nope\"]\n\
                    [[variants]]\ntag = \"cu124\"\n\
                    [[variants]]\ntag = \"gpu\"\nshade = 2\n\
                    [[variants]]\ntag = \"cu121\"\ncuda = \"twelve\"\n";
        let (rec, problems) = run(text);
        assert!(rec.is_none());
        let got: Vec<(Option<usize>, String, ProblemKind)> = problems
            .iter()
            .map(|p| (p.line, p.key.to_string(), p.kind))
            .collect();
        assert!(
            got.contains(&(Some(1), "version".into(), ProblemKind::BadValue)),
            "{got:?}"
        );
        assert!(
            got.contains(&(Some(2), "driver".into(), ProblemKind::BadValue)),
            "{got:?}"
        );
        assert!(
            got.contains(&(Some(3), "colour".into(), ProblemKind::UnknownKey)),
            "{got:?}"
        );
        assert!(
            got.contains(&(Some(8), "variants[1].tag".into(), ProblemKind::BadValue)),
            "{got:?}"
        );
        assert!(
            got.contains(&(Some(12), "variants[2].cuda".into(), ProblemKind::BadValue)),
            "{got:?}"
        );
    }

    #[test]
    fn missing_key_is_named() {
        let (_, problems) = run("version = \"12.4.0\"\n[[variants]]\ntag = \"cu124\"\n");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::MissingKey);
        assert_eq!(problems[0].key.to_string(), "driver");
    }

    #[test]
    fn unverified_must_name_a_key() {
        let (_, problems) = run(
            "version = \"12.4.0\"\ndriver = \"550.54.14\"\nunverified = [\"nope\", \"driver\"]\n[[variants]]\ntag = \"cu124\"\n",
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].line, Some(3));
        assert!(problems[0].message.contains("`nope`"));
    }

    #[test]
    fn syntax_errors_have_lines() {
        let mut problems = Vec::new();
        assert!(parse_doc("t.toml", "a = 1\nb = \n", &mut problems).is_none());
        assert_eq!(problems[0].line, Some(2));
        assert_eq!(problems[0].kind, ProblemKind::Syntax);
    }
}
