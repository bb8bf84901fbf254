//! The merged view of an image's layers, as far as the selector kept them.
//!
//! Owns: applying layers in order with the OCI whiteout rules, and answering queries by
//! path (following symlinks and hard links inside the image) and by glob-like pattern.
//! Must not: read streams (layers arrive as [`Layer`]s) or interpret files.
//!
//! Only kept entries are here (see [`super::layer`]): "absent" means "absent or not
//! selected". Deletions still reach kept entries through uninteresting parents: a
//! whiteout of `site-packages/torch` removes the kept `site-packages/torch/version.py`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::layer::{Entry, Layer};
use super::tar::Kind;

/// How many links a lookup follows before giving up (Linux's limit).
const MAX_LINKS: usize = 40;

/// One kept file, directory or link of the merged image.
#[derive(Debug, Clone)]
pub struct Node {
    /// The entry as its layer had it.
    pub entry: Entry,
    /// Which layer (0 = the base) it comes from.
    pub layer: usize,
}

/// The merged filesystem.
#[derive(Debug, Clone, Default)]
pub struct MergedFs {
    nodes: BTreeMap<String, Node>,
    layers: usize,
}

impl MergedFs {
    /// An empty filesystem.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the next layer on top: first its whiteouts against what lies below, then
    /// its entries (so a layer may delete a directory and recreate things inside it).
    pub fn apply(&mut self, layer: Layer) {
        let index = self.layers;
        self.layers += 1;
        for dir in &layer.opaque {
            self.remove_below(dir);
        }
        for path in &layer.deleted {
            self.nodes.remove(path);
            self.remove_below(path);
        }
        for entry in layer.entries {
            // A non-directory replaces a directory and all it held.
            if entry.kind != Kind::Dir {
                self.remove_below(&entry.path);
            }
            self.nodes
                .insert(entry.path.clone(), Node { entry, layer: index });
        }
    }

    /// Removes everything strictly below `dir`.
    fn remove_below(&mut self, dir: &str) {
        if dir.is_empty() {
            self.nodes.clear();
            return;
        }
        let prefix = format!("{dir}/");
        let doomed: Vec<String> = self
            .nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            self.nodes.remove(&k);
        }
    }

    /// How many layers were applied.
    pub fn layer_count(&self) -> usize {
        self.layers
    }

    /// Every kept path, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// Every kept node, sorted by path.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// The node at exactly `path` (no link following); a leading `/` is ignored.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path.trim_start_matches('/'))
    }

    /// The node `path` leads to, following symlinks (relative or absolute, clamped at the
    /// root as inside a container) and hard links; `None` when it leads nowhere kept, or
    /// round in circles.
    pub fn resolve(&self, path: &str) -> Option<&Node> {
        let mut current = path.trim_start_matches('/').to_string();
        for _ in 0..MAX_LINKS {
            // Resolve the parents first: `usr/local/cuda/version.json` with `cuda` a link.
            current = self.resolve_parents(&current)?;
            let node = self.nodes.get(&current)?;
            match (&node.entry.kind, &node.entry.link) {
                (Kind::Symlink, Some(target)) => {
                    let base = current.rsplit_once('/').map_or("", |(d, _)| d);
                    current = join_link(base, target)?;
                }
                (Kind::HardLink, Some(target)) if node.entry.content.is_none() => current = target.clone(),
                _ => return Some(node),
            }
        }
        None
    }

    /// `path` with every parent that is a kept symlink replaced by its target.
    fn resolve_parents(&self, path: &str) -> Option<String> {
        let mut out = String::new();
        let mut hops = 0;
        let comps: Vec<&str> = path.split('/').collect();
        for (i, comp) in comps.iter().enumerate() {
            let candidate = if out.is_empty() {
                comp.to_string()
            } else {
                format!("{out}/{comp}")
            };
            let last = i + 1 == comps.len();
            out = candidate;
            if last {
                break;
            }
            while let Some(node) = self.nodes.get(&out) {
                match (&node.entry.kind, &node.entry.link) {
                    (Kind::Symlink, Some(target)) => {
                        hops += 1;
                        if hops > MAX_LINKS {
                            return None;
                        }
                        let base = out.rsplit_once('/').map_or("", |(d, _)| d);
                        out = join_link(base, target)?;
                    }
                    _ => break,
                }
            }
        }
        Some(out)
    }

    /// The captured contents of the file `path` leads to.
    pub fn read(&self, path: &str) -> Option<&[u8]> {
        self.resolve(path)?.entry.content.as_deref()
    }

    /// The captured contents as shared bytes.
    pub fn read_shared(&self, path: &str) -> Option<Arc<[u8]>> {
        self.resolve(path)?.entry.content.clone()
    }

    /// Whether `path` exists, as itself or through links.
    pub fn exists(&self, path: &str) -> bool {
        self.get(path).is_some() || self.resolve(path).is_some()
    }

    /// The kept paths that match `pattern`, sorted: `*` and `?` match within one path
    /// component, `**` matches any number of whole components (zero included). Links are
    /// not followed; a leading `/` is ignored.
    pub fn glob(&self, pattern: &str) -> Vec<&str> {
        let pat: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
        // A literal leading part narrows the scan to one subtree.
        let literal: Vec<&str> = pat
            .iter()
            .take_while(|p| !p.contains(['*', '?']))
            .copied()
            .collect();
        let prefix = literal.join("/");
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.as_str())
            .filter(|k| match_components(&pat, &k.split('/').collect::<Vec<_>>()))
            .collect()
    }
}

/// Joins a symlink's target to the directory holding the link, clamping `..` at the root.
fn join_link(base: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        base.split('/').filter(|s| !s.is_empty()).collect()
    };
    for comp in target.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Matches path components against pattern components.
fn match_components(pat: &[&str], path: &[&str]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| match_components(rest, &path[skip..])),
        Some((p, rest)) => match path.split_first() {
            Some((c, tail)) => match_one(p.as_bytes(), c.as_bytes()) && match_components(rest, tail),
            None => false,
        },
    }
}

/// Matches one component: `*` any run of characters, `?` one character.
pub(crate) fn match_one(pat: &[u8], s: &[u8]) -> bool {
    // Iterative wildcard matching with backtracking to the last `*`: linear in practice,
    // never exponential.
    let (mut p, mut i) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == s[i]) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some(p);
            mark = i;
            p += 1;
        } else if let Some(sp) = star {
            p = sp + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

#[cfg(test)]
mod tests {
    use super::super::digest::sha256;
    use super::super::layer::Compression;
    use super::*;

    fn entry(path: &str, kind: Kind, link: Option<&str>, content: Option<&str>) -> Entry {
        Entry {
            path: path.into(),
            kind,
            size: content.map_or(0, |c| c.len() as u64),
            mode: 0o644,
            link: link.map(str::to_string),
            content: content.map(|c| Arc::from(c.as_bytes())),
            note: None,
        }
    }

    fn layer(entries: Vec<Entry>, deleted: &[&str], opaque: &[&str]) -> Layer {
        Layer {
            entries,
            deleted: deleted.iter().map(|s| s.to_string()).collect(),
            opaque: opaque.iter().map(|s| s.to_string()).collect(),
            compression: Compression::None,
            blob_digest: sha256(b""),
            blob_size: 0,
            diff_id: sha256(b""),
        }
    }

    #[test]
    fn whiteouts_and_opaque_dirs() {
        let mut fs = MergedFs::new();
        fs.apply(layer(
            vec![
                entry("sp/torch/version.py", Kind::File, None, Some("old")),
                entry("sp/torch-2.4.1.dist-info", Kind::Dir, None, None),
                entry("opt/a/x", Kind::File, None, Some("x")),
                entry("opt/a/y", Kind::File, None, Some("y")),
            ],
            &[],
            &[],
        ));
        fs.apply(layer(
            vec![
                entry("sp/torch/version.py", Kind::File, None, Some("new")),
                entry("opt/a/z", Kind::File, None, Some("z")),
            ],
            &["sp/torch", "sp/torch-2.4.1.dist-info"],
            &["opt/a"],
        ));
        assert_eq!(fs.read("sp/torch/version.py"), Some(&b"new"[..]));
        assert!(!fs.exists("sp/torch-2.4.1.dist-info"));
        assert!(!fs.exists("opt/a/x"));
        assert_eq!(fs.read("/opt/a/z"), Some(&b"z"[..]));
        assert_eq!(fs.layer_count(), 2);
        assert_eq!(fs.get("opt/a/z").unwrap().layer, 1);
    }

    #[test]
    fn links_are_followed_inside_the_root() {
        let mut fs = MergedFs::new();
        fs.apply(layer(
            vec![
                entry("usr/local/cuda-12.4/version.json", Kind::File, None, Some("{}")),
                entry("usr/local/cuda", Kind::Symlink, Some("cuda-12.4"), None),
                entry(
                    "etc/os-release",
                    Kind::Symlink,
                    Some("../../../usr/lib/os-release"),
                    None,
                ),
                entry("usr/lib/os-release", Kind::File, None, Some("ID=ubuntu")),
                entry("loop/a", Kind::Symlink, Some("b"), None),
                entry("loop/b", Kind::Symlink, Some("a"), None),
                entry("h", Kind::HardLink, Some("usr/lib/os-release"), None),
            ],
            &[],
            &[],
        ));
        assert_eq!(fs.read("usr/local/cuda/version.json"), Some(&b"{}"[..]));
        assert_eq!(fs.read("/etc/os-release"), Some(&b"ID=ubuntu"[..]));
        assert_eq!(fs.read("loop/a"), None);
        assert_eq!(fs.read("h"), Some(&b"ID=ubuntu"[..]));
    }

    #[test]
    fn globs() {
        let mut fs = MergedFs::new();
        fs.apply(layer(
            vec![
                entry(
                    "usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0",
                    Kind::File,
                    None,
                    None,
                ),
                entry(
                    "usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0",
                    Kind::File,
                    None,
                    None,
                ),
                entry(
                    "opt/conda/lib/python3.11/site-packages/torch/version.py",
                    Kind::File,
                    None,
                    None,
                ),
            ],
            &[],
            &[],
        ));
        assert_eq!(
            fs.glob("/usr/lib/*/libcudnn.so.*"),
            vec!["usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"]
        );
        assert_eq!(fs.glob("**/libcudnn*").len(), 2);
        assert_eq!(fs.glob("**/site-packages/torch/version.py").len(), 1);
        assert_eq!(fs.glob("opt/**/version.py").len(), 1);
        assert!(fs.glob("usr/lib/libcudnn*").is_empty());
        assert!(match_one(b"lib*.so.?", b"libx.so.9"));
        assert!(!match_one(b"lib*.so.?", b"libx.so.10"));
        assert!(match_one(b"*", b""));
        assert!(match_one(b"a*b*c", b"aXXbYYc"));
    }
}
