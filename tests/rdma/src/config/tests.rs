// SPDX-License-Identifier: GPL-2.0

use super::*;

fn run(args: &[&str]) -> Config {
    match parse_args(args.iter().copied()) {
        Ok(Command::Run(cfg)) => *cfg,
        other => panic!("{args:?}: {other:?}"),
    }
}

#[test]
fn defaults() {
    let cfg = run(&[]);
    assert_eq!(cfg, Config::default());
    assert_eq!(cfg.device, "rxe0");
    assert_eq!(cfg.port, 1);
    assert_eq!(cfg.gid_index, 1);
    assert_eq!(cfg.mtus, [PathMtu::Mtu1024, PathMtu::Mtu4096]);
    assert_eq!(cfg.size, 4 << 20);
    assert!(cfg.odp);
    assert!(cfg.cpu_check);
    assert_eq!(cfg.timeout, Duration::from_secs(10));
}

#[test]
fn fuzz_needs_vram_and_ops() {
    assert_eq!(run(&[]).fuzz, None);
    let cfg = run(&["--vram", "/dev/rvram0", "--fuzz", "100", "--seed", "7"]);
    assert_eq!((cfg.fuzz, cfg.seed), (Some(100), Some(7)));
    assert_eq!(
        parse_args(["--fuzz", "100"]).err().as_deref(),
        Some("--fuzz needs --vram")
    );
    assert!(parse_args(["--vram", "/dev/rvram0", "--fuzz", "0"]).is_err());
    assert!(parse_args(["--vram", "/dev/rvram0", "--fuzz", "x"]).is_err());
}

#[test]
fn dmabuf_needs_vram() {
    assert!(!run(&[]).dmabuf);
    let cfg = run(&[
        "--vram",
        "/dev/rvram0",
        "--dmabuf",
        "--unbind",
        "0000:03:00.0",
    ]);
    assert!(cfg.dmabuf);
    assert_eq!(cfg.unbind.as_deref(), Some("0000:03:00.0"));
    assert_eq!(
        parse_args(["--dmabuf"]).err().as_deref(),
        Some("--dmabuf needs --vram")
    );
}

#[test]
fn advise_runs_alone() {
    assert!(!run(&[]).advise);
    let cfg = run(&["--advise", "--mtu", "1024"]);
    assert!(cfg.advise);
    assert_eq!(cfg.mtus, [PathMtu::Mtu1024]);
    assert_eq!(cfg.vram, None);
    assert!(parse_args(["--advise=1"]).is_err());
}

#[test]
fn unbind_needs_vram_and_an_address() {
    assert_eq!(run(&[]).unbind, None);
    let cfg = run(&["--vram", "/dev/rvram0", "--unbind", "0000:03:00.0"]);
    assert_eq!(cfg.unbind.as_deref(), Some("0000:03:00.0"));
    assert_eq!(
        parse_args(["--unbind", "0000:03:00.0"]).err().as_deref(),
        Some("--unbind needs --vram")
    );
    assert!(parse_args(["--vram", "/dev/rvram0", "--unbind", "../x"]).is_err());
    assert!(parse_args(["--vram", "/dev/rvram0", "--unbind", ""]).is_err());
    assert!(parse_args(["--vram", "/dev/rvram0", "--unbind"]).is_err());
}

#[test]
fn demo_needs_vram() {
    assert!(!run(&[]).demo);
    let cfg = run(&["--demo", "--vram", "/dev/rvram0"]);
    assert!(cfg.demo);
    assert_eq!(
        parse_args(["--demo"]).err().as_deref(),
        Some("--demo needs --vram")
    );
    assert!(parse_args(["--demo=1", "--vram", "/dev/rvram0"]).is_err());
}

#[test]
fn every_option() {
    let cfg = run(&[
        "--device",
        "mlx5_0",
        "--port=2",
        "--gid-index",
        "3",
        "--mtu",
        "4096",
        "--mtu=1024",
        "--mtu",
        "4096",
        "--size",
        "64K",
        "--no-odp",
        "--no-cpu-check",
        "--guard=128",
        "--timeout",
        "3",
    ]);
    assert_eq!(cfg.device, "mlx5_0");
    assert_eq!(cfg.port, 2);
    assert_eq!(cfg.gid_index, 3);
    assert_eq!(cfg.mtus, [PathMtu::Mtu4096, PathMtu::Mtu1024]);
    assert_eq!(cfg.size, 64 << 10);
    assert!(!cfg.odp);
    assert!(!cfg.cpu_check);
    assert_eq!(cfg.guard, 128);
    assert_eq!(cfg.timeout, Duration::from_secs(3));
}

#[test]
fn vram_options() {
    let cfg = run(&["--vram", "/dev/rvram0"]);
    assert_eq!(
        cfg.vram,
        Some(VramMode {
            device: "/dev/rvram0".into(),
            expect: Expect::Alias,
        })
    );
    assert_eq!(cfg.bench, None);
    let cfg = run(&["--expect=migrate", "--vram=/dev/rvram1", "--size", "64K"]);
    assert_eq!(
        cfg.vram,
        Some(VramMode {
            device: "/dev/rvram1".into(),
            expect: Expect::Migrate,
        })
    );
    assert_eq!(
        run(&["--vram", "/dev/rvram0", "--expect", "alias"])
            .vram
            .map(|v| v.expect),
        Some(Expect::Alias)
    );
    assert_eq!(Expect::Migrate.to_string().parse(), Ok(Expect::Migrate));
    assert_eq!(Expect::Alias.to_string().parse(), Ok(Expect::Alias));
    assert_eq!(Expect::Coherent.to_string().parse(), Ok(Expect::Coherent));
}

#[test]
fn bench_options() {
    let bench = |args: &[&str]| {
        let mut args = args.to_vec();
        args.extend(["--vram", "/dev/rvram0"]);
        run(&args).bench
    };
    assert_eq!(bench(&[]), None);
    let default = Bench::default();
    assert_eq!(default.sizes, [4 << 20, 64 << 20]);
    assert_eq!(default.pages, [Pages::Small, Pages::Huge]);
    assert_eq!(default.reps, 8);
    assert_eq!(bench(&["--bench"]), Some(Bench::default()));
    assert_eq!(
        bench(&["--bench-only"]),
        Some(Bench {
            only: true,
            ..Bench::default()
        })
    );
    assert_eq!(
        bench(&["--bench-out", "b.md"]),
        Some(Bench {
            out: Some("b.md".into()),
            ..Bench::default()
        })
    );
    assert_eq!(
        bench(&["--bench-out=b.md", "--bench-only", "--bench"]),
        Some(Bench {
            only: true,
            out: Some("b.md".into()),
            ..Bench::default()
        })
    );
    assert_eq!(
        bench(&[
            "--bench-sizes",
            "64M,512K,4M,4M",
            "--bench-pages=thp",
            "--bench-reps",
            "0",
            "--bench-rounds",
            "3",
            "--peer",
            "/dev/rvram1"
        ]),
        Some(Bench {
            sizes: vec![512 << 10, 4 << 20, 64 << 20],
            pages: vec![Pages::Huge],
            reps: 0,
            rounds: 3,
            peer: Some("/dev/rvram1".into()),
            ..Bench::default()
        })
    );
    assert_eq!(
        bench(&["--bench-pages", "thp,4k,thp"]).map(|b| b.pages),
        Some(vec![Pages::Huge, Pages::Small])
    );
    let cfg = run(&["--bench", "--vram", "/dev/rvram0", "--expect", "migrate"]);
    assert!(cfg.bench.is_some() && cfg.vram.is_some());
}

#[test]
fn bench_needs_vram_and_a_distinct_peer() {
    assert_eq!(
        parse_args(["--bench"]).err().as_deref(),
        Some("--bench needs --vram /dev/rvramN: the target is measured in its VRAM")
    );
    assert_eq!(
        parse_args(["--vram", "/dev/rvram0", "--peer", "/dev/rvram1"])
            .err()
            .as_deref(),
        Some("--peer needs --bench")
    );
    assert!(parse_args(["--bench", "--vram", "/dev/rvram0", "--peer", "/dev/rvram0"]).is_err());
}

#[test]
fn page_kinds() {
    for p in Pages::ALL {
        assert_eq!(p.to_string().parse::<Pages>(), Ok(p));
    }
    assert!("2m".parse::<Pages>().is_err());
}

#[test]
fn single_mtu() {
    assert_eq!(run(&["--mtu", "1024"]).mtus, [PathMtu::Mtu1024]);
}

#[test]
fn sizes() {
    assert_eq!(parse_size("--size", "8192"), Ok(8192));
    assert_eq!(parse_size("--size", "2m"), Ok(2 << 20));
    assert_eq!(parse_size("--size", "1G"), Ok(1 << 30));
    assert!(parse_size("--size", "M").is_err());
    assert!(parse_size("--size", "-1").is_err());
    assert!(parse_size("--size", &format!("{}G", usize::MAX)).is_err());
}

#[test]
fn help() {
    assert_eq!(parse_args(["--help"]), Ok(Command::Help));
    assert_eq!(parse_args(["--mtu", "1024", "-h"]), Ok(Command::Help));
}

#[test]
fn errors() {
    for args in [
        &["--mtu", "1000"][..],
        &["--mtu"],
        &["--port", "256"],
        &["--gid-index", "x"],
        &["--size", "100"],
        &["--timeout", "0"],
        &["--device="],
        &["--no-odp=1"],
        &["--bogus"],
        &["rxe0"],
        &["--expect", "alias"],
        &["--vram", "/dev/rvram0", "--expect", "both"],
        &["--vram", "/dev/rvram0", "--expect"],
        &["--vram"],
        &["--vram="],
        &["--vram", "/dev/rvram0", "--no-odp"],
        &["--vram", "/dev/rvram0", "--size", "5000"],
        &["--bench=1"],
        &["--bench-only=yes"],
        &["--bench-out"],
        &["--bench-out="],
        &["--vram", "/dev/rvram0", "--bench-sizes", "4097"],
        &["--vram", "/dev/rvram0", "--bench-sizes", "0"],
        &["--vram", "/dev/rvram0", "--bench-sizes", "2G"],
        &["--vram", "/dev/rvram0", "--bench-sizes", "4M,"],
        &["--vram", "/dev/rvram0", "--bench-pages", "2m"],
        &["--vram", "/dev/rvram0", "--bench-pages", ""],
        &["--vram", "/dev/rvram0", "--bench-reps", "-1"],
        &["--vram", "/dev/rvram0", "--bench-rounds", "0"],
        &["--vram", "/dev/rvram0", "--bench", "--peer="],
    ] {
        assert!(
            parse_args(args.iter().copied()).is_err(),
            "{args:?} accepted"
        );
    }
}

#[test]
fn mtu_round_trip() {
    for mtu in PathMtu::ALL {
        assert_eq!(mtu.to_string().parse::<PathMtu>(), Ok(mtu));
    }
}
