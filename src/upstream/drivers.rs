//! The driver releases of `gpuenv db refresh`: what NVIDIA's download index lists, by
//! branch, and the driver records it proposes.
//!
//! Owns: reading the index (`https://download.nvidia.com/XFree86/Linux-x86_64/`, an HTML
//! directory listing with one folder per driver release, `580.95.05/`, and a `latest.txt`
//! naming the release NVIDIA marks as latest), [`parse_index`] and [`parse_latest`], and
//! turning the releases into proposals: a branch compat-db has no record of (from its
//! oldest recorded branch on), with the first and latest releases listed; a newer latest
//! release of a recorded branch; the first release of a recorded branch that gives none.
//!
//! The index says that a release exists. It says nothing of a branch's type, end of life
//! or architectures: a new branch's record takes `type = "unknown"`, and the architectures
//! of the newest recorded branch, marked unverified, for a curator to confirm from NVIDIA's
//! pages. Release candidates and betas are listed among the rest, so the first release
//! listed is marked unverified as well.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::Url;

use super::refresh::{Change, Proposal, RefreshStep, record_toml};
use super::{Client, Fetched, UpstreamError};
use crate::db::{BranchType, Db, DriverBranch, Source};
use crate::model::DriverVersion;

/// The longest folder name read as a version: `NNN.NNN.NN` is 10 characters; anything much
/// longer is something else.
const MAX_NAME_LEN: usize = 32;

/// The most links of the index looked at: the real index has about a thousand (every Linux
/// x86_64 release since 2004); a listing past this is not the index, and the rest is
/// counted as ignored without being parsed.
pub const MAX_INDEX_ENTRIES: usize = 20_000;

/// What the index lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverListing {
    /// Releases by branch: the first and latest release, and how many.
    pub branches: BTreeMap<u32, BranchSeen>,
    /// Releases listed.
    pub releases: usize,
    /// Links that are not a release's folder (the parent, sort links, files, `1.0-7184/`).
    pub ignored: usize,
}

/// The releases of one branch the index lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchSeen {
    /// The lowest release.
    pub first: DriverVersion,
    /// The highest release.
    pub latest: DriverVersion,
    /// How many releases.
    pub count: usize,
}

/// The driver version a folder link names: `580.95.05/` (or `./580.95.05/`) is 580.95.05.
/// Only two or three dot-separated numbers of at most 3 digits after the first (which is
/// at most 4), ending in `/`: files (`latest.txt`), the parent (`../`), query links
/// (`?C=M;O=A`) and NVIDIA's oldest folders (`1.0-7184/`) name none.
pub fn folder_version(href: &str) -> Option<DriverVersion> {
    let name = href.strip_prefix("./").unwrap_or(href).strip_suffix('/')?;
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return None;
    }
    let parts: Vec<&str> = name.split('.').collect();
    let digits =
        |p: &str, max: usize| !p.is_empty() && p.len() <= max && p.bytes().all(|b| b.is_ascii_digit());
    let well_formed =
        matches!(parts.len(), 2 | 3) && digits(parts[0], 4) && parts[1..].iter().all(|p| digits(p, 3));
    if !well_formed {
        return None;
    }
    name.parse().ok()
}

/// The targets of the `href="..."` attributes of an HTML page, at most `limit` of them,
/// and how many more there were. Quotes single or double; an attribute without its
/// closing quote ends the page.
fn hrefs(html: &str, limit: usize) -> (Vec<&str>, usize) {
    let mut out = Vec::new();
    let mut more = 0usize;
    let mut rest = html;
    while let Some(at) = find_ascii_ci(rest, "href=") {
        rest = &rest[at + "href=".len()..];
        let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        rest = &rest[1..];
        let Some(end) = rest.find(quote) else {
            break;
        };
        if out.len() < limit {
            out.push(&rest[..end]);
        } else {
            more += 1;
        }
        rest = &rest[end + 1..];
    }
    (out, more)
}

/// Where `needle` (ASCII, lowercase) is in `hay`, compared without ASCII case.
fn find_ascii_ci(hay: &str, needle: &str) -> Option<usize> {
    let n = needle.as_bytes();
    hay.as_bytes()
        .windows(n.len())
        .position(|w| w.eq_ignore_ascii_case(n))
}

/// Reads the index page: each folder link that names a release, grouped by branch (its
/// first part), at most [`MAX_INDEX_ENTRIES`] links. The same release linked twice (the
/// name and an icon) counts once.
pub fn parse_index(html: &str) -> DriverListing {
    let (links, more) = hrefs(html, MAX_INDEX_ENTRIES);
    let mut out = DriverListing {
        ignored: more,
        ..DriverListing::default()
    };
    let mut seen: BTreeSet<DriverVersion> = BTreeSet::new();
    for href in links {
        let Some(v) = folder_version(href) else {
            out.ignored += 1;
            continue;
        };
        if !seen.insert(v.clone()) {
            continue;
        }
        out.releases += 1;
        let b = out.branches.entry(v.branch()).or_insert_with(|| BranchSeen {
            first: v.clone(),
            latest: v.clone(),
            count: 0,
        });
        b.count += 1;
        if v < b.first {
            b.first = v.clone();
        }
        if v > b.latest {
            b.latest = v;
        }
    }
    out
}

/// The release `latest.txt` names: its first word (`580.95.05 580.95.05/NVIDIA-...run`).
pub fn parse_latest(text: &str) -> Option<DriverVersion> {
    let first = text.split_ascii_whitespace().next()?;
    folder_version(&format!("{first}/"))
}

/// What the driver part of a refresh read and proposes.
#[derive(Debug, Clone, Default)]
pub struct DriverScan {
    /// Releases the index lists.
    pub releases: usize,
    /// Branches they belong to.
    pub branches: usize,
    /// Links of the index that are not a release.
    pub ignored: usize,
    /// The release `latest.txt` names, when it was served and reads as one.
    pub latest: Option<String>,
    /// Branches older than compat-db's oldest driver record, without one: not proposed.
    pub older_unrecorded: usize,
    /// New branches first, then changed records.
    pub proposals: Vec<Proposal>,
}

/// Reads the index at `index` and proposes what compat-db lacks.
pub(super) fn scan(
    client: &Client,
    index: &Url,
    db: &Db,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<DriverScan, UpstreamError> {
    progress(RefreshStep::Stage {
        what: "NVIDIA's driver index".into(),
        files: Some(2),
    });
    let html = match client.get(index, None)? {
        Fetched::Body(t) => t,
        Fetched::NotFound => {
            return Err(UpstreamError::Format {
                url: index.to_string(),
                reason: "no index (404)".into(),
            });
        }
    };
    progress(RefreshStep::Read);
    let latest_url = index.join("latest.txt").map_err(|e| UpstreamError::Format {
        url: format!("{index}latest.txt"),
        reason: format!("not a URL: {e}"),
    })?;
    // latest.txt only adds a line to the summary: the folders are the facts compared, so a
    // latest.txt that cannot be read costs that line, not the proposals.
    let latest = match client.get(&latest_url, None) {
        Ok(Fetched::Body(t)) => parse_latest(&t),
        Ok(Fetched::NotFound) | Err(_) => None,
    };
    progress(RefreshStep::Read);
    let listing = parse_index(&html);
    let (proposals, older_unrecorded) = driver_proposals(&listing, db, index.as_str())?;
    Ok(DriverScan {
        releases: listing.releases,
        branches: listing.branches.len(),
        ignored: listing.ignored,
        latest: latest.map(|v| v.to_string()),
        older_unrecorded,
        proposals,
    })
}

/// The proposals for a listing: a record for each branch from compat-db's oldest recorded
/// one on that has none, and the recorded branches whose latest release is older than the
/// index's (or absent), or whose first release is absent. The second value counts the
/// unrecorded branches older than the oldest record.
pub fn driver_proposals(
    listing: &DriverListing,
    db: &Db,
    index: &str,
) -> Result<(Vec<Proposal>, usize), UpstreamError> {
    let oldest = db.drivers.iter().map(|d| d.branch).min();
    let newest = db.drivers.iter().max_by_key(|d| d.branch);
    let mut proposals = Vec::new();
    let mut older = 0;
    for (branch, seen) in &listing.branches {
        match db.drivers.iter().find(|d| d.branch == *branch) {
            None if oldest.is_some_and(|o| *branch < o) => older += 1,
            None => proposals.push(new_branch(*branch, seen, newest, index)?),
            Some(rec) => {
                if let Some(p) = changed_branch(rec, seen, index)? {
                    proposals.push(p);
                }
            }
        }
    }
    Ok((proposals, older))
}

fn index_source(index: &str, seen: &BranchSeen, branch: u32) -> Source {
    Source {
        url: index.to_string(),
        note: Some(format!(
            "NVIDIA's driver download index: {} R{branch} release folder{}, {} to {}",
            seen.count,
            if seen.count == 1 { "" } else { "s" },
            seen.first,
            seen.latest
        )),
    }
}

/// A record for a branch compat-db lacks: its releases from the index, the rest unknown or
/// taken from the newest recorded branch and marked.
fn new_branch(
    branch: u32,
    seen: &BranchSeen,
    newest: Option<&DriverBranch>,
    index: &str,
) -> Result<Proposal, UpstreamError> {
    let mut unverified = vec!["first_version".to_string()];
    let mut notes = vec![format!(
        "Proposed by `gpuenv db refresh` from NVIDIA's driver index, which lists {} R{branch} release{} ({} to {}). \
         The index says nothing of the branch's type or end of life: type is unknown until NVIDIA's driver \
         documentation names it. first_version is the lowest release listed, which may be a beta.",
        seen.count,
        if seen.count == 1 { "" } else { "s" },
        seen.first,
        seen.latest
    )];
    let architectures = match newest {
        Some(n) => {
            unverified.push("architectures".into());
            notes.push(format!(
                "architectures are R{}'s, the newest recorded branch: confirm them (a new branch may drop old architectures).",
                n.branch
            ));
            n.architectures.clone()
        }
        None => Vec::new(),
    };
    let rec = DriverBranch {
        id: format!("r{branch}"),
        branch,
        branch_type: BranchType::Unknown,
        first_version: Some(seen.first.clone()),
        latest_version: Some(seen.latest.clone()),
        released: None,
        end_of_life: None,
        end_of_life_by: None,
        architectures,
        forward_compat: Vec::new(),
        checked: crate::db::today(),
        unverified,
        notes: Some(notes.join(" ")),
        sources: vec![index_source(index, seen, branch)],
    };
    let file = format!("driver/r{branch}.toml");
    let header = format!(
        "# New driver branch proposed by `gpuenv db refresh` from NVIDIA's driver index.\n\
         # Set its type and end of life, confirm its architectures, then move it to compat-db/{file}.\n\n"
    );
    Ok(Proposal {
        text: record_toml(&rec, &file, &header)?,
        file,
        kind: "driver",
        new: true,
        pending: Vec::new(),
        changes: Vec::new(),
    })
}

/// The curated record with the index's releases where it is behind: a newer latest
/// release, or a first release it does not give. `None` when it agrees.
fn changed_branch(
    rec: &DriverBranch,
    seen: &BranchSeen,
    index: &str,
) -> Result<Option<Proposal>, UpstreamError> {
    let show = |v: &Option<DriverVersion>| v.as_ref().map_or_else(|| "-".to_string(), |v| v.to_string());
    let mut changes = Vec::new();
    let mut r = rec.clone();
    if rec.latest_version.as_ref().is_none_or(|l| seen.latest > *l) {
        changes.push(Change {
            field: "latest_version".into(),
            curated: show(&rec.latest_version),
            upstream: seen.latest.to_string(),
        });
        r.latest_version = Some(seen.latest.clone());
    }
    if rec.first_version.is_none() {
        changes.push(Change {
            field: "first_version".into(),
            curated: "-".into(),
            upstream: seen.first.to_string(),
        });
        r.first_version = Some(seen.first.clone());
        // The lowest folder may be a beta: the first release is for a curator to confirm.
        if !r.unverified.iter().any(|k| k == "first_version") {
            r.unverified.push("first_version".into());
        }
    }
    if changes.is_empty() {
        return Ok(None);
    }
    if !r.sources.iter().any(|s| s.url == index) {
        r.sources.push(index_source(index, seen, rec.branch));
    }
    let file = format!("driver/r{}.toml", rec.branch);
    let header = super::refresh::changes_header(
        "Changes proposed by `gpuenv db refresh`: NVIDIA's driver index lists releases compat-db lacks",
        &changes,
        "The notes still speak of the old values: revise them with the change.",
    );
    Ok(Some(Proposal {
        text: record_toml(&r, &file, &header)?,
        file,
        kind: "driver",
        new: false,
        pending: Vec::new(),
        changes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> DriverVersion {
        s.parse().unwrap()
    }

    #[test]
    fn folder_names_that_are_versions() {
        assert_eq!(folder_version("580.95.05/"), Some(v("580.95.05")));
        assert_eq!(folder_version("./580.142/"), Some(v("580.142")));
        assert_eq!(folder_version("96.43.23/"), Some(v("96.43.23")));
        for other in [
            "580.95.05",
            "../",
            "/XFree86/",
            "?C=M;O=A",
            "latest.txt",
            "1.0-7184/",
            "580/",
            "580.95.05.1/",
            "580..05/",
            ".580.95/",
            "580.95./",
            "580.9500/",
            "58000.95/",
            "580.95.05a/",
            "580.95.05 /",
            "５80.95/",
            "/",
            "",
            "https://download.nvidia.com/XFree86/Linux-x86_64/580.95.05/",
        ] {
            assert_eq!(folder_version(other), None, "{other}");
        }
        let huge = format!("{}/", "9".repeat(1 << 20));
        assert_eq!(folder_version(&huge), None);
    }

    /// An Apache-style listing: the name link and the parent, sort links and a file among
    /// the folders; grouped by branch with the first and latest of each.
    #[test]
    fn an_index_groups_releases_by_branch() {
        let html = r#"<html><body><h1>Index of /XFree86/Linux-x86_64</h1><table>
<tr><th><a href="?C=N;O=D">Name</a></th><th><a href="?C=M;O=A">Last modified</a></th></tr>
<tr><td><a href="/XFree86/">Parent Directory</a></td></tr>
<tr><td><a href="1.0-7184/">1.0-7184/</a></td><td>2005-04-27 12:00</td></tr>
<tr><td><a href="575.51.02/">575.51.02/</a></td></tr>
<tr><td><a HREF='580.65.06/'>580.65.06/</a></td></tr>
<tr><td><a href="580.142/">580.142/</a></td></tr>
<tr><td><a href="580.95.05/">580.95.05/</a></td></tr>
<tr><td><a href="580.95.05/">again</a></td></tr>
<tr><td><a href="latest.txt">latest.txt</a></td></tr>
</table></body></html>"#;
        let l = parse_index(html);
        assert_eq!(l.releases, 4);
        assert_eq!(l.ignored, 5);
        let r580 = &l.branches[&580];
        assert_eq!(
            (r580.first.as_str(), r580.latest.as_str(), r580.count),
            ("580.65.06", "580.142", 3)
        );
        assert_eq!(l.branches[&575].count, 1);
    }

    #[test]
    fn latest_txt_names_its_first_word() {
        assert_eq!(
            parse_latest("580.95.05 580.95.05/NVIDIA-Linux-x86_64-580.95.05.run\n"),
            Some(v("580.95.05"))
        );
        assert_eq!(parse_latest(""), None);
        assert_eq!(parse_latest("<html>not found</html>"), None);
    }

    /// Hostile listings: ten thousand entries, huge names, unclosed quotes, multi-byte text
    /// around the attribute; bounded, and no panic.
    #[test]
    fn hostile_indexes_are_read_within_bounds() {
        let mut html = String::new();
        for i in 0..10_000 {
            html.push_str(&format!(
                "<a href=\"{}.{}.{:02}/\">x</a>\n",
                400 + i / 100,
                i % 100,
                i % 7
            ));
        }
        let l = parse_index(&html);
        assert_eq!(l.releases, 10_000);
        assert_eq!(l.branches.len(), 100);
        assert_eq!(l.ignored, 0);

        let mut many = String::new();
        for _ in 0..(MAX_INDEX_ENTRIES + 5) {
            many.push_str("<a href='x'>");
        }
        let l = parse_index(&many);
        assert_eq!((l.releases, l.ignored), (0, MAX_INDEX_ENTRIES + 5));

        let huge = format!("<a href=\"{}/\">", "1".repeat(4 << 20));
        assert_eq!(parse_index(&huge).releases, 0);
        for odd in [
            "href=",
            "href=\"",
            "href=\"580.95.05/",
            "HrEf=é\"580.95.05/\"",
            "href=\u{fffd}'580.95.05/'",
            "é€href=\"580.95.05/\"é",
            "\u{0}href='580.1/'",
        ] {
            let l = parse_index(odd);
            assert!(l.releases <= 1, "{odd}");
        }
        assert_eq!(parse_index("é€href=\"580.95.05/\"é").releases, 1);
    }
}
