// SPDX-License-Identifier: GPL-2.0
//! RDMA test suite for memory registered as an on-demand-paging MR.
//!
//! Two RC QPs of one device (Soft-RoCE `rxe0` in the rvram test guest) are
//! connected to each other in one process. QP A runs RDMA WRITE and READ,
//! SEND/RECV in both directions, RDMA WRITE with immediate, and atomics
//! against a *target* buffer registered with `IBV_ACCESS_ON_DEMAND`, at each
//! configured path MTU with fresh QPs. Every byte is checked at its exact
//! offset against a position- and case-dependent pattern, as are the bytes
//! around each range.
//!
//! The binary maps an anonymous target; other callers pass their own memory
//! to [`run_suite`] (or [`run_mtu`] per MTU) and print the results with
//! [`tap::Tap`].
//!
//! In VRAM mode ([`Config::vram`]) the target is migrated into an rvram
//! GPU's VRAM ([`vram`]) before the RDMA operations of each case, and an
//! extra result per case checks, from rvram's counters and a snapshot of
//! the target, whether rxe reached the pages through their P2P alias or
//! migrated them back to RAM. [`invalidate`] remaps and unmaps parts of a
//! registered target; [`unbind`] unbinds the GPU during RDMA traffic;
//! [`fuzz`] posts random and hostile operations while the memory moves.
//! [`bench`] counts what P2P aliases save against migration: the NIC's
//! fault path alone (a synchronous ODP prefetch, [`advise`]), the
//! NIC-then-GPU pipeline, a GPU peer, and bandwidth. [`prefetch`] checks
//! what `ibv_advise_mr()` accepts and refuses, on every kind of MR.

pub mod advise;
pub mod bench;
pub mod cases;
pub mod config;
pub mod demo;
pub mod dmabuf;
pub mod error;
pub mod fuzz;
pub mod invalidate;
pub mod mmap;
pub mod pattern;
pub mod prefetch;
pub mod report;
pub mod suite;
pub mod tap;
pub mod unbind;
pub mod verbs;
pub mod vram;

pub use config::{parse_args, Bench, Command, Config, Expect, Pages, PathMtu, VramMode};
pub use error::Error;
pub use invalidate::run_invalidation;
pub use report::{exit_code, CaseKind, MtuSummary, TestResult, WriteReadWords};
pub use suite::{run_mtu, run_suite, run_suite_with};
