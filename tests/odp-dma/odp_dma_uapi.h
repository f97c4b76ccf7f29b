/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * odp_dma: ioctls of the test NIC (see odp_dma.c), shared with its
 * user-space test. Test-only: not part of the series.
 */
#ifndef ODP_DMA_UAPI_H
#define ODP_DMA_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* Register an ODP MR over [addr, addr + len) of the caller's mm. */
struct odp_dma_reg {
	__u64 addr;
	__u64 len;
	__u32 flags;		/* ODP_DMA_WRITABLE */
	__u32 mr;		/* out: handle */
};

#define ODP_DMA_WRITABLE	(1U << 0)

/*
 * Move len bytes between the caller's buffer buf and the MR at iova (a
 * user virtual address inside it) with the device's DMA engine. The range
 * is faulted and mapped first, as a NIC's page fault handler does.
 */
struct odp_dma_xfer {
	__u32 mr;
	__u32 flags;		/* ODP_DMA_TO_MR: buf -> MR; else MR -> buf */
	__u64 iova;
	__u64 len;
	__u64 buf;
};

#define ODP_DMA_TO_MR		(1U << 0)

/* How the device currently reaches the page of the MR at iova. */
struct odp_dma_query {
	__u32 mr;
	__u32 type;		/* out: ODP_DMA_MAP_* */
	__u64 iova;
	__u64 dma;		/* out: the address the DMA engine uses */
	__u32 alias;		/* out: the page is a P2P alias (HMM_PFN_ALIAS) */
	__u32 pad;
};

enum {
	ODP_DMA_MAP_NONE,	/* not mapped (never faulted, or invalidated) */
	ODP_DMA_MAP_RAM,	/* system memory, dma_map_phys() */
	ODP_DMA_MAP_BUS,	/* P2P: PCI bus address, through the switch */
	ODP_DMA_MAP_HOST_BRIDGE, /* P2P through the host bridge (MMIO map) */
	ODP_DMA_MAP_DMABUF,	/* a dma-buf MR: the exporter's DMA address */
};

/* A pinned, revocable dma-buf MR, as irdma registers one. */
struct odp_dma_reg_dmabuf {
	__s32 fd;		/* the dma-buf */
	__u32 flags;		/* ODP_DMA_WRITABLE */
	__u64 offset;		/* in the dma-buf, page aligned */
	__u64 len;
	__u32 mr;		/* out: handle; its iovas are 0..len */
	__u32 pad;
};

/* Counters of the device since probe. */
struct odp_dma_stats {
	__u64 faults;		/* ib_umem_odp_map_dma_and_lock() calls */
	__u64 map_ram;		/* pages mapped, by type */
	__u64 map_bus;
	__u64 map_host_bridge;
	__u64 map_alias;	/* of those, P2P aliases of device-private pages */
	__u64 invalidations;	/* interval notifier callbacks that unmapped */
	__u64 dma_ops;		/* DMA engine transfers */
	__u64 dma_bytes;
	__u64 revocations;	/* dma-buf MRs revoked by their exporter */
};

#define ODP_DMA_REG_MR		_IOWR('O', 0x01, struct odp_dma_reg)
#define ODP_DMA_DEREG_MR	_IOW('O', 0x02, __u32)
#define ODP_DMA_XFER		_IOW('O', 0x03, struct odp_dma_xfer)
#define ODP_DMA_QUERY		_IOWR('O', 0x04, struct odp_dma_query)
#define ODP_DMA_STATS		_IOR('O', 0x05, struct odp_dma_stats)
#define ODP_DMA_REG_DMABUF	_IOWR('O', 0x06, struct odp_dma_reg_dmabuf)

#endif
