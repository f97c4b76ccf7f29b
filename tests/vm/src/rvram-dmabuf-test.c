// SPDX-License-Identifier: GPL-2.0
/*
 * VRAM buffer objects exported as dma-bufs (RVRAM_IOCTL_ALLOC_DMABUF),
 * imported by a hardware-style NIC: the odp_dma test NIC (tests/odp-dma/)
 * registers a pinned, revocable dma-buf MR, as irdma does, and its DMA
 * engine moves data to and from the buffer peer to peer.
 *
 *   rvram-dmabuf-test OWNER OWNER_PCI NEAR FAR
 *
 * OWNER is the rvram index of the GPU, OWNER_PCI its PCI address; NEAR is
 * the odp_dma index of the engine under the GPU's PCIe switch, FAR the one
 * behind its own root port on the host bridge (P2P impossible).
 *
 * Checks, byte for byte: buffers start zeroed even over VRAM that held
 * other data; what the NIC writes through one MR, another MR over the same
 * buffer reads back; the NIC's addresses are bus addresses inside the
 * GPU's BAR2; no page crosses into system RAM (rvram's counters). Bad
 * requests get their errno; the far NIC is refused; unbinding the GPU
 * revokes a live MR (the NIC is told, its transfers fail with ENODEV).
 *
 * Prints TAP.
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include "../../odp-dma/odp_dma_uapi.h"
#include "dmirror.h"
#include "rvram-bo.h"

#define BO_PAGES 16UL

static int owner, gpu = -1;
static char gpu_name[16];
static const char *owner_pci;
static int nic[2];
static uint64_t bar_start, bar_end;

/* One of rvram's debugfs counters of OWNER, -1 if absent. */
static long long stat_of(const char *key)
{
	return rvram_stat(gpu_name, key);
}

static long long vram_size(void)
{
	return rvram_vram_size(owner);
}

static int open_gpu(void)
{
	char path[32];

	snprintf(path, sizeof(path), "/dev/rvram%d", owner);
	gpu = open(path, O_RDWR);
	return gpu;
}

/* A dma-buf of size bytes of VRAM, or -errno. */
static int alloc_bo(uint64_t size, uint32_t flags)
{
	return rvram_alloc_bo(gpu, size, flags);
}

static int reg(int dev, int fd, uint64_t offset, uint64_t len, int writable,
	       uint32_t *mr)
{
	struct odp_dma_reg_dmabuf r = {
		.fd = fd, .offset = offset, .len = len,
		.flags = writable ? ODP_DMA_WRITABLE : 0,
	};

	if (ioctl(nic[dev], ODP_DMA_REG_DMABUF, &r))
		return -errno;
	*mr = r.mr;
	return 0;
}

static int dereg(int dev, uint32_t mr)
{
	return ioctl(nic[dev], ODP_DMA_DEREG_MR, &mr) ? -errno : 0;
}

/* The NIC moves len bytes between buf and the MR at iova. */
static int xfer(int dev, uint32_t mr, uint64_t iova, void *buf, size_t len, int to_mr)
{
	struct odp_dma_xfer x = {
		.mr = mr, .flags = to_mr ? ODP_DMA_TO_MR : 0,
		.iova = iova, .len = len, .buf = (uintptr_t)buf,
	};

	return ioctl(nic[dev], ODP_DMA_XFER, &x) ? -errno : 0;
}

static struct odp_dma_query query(int dev, uint32_t mr, uint64_t iova)
{
	struct odp_dma_query q = { .mr = mr, .iova = iova };

	if (ioctl(nic[dev], ODP_DMA_QUERY, &q))
		q.type = 0xff;
	return q;
}

static struct odp_dma_stats nic_stats(int dev)
{
	struct odp_dma_stats s = {};

	ioctl(nic[dev], ODP_DMA_STATS, &s);
	return s;
}

static void fill(unsigned char *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 7 + i / PAGE + seed);
}

static size_t differ(const unsigned char *a, const unsigned char *b, size_t len)
{
	size_t i, d = 0;

	for (i = 0; i < len; i++)
		d += a[i] != b[i];
	return d;
}

static sigjmp_buf jump;

static void on_sigbus(int sig)
{
	siglongjmp(jump, 1);
}

/* Reads a byte of p: 0 if that raises SIGBUS. */
static int readable(volatile unsigned char *p)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int ok = 0;

	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(jump, 1)) {
		(void)*p;
		ok = 1;
	}
	sigaction(SIGBUS, &old, NULL);
	return ok;
}

/* Leaves a pattern in the lowest free VRAM pages: migrated in, then out. */
static int dirty_vram(size_t pages)
{
	size_t len = pages * PAGE;
	unsigned char *buf = aligned_alloc(PAGE, len), *out = malloc(len);
	int ret = -1;

	if (!buf || !out)
		goto out;
	memset(buf, 0xa5, len);
	if (!dmirror(gpu, HMM_DMIRROR_MIGRATE_TO_DEV, buf, out, pages) &&
	    !dmirror(gpu, HMM_DMIRROR_MIGRATE_TO_SYS, buf, out, pages))
		ret = 0;
out:
	free(buf);
	free(out);
	return ret;
}

static void bad_input(void)
{
	long long vram = vram_size(), exported = stat_of("dmabufs_exported");
	int fd;

	tap(alloc_bo(0, 0) == -EINVAL, "bad input: size 0 gets EINVAL");
	tap(alloc_bo(PAGE + 1, 0) == -EINVAL, "bad input: an unaligned size gets EINVAL");
	tap(vram > 0 && alloc_bo(vram + PAGE, 0) == -EINVAL,
	      "bad input: more than the %lld bytes of VRAM gets EINVAL", vram);
	tap(alloc_bo(PAGE, 1) == -EINVAL, "bad input: unknown flags get EINVAL");
	tap(stat_of("dmabufs_exported") == exported && stat_of("dmabuf_pages") == 0,
	      "bad input: nothing was exported or reserved");
	fd = alloc_bo(PAGE, 0);
	tap(fd >= 0 && close(fd) == 0 && close(fd) == -1 && errno == EBADF,
	      "bad input: a second close of the dma-buf gets EBADF");
	tap(stat_of("dmabuf_pages") == 0 &&
	      stat_of("dmabufs_released") == stat_of("dmabufs_exported"),
	      "bad input: closing the last reference released the VRAM");
}

static void round_trip(void)
{
	size_t len = BO_PAGES * PAGE, i, bad;
	unsigned char *data = malloc(len), *back = malloc(len), *map;
	long long to_ram, exported = stat_of("dmabufs_exported");
	struct odp_dma_stats s0 = nic_stats(0), s1;
	struct odp_dma_query q0, q;
	uint32_t mr, mr2, ro;
	int fd, contiguous = 1, ret;

	tap(data && back && dirty_vram(BO_PAGES) == 0,
	      "round trip: the lowest %lu VRAM pages hold old data", BO_PAGES);
	to_ram = stat_of("pages_to_ram");
	fd = alloc_bo(len, 0);
	tap(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC) &&
	      lseek(fd, 0, SEEK_END) == (off_t)len,
	      "round trip: a %zu-byte dma-buf (fd %d, close-on-exec)", len, fd);
	if (fd < 0)
		goto out;
	tap(stat_of("dmabuf_pages") == (long long)BO_PAGES &&
	      stat_of("dmabufs_exported") == exported + 1,
	      "round trip: %lu VRAM pages reserved for it", BO_PAGES);
	tap(reg(0, fd, 0, len, 1, &mr) == 0, "round trip: the NIC under the switch registers it");
	q0 = query(0, mr, 0);
	for (i = 0; i < BO_PAGES; i++) {
		q = query(0, mr, i * PAGE);
		contiguous &= q.type == ODP_DMA_MAP_DMABUF && q.dma == q0.dma + i * PAGE;
	}
	tap(contiguous && q0.dma >= bar_start && q0.dma + len - 1 <= bar_end,
	      "round trip: the NIC's addresses %#llx.. are in BAR2, one per page",
	      (unsigned long long)q0.dma);
	memset(back, 0xff, len);
	ret = xfer(0, mr, 0, back, len, 0);
	for (i = 0, bad = 0; i < len; i++)
		bad += back[i] != 0;
	tap(ret == 0 && bad == 0,
	      "round trip: the buffer reads as zeroes over old VRAM data, %zu bytes not", bad);
	fill(data, len, 11);
	tap(xfer(0, mr, 0, data, len, 1) == 0, "round trip: the NIC writes %zu bytes", len);
	tap(reg(0, fd, 4 * PAGE, 8 * PAGE, 0, &mr2) == 0,
	      "round trip: a second MR over pages 4-11");
	memset(back, 0, len);
	ret = xfer(0, mr2, 0, back, 8 * PAGE, 0);
	bad = differ(back, data + 4 * PAGE, 8 * PAGE);
	tap(ret == 0 && bad == 0, "round trip: the second MR reads what the first wrote, %zu bytes differ", bad);
	ret = xfer(0, mr, 0, back, len, 0);
	bad = differ(back, data, len);
	tap(ret == 0 && bad == 0, "round trip: the whole buffer reads back, %zu bytes differ", bad);
	tap(xfer(0, mr2, 0, data, PAGE, 1) == -EACCES,
	      "round trip: a read-only MR refuses a write (EACCES)");
	tap(xfer(0, mr2, 8 * PAGE - 8, back, 16, 0) == -ERANGE,
	      "round trip: a transfer past the MR gets ERANGE");
	tap(reg(0, fd, len - PAGE, 2 * PAGE, 1, &ro) == -EINVAL,
	      "round trip: an MR past the buffer's end gets EINVAL");
	tap(reg(0, fd, 100, PAGE, 1, &ro) == -EINVAL,
	      "round trip: an unaligned MR offset gets EINVAL");
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	bad = map == MAP_FAILED ? len : differ(map, data, len);
	tap(bad == 0, "round trip: the CPU maps the buffer and reads what the NIC wrote, %zu bytes differ", bad);
	if (map != MAP_FAILED) {
		fill(data + 12 * PAGE, 4 * PAGE, 17);
		memcpy(map + 12 * PAGE, data + 12 * PAGE, 4 * PAGE);
		ret = xfer(0, mr, 12 * PAGE, back, 4 * PAGE, 0);
		bad = differ(back, data + 12 * PAGE, 4 * PAGE);
		tap(ret == 0 && bad == 0,
		      "round trip: the NIC reads what the CPU wrote through the mapping, %zu bytes differ", bad);
		munmap(map, len);
	}
	tap(mmap(NULL, 2 * len, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EINVAL,
	      "round trip: a mapping larger than the buffer gets EINVAL");
	s1 = nic_stats(0);
	tap(s1.dma_bytes - s0.dma_bytes >= 3 * len + 8 * PAGE && stat_of("pages_to_ram") == to_ram,
	      "round trip: %llu bytes moved by the NIC, 0 pages between VRAM and RAM",
	      (unsigned long long)(s1.dma_bytes - s0.dma_bytes));
	/* The importer holds the buffer: closing the fd does not free it. */
	close(fd);
	tap(stat_of("dmabuf_pages") == (long long)BO_PAGES &&
	      xfer(0, mr, PAGE, back, PAGE, 0) == 0 && !differ(back, data + PAGE, PAGE),
	      "round trip: with its fd closed the MRs still reach the buffer");
	tap(dereg(0, mr) == 0 && dereg(0, mr2) == 0 && stat_of("dmabuf_pages") == 0,
	      "round trip: deregistering the MRs released the VRAM");
out:
	free(data);
	free(back);
}

static void far_nic(void)
{
	uint32_t mr;
	int fd = alloc_bo(2 * PAGE, 0);

	int refused = 0;

	tap(fd >= 0 && reg(1, fd, 0, 2 * PAGE, 1, &mr) == -EREMOTEIO,
	      "far NIC: registration refused, EREMOTEIO (P2P impossible, no bounce)");
	/* Any user can ask again and again: odp-dma.sh counts the log lines. */
	for (int i = 0; i < 200; i++)
		refused += fd >= 0 && reg(1, fd, 0, 2 * PAGE, i & 1, &mr) == -EREMOTEIO;
	tap(refused == 200, "far NIC: 200 more registrations refused, EREMOTEIO (%d)", refused);
	close(fd);
	tap(stat_of("dmabuf_pages") == 0, "far NIC: nothing left reserved");
}

static void unbind(void)
{
	unsigned char data[PAGE], back[PAGE], *map;
	struct odp_dma_stats a, b;
	uint32_t mr;
	int fd = alloc_bo(4 * PAGE, 0), old = gpu;

	fill(data, PAGE, 23);
	tap(fd >= 0 && reg(0, fd, 0, 4 * PAGE, 1, &mr) == 0 &&
	      xfer(0, mr, PAGE, data, PAGE, 1) == 0,
	      "unbind: the NIC wrote a page of a live dma-buf MR");
	if (fd < 0)
		return;
	map = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	tap(map != MAP_FAILED && readable(map + PAGE) && !memcmp(map + PAGE, data, PAGE),
	      "unbind: the CPU maps the buffer too and reads the NIC's page");
	a = nic_stats(0);
	tap(rvram_unbind(owner_pci) == 0,
	      "unbind: rvram%d unbound under the live MR and mapping", owner);
	tap(map != MAP_FAILED && !readable(map + PAGE) && !readable(map),
	      "unbind: the CPU mapping was revoked: SIGBUS, not stale VRAM");
	tap(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED && errno == ENODEV,
	      "unbind: a new mapping gets ENODEV");
	if (map != MAP_FAILED)
		munmap(map, 4 * PAGE);
	b = nic_stats(0);
	tap(b.revocations == a.revocations + 1 && query(0, mr, PAGE).type == ODP_DMA_MAP_NONE,
	      "unbind: the NIC was told first (revoked, its table zapped)");
	tap(xfer(0, mr, PAGE, back, PAGE, 0) == -ENODEV &&
	      xfer(0, mr, PAGE, data, PAGE, 1) == -ENODEV,
	      "unbind: its transfers fail with ENODEV");
	tap(alloc_bo(PAGE, 0) == -ENODEV, "unbind: an open GPU file gets ENODEV");
	tap(dereg(0, mr) == 0 && close(fd) == 0,
	      "unbind: the MR and the dma-buf go away cleanly");
	close(old);
	tap(rvram_bind(owner_pci) == 0 && open_gpu() >= 0,
	      "unbind: rvram%d bound again", owner);
	fd = alloc_bo(PAGE, 0);
	tap(fd >= 0 && reg(0, fd, 0, PAGE, 0, &mr) == 0 &&
	      xfer(0, mr, 0, back, PAGE, 0) == 0 && dereg(0, mr) == 0 && close(fd) == 0,
	      "unbind: a new buffer of the rebound GPU works");
}

int main(int argc, char **argv)
{
	char path[96], line[256];
	unsigned long long s, e, fl;
	FILE *f;
	int i;

	if (argc != 5) {
		fprintf(stderr, "usage: rvram-dmabuf-test OWNER OWNER_PCI NEAR FAR\n");
		return 2;
	}
	owner = atoi(argv[1]);
	owner_pci = argv[2];
	snprintf(gpu_name, sizeof(gpu_name), "rvram%d", owner);
	printf("TAP version 13\n");
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource", owner_pci);
	f = fopen(path, "r");
	for (i = 0; f && i <= 2 && fgets(line, sizeof(line), f); i++)
		if (i == 2 && sscanf(line, "%llx %llx %llx", &s, &e, &fl) == 3)
			bar_start = s, bar_end = e;
	if (f)
		fclose(f);
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/dev/odp_dma%s", argv[3 + i]);
		nic[i] = open(path, O_RDWR);
	}
	tap(bar_end > bar_start && nic[0] >= 0 && nic[1] >= 0 && open_gpu() >= 0,
	      "setup: rvram%d BAR2 %#llx-%#llx, NIC odp_dma%s under the switch, odp_dma%s far",
	      owner, (unsigned long long)bar_start, (unsigned long long)bar_end, argv[3], argv[4]);
	if (tap_failed)
		return tap_end();
	bad_input();
	round_trip();
	far_nic();
	unbind();
	return tap_end();
}
