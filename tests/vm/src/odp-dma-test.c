// SPDX-License-Identifier: GPL-2.0
/*
 * The hardware-NIC branch of ODP aliases, end to end: a DMA engine (the
 * odp_dma test NIC on QEMU's edu device, tests/odp-dma/) moves data into
 * and out of an ODP MR whose pages sit in rvram's VRAM.
 *
 *   odp-dma-test OWNER OWNER_PCI NEAR FAR
 *
 *   odp-dma-test OWNER OWNER_PCI NEAR FAR coherent
 *
 * OWNER is the rvram index of the GPU, OWNER_PCI its PCI address; NEAR is
 * the odp_dma index of the engine under the GPU's PCIe switch, FAR the one
 * behind its own root port on the q35 host bridge (P2P impossible). With
 * "coherent", the GPU's VRAM is device-coherent (bound to driver
 * rvram-coherent): the NIC maps its pages as they are, through the DMA API
 * like system memory, at their BAR addresses, with no alias and no
 * migration.
 *
 * Every transfer is checked byte for byte against a shadow copy; where the
 * NIC reaches each page is read back from the NIC's translation table
 * (ODP_DMA_QUERY): a PCI bus address inside the GPU's BAR2 for aliases.
 * x86 PCI bus addresses equal CPU physical ones, so the check uses BAR2's
 * resource range from sysfs. rvram's debugfs counters count migrations.
 *
 * Prints TAP.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../odp-dma/odp_dma_uapi.h"
#include "dmirror.h"

#define PMD_PAGES 512UL
/* Device-private GPUs have a P2P alias switch: DEBUGFS/rvramN/p2p_alias. */
#define DEBUGFS "/sys/kernel/debug/rvram"
#define MAX_GPUS 16

static int n, failed;
static int owner, gpu = -1;
static const char *owner_pci;
static int nic[2];
static uint64_t bar_start, bar_end;
static unsigned char *bounce;
static uint64_t total[4];
/* The P2P alias switches, and what each was when found. */
static struct {
	char path[300];
	char found;
} switches[MAX_GPUS];
static int nswitches;

static void check(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d ", ok ? "" : "not ", ++n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		failed++;
}

static long long stat_of(const char *key)
{
	char path[96], k[64];
	long long v, ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/rvram/rvram%d/stats", owner);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", k, &v) == 2)
		if (!strcmp(k, key))
			ret = v;
	fclose(f);
	return ret;
}

/* Y or N, what the switch at PATH reads; 0 if it cannot be read. */
static char switch_value(const char *path)
{
	char v[8] = "";
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	if (!fgets(v, sizeof(v), f))
		v[0] = 0;
	fclose(f);
	return v[0] == 'Y' || v[0] == 'N' ? v[0] : 0;
}

/*
 * Finds the P2P alias switch of every device-private GPU (a device-coherent
 * one has none) and what it is: how many.
 */
static int find_switches(void)
{
	DIR *d = opendir(DEBUGFS);
	struct dirent *e;

	nswitches = 0;
	if (!d)
		return 0;
	while ((e = readdir(d)) && nswitches < MAX_GPUS) {
		if (strncmp(e->d_name, "rvram", 5))
			continue;
		snprintf(switches[nswitches].path, sizeof(switches[0].path), "%s/%s/p2p_alias",
			 DEBUGFS, e->d_name);
		switches[nswitches].found = switch_value(switches[nswitches].path);
		if (switches[nswitches].found)
			nswitches++;
	}
	closedir(d);
	return nswitches;
}

/*
 * Sets every switch found to VAL, Y (P2P aliases: the series) or N
 * (rvram refuses them: ODP faults migrate the pages to system RAM, as
 * Linux 7.3 does), or with VAL 0 back to what it was; each is read back.
 * 0, or -1 if one did not take or there is none.
 */
static int set_switches(char val)
{
	int i, ret = nswitches ? 0 : -1;

	for (i = 0; i < nswitches; i++) {
		char want[2] = { val ? val : switches[i].found, 0 };

		if (sysfs_write(switches[i].path, want) || switch_value(switches[i].path) != want[0])
			ret = -1;
	}
	return ret;
}

static int open_gpu(void)
{
	char path[32];

	snprintf(path, sizeof(path), "/dev/rvram%d", owner);
	gpu = open(path, O_RDWR);
	return gpu;
}

/* Pages of [buf, buf + npages) in OWNER's VRAM; *pmd: how many PMD-mapped. */
static size_t resident(void *buf, size_t npages, size_t *pmd)
{
	unsigned char *snap = malloc(npages);
	size_t i, r = 0;

	*pmd = 0;
	if (!snap || dmirror(gpu, HMM_DMIRROR_SNAPSHOT, buf, snap, npages)) {
		free(snap);
		return 0;
	}
	for (i = 0; i < npages; i++) {
		r += (snap[i] & 0xf0) == HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL ||
		     (snap[i] & 0xf0) == HMM_DMIRROR_PROT_DEV_COHERENT_LOCAL;
		*pmd += !!(snap[i] & HMM_DMIRROR_PROT_PMD);
	}
	free(snap);
	return r;
}

static void fill(unsigned char *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 7 + i / PAGE + seed);
}

/*
 * An anonymous buffer of npages with its own pattern (also kept in
 * *shadow), moved into OWNER's VRAM: in 2 MiB folios if thp.
 */
static unsigned char *vram_buffer(size_t npages, int thp, unsigned int seed,
				  unsigned char **shadow)
{
	size_t len = npages * PAGE, pmd;
	unsigned char *raw, *buf;

	raw = mmap(NULL, len + (2UL << 20), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	*shadow = malloc(len);
	if (raw == MAP_FAILED || !*shadow)
		return NULL;
	buf = (unsigned char *)(((uintptr_t)raw + (2UL << 20) - 1) & ~((2UL << 20) - 1));
	madvise(buf, len, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	fill(buf, len, seed);
	memcpy(*shadow, buf, len);
	if (dmirror(gpu, HMM_DMIRROR_MIGRATE_TO_DEV, buf, bounce, npages) ||
	    resident(buf, npages, &pmd) != npages) {
		printf("# could not move %zu pages into rvram%d\n", npages, owner);
		return NULL;
	}
	printf("# %zu pages in rvram%d's VRAM, %zu PMD-mapped\n", npages, owner, pmd);
	return buf;
}

static int reg(int dev, void *addr, size_t len, uint32_t *mr)
{
	struct odp_dma_reg r = {
		.addr = (uintptr_t)addr, .len = len, .flags = ODP_DMA_WRITABLE,
	};

	if (ioctl(nic[dev], ODP_DMA_REG_MR, &r))
		return -errno;
	*mr = r.mr;
	return 0;
}

static int dereg(int dev, uint32_t mr)
{
	return ioctl(nic[dev], ODP_DMA_DEREG_MR, &mr) ? -errno : 0;
}

/* The NIC moves len bytes between buf and the MR at iova. */
static int xfer(int dev, uint32_t mr, void *iova, void *buf, size_t len, int to_mr)
{
	struct odp_dma_xfer x = {
		.mr = mr, .flags = to_mr ? ODP_DMA_TO_MR : 0,
		.iova = (uintptr_t)iova, .len = len, .buf = (uintptr_t)buf,
	};

	if (ioctl(nic[dev], ODP_DMA_XFER, &x)) {
		printf("# xfer of %zu bytes at %p: %s\n", len, iova, strerror(errno));
		return -errno;
	}
	return 0;
}

static struct odp_dma_query query(int dev, uint32_t mr, void *iova)
{
	struct odp_dma_query q = { .mr = mr, .iova = (uintptr_t)iova };

	if (ioctl(nic[dev], ODP_DMA_QUERY, &q))
		q.type = ~0U;
	return q;
}

static struct odp_dma_stats nic_stats(int dev)
{
	struct odp_dma_stats s = { 0 };

	ioctl(nic[dev], ODP_DMA_STATS, &s);
	return s;
}

/*
 * The NIC writes new data at the given (offset, length) pieces of the MR,
 * then reads every touched page back; both checked against the shadow.
 */
struct piece {
	size_t off, len;
};

static int write_pieces(int dev, uint32_t mr, unsigned char *buf,
			unsigned char *shadow, const struct piece *p, int np,
			unsigned int seed)
{
	unsigned char *src;
	int i, err = 0;

	for (i = 0; i < np && !err; i++) {
		src = malloc(p[i].len);
		if (!src)
			return -ENOMEM;
		fill(src, p[i].len, seed + i);
		err = xfer(dev, mr, buf + p[i].off, src, p[i].len, 1);
		if (!err)
			memcpy(shadow + p[i].off, src, p[i].len);
		free(src);
	}
	return err;
}

/* The NIC reads the whole pages under the pieces: mismatched bytes, or -1. */
static long read_pages(int dev, uint32_t mr, unsigned char *buf,
		       const unsigned char *shadow, const struct piece *p, int np)
{
	long bad = 0;
	int i;

	for (i = 0; i < np; i++) {
		size_t first = p[i].off / PAGE * PAGE;
		size_t len = (p[i].off + p[i].len + PAGE - 1) / PAGE * PAGE - first;
		unsigned char *dst = malloc(len);
		size_t j;

		if (!dst || xfer(dev, mr, buf + first, dst, len, 0)) {
			free(dst);
			return -1;
		}
		for (j = 0; j < len; j++)
			bad += dst[j] != shadow[first + j];
		free(dst);
	}
	return bad;
}

/* How many touched pages the NIC maps with type, and inside BAR2. */
static void where(int dev, uint32_t mr, unsigned char *buf, const struct piece *p,
		  int np, uint32_t type, int *typed, int *in_bar, int *alias)
{
	int i;
	size_t off;

	*typed = *in_bar = *alias = 0;
	for (i = 0; i < np; i++) {
		for (off = p[i].off / PAGE * PAGE; off < p[i].off + p[i].len; off += PAGE) {
			struct odp_dma_query q = query(dev, mr, buf + off);

			*typed += q.type == type;
			*in_bar += q.dma >= bar_start && q.dma + PAGE - 1 <= bar_end;
			*alias += q.alias;
			if (q.type < 4)
				total[q.type]++;
			if (off == p[i].off / PAGE * PAGE && i == 0)
				printf("# page at +%#zx: type %u, dma %#llx, alias %u\n",
				       off, q.type, (unsigned long long)q.dma, q.alias);
		}
	}
}

static int pages_of(const struct piece *p, int np)
{
	int i, pages = 0;

	for (i = 0; i < np; i++)
		pages += (p[i].off + p[i].len + PAGE - 1) / PAGE - p[i].off / PAGE;
	return pages;
}

/* How a round expects the NIC to reach the VRAM pages. */
enum expect {
	MIGRATE,	/* core migrates them to system RAM first */
	BUS,		/* P2P aliases at PCI bus addresses in BAR2 */
	COHERENT,	/* device-coherent pages mapped as RAM, at their BAR address */
};

/*
 * One round: the NIC dev writes the pieces of an MR over a VRAM buffer and
 * reads them back; expect says how the NIC must reach the pages.
 */
static void round_trip(const char *what, int dev, size_t npages, int thp,
		       const struct piece *p, int np, enum expect expect)
{
	unsigned char *shadow, *buf = vram_buffer(npages, thp, 11 + n, &shadow);
	long long to_ram, grants;
	struct odp_dma_stats a, b;
	int typed, in_bar, alias, pages = pages_of(p, np);
	size_t pmd, res;
	uint32_t mr;
	long bad;

	check(buf != NULL, "%s: %zu pages in VRAM%s", what, npages, thp ? " (2 MiB folios)" : "");
	if (!buf)
		return;
	check(reg(dev, buf, npages * PAGE, &mr) == 0, "%s: ODP MR registered", what);
	to_ram = stat_of("pages_to_ram");
	grants = stat_of("alias_grants");
	a = nic_stats(dev);
	check(write_pieces(dev, mr, buf, shadow, p, np, 101) == 0,
	      "%s: the DMA engine wrote %d pieces into the MR", what, np);
	bad = read_pages(dev, mr, buf, shadow, p, np);
	check(bad == 0, "%s: the DMA engine read back %d pages, %ld bytes wrong", what, pages, bad);
	b = nic_stats(dev);
	where(dev, mr, buf, p, np, expect == BUS ? ODP_DMA_MAP_BUS : ODP_DMA_MAP_RAM,
	      &typed, &in_bar, &alias);
	res = resident(buf, npages, &pmd);
	printf("# %s: rvram pages_to_ram +%lld, alias_grants +%lld; NIC faults +%llu, "
	       "mapped bus %llu, host bridge %llu, ram %llu (aliases %llu), DMA ops +%llu\n",
	       what, stat_of("pages_to_ram") - to_ram, stat_of("alias_grants") - grants,
	       (unsigned long long)(b.faults - a.faults),
	       (unsigned long long)(b.map_bus - a.map_bus),
	       (unsigned long long)(b.map_host_bridge - a.map_host_bridge),
	       (unsigned long long)(b.map_ram - a.map_ram),
	       (unsigned long long)(b.map_alias - a.map_alias),
	       (unsigned long long)(b.dma_ops - a.dma_ops));
	if (expect == COHERENT) {
		check(typed == pages && in_bar == pages && alias == 0,
		      "%s: %d/%d pages mapped as memory at their address in rvram%d's BAR2, %d aliases",
		      what, in_bar, pages, owner, alias);
		check(stat_of("pages_to_ram") == to_ram && stat_of("alias_grants") == grants,
		      "%s: no page migrated, no alias granted (pages_to_ram +%lld, alias_grants +%lld)",
		      what, stat_of("pages_to_ram") - to_ram, stat_of("alias_grants") - grants);
		check(res == npages, "%s: all %zu pages still in VRAM (%zu)", what, npages, res);
		check(b.map_ram - a.map_ram >= (uint64_t)pages && b.map_bus == a.map_bus &&
		      b.map_host_bridge == a.map_host_bridge && b.map_alias == a.map_alias,
		      "%s: the NIC counted %llu RAM mappings, no P2P", what,
		      (unsigned long long)(b.map_ram - a.map_ram));
	} else if (expect == BUS) {
		check(typed == pages && in_bar == pages && alias == pages,
		      "%s: %d/%d pages mapped at PCI bus addresses inside rvram%d's BAR2, %d aliases",
		      what, in_bar, pages, owner, alias);
		check(stat_of("pages_to_ram") == to_ram,
		      "%s: no page migrated (pages_to_ram +%lld)", what,
		      stat_of("pages_to_ram") - to_ram);
		check(res == npages, "%s: all %zu pages still in VRAM (%zu)", what, npages, res);
		check(b.map_bus - a.map_bus >= (uint64_t)pages && b.map_ram == a.map_ram &&
		      b.map_alias - a.map_alias >= (uint64_t)pages,
		      "%s: the NIC counted %llu bus-address alias mappings, %llu RAM", what,
		      (unsigned long long)(b.map_bus - a.map_bus),
		      (unsigned long long)(b.map_ram - a.map_ram));
	} else {
		check(typed == pages && in_bar == 0 && alias == 0,
		      "%s: %d/%d pages mapped in system RAM, none in BAR2, no alias",
		      what, typed, pages);
		check(stat_of("pages_to_ram") - to_ram >= pages,
		      "%s: core migrated the touched pages (pages_to_ram +%lld for %d)",
		      what, stat_of("pages_to_ram") - to_ram, pages);
		check(b.map_bus == a.map_bus && b.map_host_bridge == a.map_host_bridge &&
		      b.map_alias == a.map_alias,
		      "%s: no P2P mapping counted by the NIC", what);
	}
	check(dereg(dev, mr) == 0, "%s: MR deregistered", what);
	check(memcmp(buf, shadow, npages * PAGE) == 0,
	      "%s: the CPU reads the NIC's data and the rest intact", what);
	munmap(buf, npages * PAGE);
	free(shadow);
}

/*
 * The NIC holds mappings while the range changes under it: the owner
 * migrates it back, then to the device again, then it is replaced.
 */
static void invalidation(void)
{
	const struct piece p[] = { { 0, 2 * PAGE } };
	unsigned char *shadow, *buf = vram_buffer(8, 0, 77, &shadow);
	struct odp_dma_stats a, b;
	struct odp_dma_query q;
	unsigned char *fresh;
	uint32_t mr;
	void *m;

	check(buf && reg(0, buf, 8 * PAGE, &mr) == 0, "invalidate: MR over 8 VRAM pages");
	if (!buf)
		return;
	check(write_pieces(0, mr, buf, shadow, p, 1, 5) == 0 &&
	      query(0, mr, buf).type == ODP_DMA_MAP_BUS,
	      "invalidate: the NIC wrote 2 pages through aliases");
	a = nic_stats(0);
	check(dmirror(gpu, HMM_DMIRROR_MIGRATE_TO_SYS, buf, bounce, 8) == 0,
	      "invalidate: the GPU migrated the range to system memory");
	b = nic_stats(0);
	q = query(0, mr, buf);
	check(b.invalidations > a.invalidations && q.type == ODP_DMA_MAP_NONE,
	      "invalidate: the NIC's mapping was dropped (%llu invalidations, type %u)",
	      (unsigned long long)(b.invalidations - a.invalidations), q.type);
	check(read_pages(0, mr, buf, shadow, p, 1) == 0 &&
	      query(0, mr, buf).type == ODP_DMA_MAP_RAM,
	      "invalidate: re-faulted, the NIC reads its data from system RAM");
	a = nic_stats(0);
	check(dmirror(gpu, HMM_DMIRROR_MIGRATE_TO_DEV, buf, bounce, 8) == 0,
	      "invalidate: the GPU migrated the range back into VRAM");
	b = nic_stats(0);
	check(b.invalidations > a.invalidations &&
	      read_pages(0, mr, buf, shadow, p, 1) == 0 &&
	      query(0, mr, buf).type == ODP_DMA_MAP_BUS,
	      "invalidate: re-faulted, the NIC reads the same data through aliases again");
	/* munmap and a new mapping at the same address. */
	a = nic_stats(0);
	munmap(buf, 8 * PAGE);
	check(query(0, mr, buf).type == ODP_DMA_MAP_NONE &&
	      nic_stats(0).invalidations > a.invalidations,
	      "invalidate: munmap dropped the NIC's mapping");
	check(xfer(0, mr, buf, bounce, PAGE, 0) == -EFAULT,
	      "invalidate: a transfer over the hole fails with EFAULT");
	m = mmap(buf, 8 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	fresh = m;
	if (m != MAP_FAILED) {
		fill(fresh, 8 * PAGE, 200);
		memcpy(shadow, fresh, 8 * PAGE);
	}
	check(m == buf && read_pages(0, mr, buf, shadow, p, 1) == 0,
	      "invalidate: after a new mmap the NIC reads the new data");
	check(dereg(0, mr) == 0, "invalidate: MR deregistered");
	munmap(buf, 8 * PAGE);
	free(shadow);
}

/* The GPU unbinds while the NIC maps its VRAM: nothing is lost. */
static void unbind(void)
{
	const struct piece p[] = { { 0, 8 * PAGE } };
	const struct piece w[] = { { PAGE, 2 * PAGE } };
	unsigned char *shadow, *buf = vram_buffer(8, 0, 33, &shadow);
	struct odp_dma_stats a, b;
	uint32_t mr;
	long bad;

	check(buf && reg(0, buf, 8 * PAGE, &mr) == 0, "unbind: MR over 8 VRAM pages");
	if (!buf)
		return;
	check(write_pieces(0, mr, buf, shadow, w, 1, 9) == 0 &&
	      query(0, mr, buf + PAGE).type == ODP_DMA_MAP_BUS,
	      "unbind: the NIC wrote 2 pages through aliases");
	a = nic_stats(0);
	close(gpu);
	check(rvram_unbind(owner_pci) == 0,
	      "unbind: rvram%d unbound while the NIC maps its VRAM", owner);
	b = nic_stats(0);
	check(b.invalidations > a.invalidations && query(0, mr, buf + PAGE).type == ODP_DMA_MAP_NONE,
	      "unbind: eviction dropped the NIC's mappings first");
	bad = read_pages(0, mr, buf, shadow, p, 1);
	check(bad == 0 && query(0, mr, buf).type == ODP_DMA_MAP_RAM,
	      "unbind: the NIC reads all 8 pages from system RAM, %ld bytes wrong", bad);
	check(dereg(0, mr) == 0 && memcmp(buf, shadow, 8 * PAGE) == 0,
	      "unbind: the CPU reads every byte");
	check(rvram_bind(owner_pci) == 0 && open_gpu() >= 0,
	      "unbind: rvram%d bound again", owner);
	munmap(buf, 8 * PAGE);
	free(shadow);
}

int main(int argc, char **argv)
{
	const struct piece four_k[] = {
		{ 0, 4 * PAGE },	/* whole pages */
		{ 5 * PAGE + 100, 300 },	/* inside a page */
		{ 6 * PAGE + 3000, 2000 },	/* across a page boundary */
	};
	const struct piece folio[] = {
		{ 0, PAGE }, { 255 * PAGE + 2048, PAGE }, { 511 * PAGE, PAGE },
	};
	const struct piece two[] = { { 0, 2 * PAGE } };
	char path[96], line[256];
	unsigned long long s, e, fl;
	FILE *f;
	int i;

	if (argc != 5 && (argc != 6 || strcmp(argv[5], "coherent"))) {
		fprintf(stderr, "usage: odp-dma-test OWNER OWNER_PCI NEAR FAR [coherent]\n");
		return 2;
	}
	owner = atoi(argv[1]);
	owner_pci = argv[2];
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
	bounce = malloc(PMD_PAGES * PAGE);
	check(bar_end > bar_start && nic[0] >= 0 && nic[1] >= 0 && open_gpu() >= 0 && bounce,
	      "setup: rvram%d BAR2 %#llx-%#llx, NIC odp_dma%s under the switch, odp_dma%s far",
	      owner, (unsigned long long)bar_start, (unsigned long long)bar_end, argv[3], argv[4]);
	if (failed) {
		printf("1..%d\n", n);
		return 1;
	}
	/* Aliases on (the default), whatever an earlier run left. */
	if (!find_switches())
		printf("# no P2P alias switch (%s/rvramN/p2p_alias)\n", DEBUGFS);
	else if (set_switches('Y'))
		printf("# cannot turn the P2P alias switches on\n");

	if (argc == 6) {
		/* Both NICs: coherent memory needs no P2P path of its own. */
		round_trip("coherent 4k", 0, 8, 0, four_k, 3, COHERENT);
		round_trip("coherent thp", 0, PMD_PAGES, 1, folio, 3, COHERENT);
		round_trip("coherent far 4k", 1, 8, 0, two, 1, COHERENT);
		if (nswitches && set_switches(0))
			printf("# cannot restore the P2P alias switches\n");
		printf("1..%d\n", n);
		return failed ? 1 : 0;
	}
	round_trip("alias 4k", 0, 8, 0, four_k, 3, BUS);
	round_trip("alias thp", 0, PMD_PAGES, 1, folio, 3, BUS);
	round_trip("far 4k", 1, 8, 0, two, 1, MIGRATE);
	check(set_switches('N') == 0, "aliases off: the %d GPUs' p2p_alias switches read N",
	      nswitches);
	round_trip("aliases off 4k", 0, 8, 0, two, 1, MIGRATE);
	round_trip("aliases off thp", 0, PMD_PAGES, 1, folio, 1, MIGRATE);
	check(set_switches('Y') == 0, "aliases on again: the %d GPUs' p2p_alias switches read Y",
	      nswitches);
	invalidation();
	unbind();
	if (set_switches(0))
		printf("# cannot restore the P2P alias switches\n");

	printf("# NIC mappings checked: bus address %llu, host bridge %llu, system RAM %llu\n",
	       (unsigned long long)total[ODP_DMA_MAP_BUS],
	       (unsigned long long)total[ODP_DMA_MAP_HOST_BRIDGE],
	       (unsigned long long)total[ODP_DMA_MAP_RAM]);
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}
