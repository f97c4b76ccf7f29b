// SPDX-License-Identifier: GPL-2.0
//! A thin layer over sideway: one device and PD, registered buffers, and a
//! pair of RC QPs connected to each other, posting one work request at a
//! time and waiting for its completion with a timeout.
//!
//! QP A is the requester of RDMA WRITE, READ and atomics; QP B is its peer.
//! Each QP has its own send and receive CQ, so a completion can only turn up
//! where it is expected.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{
    CreateCompletionQueueWorkCompletionFlags, ExtendedCompletionQueue, PollCompletionQueueError,
    WorkCompletionOperationType,
};
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, PortState};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    ExtendedQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState, QueuePairType,
    SendOperationFlags, SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

use crate::advise;
use crate::config::{Config, PathMtu};
use crate::error::{Context, Error};

mod wr;

pub use wr::{wc_status_name, Completion, Expected, OpError, Queue, Remote, SendOp, Side};

/// Work requests each queue can hold; the suite keeps at most two posted.
const QUEUE_DEPTH: u32 = 16;
/// Completions each CQ can hold.
const CQ_DEPTH: u32 = 32;
/// Initial PSN of QP A's send queue (and B's receive queue).
const PSN_A: u32 = 0x1a2b3;
/// Initial PSN of QP B's send queue (and A's receive queue).
const PSN_B: u32 = 0x4c5d6;
/// Largest number of outstanding RDMA READ / atomic requests to ask for.
const MAX_RD_ATOMIC: u8 = 16;

/// Every operation the suite posts.
const SEND_OPS: SendOperationFlags = SendOperationFlags::Send
    .or(SendOperationFlags::Write)
    .or(SendOperationFlags::WriteWithImmediate)
    .or(SendOperationFlags::Read)
    .or(SendOperationFlags::AtomicCompareAndSwap)
    .or(SendOperationFlags::AtomicFetchAndAdd);

/// Access the QPs grant to incoming requests.
const QP_ACCESS: AccessFlags = AccessFlags::LocalWrite
    .or(AccessFlags::RemoteWrite)
    .or(AccessFlags::RemoteRead)
    .or(AccessFlags::RemoteAtomic);

/// Access flags of the target MR: everything the suite does to it, plus
/// on-demand paging when `odp` is set.
pub fn target_access(odp: bool) -> AccessFlags {
    if odp {
        QP_ACCESS | AccessFlags::OnDemand
    } else {
        QP_ACCESS
    }
}

/// Access flags of the local source/sink MR.
pub fn local_access() -> AccessFlags {
    AccessFlags::LocalWrite
}

/// An open device with a protection domain, resolved port and GID.
pub struct Device {
    // Field order is drop order: the PD before the context it came from
    // (sideway also keeps the context alive through the PD).
    pd: Arc<ProtectionDomain>,
    ctx: Arc<DeviceContext>,
    port: u8,
    gid_index: u8,
    gid: Gid,
    max_rd_atomic: u8,
    info: Vec<String>,
}

impl Device {
    /// Opens `cfg.device`, checks its port is active and its GID set, and
    /// allocates a PD.
    pub fn open(cfg: &Config) -> Result<Self, Error> {
        let list = DeviceList::new().map_err(|err| {
            let what = if os_error(&err) == Some(libc::EOPNOTSUPP) {
                // sideway's libibverbs shim says EOPNOTSUPP when it cannot
                // load the real library.
                "list RDMA devices (is libibverbs.so.1 installed?)"
            } else {
                "list RDMA devices"
            };
            Error::caused(what, &err)
        })?;
        let names: Vec<String> = list.iter().map(|dev| dev.name()).collect();
        let dev = list
            .iter()
            .find(|dev| dev.name() == cfg.device)
            .ok_or_else(|| {
                Error::new(format!(
                    "RDMA device {} not found (devices: {})",
                    cfg.device,
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ))
            })?;
        let ctx = dev.open().context(&format!("open {}", cfg.device))?;
        let attr = ctx.query_device().context("query device")?;
        let port_attr = ctx
            .query_port(cfg.port)
            .context(&format!("query port {}", cfg.port))?;
        let state = port_attr.port_state();
        if state != PortState::Active {
            return Err(Error::new(format!(
                "port {} is {state:?}, not Active",
                cfg.port
            )));
        }
        let gid = ctx
            .query_gid(cfg.port, cfg.gid_index.into())
            .context(&format!("query GID {}", cfg.gid_index))?;
        if gid.is_zero() {
            return Err(Error::new(format!(
                "GID index {} of port {} is empty (no address on the netdev?)",
                cfg.gid_index, cfg.port
            )));
        }
        let gid_type = match ctx.query_gid_type(cfg.port, cfg.gid_index.into()) {
            Ok(1) => "RoCE v2",
            Ok(_) => "IB/RoCE v1",
            Err(_) => "unknown type",
        };
        let rd_atomic = attr.max_qp_rd_atom().min(attr.max_qp_init_rd_atom());
        let max_rd_atomic = u8::try_from(rd_atomic.clamp(1, MAX_RD_ATOMIC.into())).unwrap_or(1);
        let odp = &attr.attr.odp_caps;
        let info = vec![
            format!(
                "device {} port {} (active MTU {}), GID {} = {gid} ({gid_type})",
                cfg.device,
                cfg.port,
                mtu_bytes(port_attr.active_mtu()),
                cfg.gid_index
            ),
            odp_caps_text(odp.general_caps, odp.per_transport_caps.rc_odp_caps),
        ];
        let pd = ctx.alloc_pd().context("allocate PD")?;
        Ok(Self {
            pd,
            ctx,
            port: cfg.port,
            gid_index: cfg.gid_index,
            gid,
            max_rd_atomic,
            info,
        })
    }

    /// Notes about the device for the setup result's diagnostics.
    pub fn info(&self) -> &[String] {
        &self.info
    }

    /// The protection domain, for registrations made elsewhere
    /// ([`dmabuf`](crate::dmabuf)).
    pub(crate) fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    /// Registers `buf` as a memory region with `access`.
    pub fn register<'buf>(
        &self,
        buf: &'buf mut [u8],
        access: AccessFlags,
    ) -> Result<Region<'buf>, Error> {
        if buf.is_empty() {
            return Err(Error::new("cannot register an empty buffer"));
        }
        // SAFETY: `buf` is an exclusive borrow, valid for `buf.len()` bytes
        // for 'buf. The returned `Region` holds that borrow together with the
        // only handle to the MR, so the MR is deregistered (when the region
        // drops) before the memory can be freed or reused. The CPU touches
        // the memory only through the region, between work requests.
        let mr = unsafe { self.pd.reg_mr(buf.as_mut_ptr() as usize, buf.len(), access) }
            .context(&format!("register {} bytes with {access:?}", buf.len()))?;
        Ok(Region { buf, mr })
    }

    /// Prefetches all of `region`, an ODP MR registered on this device,
    /// for writing, and waits until it is mapped
    /// ([`advise`](crate::advise): `PREFETCH_WRITE` with `FLUSH`, in SGEs
    /// of 256 KiB). Returns the time the prefetch calls took: the device's
    /// fault path over the whole region.
    pub fn prefetch_write(&self, region: &Region<'_>) -> Result<Duration, String> {
        let mut sges = advise::prefetch_sges(region.addr(0), region.len(), region.mr.lkey())?;
        // SAFETY: `self.pd` keeps the PD allocated for the life of `self`,
        // which outlives this call.
        let pd = unsafe { self.pd.pd() }.cast::<c_void>();
        let start = Instant::now();
        // SAFETY: `pd` is live for the call; the SGEs name `region`'s MR,
        // which the caller registered on this device (the kernel looks the
        // lkey up in this PD and refuses others).
        unsafe { advise::prefetch_write(pd, &mut sges) }?;
        Ok(start.elapsed())
    }

    /// Sends one `advise_mr` command on this device's PD with `advice`,
    /// `flags` and `sges` as they are ([`advise::advise_mr`]): 0 if the
    /// kernel accepted it, else its errno.
    pub fn advise_mr(
        &self,
        advice: u32,
        flags: u32,
        sges: &mut [advise::IbvSge],
    ) -> Result<i32, String> {
        // SAFETY: `self.pd` keeps the PD allocated for the life of `self`,
        // which outlives this call.
        let pd = unsafe { self.pd.pd() }.cast::<c_void>();
        // SAFETY: `pd` is live for the call. The SGEs are only read by the
        // kernel, which looks each lkey up in this PD and checks it.
        unsafe { advise::advise_mr(pd, advice, flags, sges) }
    }

    /// Creates QPs A and B with their CQs and connects them to each other
    /// at `mtu`: INIT, RTR (remote QPN, GID, PSN, MTU), RTS.
    pub fn connect(&self, mtu: PathMtu) -> Result<Endpoints, Error> {
        let new_cq = || {
            self.ctx
                .create_cq_builder()
                .setup_cqe(CQ_DEPTH)
                // Only what `Endpoints::wait` reads besides the fields every
                // completion has; providers may refuse others.
                .setup_wc_flags(
                    CreateCompletionQueueWorkCompletionFlags::ByteLength
                        | CreateCompletionQueueWorkCompletionFlags::ImmediateData,
                )
                .build_ex()
                .context("create CQ")
        };
        let cqs = [new_cq()?, new_cq()?, new_cq()?, new_cq()?];
        let new_qp = |send: &Arc<ExtendedCompletionQueue>, recv: &Arc<ExtendedCompletionQueue>| {
            let mut builder = self.pd.create_qp_builder();
            builder
                .setup_qp_type(QueuePairType::ReliableConnection)
                .setup_max_send_wr(QUEUE_DEPTH)
                .setup_max_recv_wr(QUEUE_DEPTH)
                .setup_max_send_sge(1)
                .setup_max_recv_sge(1)
                .setup_max_inline_data(0)
                .setup_send_cq(Arc::clone(send))
                .setup_recv_cq(Arc::clone(recv))
                .setup_send_ops_flags(SEND_OPS);
            builder.build_ex().context("create RC QP")
        };
        let mut a = new_qp(&cqs[0], &cqs[1])?;
        let mut b = new_qp(&cqs[2], &cqs[3])?;
        let (qpn_a, qpn_b) = (a.qp_number(), b.qp_number());
        for qp in [&mut a, &mut b] {
            let mut attr = QueuePairAttribute::new();
            attr.setup_state(QueuePairState::Init)
                .setup_pkey_index(0)
                .setup_port(self.port)
                .setup_access_flags(QP_ACCESS);
            qp.modify(&attr).context("modify QP to INIT")?;
        }
        self.to_rtr(&mut a, qpn_b, PSN_B, mtu)?;
        self.to_rtr(&mut b, qpn_a, PSN_A, mtu)?;
        self.to_rts(&mut a, PSN_A)?;
        self.to_rts(&mut b, PSN_B)?;
        Ok(Endpoints { a, b, cqs })
    }

    fn to_rtr(
        &self,
        qp: &mut ExtendedQueuePair,
        remote_qpn: u32,
        remote_psn: u32,
        mtu: PathMtu,
    ) -> Result<(), Error> {
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(0)
            .setup_port(self.port)
            .setup_service_level(0)
            .setup_grh_src_gid_index(self.gid_index)
            .setup_grh_dest_gid(&self.gid)
            .setup_grh_hop_limit(64);
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(mtu.to_sideway())
            .setup_dest_qp_num(remote_qpn)
            .setup_rq_psn(remote_psn)
            .setup_max_dest_read_atomic(self.max_rd_atomic)
            .setup_min_rnr_timer(12)
            .setup_address_vector(&ah);
        qp.modify(&attr).context(&format!(
            "modify QP {:#x} to RTR (remote QP {remote_qpn:#x})",
            qp.qp_number()
        ))
    }

    fn to_rts(&self, qp: &mut ExtendedQueuePair, psn: u32) -> Result<(), Error> {
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(psn)
            // Local ACK timeout 4.096 us * 2^20 = 4.3 s. rxe retransmits a
            // request the responder has not answered in time, and the
            // responder executes a duplicate READ again, after the
            // requester may have moved on. With the 67 ms of timeout 14, a
            // debug kernel under TCG migrating the pages of a READ back
            // from VRAM was that slow dozens of times per run, and a late
            // duplicate READ then migrated the pages the next case had
            // just moved into VRAM back out of it.
            .setup_timeout(RC_ACK_TIMEOUT)
            .setup_retry_cnt(7)
            .setup_rnr_retry(7)
            .setup_max_read_atomic(self.max_rd_atomic);
        qp.modify(&attr)
            .context(&format!("modify QP {:#x} to RTS", qp.qp_number()))
    }
}

/// The RC local ACK timeout exponent QPs move to RTS with (4.3 s).
pub const RC_ACK_TIMEOUT: u8 = 20;

/// The errno of the first `io::Error` in `err`'s source chain.
fn os_error(err: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        cur = e.source();
    }
    None
}

/// Bytes of a sideway MTU value.
fn mtu_bytes(mtu: sideway::ibverbs::device_context::Mtu) -> usize {
    PathMtu::ALL
        .into_iter()
        .find(|m| m.to_sideway() == mtu)
        .map_or(0, PathMtu::bytes)
}

/// Describes the device's on-demand paging capabilities
/// (`ibv_odp_caps.general_caps` and `per_transport_caps.rc_odp_caps`).
pub fn odp_caps_text(general: u64, rc: u32) -> String {
    const GENERAL: [(u64, &str); 2] = [(1 << 0, "supported"), (1 << 1, "implicit")];
    const RC: [(u32, &str); 8] = [
        (1 << 0, "SEND"),
        (1 << 1, "RECV"),
        (1 << 2, "WRITE"),
        (1 << 3, "READ"),
        (1 << 4, "ATOMIC"),
        (1 << 5, "SRQ_RECV"),
        (1 << 6, "FLUSH"),
        (1 << 7, "ATOMIC_WRITE"),
    ];
    let general: Vec<&str> = GENERAL
        .iter()
        .filter(|(bit, _)| general & bit != 0)
        .map(|&(_, name)| name)
        .collect();
    let rc: Vec<&str> = RC
        .iter()
        .filter(|(bit, _)| rc & bit != 0)
        .map(|&(_, name)| name)
        .collect();
    format!(
        "ODP caps: {}; RC: {}",
        if general.is_empty() {
            "none".to_owned()
        } else {
            general.join(", ")
        },
        if rc.is_empty() {
            "none".to_owned()
        } else {
            rc.join(" ")
        }
    )
}

/// A registered buffer: the exclusive borrow of its memory and its MR.
pub struct Region<'buf> {
    // Field order is drop order: deregister before the borrow ends.
    mr: Arc<MemoryRegion>,
    buf: &'buf mut [u8],
}

impl Region<'_> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the region is empty (never: registration refuses that).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The memory, for the CPU. Only while no posted work request uses it.
    pub fn bytes(&self) -> &[u8] {
        self.buf
    }

    /// The memory, for the CPU, mutably. Only while no posted work request
    /// uses it.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.buf
    }

    /// Virtual address of byte `offset`.
    pub fn addr(&self, offset: usize) -> u64 {
        self.buf.as_ptr() as u64 + offset as u64
    }

    /// The MR's local key.
    pub fn lkey(&self) -> u32 {
        self.mr.lkey()
    }

    /// A scatter/gather entry for `len` bytes at `offset`.
    pub fn sge(&self, offset: usize, len: usize) -> Result<Sge<'_>, OpError> {
        let end = offset.checked_add(len).filter(|&end| end <= self.len());
        let len32 = u32::try_from(len).ok();
        match (end, len32) {
            (Some(_), Some(len)) => Ok(Sge {
                lkey: self.mr.lkey(),
                addr: self.addr(offset),
                len,
                _region: PhantomData,
            }),
            _ => Err(OpError::Invalid(format!(
                "{len} bytes at offset {offset} exceed the {}-byte region",
                self.len()
            ))),
        }
    }

    /// The remote address of `len` bytes at `offset`, for the peer QP.
    pub fn remote(&self, offset: usize, len: usize) -> Result<Remote, OpError> {
        if offset.checked_add(len).is_some_and(|end| end <= self.len()) {
            Ok(Remote {
                rkey: self.mr.rkey(),
                addr: self.addr(offset),
            })
        } else {
            Err(OpError::Invalid(format!(
                "remote range of {len} bytes at offset {offset} exceeds the {}-byte region",
                self.len()
            )))
        }
    }
}

/// A local buffer for one work request, inside a registered [`Region`].
#[derive(Debug, Clone, Copy)]
pub struct Sge<'r> {
    lkey: u32,
    addr: u64,
    len: u32,
    _region: PhantomData<&'r ()>,
}

impl Sge<'_> {
    /// An SGE of `len` bytes at `addr` of the MR `lkey`, for regions that
    /// are not [`Region`]s; the caller keeps the MR registered for `'r`
    /// and checked the range.
    pub(crate) fn raw(lkey: u32, addr: u64, len: u32) -> Self {
        Self {
            lkey,
            addr,
            len,
            _region: PhantomData,
        }
    }
}

/// QPs A and B, connected to each other, and their CQs.
pub struct Endpoints {
    // Field order is drop order: QPs before the CQs they use.
    a: ExtendedQueuePair,
    b: ExtendedQueuePair,
    /// A send, A recv, B send, B recv.
    cqs: [Arc<ExtendedCompletionQueue>; 4],
}

impl Endpoints {
    fn qp(&mut self, side: Side) -> &mut ExtendedQueuePair {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    fn cq(&self, side: Side, queue: Queue) -> &ExtendedCompletionQueue {
        let index = match (side, queue) {
            (Side::A, Queue::Send) => 0,
            (Side::A, Queue::Recv) => 1,
            (Side::B, Queue::Send) => 2,
            (Side::B, Queue::Recv) => 3,
        };
        &self.cqs[index]
    }

    /// QP numbers of A and B.
    pub fn qp_numbers(&self) -> (u32, u32) {
        (self.a.qp_number(), self.b.qp_number())
    }

    /// Posts one signaled send-queue work request on `side`'s QP with
    /// `sge` as its local buffer.
    pub fn post_send(
        &mut self,
        side: Side,
        wr_id: u64,
        op: SendOp,
        sge: Sge<'_>,
    ) -> Result<(), OpError> {
        let mut guard = self.qp(side).start_post_send();
        let wr = guard.construct_wr(wr_id, WorkRequestFlags::Signaled);
        let local = match op {
            SendOp::Send => wr.setup_send(),
            SendOp::Write(r) => wr.setup_write(r.rkey, r.addr),
            SendOp::WriteImm(r, imm) => wr.setup_write_imm(r.rkey, r.addr, imm),
            SendOp::Read(r) => wr.setup_read(r.rkey, r.addr),
            SendOp::FetchAdd(r, add) => wr.setup_atomic_fetch_add(r.rkey, r.addr, add),
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            } => wr.setup_atomic_compare_swap(remote.rkey, remote.addr, compare, swap),
        };
        // SAFETY: `Region::sge` made `sge` from a live registered region and
        // bounds-checked it, and its lifetime keeps that region alive here.
        // Callers wait for this work request's completion before touching or
        // releasing the buffer; when a wait fails they drop the QPs (which
        // flushes the request) before the region.
        unsafe { local.setup_sge(sge.lkey, sge.addr, sge.len) };
        guard.post().map_err(|err| OpError::Post {
            op: op.name(),
            msg: Error::caused("ibv_wr_complete", &err).to_string(),
        })
    }

    /// Posts one signaled `op` on `side`'s QP and waits up to `timeout`
    /// for its successful send completion.
    pub fn post_and_wait(
        &mut self,
        side: Side,
        wr_id: u64,
        op: SendOp,
        sge: Sge<'_>,
        timeout: Duration,
    ) -> Result<Completion, OpError> {
        self.post_send(side, wr_id, op, sge)?;
        let expected = Expected {
            op: op.name(),
            wr_id,
            opcode: op.completion_opcode(),
            byte_len: None,
        };
        self.wait(side, Queue::Send, &expected, timeout)
    }

    /// Posts one receive work request on `side`'s QP, into `sge` or, for
    /// RDMA WRITE with immediate, without a buffer.
    pub fn post_recv(
        &mut self,
        side: Side,
        wr_id: u64,
        sge: Option<Sge<'_>>,
    ) -> Result<(), OpError> {
        let mut guard = self.qp(side).start_post_recv();
        let wr = guard.construct_wr(wr_id);
        if let Some(sge) = sge {
            // SAFETY: as in `post_send`.
            unsafe { wr.setup_sge(sge.lkey, sge.addr, sge.len) };
        }
        guard.post().map_err(|err| OpError::Post {
            op: "RECV",
            msg: Error::caused("ibv_post_recv", &err).to_string(),
        })
    }

    /// Waits up to `timeout` for the next completion on `side`'s `queue`,
    /// and checks it is `expected`. Sleeps briefly between polls.
    pub fn wait(
        &self,
        side: Side,
        queue: Queue,
        expected: &Expected,
        timeout: Duration,
    ) -> Result<Completion, OpError> {
        self.wait_polling(side, queue, expected, timeout, false)
    }

    /// [`wait`](Self::wait), but polling without sleeping, for timing.
    pub fn wait_spin(
        &self,
        side: Side,
        queue: Queue,
        expected: &Expected,
        timeout: Duration,
    ) -> Result<Completion, OpError> {
        self.wait_polling(side, queue, expected, timeout, true)
    }

    fn wait_polling(
        &self,
        side: Side,
        queue: Queue,
        expected: &Expected,
        timeout: Duration,
        spin: bool,
    ) -> Result<Completion, OpError> {
        let cq = self.cq(side, queue);
        let deadline = Instant::now() + timeout;
        loop {
            match cq.start_poll() {
                Ok(mut poller) => {
                    if let Some(wc) = poller.next() {
                        let status = wc.status();
                        let ok = status == 0;
                        let opcode = ok.then(|| wc.opcode());
                        let with_imm = opcode
                            == Some(WorkCompletionOperationType::ReceiveWithImmediate as u32);
                        let completion = Completion {
                            wr_id: wc.wr_id(),
                            status,
                            vendor_err: wc.vendor_err(),
                            opcode,
                            byte_len: if ok { wc.byte_len() } else { 0 },
                            imm_data: with_imm.then(|| wc.imm_data()),
                        };
                        return expected.check(completion);
                    }
                }
                Err(PollCompletionQueueError::CompletionQueueEmpty) => {}
                Err(err) => {
                    return Err(OpError::Poll {
                        op: expected.op,
                        msg: Error::caused("ibv_start_poll", &err).to_string(),
                    })
                }
            }
            if Instant::now() >= deadline {
                return Err(OpError::Timeout {
                    op: expected.op,
                    after: timeout,
                });
            }
            if spin {
                std::hint::spin_loop();
            } else {
                thread::sleep(Duration::from_micros(20));
            }
        }
    }
}

#[cfg(test)]
mod tests;
