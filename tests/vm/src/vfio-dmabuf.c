// SPDX-License-Identifier: GPL-2.0
/*
 * A PCI BAR exported by VFIO as a dma-buf (VFIO_DEVICE_FEATURE_DMA_BUF),
 * registered as a dma-buf MR of the odp_dma test NIC, which imports it as
 * irdma does (ib_umem_dmabuf_get_pinned_revocable_and_lock()): upstream
 * code on both sides of dma_buf_phys_vec_to_sgt() and dma_buf_free_sgt(),
 * the pair that the dma-buf-fix series repairs. Each registration maps the
 * attachment and each deregistration unmaps it; before the fix, every
 * unmap leaked the table's scatterlist (kmemleak: tests/vm/vfio-dmabuf.sh).
 *
 *   vfio-dmabuf BDF NIC ROUNDS
 *
 * BDF is bound to vfio-pci in no-IOMMU mode; NIC is N of /dev/odp_dmaN, a
 * DMA engine under the same PCIe switch. Each round registers 1 MiB of
 * BAR2, has the NIC read 2 KiB of it at a rotating offset and write 2 KiB
 * back, checks both against the CPU's mapping of the BAR (VFIO's mmap), and
 * deregisters. Then the VFIO device is closed under a live MR: its dma-buf
 * is revoked, the NIC's next transfer fails with ENODEV, and the MR still
 * deregisters. Prints TAP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "../../odp-dma/odp_dma_uapi.h"

#define BAR 2
#define LEN (1UL << 20)
/* One transfer of QEMU's edu engine each (2 KiB), which takes 100 ms. */
#define READ_LEN 2048
#define WRITE_LEN 2048

static int tap_n, tap_failed;

static void check(int ok, const char *what)
{
	printf("%sok %d %s\n", ok ? "" : "not ", ++tap_n, what);
	if (!ok)
		tap_failed++;
}

static void die(const char *what)
{
	printf("not ok %d %s: %s\n", ++tap_n, what, strerror(errno));
	printf("1..%d\n", tap_n);
	exit(1);
}

/* The device fd of BDF, bound to vfio-pci in no-IOMMU mode. */
static int vfio_open(const char *bdf)
{
	char path[PATH_MAX], link[PATH_MAX];
	struct vfio_group_status st = { .argsz = sizeof(st) };
	int container, group, dev;
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/iommu_group", bdf);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		die("the device's IOMMU group");
	link[n] = 0;
	snprintf(path, sizeof(path), "/dev/vfio/noiommu-%s", basename(link));
	container = open("/dev/vfio/vfio", O_RDWR);
	group = open(path, O_RDWR);
	if (container < 0 || group < 0)
		die("open the VFIO container and no-IOMMU group");
	if (ioctl(group, VFIO_GROUP_GET_STATUS, &st))
		die("VFIO_GROUP_GET_STATUS");
	if (!(st.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		errno = EBUSY;
		die("the group is not viable");
	}
	if (ioctl(group, VFIO_GROUP_SET_CONTAINER, &container) ||
	    ioctl(container, VFIO_SET_IOMMU, VFIO_NOIOMMU_IOMMU))
		die("set up the no-IOMMU container");
	dev = ioctl(group, VFIO_GROUP_GET_DEVICE_FD, bdf);
	if (dev < 0)
		die("VFIO_GROUP_GET_DEVICE_FD");
	/* The device fd keeps the group and container alive. */
	close(group);
	close(container);
	return dev;
}

/* A dma-buf of [offset, offset + len) of BAR, or -errno. */
static int vfio_dmabuf(int dev, uint64_t offset, uint64_t len)
{
	struct {
		struct vfio_device_feature f;
		struct vfio_device_feature_dma_buf d;
		struct vfio_region_dma_range r;
	} __attribute__((packed)) arg = {
		.f = {
			.argsz = sizeof(arg),
			.flags = VFIO_DEVICE_FEATURE_GET | VFIO_DEVICE_FEATURE_DMA_BUF,
		},
		.d = { .region_index = BAR, .open_flags = O_RDWR | O_CLOEXEC, .nr_ranges = 1 },
		.r = { .offset = offset, .length = len },
	};
	int fd = ioctl(dev, VFIO_DEVICE_FEATURE, &arg);

	return fd < 0 ? -errno : fd;
}

static int nic;

static int reg(int fd, uint32_t *mr)
{
	struct odp_dma_reg_dmabuf r = { .fd = fd, .len = LEN, .flags = ODP_DMA_WRITABLE };

	if (ioctl(nic, ODP_DMA_REG_DMABUF, &r))
		return -errno;
	*mr = r.mr;
	return 0;
}

static int dereg(uint32_t mr)
{
	return ioctl(nic, ODP_DMA_DEREG_MR, &mr) ? -errno : 0;
}

static int xfer(uint32_t mr, uint64_t iova, void *buf, size_t len, int to_mr)
{
	struct odp_dma_xfer x = {
		.mr = mr, .flags = to_mr ? ODP_DMA_TO_MR : 0,
		.iova = iova, .len = len, .buf = (uintptr_t)buf,
	};

	return ioctl(nic, ODP_DMA_XFER, &x) ? -errno : 0;
}

static struct odp_dma_stats nic_stats(void)
{
	struct odp_dma_stats s = {};

	ioctl(nic, ODP_DMA_STATS, &s);
	return s;
}

/* What byte i of the window holds in round r (0: before any round). */
static uint8_t pattern(unsigned long i, unsigned int r)
{
	return (uint8_t)(i * 131 + (i >> 12) * 7 + r * 29 + 1);
}

int main(int argc, char **argv)
{
	struct vfio_region_info ri = { .argsz = sizeof(ri), .index = BAR };
	struct odp_dma_stats s0, s1;
	static uint8_t buf[READ_LEN];
	unsigned int rounds, r, bad_reads = 0, bad_writes = 0, failed = 0;
	volatile uint8_t *bar;
	char path[64], what[160];
	uint32_t mr;
	int dev, fd, ret;

	if (argc != 4) {
		fprintf(stderr, "usage: vfio-dmabuf BDF NIC ROUNDS\n");
		return 2;
	}
	rounds = strtoul(argv[3], NULL, 0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	snprintf(path, sizeof(path), "/dev/odp_dma%s", argv[2]);
	nic = open(path, O_RDWR);
	if (nic < 0)
		die("open the NIC");
	dev = vfio_open(argv[1]);
	check(1, "VFIO device fd of the GPU in no-IOMMU mode");
	if (ioctl(dev, VFIO_DEVICE_GET_REGION_INFO, &ri) || ri.size < LEN ||
	    !(ri.flags & VFIO_REGION_INFO_FLAG_MMAP))
		die("BAR2 is a mappable region of at least 1 MiB");
	bar = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, dev, ri.offset);
	if (bar == MAP_FAILED)
		die("mmap BAR2 through VFIO");
	for (unsigned long i = 0; i < LEN; i++)
		bar[i] = pattern(i, 0);

	/* VFIO's own checks of the range: past the BAR, and empty. */
	ret = vfio_dmabuf(dev, ri.size, 4096);
	check(ret == -EINVAL, "a dma-buf past the end of BAR2 is refused with EINVAL");
	ret = vfio_dmabuf(dev, 0, 0);
	check(ret == -EINVAL, "an empty dma-buf range is refused with EINVAL");

	fd = vfio_dmabuf(dev, 0, LEN);
	if (fd < 0) {
		errno = -fd;
		die("VFIO_DEVICE_FEATURE_DMA_BUF of 1 MiB of BAR2");
	}
	check(1, "VFIO exports 1 MiB of BAR2 as a dma-buf");

	s0 = nic_stats();
	for (r = 1; r <= rounds; r++) {
		uint64_t off = (r * 12288UL) % (LEN - READ_LEN);

		if (reg(fd, &mr)) {
			failed++;
			continue;
		}
		/* The NIC reads what the CPU wrote, through the bus address. */
		if (xfer(mr, off, buf, READ_LEN, 0)) {
			failed++;
		} else {
			for (unsigned long i = 0; i < READ_LEN; i++)
				bad_reads += buf[i] != bar[off + i];
		}
		/* And writes what the CPU reads back. */
		for (unsigned long i = 0; i < WRITE_LEN; i++)
			buf[i] = pattern(off + i, r);
		if (xfer(mr, off, buf, WRITE_LEN, 1)) {
			failed++;
		} else {
			for (unsigned long i = 0; i < WRITE_LEN; i++)
				bad_writes += bar[off + i] != pattern(off + i, r);
		}
		if (dereg(mr))
			failed++;
	}
	s1 = nic_stats();
	snprintf(what, sizeof(what),
		 "%u registrations, transfers and deregistrations of the dma-buf MR succeeded",
		 rounds);
	check(!failed, what);
	check(!bad_reads, "every byte the NIC read from the BAR was the CPU's");
	check(!bad_writes, "every byte the NIC wrote to the BAR reads back with the CPU");
	printf("# DMA engine: %llu transfers, %llu bytes\n",
	       (unsigned long long)(s1.dma_ops - s0.dma_ops),
	       (unsigned long long)(s1.dma_bytes - s0.dma_bytes));
	check(s1.dma_bytes - s0.dma_bytes >= (unsigned long long)rounds * (READ_LEN + WRITE_LEN),
	      "the NIC's DMA engine moved every byte");

	/* The device goes away under a live MR: VFIO revokes its dma-bufs. */
	if (reg(fd, &mr))
		die("register once more");
	munmap((void *)bar, LEN);
	close(dev);
	ret = xfer(mr, 0, buf, sizeof(buf), 0);
	check(ret == -ENODEV, "closing the VFIO device revokes the MR: a transfer fails with ENODEV");
	check(nic_stats().revocations == s1.revocations + 1, "the NIC counted one revocation");
	check(dereg(mr) == 0, "the revoked MR deregisters");
	check(reg(fd, &mr) == -ENODEV, "a revoked dma-buf cannot be registered again (ENODEV)");
	close(fd);
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
