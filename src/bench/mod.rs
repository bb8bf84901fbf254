//! `gpuenv bench`: figures measured on the delivered machine, judged against the GPU's
//! datasheet and against the machine's own peers.
//!
//! Owns: what a measurement is ([`Figure`]) and the results document ([`BenchDoc`]);
//! reading the outputs of the engines people trust (DCGM, nccl-tests, nvbandwidth, fio,
//! perftest's `ib_write_bw`);
//! gpuenv's own measurements of the host (disk, memory, network, downloads) and of the GPUs
//! (an embedded Python script whose arithmetic is done here); the burn-in; judging each
//! figure. Must not: print (that is `report`), or decide stack compatibility.

pub mod burn;
pub mod engines;
pub mod figure;
pub mod gpu;
pub mod gpus;
pub mod host;
pub mod judge;
pub mod run;

pub use figure::{BenchDoc, Engine, EngineFailure, Figure, Metric};
pub use judge::{Judged, Judgement, Outlier, PcieLink, Verdict, judge, links_from_host, outliers_across};

/// Whether a judged bench found something wrong: a figure below its datasheet range, a
/// GPU or node below its peers, a failure an engine reported, or a failed burn-in.
pub fn has_findings(m: &crate::judge::Measured) -> bool {
    findings_in(&m.figures, &m.outliers, &m.failures, m.burn.as_ref())
}

/// [`has_findings`] on the parts: what a node printed, read back.
pub fn findings_in(
    figures: &[Judged],
    outliers: &[Outlier],
    failures: &[EngineFailure],
    burn: Option<&burn::BurnResult>,
) -> bool {
    figures.iter().any(|j| j.verdict == Verdict::Fail)
        || !outliers.is_empty()
        || !failures.is_empty()
        || burn.is_some_and(|b| b.verdict == burn::Verdict::Fail)
}
