// SPDX-License-Identifier: GPL-2.0
//! Work requests, their completions and what the suite expects of them.

use super::*;

/// A remote address and key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// Remote key of the MR.
    pub rkey: u32,
    /// Virtual address in the MR.
    pub addr: u64,
}

/// A send-queue operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND of the local buffer.
    Send,
    /// RDMA WRITE of the local buffer to the remote address.
    Write(Remote),
    /// RDMA WRITE with immediate data.
    WriteImm(Remote, u32),
    /// RDMA READ from the remote address into the local buffer.
    Read(Remote),
    /// Atomic fetch-and-add of the value; the old value lands locally.
    FetchAdd(Remote, u64),
    /// Atomic compare-and-swap: if the remote word equals `compare` it
    /// becomes `swap`; the old value lands locally.
    CompareSwap {
        /// Where.
        remote: Remote,
        /// Expected old value.
        compare: u64,
        /// New value.
        swap: u64,
    },
}

impl SendOp {
    /// Short name for diagnostics.
    pub fn name(&self) -> &'static str {
        match self {
            SendOp::Send => "SEND",
            SendOp::Write(_) => "RDMA WRITE",
            SendOp::WriteImm(..) => "RDMA WRITE with immediate",
            SendOp::Read(_) => "RDMA READ",
            SendOp::FetchAdd(..) => "atomic fetch-and-add",
            SendOp::CompareSwap { .. } => "atomic compare-and-swap",
        }
    }

    /// The opcode of its send completion.
    pub fn completion_opcode(&self) -> WorkCompletionOperationType {
        match self {
            SendOp::Send => WorkCompletionOperationType::Send,
            SendOp::Write(_) | SendOp::WriteImm(..) => WorkCompletionOperationType::Write,
            SendOp::Read(_) => WorkCompletionOperationType::Read,
            SendOp::FetchAdd(..) => WorkCompletionOperationType::FetchAndAdd,
            SendOp::CompareSwap { .. } => WorkCompletionOperationType::CompareAndSwap,
        }
    }
}

/// One of the two QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The requester.
    A,
    /// The responder.
    B,
}

/// A QP's send or receive queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// Send queue completions.
    Send,
    /// Receive queue completions.
    Recv,
}

/// A completion as polled, copied out of the CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// Work request id.
    pub wr_id: u64,
    /// `ibv_wc_status`.
    pub status: u32,
    /// Vendor error syndrome.
    pub vendor_err: u32,
    /// `ibv_wc_opcode`, valid on success only.
    pub opcode: Option<u32>,
    /// Received length, valid for successful receive completions.
    pub byte_len: u32,
    /// Immediate data of a successful RECV_RDMA_WITH_IMM completion.
    pub imm_data: Option<u32>,
}

/// What a completion must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// Operation name for diagnostics.
    pub op: &'static str,
    /// Work request id.
    pub wr_id: u64,
    /// Completion opcode.
    pub opcode: WorkCompletionOperationType,
    /// Received length, for receive completions.
    pub byte_len: Option<u32>,
}

impl Expected {
    /// Checks a completion: success status first, then id, opcode, length.
    pub fn check(&self, c: Completion) -> Result<Completion, OpError> {
        if c.status != 0 {
            return Err(OpError::Status {
                op: self.op,
                wr_id: c.wr_id,
                status: c.status,
                vendor_err: c.vendor_err,
            });
        }
        let mut wrong = Vec::new();
        if c.wr_id != self.wr_id {
            wrong.push(format!("wr_id {:#x}, want {:#x}", c.wr_id, self.wr_id));
        }
        let want = self.opcode as u32;
        if c.opcode != Some(want) {
            wrong.push(format!(
                "opcode {:?}, want {want} ({:?})",
                c.opcode, self.opcode
            ));
        }
        if let Some(len) = self.byte_len.filter(|&len| len != c.byte_len) {
            wrong.push(format!("byte_len {}, want {len}", c.byte_len));
        }
        if wrong.is_empty() {
            Ok(c)
        } else {
            Err(OpError::Unexpected {
                op: self.op,
                detail: wrong.join(", "),
            })
        }
    }
}

/// Why a work request did not complete as it should. Any of these leaves
/// the QPs in an unknown state: the suite reconnects them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpError {
    /// A bad buffer range: a bug in the suite, not in the kernel.
    Invalid(String),
    /// Posting failed.
    Post {
        /// Operation.
        op: &'static str,
        /// Error text.
        msg: String,
    },
    /// Polling the CQ failed.
    Poll {
        /// Operation.
        op: &'static str,
        /// Error text.
        msg: String,
    },
    /// No completion within the timeout.
    Timeout {
        /// Operation.
        op: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// The completion has an error status.
    Status {
        /// Operation.
        op: &'static str,
        /// Its wr_id.
        wr_id: u64,
        /// `ibv_wc_status`.
        status: u32,
        /// Vendor syndrome.
        vendor_err: u32,
    },
    /// A successful completion that is not the expected one.
    Unexpected {
        /// Operation.
        op: &'static str,
        /// What differs.
        detail: String,
    },
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpError::Invalid(msg) => write!(f, "invalid request: {msg}"),
            OpError::Post { op, msg } => write!(f, "{op}: post failed: {msg}"),
            OpError::Poll { op, msg } => write!(f, "{op}: poll CQ failed: {msg}"),
            OpError::Timeout { op, after } => {
                write!(f, "{op}: no completion within {} s", after.as_secs_f64())
            }
            OpError::Status {
                op,
                wr_id,
                status,
                vendor_err,
            } => write!(
                f,
                "{op}: completion status {status} ({}), vendor_err {vendor_err:#x}, wr_id {wr_id:#x}",
                wc_status_name(*status)
            ),
            OpError::Unexpected { op, detail } => write!(f, "{op}: unexpected completion: {detail}"),
        }
    }
}

impl std::error::Error for OpError {}

/// libibverbs' name of an `ibv_wc_status` value.
pub fn wc_status_name(status: u32) -> &'static str {
    const NAMES: [&str; 24] = [
        "IBV_WC_SUCCESS",
        "IBV_WC_LOC_LEN_ERR",
        "IBV_WC_LOC_QP_OP_ERR",
        "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR",
        "IBV_WC_WR_FLUSH_ERR",
        "IBV_WC_MW_BIND_ERR",
        "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR",
        "IBV_WC_REM_INV_REQ_ERR",
        "IBV_WC_REM_ACCESS_ERR",
        "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR",
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "IBV_WC_LOC_RDD_VIOL_ERR",
        "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR",
        "IBV_WC_INV_EECN_ERR",
        "IBV_WC_INV_EEC_STATE_ERR",
        "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR",
        "IBV_WC_GENERAL_ERR",
        "IBV_WC_TM_ERR",
        "IBV_WC_TM_RNDV_INCOMPLETE",
    ];
    usize::try_from(status)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("unknown status")
}
