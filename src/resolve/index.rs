//! Lookups the rules make over and over, computed once per database: the thresholds of
//! each CUDA release line, the CUDA version each driver reports, the branch of a driver and
//! the first branch that drives each architecture.

use std::collections::HashMap;

use super::Catalog;
use super::rules::{BuildEntry, build_entries};
use crate::db::{CudaRelease, DriverBranch};
use crate::model::{Architecture, CudaVersion, DriverVersion};

/// The CUDA thresholds of one minor release line.
#[derive(Debug, Clone)]
pub(crate) struct CudaLine<'a> {
    pub version: CudaVersion,
    /// Native minimum: the lowest of the line's rows (its GA); updates do not raise the bar
    /// for applications built against the line.
    pub native: DriverVersion,
    /// The family's minor-version compatibility floor, where the line has one (11.1 on).
    pub floor: Option<DriverVersion>,
    /// The newest toolkit of the line (for nvcc).
    pub newest: &'a CudaRelease,
    /// The native minimum is not verified against a primary source.
    pub unverified_native: bool,
    /// Branches whose `cuda-compat` package for this line runs as host (`R535`).
    pub fc_branches: Vec<String>,
}

/// The database, indexed for the rules.
pub struct Index<'a> {
    pub(crate) cat: &'a dyn Catalog,
    lines: HashMap<(u32, u32), CudaLine<'a>>,
    /// (native minimum, line) sorted by minimum, for a driver's own CUDA version.
    by_native: Vec<(DriverVersion, CudaVersion)>,
    first_branch: HashMap<Architecture, &'a DriverBranch>,
    builds: Vec<BuildEntry<'a>>,
}

impl<'a> Index<'a> {
    /// Indexes a catalog.
    pub fn new(cat: &'a dyn Catalog) -> Index<'a> {
        let mut rows: HashMap<(u32, u32), Vec<(&'a CudaRelease, &'a DriverVersion)>> = HashMap::new();
        // A toolkit with pending facts (a proposal not yet curated) is unknown to the
        // rules: its line comes from the curated rows alone, and a line of only such rows
        // has no thresholds, so nothing is judged compatible on facts nobody has checked.
        for c in cat.cuda().iter().filter(|c| c.pending.is_empty()) {
            if let Some(native) = &c.min_driver_linux {
                rows.entry(c.version.major_minor()).or_default().push((c, native));
            }
        }
        let mut lines = HashMap::new();
        for (mm, rs) in rows {
            let (ga, native) = *rs.iter().min_by(|a, b| a.1.cmp(b.1)).expect("non-empty");
            let rs: Vec<&CudaRelease> = rs.iter().map(|(c, _)| *c).collect();
            let newest = rs
                .iter()
                .max_by(|a, b| a.version.cmp(&b.version))
                .expect("non-empty");
            // Minor-version compatibility exists from CUDA 11.1 on.
            let mvc = mm.0 > 11 || (mm.0 == 11 && mm.1 >= 1);
            let fc_branches = cat
                .drivers()
                .iter()
                .filter(|d| d.forward_compat.iter().any(|c| c.major_minor() == mm))
                .map(|d| format!("R{}", d.branch))
                .collect();
            lines.insert(
                mm,
                CudaLine {
                    version: CudaVersion::from_major_minor(mm.0, mm.1),
                    native: native.clone(),
                    floor: if mvc { ga.family_min_driver.clone() } else { None },
                    newest,
                    unverified_native: ga.unverified.iter().any(|u| u == "min_driver_linux"),
                    fc_branches,
                },
            );
        }
        let mut by_native: Vec<(DriverVersion, CudaVersion)> = lines
            .values()
            .map(|l| (l.native.clone(), l.version.clone()))
            .collect();
        by_native.sort();
        let mut first_branch = HashMap::new();
        for d in cat.drivers() {
            for a in &d.architectures {
                let e = first_branch.entry(*a).or_insert(d);
                if d.branch < e.branch {
                    *e = d;
                }
            }
        }
        Index {
            cat,
            lines,
            by_native,
            first_branch,
            builds: build_entries(cat.torch()),
        }
    }

    /// The line of a CUDA version (by major.minor).
    pub(crate) fn line(&self, v: &CudaVersion) -> Option<&CudaLine<'a>> {
        self.lines.get(&v.major_minor())
    }

    /// The CUDA version a driver reports (`cuDriverGetVersion`): the newest line whose
    /// native minimum it meets.
    pub(crate) fn driver_cuda(&self, d: &DriverVersion) -> Option<CudaVersion> {
        self.by_native
            .iter()
            .filter(|(n, _)| n <= d)
            .map(|(_, v)| v)
            .max()
            .cloned()
    }

    /// The branch record of a driver, or the nearest older one (the flag says exact).
    pub(crate) fn branch_of(&self, d: &DriverVersion) -> Option<(&'a DriverBranch, bool)> {
        let b = d.branch();
        let drivers = self.cat.drivers();
        if let Some(exact) = drivers.iter().find(|r| r.branch == b) {
            return Some((exact, true));
        }
        drivers
            .iter()
            .filter(|r| r.branch < b)
            .max_by_key(|r| r.branch)
            .map(|r| (r, false))
    }

    /// Every torch build, newest release first.
    pub(crate) fn builds(&self) -> &[BuildEntry<'a>] {
        &self.builds
    }

    /// The first branch that drives an architecture.
    pub(crate) fn first_branch(&self, a: Architecture) -> Option<&'a DriverBranch> {
        self.first_branch.get(&a).copied()
    }
}
