// SPDX-License-Identifier: GPL-2.0
/*
 * A 2 MiB THP migrated to a dmirror device as one huge device folio, split
 * there, then all of the device's memory evicted (HMM_DMIRROR_RELEASE) or
 * migrated back. Every page must keep its own data; nothing may touch any
 * other memory.
 *
 * Regression test for lib/test_hmm's folio_split callback: it reset the
 * backing page's order but left it a compound head with 0 pages, so the
 * eviction's folio_copy() of the split head copied on through all of
 * memory (a triple fault, or general protection faults in unrelated
 * processes). Seen first in hmm-race's THP region under RELEASE.
 *
 *   dmirror-thp-split DEVICE      prints TAP
 */
#include <stdint.h>
#include <sys/mman.h>

#include "dmirror.h"

#define NPAGES (PMD_SIZE / PAGE)

static int fd;
static char *buf;
/* test_hmm's MIGRATE_TO_DEV copies what it migrated out to `ptr`. */
static char scratch[PMD_SIZE];

/* The 64-bit words of page `i` in round `r`: each page its own pattern. */
static uint64_t word(unsigned int r, unsigned long i, unsigned long w)
{
	return ((uint64_t)r << 56) ^ (i << 20) ^ w ^ 0x5a5a000000005a5aULL;
}

static void fill(unsigned int r)
{
	for (unsigned long i = 0; i < NPAGES; i++) {
		uint64_t *p = (uint64_t *)(buf + i * PAGE);

		for (unsigned long w = 0; w < PAGE / 8; w++)
			p[w] = word(r, i, w);
	}
}

/* Pages whose data is not round `r`'s, read by the CPU. */
static unsigned long bad_pages(unsigned int r)
{
	unsigned long bad = 0;

	for (unsigned long i = 0; i < NPAGES; i++) {
		const uint64_t *p = (const uint64_t *)(buf + i * PAGE);

		for (unsigned long w = 0; w < PAGE / 8; w++)
			if (p[w] != word(r, i, w)) {
				if (!bad)
					printf("# page %lu word %lu: %#llx, not %#llx\n", i, w,
					       (unsigned long long)p[w],
					       (unsigned long long)word(r, i, w));
				bad++;
				break;
			}
	}
	return bad;
}

/*
 * A fresh THP at buf with round r's data, migrated to the device: 1 if it
 * went as one huge device folio (SNAPSHOT shows a PMD mapping of local
 * device memory), 0 if the system gave no THP or the device no huge page,
 * -1 on an error.
 */
static int thp_to_device(unsigned int r)
{
	unsigned char snap[NPAGES];
	int ret;

	if (mmap(buf, PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0) == MAP_FAILED)
		return -1;
	madvise(buf, PMD_SIZE, MADV_HUGEPAGE);
	fill(r);
	ret = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, buf, scratch, NPAGES);
	if (ret) {
		printf("# MIGRATE_TO_DEV: %s\n", strerror(-ret));
		return -1;
	}
	ret = dmirror(fd, HMM_DMIRROR_SNAPSHOT, buf, snap, NPAGES);
	if (ret) {
		printf("# SNAPSHOT: %s\n", strerror(-ret));
		return -1;
	}
	return (snap[0] & HMM_DMIRROR_PROT_PMD) && (snap[0] & HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL);
}

/* Ways to split the huge device folio; each leaves page 0 on the device. */
enum split { CPU_FAULT, MIGRATE_PART, UNMAP_PART, NSPLITS };

static const char *const split_name[] = {
	[CPU_FAULT] = "a CPU read of one page after an mprotect() split the PMD",
	[MIGRATE_PART] = "MIGRATE_TO_SYS of 8 pages in its middle",
	[UNMAP_PART] = "munmap() of its second half",
};

static int split(enum split how)
{
	volatile char *p = buf + 300 * PAGE;

	switch (how) {
	case CPU_FAULT:
		if (mprotect(buf + 100 * PAGE, PAGE, PROT_READ))
			return -errno;
		(void)*p;
		return mprotect(buf + 100 * PAGE, PAGE, PROT_READ | PROT_WRITE) ? -errno : 0;
	case MIGRATE_PART:
		return dmirror(fd, HMM_DMIRROR_MIGRATE_TO_SYS, buf + 200 * PAGE, scratch, 8);
	case UNMAP_PART:
		return munmap(buf + PMD_SIZE / 2, PMD_SIZE / 2) ? -errno : 0;
	default:
		return -EINVAL;
	}
}

/* Ways to take the rest of the folio off the device. */
enum back { RELEASE, MIGRATE_ALL, NBACKS };

static const char *const back_name[] = {
	[RELEASE] = "RELEASE evicts the device memory",
	[MIGRATE_ALL] = "MIGRATE_TO_SYS of the range",
};

int main(int argc, char **argv)
{
	unsigned int r = 0;
	char *area;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 2;
	}
	printf("TAP version 13\n# dmirror-thp-split %s\n", argv[1]);
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		printf("Bail out! open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	area = mmap(NULL, 2 * PMD_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", strerror(errno));
		return 1;
	}
	buf = (char *)(((uintptr_t)area + PMD_SIZE - 1) & ~(PMD_SIZE - 1));

	for (int how = 0; how < NSPLITS; how++) {
		for (int back = 0; back < NBACKS; back++) {
			unsigned long npages = how == UNMAP_PART ? NPAGES / 2 : NPAGES;
			int huge, ret;

			r++;
			huge = thp_to_device(r);
			if (huge < 0) {
				tap(0, "%s, then %s: the THP went to the device",
				    split_name[how], back_name[back]);
				continue;
			}
			if (!huge) {
				printf("ok %d # SKIP %s, then %s: no huge device folio (THP disabled or no huge page)\n",
				       ++tap_n, split_name[how], back_name[back]);
				continue;
			}
			ret = split(how);
			if (ret) {
				tap(0, "%s, then %s: the split (%s)", split_name[how],
				    back_name[back], strerror(-ret));
				continue;
			}
			if (back == RELEASE) {
				/*
				 * EBUSY: some memory stayed in use (no huge
				 * page for it now); the CPU reads fault it back.
				 */
				ret = dmirror(fd, HMM_DMIRROR_RELEASE, buf, NULL, npages);
				if (ret == -EBUSY) {
					printf("# RELEASE: EBUSY\n");
					ret = 0;
				}
			} else {
				ret = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_SYS, buf, scratch, npages);
			}
			if (ret) {
				tap(0, "%s, then %s: %s", split_name[how], back_name[back],
				    strerror(-ret));
				continue;
			}
			if (how == UNMAP_PART) {
				/* Only the first half is there to read. */
				mmap(buf + PMD_SIZE / 2, PMD_SIZE / 2, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
				for (unsigned long i = NPAGES / 2; i < NPAGES; i++)
					for (unsigned long w = 0; w < PAGE / 8; w++)
						((uint64_t *)(buf + i * PAGE))[w] = word(r, i, w);
			}
			tap(bad_pages(r) == 0, "%s, then %s: every page keeps its data",
			    split_name[how], back_name[back]);
		}
	}
	munmap(area, 2 * PMD_SIZE);
	close(fd);
	return tap_end();
}
