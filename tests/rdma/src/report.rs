// SPDX-License-Identifier: GPL-2.0
//! Test results, per-MTU word summaries and the exit code.

use crate::config::PathMtu;
use crate::pattern::WordStats;
use crate::vram::StatsDelta;

/// What a [`TestResult`] tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaseKind {
    /// Allocating buffers, opening the device, registering memory,
    /// creating and connecting QPs. A failure is a setup error.
    Setup,
    /// RDMA WRITE to the target, then RDMA READ back.
    WriteRead,
    /// SEND/RECV with the target as receive buffer or as send source.
    SendRecv,
    /// RDMA WRITE with immediate into the target.
    WriteImm,
    /// Atomic fetch-and-add or compare-and-swap on the target.
    Atomic,
    /// VRAM mode: what the RDMA operations of the case before did with the
    /// target pages in VRAM.
    Vram,
    /// One measurement of the benchmark ([`crate::bench`]): fails if it
    /// could not be measured, read back wrong data, or rvram's counters
    /// show pages moving where they must not (or not where they must);
    /// never on a time.
    Bench,
    /// Invalidation and bad input: parts of a registered ODP target
    /// remapped or unmapped.
    Invalidation,
}

/// Wrong and checked 32-bit words of a WRITE/READ case.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteReadWords {
    /// Target words after the WRITE, as seen by the CPU.
    pub write: WordStats,
    /// Words read back by the READ.
    pub read: WordStats,
}

impl WriteReadWords {
    /// Both together.
    pub fn total(&self) -> WordStats {
        let mut sum = self.write;
        sum += self.read;
        sum
    }
}

/// The outcome of one test case: one TAP line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResult {
    /// TAP description, e.g. `mtu 1024: write+read offset 1 length 1000`.
    pub name: String,
    /// What kind of case this was.
    pub kind: CaseKind,
    /// The path MTU it ran at, if it got as far as choosing one.
    pub mtu: Option<PathMtu>,
    /// Whether it passed.
    pub passed: bool,
    /// Diagnostic lines: why it failed, or notes about a pass.
    pub diagnostics: Vec<String>,
    /// Word counts, for [`CaseKind::WriteRead`] cases.
    pub words: Option<WriteReadWords>,
    /// rvram's counter changes over the RDMA operations of a case, for
    /// [`CaseKind::Vram`] results that measured them.
    pub vram: Option<StatsDelta>,
}

impl TestResult {
    /// The result of an invalidation or unbind step: passed with its notes
    /// as diagnostics, or failed with the reason.
    pub fn invalidation(
        name: impl Into<String>,
        mtu: PathMtu,
        outcome: Result<Vec<String>, String>,
    ) -> Self {
        let (passed, diagnostics) = match outcome {
            Ok(notes) => (true, notes),
            Err(why) => (false, vec![why]),
        };
        Self {
            name: name.into(),
            kind: CaseKind::Invalidation,
            mtu: Some(mtu),
            passed,
            diagnostics,
            words: None,
            vram: None,
        }
    }

    /// A failed setup step.
    pub fn setup_failure(
        name: impl Into<String>,
        mtu: Option<PathMtu>,
        why: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            kind: CaseKind::Setup,
            mtu,
            passed: false,
            diagnostics: vec![why.into()],
            words: None,
            vram: None,
        }
    }
}

/// The per-MTU summary of all WRITE/READ cases, and of VRAM mode.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MtuSummary {
    /// Number of WRITE/READ cases.
    pub cases: usize,
    /// Their words.
    pub words: WriteReadWords,
    /// Number of cases with measured VRAM counters.
    pub vram_cases: usize,
    /// Sum of their counter changes.
    pub vram: StatsDelta,
}

impl MtuSummary {
    /// Sums the WRITE/READ cases of `results` that ran at `mtu`.
    pub fn of(results: &[TestResult], mtu: PathMtu) -> Self {
        let mut sum = Self::default();
        for words in results
            .iter()
            .filter(|r| r.mtu == Some(mtu))
            .filter_map(|r| r.words)
        {
            sum.cases += 1;
            sum.words.write += words.write;
            sum.words.read += words.read;
        }
        for delta in results
            .iter()
            .filter(|r| r.mtu == Some(mtu))
            .filter_map(|r| r.vram)
        {
            sum.vram_cases += 1;
            sum.vram += delta;
        }
        sum
    }

    /// The summary as a TAP comment line (without the `# `), e.g.
    /// `mtu 1024: wrong words 0 of 123 (write 0 of 60, read 0 of 63; 42 cases)`.
    pub fn line(&self, mtu: PathMtu) -> String {
        format!(
            "mtu {mtu}: wrong words {} (write {}, read {}; {} write/read cases)",
            self.words.total(),
            self.words.write,
            self.words.read,
            self.cases
        )
    }

    /// The VRAM mode summary as a TAP comment line (without the `# `),
    /// e.g. `vram mtu 1024: migrated_to_ram +0, alias_grants +87 over 62
    /// cases`.
    pub fn vram_line(&self, mtu: PathMtu) -> String {
        format!(
            "vram mtu {mtu}: {} over {} cases",
            self.vram, self.vram_cases
        )
    }
}

/// The process exit code for `results`: 2 if a setup step failed, 1 if a
/// case failed, 0 if all passed.
pub fn exit_code(results: &[TestResult]) -> u8 {
    if results
        .iter()
        .any(|r| !r.passed && r.kind == CaseKind::Setup)
    {
        2
    } else if results.iter().any(|r| !r.passed) {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(mtu: PathMtu, passed: bool, wrong: u64, total: u64) -> TestResult {
        let stats = WordStats { wrong, total };
        TestResult {
            name: "x".into(),
            kind: CaseKind::WriteRead,
            mtu: Some(mtu),
            passed,
            diagnostics: Vec::new(),
            words: Some(WriteReadWords {
                write: stats,
                read: stats,
            }),
            vram: None,
        }
    }

    #[test]
    fn summary_sums_one_mtu() {
        let results = vec![
            case(PathMtu::Mtu1024, false, 3, 4),
            case(PathMtu::Mtu1024, true, 0, 10),
            case(PathMtu::Mtu4096, true, 0, 100),
            TestResult::setup_failure("s", Some(PathMtu::Mtu1024), "no"),
        ];
        let s = MtuSummary::of(&results, PathMtu::Mtu1024);
        assert_eq!(s.cases, 2);
        assert_eq!(
            s.words.total(),
            WordStats {
                wrong: 6,
                total: 28
            }
        );
        assert_eq!(
            s.line(PathMtu::Mtu1024),
            "mtu 1024: wrong words 6 of 28 (write 3 of 14, read 3 of 14; 2 write/read cases)"
        );
        assert_eq!(
            MtuSummary::of(&results, PathMtu::Mtu256),
            MtuSummary::default()
        );
    }

    #[test]
    fn vram_summary() {
        let vram = |mtu, ram, grants| TestResult {
            name: "v".into(),
            kind: CaseKind::Vram,
            mtu: Some(mtu),
            passed: true,
            diagnostics: Vec::new(),
            words: None,
            vram: Some(StatsDelta {
                migrated_to_ram: ram,
                alias_grants: grants,
                ..StatsDelta::default()
            }),
        };
        let results = vec![
            case(PathMtu::Mtu1024, true, 0, 4),
            vram(PathMtu::Mtu1024, 0, 3),
            vram(PathMtu::Mtu1024, 2, 5),
            vram(PathMtu::Mtu4096, 7, 0),
        ];
        let s = MtuSummary::of(&results, PathMtu::Mtu1024);
        assert_eq!(s.cases, 1);
        assert_eq!(s.vram_cases, 2);
        assert_eq!(
            s.vram_line(PathMtu::Mtu1024),
            "vram mtu 1024: migrated_to_ram +2, alias_grants +8 over 2 cases"
        );
    }

    #[test]
    fn exit_codes() {
        let pass = case(PathMtu::Mtu1024, true, 0, 1);
        let fail = case(PathMtu::Mtu1024, false, 1, 1);
        let setup = TestResult::setup_failure("s", None, "no");
        assert_eq!(exit_code(&[]), 0);
        assert_eq!(exit_code(std::slice::from_ref(&pass)), 0);
        assert_eq!(exit_code(&[pass.clone(), fail.clone()]), 1);
        assert_eq!(exit_code(&[fail, setup, pass]), 2);
    }
}
