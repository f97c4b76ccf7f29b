// SPDX-License-Identifier: GPL-2.0

use super::*;

fn completion(status: u32, opcode: u32) -> Completion {
    Completion {
        wr_id: 7,
        status,
        vendor_err: 0x81,
        opcode: (status == 0).then_some(opcode),
        byte_len: 100,
        imm_data: None,
    }
}

#[test]
fn status_names() {
    assert_eq!(wc_status_name(0), "IBV_WC_SUCCESS");
    assert_eq!(wc_status_name(10), "IBV_WC_REM_ACCESS_ERR");
    assert_eq!(wc_status_name(12), "IBV_WC_RETRY_EXC_ERR");
    assert_eq!(wc_status_name(23), "IBV_WC_TM_RNDV_INCOMPLETE");
    assert_eq!(wc_status_name(24), "unknown status");
    assert_eq!(wc_status_name(u32::MAX), "unknown status");
}

#[test]
fn expected_completions() {
    let read = WorkCompletionOperationType::Read;
    let want = Expected {
        op: "RDMA READ",
        wr_id: 7,
        opcode: read,
        byte_len: None,
    };
    assert!(want.check(completion(0, read as u32)).is_ok());

    let err = want.check(completion(10, read as u32)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "RDMA READ: completion status 10 (IBV_WC_REM_ACCESS_ERR), vendor_err 0x81, wr_id 0x7"
    );

    let err = want
        .check(completion(0, WorkCompletionOperationType::Write as u32))
        .unwrap_err();
    assert!(matches!(err, OpError::Unexpected { .. }), "{err}");

    let recv = Expected {
        op: "RECV",
        wr_id: 7,
        opcode: WorkCompletionOperationType::Receive,
        byte_len: Some(99),
    };
    let err = recv
        .check(completion(0, WorkCompletionOperationType::Receive as u32))
        .unwrap_err();
    assert!(err.to_string().contains("byte_len 100, want 99"), "{err}");
}

#[test]
fn timeouts_read_well() {
    let err = OpError::Timeout {
        op: "SEND",
        after: Duration::from_secs(10),
    };
    assert_eq!(err.to_string(), "SEND: no completion within 10 s");
}

#[test]
fn odp_caps() {
    assert_eq!(odp_caps_text(0, 0), "ODP caps: none; RC: none");
    assert_eq!(
        odp_caps_text(1, 0x1f),
        "ODP caps: supported; RC: SEND RECV WRITE READ ATOMIC"
    );
}

#[test]
fn access_flags() {
    assert!(target_access(true).contains(AccessFlags::OnDemand));
    assert!(!target_access(false).contains(AccessFlags::OnDemand));
    assert!(target_access(false).contains(AccessFlags::RemoteAtomic | AccessFlags::LocalWrite));
    assert!(local_access().contains(AccessFlags::LocalWrite));
}

#[test]
fn send_ops_cover_every_operation() {
    for op in [
        SendOperationFlags::Send,
        SendOperationFlags::Write,
        SendOperationFlags::WriteWithImmediate,
        SendOperationFlags::Read,
        SendOperationFlags::AtomicCompareAndSwap,
        SendOperationFlags::AtomicFetchAndAdd,
    ] {
        assert!(SEND_OPS.contains(op));
    }
}
