//! The NGC PyTorch releases of `gpuenv db refresh`: which `nvcr.io/nvidia/pytorch:YY.MM-py3`
//! tags the registry lists, and a proposed image record for each release compat-db lacks.
//!
//! Owns: the filter of registry tags to NGC releases ([`ngc_release`], [`sort_tags`]) and
//! the proposals. The registry is read through [`crate::registry`] (its token flow and
//! bounds), anonymously: the repository is public, and a refresh never sends credentials.
//!
//! A tag says only that a release exists. Its torch, CUDA, cuDNN, NCCL and Python, its
//! driver minimum and its forward-compatibility branches are in NVIDIA's release notes
//! and in the image itself, not in the tag list, so a proposal leaves them out and names
//! them as pending: it is a draft a curator completes (an `ngc` record needs `torch` and
//! `cuda` before it lints), never a record with invented facts.

use std::collections::BTreeSet;
use std::fmt;

use super::UpstreamError;
use super::refresh::{Proposal, RefreshStep, record_toml};
use crate::db::{Db, Image, ImageFamily, Source};
use crate::deadline::Deadline;
use crate::model::PartialDate;
use crate::registry::Registry;

/// The repository of NGC's PyTorch container on its registry.
pub const NGC_REPOSITORY: &str = "nvidia/pytorch";

/// The facts a tag does not give, which a proposal leaves for a curator.
pub const NGC_PENDING: [&str; 7] = [
    "torch",
    "cuda",
    "cudnn",
    "nccl",
    "python",
    "min_driver",
    "forward_compat",
];

/// The longest tag the distribution spec allows (`[\w][\w.-]{0,127}`): a longer one is
/// not a tag, and is not looked at further.
const MAX_TAG_LEN: usize = 128;

/// An NGC release: the `YY.MM` of its tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NgcRelease {
    /// The year, two digits (`25` for 2025).
    pub year: u8,
    /// The month, 1 to 12.
    pub month: u8,
}

impl fmt::Display for NgcRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}.{:02}", self.year, self.month)
    }
}

impl NgcRelease {
    /// The main tag of the release, `YY.MM-py3`.
    pub fn tag(&self) -> String {
        format!("{self}-py3")
    }

    /// The month it is named after, as a date (`2025-05`).
    fn month_date(&self) -> Option<PartialDate> {
        format!("20{:02}-{:02}", self.year, self.month).parse().ok()
    }
}

/// The release a tag is the main image of: exactly `YY.MM-py3` (two digits, a month 01 to
/// 12). Every other tag is something else: an integrated-GPU build (`-igpu`, `-py3-igpu`),
/// a Python 2 image of old (`-py2`), a variant with a suffix, or not NGC's naming at all.
pub fn ngc_release(tag: &str) -> Option<NgcRelease> {
    let b = tag.as_bytes();
    if b.len() != "YY.MM-py3".len() || !tag.ends_with("-py3") || b[2] != b'.' {
        return None;
    }
    let two = |i: usize| -> Option<u8> {
        let (h, l) = (b[i], b[i + 1]);
        (h.is_ascii_digit() && l.is_ascii_digit()).then(|| (h - b'0') * 10 + (l - b'0'))
    };
    let year = two(0)?;
    let month = two(3)?;
    (1..=12).contains(&month).then_some(NgcRelease { year, month })
}

/// The tags of the repository, sorted: the releases their main tags name, and how many
/// tags were something else.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NgcTags {
    /// Releases with a `YY.MM-py3` tag.
    pub releases: BTreeSet<NgcRelease>,
    /// Tags that are not a release's main tag (`25.01-py3-igpu`, `17.12`, ...).
    pub ignored: usize,
}

/// Sorts `tags` into releases and the rest. A tag longer than the spec allows is counted
/// as ignored without being read.
pub fn sort_tags<'a>(tags: impl IntoIterator<Item = &'a str>) -> NgcTags {
    let mut out = NgcTags::default();
    for tag in tags {
        match (tag.len() <= MAX_TAG_LEN).then(|| ngc_release(tag)).flatten() {
            Some(r) => {
                out.releases.insert(r);
            }
            None => out.ignored += 1,
        }
    }
    out
}

/// What the NGC part of a refresh read and proposes.
#[derive(Debug, Clone, Default)]
pub struct NgcScan {
    /// Releases the registry lists (`YY.MM-py3` tags).
    pub releases: usize,
    /// Tags that are not a release's main tag.
    pub ignored: usize,
    /// Releases older than compat-db's oldest NGC record without one: not proposed, as
    /// compat-db's NGC coverage starts there.
    pub older_unrecorded: usize,
    /// A draft image record for each newer release without one.
    pub proposals: Vec<Proposal>,
}

/// The releases compat-db records: its `ngc` image records, by the release their tag names.
fn recorded(db: &Db) -> BTreeSet<NgcRelease> {
    db.images
        .iter()
        .filter(|im| im.family == ImageFamily::Ngc)
        .filter_map(|im| im.tag.as_deref().and_then(ngc_release))
        .collect()
}

/// Compares the registry's releases with compat-db's and proposes the missing ones: those
/// from the oldest recorded release on (gaps and newer releases); older ones are counted.
pub fn ngc_candidates(
    listed: &BTreeSet<NgcRelease>,
    known: &BTreeSet<NgcRelease>,
) -> (Vec<NgcRelease>, usize) {
    let oldest = known.iter().next().copied();
    let missing = listed.iter().filter(|r| !known.contains(r));
    let (new, older): (Vec<NgcRelease>, Vec<NgcRelease>) =
        missing.partition(|r| oldest.is_none_or(|o| **r >= o));
    (new, older.len())
}

/// Lists the tags of `NGC_REPOSITORY` on `host` and proposes the releases compat-db lacks.
pub(super) fn scan(
    host: &str,
    insecure: &[String],
    deadline: &Deadline,
    db: &Db,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<NgcScan, UpstreamError> {
    progress(RefreshStep::Stage {
        what: format!("the tags of {host}/{NGC_REPOSITORY}"),
        files: None,
    });
    let failed = |e: crate::registry::RegistryError| UpstreamError::Network {
        url: format!("{host}/{NGC_REPOSITORY}"),
        reason: e.to_string(),
    };
    // Anonymous, and plain HTTP only where the registry client allows it (loopback, or a
    // host the user listed as insecure).
    let registry = Registry::new(host, None, deadline.clone(), insecure).map_err(failed)?;
    let tags = registry.tags(NGC_REPOSITORY).map_err(failed)?;
    progress(RefreshStep::Read);
    let sorted = sort_tags(tags.iter().map(String::as_str));
    let (new, older_unrecorded) = ngc_candidates(&sorted.releases, &recorded(db));
    let listing = format!(
        "{}://{host}/v2/{NGC_REPOSITORY}/tags/list",
        if crate::registry::plain_http(host, insecure) {
            "http"
        } else {
            "https"
        }
    );
    let proposals = new
        .iter()
        .map(|r| ngc_proposal(*r, host, &listing))
        .collect::<Result<_, _>>()?;
    Ok(NgcScan {
        releases: sorted.releases.len(),
        ignored: sorted.ignored,
        older_unrecorded,
        proposals,
    })
}

/// NVIDIA's release notes of a release: `rel-25-05.html` for 25.05.
fn release_notes(r: NgcRelease) -> String {
    format!(
        "https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-{:02}-{:02}.html",
        r.year, r.month
    )
}

/// A draft `ngc` image record: the tag, the month it is named after (unverified), and
/// nothing the tag does not say.
fn ngc_proposal(r: NgcRelease, host: &str, listing: &str) -> Result<Proposal, UpstreamError> {
    let tag = r.tag();
    let pending: Vec<String> = NGC_PENDING.iter().map(|k| k.to_string()).collect();
    let rec = Image {
        released: r.month_date(),
        checked: crate::db::today(),
        unverified: vec!["released".into()],
        notes: Some(format!(
            "Proposed by `gpuenv db refresh`: the registry {host} lists the tag {tag}, and that is all it says. \
             released is the month the YY.MM tag names, unverified. Still unknown: {}; take them from NVIDIA's \
             release notes for this container, or from the image itself (`gpuenv verify`).",
            NGC_PENDING.join(", ")
        )),
        sources: vec![
            Source {
                url: listing.to_string(),
                note: Some(format!(
                    "the registry's tag list (OCI distribution API) names {tag}"
                )),
            },
            Source {
                url: release_notes(r),
                note: Some("NVIDIA's release notes for this container: where the pending facts are".into()),
            },
        ],
        ..Image::named(
            format!("ngc-{r}"),
            ImageFamily::Ngc,
            "nvcr.io/nvidia/pytorch",
            tag.clone(),
        )
    };
    let file = format!("image/ngc-{r}.toml");
    let header = format!(
        "# New NGC PyTorch release proposed by `gpuenv db refresh`: nvcr.io/nvidia/pytorch:{tag} exists.\n\
         # The tag says nothing more. Still unknown, and left out rather than guessed: {}.\n\
         # An `ngc` record needs at least torch and cuda: fill them in from the release notes, then move\n\
         # this to compat-db/{file}.\n\n",
        NGC_PENDING.join(", ")
    );
    Ok(Proposal {
        text: record_toml(&rec, &file, &header)?,
        file,
        kind: "image",
        new: true,
        pending,
        changes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(s: &str) -> NgcRelease {
        ngc_release(s).unwrap()
    }

    #[test]
    fn only_the_main_py3_tag_names_a_release() {
        assert_eq!(rel("25.05-py3"), NgcRelease { year: 25, month: 5 });
        assert_eq!(rel("25.05-py3").to_string(), "25.05");
        assert_eq!(rel("23.01-py3").tag(), "23.01-py3");
        for other in [
            "25.05-py3-igpu",
            "25.05-igpu",
            "19.01-py2",
            "17.12",
            "25.13-py3",
            "25.00-py3",
            "5.05-py3",
            "25.5-py3",
            "25.05-py3 ",
            "2a.05-py3",
            "25-05-py3",
            "25.05-PY3",
            "",
            "latest",
            "２5.05-py3",
            "é5.05-py",
        ] {
            assert_eq!(ngc_release(other), None, "{other}");
        }
    }

    #[test]
    fn tags_sort_into_releases_and_the_ignored_count() {
        let tags = [
            "24.12-py3",
            "25.01-py3",
            "25.01-py3-igpu",
            "25.01-igpu",
            "24.12-py3",
            "nonsense",
        ];
        let sorted = sort_tags(tags);
        let names: Vec<String> = sorted.releases.iter().map(|r| r.to_string()).collect();
        assert_eq!(names, ["24.12", "25.01"]);
        assert_eq!(sorted.ignored, 3);
    }

    /// Hostile lists: huge tags, ten thousand entries, binary-looking text. Bounded work,
    /// no panic, and the one real release among them found.
    #[test]
    fn hostile_tag_lists_are_sorted_without_panic() {
        let huge = "9".repeat(1 << 20);
        let mut tags: Vec<String> = (0..10_000).map(|i| format!("{i}.{i}-py3\u{0}")).collect();
        tags.push(huge);
        tags.push(format!("25.05-py3{}", "x".repeat(200)));
        tags.push("\u{feff}25.05-py3".into());
        tags.push("26.01-py3".into());
        let sorted = sort_tags(tags.iter().map(String::as_str));
        assert_eq!(sorted.releases.len(), 1);
        assert_eq!(sorted.ignored, tags.len() - 1);
        // Every two-digit pair is read without overflow or slicing a character.
        for y in 0..100u8 {
            for m in 0..100u8 {
                let t = format!("{y:02}.{m:02}-py3");
                assert_eq!(ngc_release(&t).is_some(), (1..=12).contains(&m), "{t}");
            }
        }
    }

    #[test]
    fn candidates_are_gaps_and_newer_releases_older_ones_counted() {
        let set = |xs: &[&str]| xs.iter().map(|s| rel(s)).collect::<BTreeSet<_>>();
        let listed = set(&["22.12-py3", "23.01-py3", "24.12-py3", "25.01-py3", "26.10-py3"]);
        let known = set(&["23.01-py3", "25.01-py3"]);
        let (new, older) = ngc_candidates(&listed, &known);
        let names: Vec<String> = new.iter().map(|r| r.to_string()).collect();
        assert_eq!(names, ["24.12", "26.10"]);
        assert_eq!(older, 1);
        // No NGC record at all: every release is proposed.
        let (new, older) = ngc_candidates(&listed, &BTreeSet::new());
        assert_eq!((new.len(), older), (5, 0));
    }

    #[test]
    fn a_proposal_names_the_tag_and_invents_nothing() {
        let p = ngc_proposal(
            rel("26.10-py3"),
            "nvcr.io",
            "https://nvcr.io/v2/nvidia/pytorch/tags/list",
        )
        .unwrap();
        assert_eq!(p.file, "image/ngc-26.10.toml");
        assert_eq!(p.kind, "image");
        assert_eq!(p.pending, NGC_PENDING);
        let body: String = p
            .text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let doc: toml::Value = toml::from_str(&body).unwrap();
        assert_eq!(doc["tag"].as_str(), Some("26.10-py3"));
        assert_eq!(doc["family"].as_str(), Some("ngc"));
        assert_eq!(doc["released"].as_str(), Some("2026-10"));
        for key in NGC_PENDING {
            assert!(
                doc.get(key).is_none(),
                "{key} is pending, not written: {}",
                p.text
            );
        }
        assert!(p.text.contains("rel-26-10.html"), "{}", p.text);
    }
}
