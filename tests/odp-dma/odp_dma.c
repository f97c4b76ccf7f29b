// SPDX-License-Identifier: GPL-2.0
/*
 * odp_dma: a test NIC whose ODP MRs work as a hardware NIC's do.
 *
 * rxe, the only RDMA device the guest has, touches memory with the CPU, so
 * it takes the virtual-DMA branch of IB core's ODP alias support. Every
 * hardware NIC takes the other one: IB core names its DMA device as the
 * HMM alias client, hmm_dma_map_pfn() maps what HMM reports (a P2P alias
 * becomes a PCI bus address, or an MMIO mapping through the host bridge),
 * and the device's DMA engine reads and writes that address.
 *
 * This driver is that other branch, on QEMU's edu device, whose DMA engine
 * copies up to 4 KiB between a bus address and a buffer of its own. Its
 * MRs are ib_umem_odp umems, handled as mlx5 handles them:
 *
 *  - a transfer faults its range with ib_umem_odp_map_dma_and_lock(), then
 *    builds its translation table with hmm_dma_map_pfn() and a
 *    pci_p2pdma_map_state, as populate_mtt() does;
 *  - the interval notifier zaps the table and calls
 *    ib_umem_odp_unmap_dma_pages() under umem_mutex, as
 *    mlx5_ib_invalidate_range() does;
 *  - the DMA engine moves the data while umem_mutex is held, so an
 *    invalidation waits for a transfer in flight, as mlx5 waits for its
 *    UMR to zap the MTT.
 *
 * The CPU never touches MR pages. User space drives it through a misc
 * device, /dev/odp_dmaN (odp_dma_uapi.h). The ib_device, whose DMA device
 * is the edu PCI function, is registered with IB core and reports ODP
 * support for RC READ and WRITE, so it shows in `rdma dev` and sysfs and
 * its umems hang off a live device, as a NIC's do. It has one port and no
 * data path of its own: PDs are empty objects, and CQs, QPs and MRs
 * through the verbs fail with -EOPNOTSUPP (there is no uverbs provider;
 * MRs are made through the misc device).
 *
 * Test-only: it lives in the rvram project's tests/, not in the series.
 */
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/hmm.h>
#include <linux/hmm-dma.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/ib_verbs.h>

#include "odp_dma_uapi.h"

#define EDU_IDENT		0x00
#define EDU_DMA_SRC		0x80
#define EDU_DMA_DST		0x88
#define EDU_DMA_CNT		0x90
#define EDU_DMA_CMD		0x98
#define EDU_DMA_RUN		BIT(0)
#define EDU_DMA_TO_PCI		BIT(1)	/* engine buffer -> bus address */
#define EDU_BUF			0x40000	/* the engine's buffer, as a DMA address */
#define EDU_BUF_SIZE		4096
/*
 * QEMU 7.2's edu aborts (hw_error) on a transfer that ends at the end of
 * its buffer, so the engine moves at most half of it at a time.
 */
#define EDU_XFER_MAX		(EDU_BUF_SIZE / 2)
/* The engine completes a transfer 100 ms (virtual time) after it starts. */
#define EDU_DMA_TIMEOUT_MS	5000

/* Low bits of a translation entry (entries are page aligned). */
#define XLT_VALID		BIT(0)
#define XLT_WRITE		BIT(1)

struct odp_dma_dev {
	struct ib_device ibdev;
	struct pci_dev *pdev;
	void __iomem *mmio;
	/* One transfer at a time owns the engine and the bounce page. */
	struct mutex engine;
	void *bounce;
	dma_addr_t bounce_dma;
	struct miscdevice misc;
	int nr;
	char name[16];
	/* Open files, so that remove() can release their MRs. */
	struct mutex files_lock;
	struct list_head files;
	bool dead;
	struct {
		atomic64_t faults, map_ram, map_bus, map_host_bridge, map_alias;
		atomic64_t invalidations, dma_ops, dma_bytes, revocations;
	} stats;
};

struct odp_dma_file {
	struct odp_dma_dev *dev;
	struct list_head node;
	/* Serialises MR creation and destruction against remove(). */
	struct mutex lock;
	struct xarray mrs;
};

struct odp_dma_mr {
	struct odp_dma_dev *dev;
	/* An ODP MR, or a dma-buf MR (its iovas are 0..len). */
	struct ib_umem_odp *odp;
	struct ib_umem_dmabuf *dmabuf;
	u64 len;
	/* dma-buf MRs: the exporter took the memory away (under its resv). */
	bool revoked;
	/* The device's translation table: a DMA address per page, or 0. */
	u64 *xlt;
	u8 *type;
};

static DEFINE_IDA(odp_dma_ida);

/* The verbs IB core insists on: a device without a data path of its own. */
struct odp_dma_pd {
	struct ib_pd ibpd;
};

struct odp_dma_cq {
	struct ib_cq ibcq;
};

struct odp_dma_qp {
	struct ib_qp ibqp;
};

static int odp_dma_query_device(struct ib_device *ibdev,
				struct ib_device_attr *attr,
				struct ib_udata *udata)
{
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->max_mr_size = U64_MAX;
	attr->page_size_cap = PAGE_SIZE | SZ_2M;
	attr->vendor_id = 0x1234;	/* QEMU */
	attr->max_mr = INT_MAX;
	attr->max_pd = INT_MAX;
	attr->odp_caps.general_caps = IB_ODP_SUPPORT;
	attr->odp_caps.per_transport_caps.rc_odp_caps =
		IB_ODP_SUPPORT_READ | IB_ODP_SUPPORT_WRITE;
	return 0;
}

static int odp_dma_query_port(struct ib_device *ibdev, u32 port,
			      struct ib_port_attr *attr)
{
	struct odp_dma_dev *d = container_of(ibdev, struct odp_dma_dev, ibdev);

	/* IB core zeroed *attr. */
	attr->state = READ_ONCE(d->dead) ? IB_PORT_DOWN : IB_PORT_ACTIVE;
	attr->phys_state = attr->state == IB_PORT_ACTIVE ?
		IB_PORT_PHYS_STATE_LINK_UP : IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = IB_MTU_4096;
	attr->active_width = IB_WIDTH_1X;
	attr->active_speed = IB_SPEED_SDR;
	attr->max_msg_sz = EDU_XFER_MAX;
	return 0;
}

static int odp_dma_get_port_immutable(struct ib_device *ibdev, u32 port,
				      struct ib_port_immutable *immutable)
{
	/* No protocol: no GID or P_Key tables, no MADs, no connection managers. */
	memset(immutable, 0, sizeof(*immutable));
	return 0;
}

static enum rdma_link_layer odp_dma_get_link_layer(struct ib_device *ibdev,
						   u32 port)
{
	return IB_LINK_LAYER_UNSPECIFIED;
}

static int odp_dma_alloc_pd(struct ib_pd *pd, struct ib_udata *udata)
{
	return 0;
}

static int odp_dma_dealloc_pd(struct ib_pd *pd, struct ib_udata *udata)
{
	return 0;
}

static int odp_dma_create_cq(struct ib_cq *cq, const struct ib_cq_init_attr *attr,
			     struct uverbs_attr_bundle *attrs)
{
	return -EOPNOTSUPP;
}

static int odp_dma_destroy_cq(struct ib_cq *cq, struct ib_udata *udata)
{
	return 0;
}

static int odp_dma_poll_cq(struct ib_cq *cq, int n, struct ib_wc *wc)
{
	return 0;
}

static int odp_dma_req_notify_cq(struct ib_cq *cq, enum ib_cq_notify_flags flags)
{
	return 0;
}

static int odp_dma_create_qp(struct ib_qp *qp, struct ib_qp_init_attr *attr,
			     struct ib_udata *udata)
{
	return -EOPNOTSUPP;
}

static int odp_dma_modify_qp(struct ib_qp *qp, struct ib_qp_attr *attr,
			     int mask, struct ib_udata *udata)
{
	return -EOPNOTSUPP;
}

static int odp_dma_destroy_qp(struct ib_qp *qp, struct ib_udata *udata)
{
	return 0;
}

static int odp_dma_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			     const struct ib_send_wr **bad_wr)
{
	*bad_wr = wr;
	return -EOPNOTSUPP;
}

static int odp_dma_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			     const struct ib_recv_wr **bad_wr)
{
	*bad_wr = wr;
	return -EOPNOTSUPP;
}

static struct ib_mr *odp_dma_get_dma_mr(struct ib_pd *pd, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static struct ib_mr *odp_dma_reg_user_mr(struct ib_pd *pd, u64 start, u64 len,
					 u64 iova, int access,
					 struct ib_dmah *dmah,
					 struct ib_udata *udata)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static int odp_dma_dereg_mr(struct ib_mr *mr, struct ib_udata *udata)
{
	return 0;
}

static const struct ib_device_ops odp_dma_ib_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,

	.query_device = odp_dma_query_device,
	.query_port = odp_dma_query_port,
	.get_port_immutable = odp_dma_get_port_immutable,
	.get_link_layer = odp_dma_get_link_layer,
	.alloc_pd = odp_dma_alloc_pd,
	.dealloc_pd = odp_dma_dealloc_pd,
	.create_cq = odp_dma_create_cq,
	.destroy_cq = odp_dma_destroy_cq,
	.poll_cq = odp_dma_poll_cq,
	.req_notify_cq = odp_dma_req_notify_cq,
	.create_qp = odp_dma_create_qp,
	.modify_qp = odp_dma_modify_qp,
	.destroy_qp = odp_dma_destroy_qp,
	.post_send = odp_dma_post_send,
	.post_recv = odp_dma_post_recv,
	.get_dma_mr = odp_dma_get_dma_mr,
	.reg_user_mr = odp_dma_reg_user_mr,
	.dereg_mr = odp_dma_dereg_mr,

	INIT_RDMA_OBJ_SIZE(ib_pd, odp_dma_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_cq, odp_dma_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_qp, odp_dma_qp, ibqp),
};

static int edu_dma(struct odp_dma_dev *d, u64 src, u64 dst, u32 len,
		   bool to_pci)
{
	unsigned long timeout = jiffies + msecs_to_jiffies(EDU_DMA_TIMEOUT_MS);

	lockdep_assert_held(&d->engine);
	writeq(src, d->mmio + EDU_DMA_SRC);
	writeq(dst, d->mmio + EDU_DMA_DST);
	writeq(len, d->mmio + EDU_DMA_CNT);
	writeq(EDU_DMA_RUN | (to_pci ? EDU_DMA_TO_PCI : 0),
	       d->mmio + EDU_DMA_CMD);
	while (readq(d->mmio + EDU_DMA_CMD) & EDU_DMA_RUN) {
		if (time_after(jiffies, timeout)) {
			dev_err_ratelimited(&d->pdev->dev,
					    "DMA of %u bytes timed out\n", len);
			return -ETIMEDOUT;
		}
		usleep_range(1000, 2000);
	}
	atomic64_inc(&d->stats.dma_ops);
	atomic64_add(len, &d->stats.dma_bytes);
	return 0;
}

static bool odp_dma_invalidate(struct mmu_interval_notifier *mni,
			       const struct mmu_notifier_range *range,
			       unsigned long cur_seq)
{
	struct ib_umem_odp *odp = container_of(mni, struct ib_umem_odp, notifier);
	struct odp_dma_mr *mr = odp->private;
	u64 start, end, addr;

	if (!mmu_notifier_range_blockable(range))
		return false;

	mutex_lock(&odp->umem_mutex);
	mmu_interval_set_seq(mni, cur_seq);
	start = max_t(u64, ib_umem_start(odp), range->start);
	end = min_t(u64, ib_umem_end(odp), range->end);
	/* Zap the device's table first, as mlx5 zaps its MTT. */
	for (addr = start; addr < end; addr += PAGE_SIZE) {
		size_t idx = (addr - ib_umem_start(odp)) >> PAGE_SHIFT;

		mr->xlt[idx] = 0;
		mr->type[idx] = ODP_DMA_MAP_NONE;
	}
	if (start < end) {
		ib_umem_odp_unmap_dma_pages(odp, start, end);
		atomic64_inc(&mr->dev->stats.invalidations);
	}
	mutex_unlock(&odp->umem_mutex);
	return true;
}

static const struct mmu_interval_notifier_ops odp_dma_mni_ops = {
	.invalidate = odp_dma_invalidate,
};

/*
 * Faults [va, va + len) and maps it for the engine: on success, returns
 * with umem_mutex held and every page of the range in the table.
 */
static int odp_dma_map(struct odp_dma_mr *mr, u64 va, u64 len, bool write)
{
	struct odp_dma_dev *d = mr->dev;
	struct ib_umem_odp *odp = mr->odp;
	struct pci_p2pdma_map_state p2pdma_state = {};
	size_t first, i, n;
	int ret;

	ret = ib_umem_odp_map_dma_and_lock(odp, va, len,
					   write ? HMM_PFN_WRITE : 0, true);
	atomic64_inc(&d->stats.faults);
	if (ret < 0)
		return ret;
	first = (ALIGN_DOWN(va, PAGE_SIZE) - ib_umem_start(odp)) >> PAGE_SHIFT;
	n = ret;
	for (i = first; i < first + n; i++) {
		unsigned long pfn = odp->map.pfn_list[i];
		bool was_mapped = pfn & HMM_PFN_DMA_MAPPED;
		dma_addr_t dma;

		if (!(pfn & HMM_PFN_VALID) ||
		    (write && !(pfn & HMM_PFN_WRITE))) {
			ret = -EFAULT;
			goto err;
		}
		dma = hmm_dma_map_pfn(d->ibdev.dma_device, &odp->map, i,
				      &p2pdma_state);
		if (dma_mapping_error(d->ibdev.dma_device, dma)) {
			ret = -EFAULT;
			goto err;
		}
		pfn = odp->map.pfn_list[i];
		mr->xlt[i] = dma | XLT_VALID |
			     (pfn & HMM_PFN_WRITE ? XLT_WRITE : 0);
		if (pfn & HMM_PFN_P2PDMA_BUS)
			mr->type[i] = ODP_DMA_MAP_BUS;
		else if (pfn & HMM_PFN_P2PDMA)
			mr->type[i] = ODP_DMA_MAP_HOST_BRIDGE;
		else
			mr->type[i] = ODP_DMA_MAP_RAM;
		if (was_mapped)
			continue;
		odp->npages++;
		switch (mr->type[i]) {
		case ODP_DMA_MAP_BUS:
			atomic64_inc(&d->stats.map_bus);
			break;
		case ODP_DMA_MAP_HOST_BRIDGE:
			atomic64_inc(&d->stats.map_host_bridge);
			break;
		default:
			atomic64_inc(&d->stats.map_ram);
		}
		if (pfn & HMM_PFN_ALIAS)
			atomic64_inc(&d->stats.map_alias);
	}
	return 0;
err:
	mutex_unlock(&odp->umem_mutex);
	return ret;
}

/*
 * Resolves iova to the address the engine uses, and returns with the lock
 * that keeps it valid held: umem_mutex for an ODP MR, after faulting and
 * mapping the page; the dma-buf's reservation lock for a dma-buf MR, whose
 * table was filled at registration and which the exporter revokes under
 * that lock, so a revocation waits for a transfer in flight, as irdma's
 * revoke waits for the hardware to stop using the MR.
 */
static int odp_dma_lock_target(struct odp_dma_mr *mr, u64 iova, u32 len,
			       bool write, u64 *target)
{
	size_t idx;
	int ret;

	if (mr->dmabuf) {
		struct dma_resv *resv = mr->dmabuf->attach->dmabuf->resv;

		dma_resv_lock(resv, NULL);
		if (mr->revoked) {
			dma_resv_unlock(resv);
			return -ENODEV;
		}
		idx = iova >> PAGE_SHIFT;
	} else {
		ret = odp_dma_map(mr, iova, len, write);
		if (ret)
			return ret;
		idx = (iova - ib_umem_start(mr->odp)) >> PAGE_SHIFT;
	}
	/* The entry cannot change while the lock is held. */
	*target = (mr->xlt[idx] & PAGE_MASK) + offset_in_page(iova);
	return 0;
}

static void odp_dma_unlock_target(struct odp_dma_mr *mr)
{
	if (mr->dmabuf)
		dma_resv_unlock(mr->dmabuf->attach->dmabuf->resv);
	else
		mutex_unlock(&mr->odp->umem_mutex);
}

/* One transfer of at most EDU_XFER_MAX bytes, inside a page of the MR. */
static int odp_dma_xfer_page(struct odp_dma_mr *mr, u64 iova, u32 len,
			     void __user *buf, bool to_mr)
{
	struct odp_dma_dev *d = mr->dev;
	u64 target;
	int ret;

	mutex_lock(&d->engine);
	if (to_mr) {
		if (copy_from_user(d->bounce, buf, len)) {
			ret = -EFAULT;
			goto out;
		}
		ret = edu_dma(d, d->bounce_dma, EDU_BUF, len, false);
		if (ret)
			goto out;
	}
	ret = odp_dma_lock_target(mr, iova, len, to_mr, &target);
	if (ret)
		goto out;
	if (to_mr)
		ret = edu_dma(d, EDU_BUF, target, len, true);
	else
		ret = edu_dma(d, target, EDU_BUF, len, false);
	odp_dma_unlock_target(mr);
	if (ret || to_mr)
		goto out;
	ret = edu_dma(d, EDU_BUF, d->bounce_dma, len, true);
	if (!ret && copy_to_user(buf, d->bounce, len))
		ret = -EFAULT;
out:
	mutex_unlock(&d->engine);
	return ret;
}

static struct odp_dma_mr *odp_dma_mr_get(struct odp_dma_file *f, u32 handle)
{
	struct odp_dma_mr *mr = xa_load(&f->mrs, handle);

	return mr ?: ERR_PTR(-ENOENT);
}

/* An MR of `pages` pages with an empty translation table, not published. */
static struct odp_dma_mr *odp_dma_mr_new(struct odp_dma_dev *d, size_t pages)
{
	struct odp_dma_mr *mr = kzalloc_obj(*mr);

	if (!mr)
		return NULL;
	mr->dev = d;
	mr->xlt = kvcalloc(pages, sizeof(*mr->xlt), GFP_KERNEL);
	mr->type = kvcalloc(pages, sizeof(*mr->type), GFP_KERNEL);
	if (!mr->xlt || !mr->type) {
		kvfree(mr->xlt);
		kvfree(mr->type);
		kfree(mr);
		return NULL;
	}
	return mr;
}

/* Frees an MR that was never published (its umem released or never got). */
static void odp_dma_mr_discard(struct odp_dma_mr *mr)
{
	kvfree(mr->xlt);
	kvfree(mr->type);
	kfree(mr);
}

static void odp_dma_mr_free(struct odp_dma_mr *mr)
{
	/*
	 * ODP: unmaps what is left under umem_mutex and removes the notifier.
	 * dma-buf: revokes (calling our revoke), unpins, detaches.
	 */
	if (mr->dmabuf)
		ib_umem_release(&mr->dmabuf->umem);
	else
		ib_umem_odp_release(mr->odp);
	odp_dma_mr_discard(mr);
}

static long odp_dma_reg(struct odp_dma_file *f, void __user *arg)
{
	struct odp_dma_dev *d = f->dev;
	struct odp_dma_reg reg;
	struct odp_dma_mr *mr;
	int access = IB_ACCESS_ON_DEMAND | IB_ACCESS_REMOTE_READ;
	size_t pages;
	u32 handle;
	int ret;

	if (copy_from_user(&reg, arg, sizeof(reg)))
		return -EFAULT;
	if (reg.flags & ~ODP_DMA_WRITABLE || !reg.len ||
	    !PAGE_ALIGNED(reg.addr) || !PAGE_ALIGNED(reg.len) ||
	    reg.addr + reg.len < reg.addr || reg.len > SZ_1G)
		return -EINVAL;
	if (reg.flags & ODP_DMA_WRITABLE)
		access |= IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	pages = reg.len >> PAGE_SHIFT;

	mr = odp_dma_mr_new(d, pages);
	if (!mr)
		return -ENOMEM;
	mutex_lock(&f->lock);
	if (d->dead) {
		ret = -ENODEV;
		goto err_unlock;
	}
	mr->odp = ib_umem_odp_get(&d->ibdev, reg.addr, reg.len, access,
				  &odp_dma_mni_ops);
	if (IS_ERR(mr->odp)) {
		ret = PTR_ERR(mr->odp);
		goto err_unlock;
	}
	mr->odp->private = mr;
	ret = xa_alloc(&f->mrs, &handle, mr, xa_limit_32b, GFP_KERNEL);
	if (ret) {
		ib_umem_odp_release(mr->odp);
		goto err_unlock;
	}
	mutex_unlock(&f->lock);
	reg.mr = handle;
	if (copy_to_user(arg, &reg, sizeof(reg))) {
		/* The handle is the caller's to release with DEREG_MR. */
		return -EFAULT;
	}
	return 0;

err_unlock:
	mutex_unlock(&f->lock);
	odp_dma_mr_discard(mr);
	return ret;
}

/* Called under the dma-buf's reservation lock, once, before IB core unmaps. */
static void odp_dma_dmabuf_revoke(void *priv)
{
	struct odp_dma_mr *mr = priv;
	size_t pages = mr->len >> PAGE_SHIFT;

	dma_resv_assert_held(mr->dmabuf->attach->dmabuf->resv);
	memset(mr->xlt, 0, pages * sizeof(*mr->xlt));
	memset(mr->type, ODP_DMA_MAP_NONE, pages);
	mr->revoked = true;
	atomic64_inc(&mr->dev->stats.revocations);
}

static long odp_dma_reg_dmabuf(struct odp_dma_file *f, void __user *arg)
{
	struct odp_dma_dev *d = f->dev;
	struct odp_dma_reg_dmabuf reg;
	struct ib_umem_dmabuf *umem;
	struct scatterlist *sg;
	struct odp_dma_mr *mr;
	int access = IB_ACCESS_REMOTE_READ;
	size_t pages, idx = 0;
	u32 handle;
	int ret, i;

	if (copy_from_user(&reg, arg, sizeof(reg)))
		return -EFAULT;
	if (reg.flags & ~ODP_DMA_WRITABLE || reg.pad || !reg.len ||
	    !PAGE_ALIGNED(reg.offset) || !PAGE_ALIGNED(reg.len) ||
	    reg.offset + reg.len < reg.offset || reg.len > SZ_1G)
		return -EINVAL;
	if (reg.flags & ODP_DMA_WRITABLE)
		access |= IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	pages = reg.len >> PAGE_SHIFT;

	mr = odp_dma_mr_new(d, pages);
	if (!mr)
		return -ENOMEM;
	mr->len = reg.len;
	mutex_lock(&f->lock);
	if (d->dead) {
		ret = -ENODEV;
		goto err_unlock;
	}
	umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(&d->ibdev, reg.offset,
							    reg.len, reg.fd,
							    access);
	if (IS_ERR(umem)) {
		ret = PTR_ERR(umem);
		goto err_unlock;
	}
	mr->dmabuf = umem;
	ib_umem_dmabuf_set_revoke_locked(umem, odp_dma_dmabuf_revoke, mr);
	/* The mapped table covers exactly [offset, offset + len). */
	for_each_sgtable_dma_sg(&umem->umem.sgt_append.sgt, sg, i) {
		u64 off;

		for (off = 0; off < sg_dma_len(sg) && idx < pages;
		     off += PAGE_SIZE, idx++) {
			mr->xlt[idx] = (sg_dma_address(sg) + off) | XLT_VALID |
				       (umem->umem.writable ? XLT_WRITE : 0);
			mr->type[idx] = ODP_DMA_MAP_DMABUF;
		}
	}
	dma_resv_unlock(umem->attach->dmabuf->resv);
	if (idx != pages) {
		dev_warn(&d->pdev->dev, "dma-buf MR: %zu of %zu pages mapped\n",
			 idx, pages);
		ret = -EIO;
		goto err_release;
	}
	ret = xa_alloc(&f->mrs, &handle, mr, xa_limit_32b, GFP_KERNEL);
	if (ret)
		goto err_release;
	mutex_unlock(&f->lock);
	reg.mr = handle;
	if (copy_to_user(arg, &reg, sizeof(reg))) {
		/* The handle is the caller's to release with DEREG_MR. */
		return -EFAULT;
	}
	return 0;

err_release:
	ib_umem_release(&umem->umem);
err_unlock:
	mutex_unlock(&f->lock);
	odp_dma_mr_discard(mr);
	return ret;
}

static long odp_dma_dereg(struct odp_dma_file *f, void __user *arg)
{
	struct odp_dma_mr *mr;
	u32 handle;

	if (get_user(handle, (u32 __user *)arg))
		return -EFAULT;
	mutex_lock(&f->lock);
	mr = xa_erase(&f->mrs, handle);
	if (mr)
		odp_dma_mr_free(mr);
	mutex_unlock(&f->lock);
	return mr ? 0 : -ENOENT;
}

static long odp_dma_xfer(struct odp_dma_file *f, void __user *arg)
{
	struct odp_dma_xfer x;
	struct odp_dma_mr *mr;
	u64 done = 0;
	int ret = 0;

	if (copy_from_user(&x, arg, sizeof(x)))
		return -EFAULT;
	if (x.flags & ~ODP_DMA_TO_MR || !x.len ||
	    x.iova + x.len < x.iova)
		return -EINVAL;
	mutex_lock(&f->lock);
	mr = odp_dma_mr_get(f, x.mr);
	if (IS_ERR(mr)) {
		ret = PTR_ERR(mr);
		goto out;
	}
	if (f->dev->dead) {
		ret = -ENODEV;
		goto out;
	}
	if (mr->dmabuf ? x.iova + x.len > mr->len :
	    x.iova < ib_umem_start(mr->odp) ||
	    x.iova + x.len > ib_umem_end(mr->odp)) {
		ret = -ERANGE;
		goto out;
	}
	if ((x.flags & ODP_DMA_TO_MR) &&
	    !(mr->dmabuf ? &mr->dmabuf->umem : &mr->odp->umem)->writable) {
		ret = -EACCES;
		goto out;
	}
	while (done < x.len) {
		u64 iova = x.iova + done;
		u32 len = min_t(u64, x.len - done,
				EDU_XFER_MAX - iova % EDU_XFER_MAX);

		ret = odp_dma_xfer_page(mr, iova, len,
					u64_to_user_ptr(x.buf + done),
					x.flags & ODP_DMA_TO_MR);
		if (ret)
			break;
		done += len;
	}
out:
	mutex_unlock(&f->lock);
	return ret;
}

static long odp_dma_query(struct odp_dma_file *f, void __user *arg)
{
	struct odp_dma_query q;
	struct odp_dma_mr *mr;
	size_t idx;
	int ret = 0;

	if (copy_from_user(&q, arg, sizeof(q)))
		return -EFAULT;
	mutex_lock(&f->lock);
	mr = odp_dma_mr_get(f, q.mr);
	if (IS_ERR(mr)) {
		ret = PTR_ERR(mr);
		goto out;
	}
	if (mr->dmabuf) {
		struct dma_resv *resv = mr->dmabuf->attach->dmabuf->resv;

		if (q.iova >= mr->len) {
			ret = -ERANGE;
			goto out;
		}
		idx = q.iova >> PAGE_SHIFT;
		dma_resv_lock(resv, NULL);
		q.type = mr->type[idx];
		q.dma = mr->xlt[idx] & PAGE_MASK;
		q.alias = 0;
		dma_resv_unlock(resv);
		goto copy;
	}
	if (q.iova < ib_umem_start(mr->odp) ||
	    q.iova >= ib_umem_end(mr->odp)) {
		ret = -ERANGE;
		goto out;
	}
	idx = (q.iova - ib_umem_start(mr->odp)) >> PAGE_SHIFT;
	mutex_lock(&mr->odp->umem_mutex);
	q.type = mr->type[idx];
	q.dma = mr->xlt[idx] & PAGE_MASK;
	q.alias = q.type != ODP_DMA_MAP_NONE &&
		  !!(mr->odp->map.pfn_list[idx] & HMM_PFN_ALIAS);
	mutex_unlock(&mr->odp->umem_mutex);
copy:
	if (copy_to_user(arg, &q, sizeof(q)))
		ret = -EFAULT;
out:
	mutex_unlock(&f->lock);
	return ret;
}

static long odp_dma_stats(struct odp_dma_dev *d, void __user *arg)
{
	struct odp_dma_stats s = {
		.faults = atomic64_read(&d->stats.faults),
		.map_ram = atomic64_read(&d->stats.map_ram),
		.map_bus = atomic64_read(&d->stats.map_bus),
		.map_host_bridge = atomic64_read(&d->stats.map_host_bridge),
		.map_alias = atomic64_read(&d->stats.map_alias),
		.invalidations = atomic64_read(&d->stats.invalidations),
		.dma_ops = atomic64_read(&d->stats.dma_ops),
		.dma_bytes = atomic64_read(&d->stats.dma_bytes),
		.revocations = atomic64_read(&d->stats.revocations),
	};

	return copy_to_user(arg, &s, sizeof(s)) ? -EFAULT : 0;
}

static long odp_dma_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg)
{
	struct odp_dma_file *f = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case ODP_DMA_REG_MR:
		return odp_dma_reg(f, uarg);
	case ODP_DMA_REG_DMABUF:
		return odp_dma_reg_dmabuf(f, uarg);
	case ODP_DMA_DEREG_MR:
		return odp_dma_dereg(f, uarg);
	case ODP_DMA_XFER:
		return odp_dma_xfer(f, uarg);
	case ODP_DMA_QUERY:
		return odp_dma_query(f, uarg);
	case ODP_DMA_STATS:
		return odp_dma_stats(f->dev, uarg);
	}
	return -ENOTTY;
}

static int odp_dma_open(struct inode *inode, struct file *file)
{
	struct odp_dma_dev *d = container_of(file->private_data,
					     struct odp_dma_dev, misc);
	struct odp_dma_file *f;

	f = kzalloc_obj(*f);
	if (!f)
		return -ENOMEM;
	f->dev = d;
	mutex_init(&f->lock);
	xa_init_flags(&f->mrs, XA_FLAGS_ALLOC);
	mutex_lock(&d->files_lock);
	if (d->dead) {
		mutex_unlock(&d->files_lock);
		kfree(f);
		return -ENODEV;
	}
	list_add(&f->node, &d->files);
	/* Keeps the ib_device (and so d) until release. */
	get_device(&d->ibdev.dev);
	mutex_unlock(&d->files_lock);
	file->private_data = f;
	return 0;
}

static void odp_dma_file_drop_mrs(struct odp_dma_file *f)
{
	struct odp_dma_mr *mr;
	unsigned long handle;

	mutex_lock(&f->lock);
	xa_for_each(&f->mrs, handle, mr) {
		xa_erase(&f->mrs, handle);
		odp_dma_mr_free(mr);
	}
	mutex_unlock(&f->lock);
}

static int odp_dma_release(struct inode *inode, struct file *file)
{
	struct odp_dma_file *f = file->private_data;
	struct odp_dma_dev *d = f->dev;

	mutex_lock(&d->files_lock);
	list_del(&f->node);
	mutex_unlock(&d->files_lock);
	odp_dma_file_drop_mrs(f);
	xa_destroy(&f->mrs);
	kfree(f);
	put_device(&d->ibdev.dev);
	return 0;
}

static const struct file_operations odp_dma_fops = {
	.owner = THIS_MODULE,
	.open = odp_dma_open,
	.release = odp_dma_release,
	.unlocked_ioctl = odp_dma_ioctl,
};

static int odp_dma_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct odp_dma_dev *d;
	int ret, nr;

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	pci_set_master(pdev);

	d = ib_alloc_device(odp_dma_dev, ibdev);
	if (!d)
		return -ENOMEM;
	d->pdev = pdev;
	d->ibdev.dev.parent = &pdev->dev;
	d->ibdev.node_type = RDMA_NODE_UNSPECIFIED;
	d->ibdev.phys_port_cnt = 1;
	d->ibdev.num_comp_vectors = 1;
	strscpy(d->ibdev.node_desc, "odp_dma test NIC", sizeof(d->ibdev.node_desc));
	ib_set_device_ops(&d->ibdev, &odp_dma_ib_ops);
	mutex_init(&d->engine);
	mutex_init(&d->files_lock);
	INIT_LIST_HEAD(&d->files);

	d->mmio = pcim_iomap_region(pdev, 0, "odp_dma");
	if (IS_ERR(d->mmio)) {
		ret = PTR_ERR(d->mmio);
		goto err_dealloc;
	}
	if ((readl(d->mmio + EDU_IDENT) & 0xff) != 0xed) {
		dev_err(&pdev->dev, "not an edu device\n");
		ret = -ENODEV;
		goto err_dealloc;
	}
	d->bounce = dma_alloc_coherent(&pdev->dev, EDU_BUF_SIZE,
				       &d->bounce_dma, GFP_KERNEL);
	if (!d->bounce) {
		ret = -ENOMEM;
		goto err_dealloc;
	}
	nr = ida_alloc(&odp_dma_ida, GFP_KERNEL);
	if (nr < 0) {
		ret = nr;
		goto err_bounce;
	}
	d->nr = nr;
	snprintf(d->name, sizeof(d->name), "odp_dma%d", nr);
	/* The IB device is named as the misc device; its DMA device is ours. */
	ret = ib_register_device(&d->ibdev, d->name, &pdev->dev);
	if (ret) {
		dev_err(&pdev->dev, "ib_register_device: %d\n", ret);
		goto err_ida;
	}
	d->misc.minor = MISC_DYNAMIC_MINOR;
	d->misc.name = d->name;
	d->misc.fops = &odp_dma_fops;
	d->misc.parent = &pdev->dev;
	ret = misc_register(&d->misc);
	if (ret)
		goto err_unregister;
	pci_set_drvdata(pdev, d);
	dev_info(&pdev->dev, "%s: DMA engine for ODP MRs\n", d->name);
	return 0;

err_unregister:
	ib_unregister_device(&d->ibdev);
err_ida:
	ida_free(&odp_dma_ida, nr);
err_bounce:
	dma_free_coherent(&pdev->dev, EDU_BUF_SIZE, d->bounce, d->bounce_dma);
err_dealloc:
	ib_dealloc_device(&d->ibdev);
	return ret;
}

static void odp_dma_remove(struct pci_dev *pdev)
{
	struct odp_dma_dev *d = pci_get_drvdata(pdev);
	struct odp_dma_file *f;

	misc_deregister(&d->misc);
	/* Open files get -ENODEV; their MRs go now, while the device is bound. */
	mutex_lock(&d->files_lock);
	d->dead = true;
	list_for_each_entry(f, &d->files, node)
		odp_dma_file_drop_mrs(f);
	mutex_unlock(&d->files_lock);
	ib_unregister_device(&d->ibdev);
	ida_free(&odp_dma_ida, d->nr);
	dma_free_coherent(&pdev->dev, EDU_BUF_SIZE, d->bounce, d->bounce_dma);
	ib_dealloc_device(&d->ibdev);
}

static const struct pci_device_id odp_dma_ids[] = {
	{ PCI_DEVICE(0x1234, 0x11e8) },	/* QEMU edu */
	{ }
};
MODULE_DEVICE_TABLE(pci, odp_dma_ids);

static struct pci_driver odp_dma_driver = {
	.name = "odp_dma",
	.id_table = odp_dma_ids,
	.probe = odp_dma_probe,
	.remove = odp_dma_remove,
};
module_pci_driver(odp_dma_driver);

MODULE_DESCRIPTION("Test NIC: ODP MRs mapped and moved by a DMA engine, as mlx5 does");
MODULE_LICENSE("GPL");
