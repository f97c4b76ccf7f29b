// SPDX-License-Identifier: GPL-2.0
//! `rvram-rdma-test`: RDMA WRITE/READ, SEND/RECV and atomics against an
//! on-demand-paging MR over an anonymous mapping; TAP 13 on stdout. With
//! `--vram`, the mapping is moved into an rvram GPU's VRAM before each
//! case's RDMA operations; with `--bench`, what P2P aliases save against
//! migration is measured too (`rvram_rdma_test::bench`).
//!
//! Exit code: 0 if every case passed, 1 if a case failed, 2 on a usage or
//! setup error. See `--help` for the options.

use std::io;
use std::process::ExitCode;

use rvram_rdma_test::bench::{run_bench, Emit};
use rvram_rdma_test::mmap::Mmap;
use rvram_rdma_test::tap::Tap;
use rvram_rdma_test::{
    config, exit_code, parse_args, run_invalidation, run_mtu, Command, MtuSummary, TestResult,
};

fn main() -> ExitCode {
    let cfg = match parse_args(std::env::args().skip(1)) {
        Ok(Command::Run(cfg)) => *cfg,
        Ok(Command::Help) => {
            print!("{}", config::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("rvram-rdma-test: {msg}\n\n{}", config::USAGE);
            return ExitCode::from(2);
        }
    };

    if cfg.demo {
        return match rvram_rdma_test::demo::run_demo(&cfg) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("rvram-rdma-test: demo: {err}");
                ExitCode::FAILURE
            }
        };
    }

    let mut tap = Tap::new(io::stdout().lock());
    tap.comment(&format!(
        "rvram-rdma-test {}: device {} port {} GID index {}, {} target MR, CPU check {}, timeout {} s",
        env!("CARGO_PKG_VERSION"),
        cfg.device,
        cfg.port,
        cfg.gid_index,
        if cfg.odp { "ODP" } else { "pinned" },
        if cfg.cpu_check { "on" } else { "off" },
        cfg.timeout.as_secs()
    ));
    if let Some(vram) = &cfg.vram {
        tap.comment(&format!(
            "VRAM mode: target migrated into {} before the RDMA operations of each case, expect {}",
            vram.device.display(),
            vram.expect
        ));
    }

    let mut results = Vec::new();
    let suite = !cfg.bench.as_ref().is_some_and(|b| b.only);
    if let (Some(ops), Some(vram)) = (cfg.fuzz, &cfg.vram) {
        let seed = cfg.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
        tap.comment(&format!("fuzz seed {seed} (--seed replays it)"));
        for r in rvram_rdma_test::fuzz::run_fuzz(&cfg, cfg.mtus[0], vram, ops, seed) {
            tap.result(&r);
            results.push(r);
        }
    } else if let (true, Some(vram)) = (cfg.dmabuf, &cfg.vram) {
        for r in rvram_rdma_test::dmabuf::run_dmabuf(&cfg, &vram.device, cfg.unbind.as_deref()) {
            tap.result(&r);
            results.push(r);
        }
    } else if let (Some(gpu), Some(vram)) = (&cfg.unbind, &cfg.vram) {
        let mtu = cfg.mtus[0];
        for r in rvram_rdma_test::unbind::run_unbind(&cfg, mtu, vram, gpu) {
            tap.result(&r);
            results.push(r);
        }
    } else if cfg.advise {
        for r in rvram_rdma_test::prefetch::run_advise(&cfg) {
            tap.result(&r);
            results.push(r);
        }
    } else if suite {
        match Mmap::anonymous(cfg.size) {
            Ok(mut target) => {
                for &mtu in &cfg.mtus {
                    let mtu_results =
                        run_mtu(&cfg, mtu, target.as_mut_slice(), &mut |r| tap.result(r));
                    let summary = MtuSummary::of(&mtu_results, mtu);
                    tap.comment(&summary.line(mtu));
                    if cfg.vram.is_some() {
                        tap.comment(&summary.vram_line(mtu));
                    }
                    results.extend(mtu_results);
                    for r in run_invalidation(&cfg, mtu) {
                        tap.result(&r);
                        results.push(r);
                    }
                }
            }
            Err(err) => {
                let result = TestResult::setup_failure(
                    "allocate target buffer",
                    None,
                    format!("mmap of {} bytes: {err}", cfg.size),
                );
                tap.result(&result);
                results.push(result);
            }
        }
    }

    if let Some(bench) = &cfg.bench {
        let (report, bench_results) = run_bench(&cfg, &mut |emit| match emit {
            Emit::Result(r) => tap.result(r),
            Emit::Comment(line) => tap.comment(line),
        });
        results.extend(bench_results);
        if let Some(path) = &bench.out {
            if let Err(err) = std::fs::write(path, report.markdown()) {
                let result = TestResult::setup_failure(
                    format!("bench: write {}", path.display()),
                    None,
                    err.to_string(),
                );
                tap.result(&result);
                results.push(result);
            }
        }
    }

    let code = exit_code(&results);
    match tap.finish() {
        Ok(_) => ExitCode::from(code),
        Err(err) => {
            eprintln!("rvram-rdma-test: writing TAP output: {err}");
            ExitCode::from(2)
        }
    }
}
