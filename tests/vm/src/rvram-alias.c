// SPDX-License-Identifier: GPL-2.0
/*
 * P2P aliases of device-private pages, end to end through rvram.
 *
 *   rvram-alias OWNER NEAR FAR OWNER_PCI
 *
 * OWNER, NEAR and FAR are rvram indices: OWNER and NEAR sit under one PCIe
 * switch (P2PDMA possible), FAR behind its own root port on the q35 host
 * bridge, which is not on the P2PDMA whitelist (P2PDMA impossible).
 * OWNER_PCI is OWNER's PCI address, for the unbind case.
 *
 * Data is migrated into OWNER's VRAM; then NEAR or FAR reads and writes it
 * through the dmirror ABI as a DMA client (HMM_DMIRROR_FLAGS with rvram's
 * alias flags), and the test checks every byte, where the pages are
 * (OWNER's SNAPSHOT) and rvram's counters in debugfs.
 *
 * Prints TAP.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dmirror.h"

#define NPAGES 1024L /* two PMDs */
#define SIZE (NPAGES * 4096L)

static int n, failed;
static int owner, near, far;
/* Per GPU: a plain mirror, a DMA alias client, a virtual-DMA alias client. */
static int plain[8], dma[8], cpu[8];

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
	if (!ok)
		failed++;
}

/* One counter of /sys/kernel/debug/rvram/rvramN/stats, -1 if missing. */
static long long stat_of(int gpu, const char *key)
{
	char path[96], k[64];
	long long v, ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/rvram/rvram%d/stats", gpu);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", k, &v) == 2)
		if (!strcmp(k, key))
			ret = v;
	fclose(f);
	return ret;
}

struct counters {
	long long to_ram, grants, accesses;
};

static struct counters counters(int client)
{
	struct counters c = {
		.to_ram = stat_of(owner, "migrated_to_ram"),
		.grants = stat_of(owner, "alias_grants"),
		.accesses = stat_of(client, "alias_accesses"),
	};
	return c;
}

/* A dmirror command that fails, logged, unless it handled every page. */
static int dmirror_all(int fd, unsigned long req, void *addr, void *ptr,
		       uint64_t npages)
{
	struct hmm_dmirror_cmd cmd = {
		.addr = (uintptr_t)addr,
		.ptr = (uintptr_t)ptr,
		.npages = npages,
	};

	if (ioctl(fd, req, &cmd)) {
		int err = errno;

		printf("# ioctl %#lx: %s\n", req, strerror(err));
		return -err;
	}
	/* Data commands report how many pages they handled. */
	if ((req == HMM_DMIRROR_READ || req == HMM_DMIRROR_WRITE ||
	     req == HMM_DMIRROR_MIGRATE_TO_DEV || req == HMM_DMIRROR_MIGRATE_TO_SYS) &&
	    cmd.cpages != npages)
		return -EIO;
	return 0;
}

static int set_flags(int fd, uint64_t flags)
{
	return dmirror_all(fd, HMM_DMIRROR_FLAGS, NULL, NULL, flags);
}

static void fill(unsigned char *p, unsigned int seed)
{
	size_t i;

	for (i = 0; i < SIZE; i++)
		p[i] = (unsigned char)(i * 13 + i / 4096 + seed);
}

static size_t mismatches(const unsigned char *p, unsigned int seed)
{
	size_t i, bad = 0;

	for (i = 0; i < SIZE; i++)
		bad += p[i] != (unsigned char)(i * 13 + i / 4096 + seed);
	return bad;
}

/* Pages of the range resident in OWNER's VRAM, and how many PMD-mapped. */
static size_t resident(unsigned char *buf, size_t *pmd)
{
	unsigned char snap[NPAGES];
	size_t i, r = 0;

	*pmd = 0;
	if (dmirror_all(plain[owner], HMM_DMIRROR_SNAPSHOT, buf, snap, NPAGES))
		return 0;
	for (i = 0; i < NPAGES; i++) {
		r += (snap[i] & 0xf0) == HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL;
		*pmd += !!(snap[i] & HMM_DMIRROR_PROT_PMD);
	}
	return r;
}

/*
 * A THP-aligned anonymous buffer with @seed's pattern, moved into VRAM, in
 * 2 MiB folios where THP allows (@advice MADV_HUGEPAGE), or in 4 KiB pages
 * mapped by PTEs (MADV_NOHUGEPAGE).
 */
static unsigned char *vram_buffer_of(unsigned int seed, unsigned char *bounce,
				     int advice)
{
	unsigned char *raw, *buf;
	size_t pmd;

	raw = mmap(NULL, SIZE + (2UL << 20), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	buf = (unsigned char *)(((uintptr_t)raw + (2UL << 20) - 1) & ~((2UL << 20) - 1));
	madvise(buf, SIZE, advice);
	fill(buf, seed);
	if (dmirror_all(plain[owner], HMM_DMIRROR_MIGRATE_TO_DEV, buf, bounce, NPAGES) ||
	    resident(buf, &pmd) != NPAGES)
		return NULL;
	printf("# seed %u: %lu pages in rvram%d, %zu PMD-mapped\n", seed, NPAGES, owner, pmd);
	if (advice == MADV_NOHUGEPAGE && pmd)
		return NULL;
	return buf;
}

static unsigned char *vram_buffer(unsigned int seed, unsigned char *bounce)
{
	return vram_buffer_of(seed, bounce, MADV_HUGEPAGE);
}

static void report(const char *what, struct counters a, struct counters b)
{
	printf("# %s: migrated_to_ram +%lld, alias_grants +%lld, alias_accesses +%lld\n",
	       what, b.to_ram - a.to_ram, b.grants - a.grants, b.accesses - a.accesses);
}

/*
 * 4 KiB pages mapped by PTEs: rvram's aliases are linear over its VRAM
 * (PGMAP_ALIAS_LINEAR), so core answers every page from the pagemap's
 * description, with no call into rvram, and counts the pages it reports
 * as aliases (alias_grants): NPAGES, up to twice that for walks that
 * retry.
 */
static void alias_per_page_table(unsigned char *bounce)
{
	unsigned char *buf = vram_buffer_of(10, bounce, MADV_NOHUGEPAGE);
	struct counters a, b;
	size_t pmd;

	check(buf != NULL, "4k alias: data in rvram%d, in 4 KiB pages", owner);
	if (!buf)
		return;
	a = counters(near);
	memset(bounce, 0, SIZE);
	check(dmirror_all(dma[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0,
	      "4k alias: rvram%d reads the range", near);
	b = counters(near);
	report("4k alias read", a, b);
	check(mismatches(bounce, 10) == 0, "4k alias: every byte read through the alias is right");
	check(b.to_ram == a.to_ram && b.accesses - a.accesses == NPAGES,
	      "4k alias: %lu pages read through aliases, none migrated", NPAGES);
	check(b.grants - a.grants >= NPAGES && b.grants - a.grants <= 2 * NPAGES,
	      "4k alias: core reported %lld pages of rvram%d as aliases, for %lu pages",
	      b.grants - a.grants, owner, NPAGES);
	check(resident(buf, &pmd) == NPAGES && pmd == 0,
	      "4k alias: the pages are still in rvram%d's VRAM, PTE-mapped", owner);
	munmap(buf, SIZE);
}

/* NEAR reads and writes through P2P aliases: nothing migrates. */
static void alias_allowed(unsigned char *bounce)
{
	unsigned char *buf = vram_buffer(1, bounce);
	struct counters a, b;
	size_t pmd;

	check(buf != NULL, "alias: data in rvram%d", owner);
	if (!buf)
		return;
	a = counters(near);
	memset(bounce, 0, SIZE);
	check(dmirror_all(dma[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0, "alias: rvram%d reads the range", near);
	b = counters(near);
	report("alias read", a, b);
	check(mismatches(bounce, 1) == 0, "alias: every byte read through the alias is right");
	check(b.to_ram == a.to_ram, "alias: no page migrated to RAM");
	/* Every page reported as an alias, some twice if a walk retried. */
	check(b.grants - a.grants >= NPAGES && b.grants - a.grants <= 2 * NPAGES,
	      "alias: core reported %lld pages of rvram%d as aliases", b.grants - a.grants, owner);
	check(b.accesses - a.accesses == NPAGES, "alias: rvram%d accessed %lu pages through aliases", near, NPAGES);
	check(resident(buf, &pmd) == NPAGES, "alias: the pages are still in rvram%d's VRAM", owner);

	/* The owner writes through the device; the client sees it. */
	fill(bounce, 2);
	check(dmirror_all(plain[owner], HMM_DMIRROR_WRITE, buf, bounce, NPAGES) == 0, "alias: rvram%d writes its VRAM", owner);
	memset(bounce, 0, SIZE);
	a = counters(near);
	check(dmirror_all(dma[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 2) == 0, "alias: data written by the owner is read through the alias");

	/* The client writes through the alias; the CPU sees it. */
	fill(bounce, 3);
	check(dmirror_all(dma[near], HMM_DMIRROR_WRITE, buf, bounce, NPAGES) == 0, "alias: rvram%d writes through the alias", near);
	b = counters(near);
	report("alias read+write", a, b);
	check(b.to_ram == a.to_ram && resident(buf, &pmd) == NPAGES,
	      "alias: after the write the pages are still in VRAM, none migrated");
	check(mismatches(buf, 3) == 0, "alias: the CPU reads what the client wrote");

	/* Invalidation: pages moved back to RAM are read from RAM. */
	buf = vram_buffer(4, bounce);
	check(buf && dmirror_all(plain[owner], HMM_DMIRROR_MIGRATE_TO_SYS, buf, bounce, NPAGES) == 0,
	      "alias: the range migrates back to RAM");
	a = counters(near);
	check(buf && dmirror_all(dma[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 4) == 0, "alias: after migration the client reads the RAM copy");
	b = counters(near);
	check(b.accesses == a.accesses, "alias: no alias used for pages in RAM");

	/* Eviction of the owner's VRAM (RELEASE) while the client uses aliases. */
	buf = vram_buffer(9, bounce);
	check(buf && dmirror_all(dma[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 9) == 0, "evict: rvram%d reads through aliases", near);
	check(buf && dmirror_all(plain[owner], HMM_DMIRROR_RELEASE, buf, NULL, 1) == 0,
	      "evict: rvram%d evicts its VRAM", owner);
	a = counters(near);
	memset(bounce, 0, SIZE);
	check(buf && dmirror_all(dma[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 9) == 0, "evict: the client reads the evicted data");
	b = counters(near);
	check(b.accesses == a.accesses && resident(buf, &pmd) == 0,
	      "evict: nothing in VRAM, no alias used");
	check(buf && mismatches(buf, 9) == 0, "evict: the CPU reads the evicted data");
}

/* Without the flag NEAR's reads migrate the pages: the status quo. */
static void alias_not_allowed(unsigned char *bounce)
{
	unsigned char *buf = vram_buffer(5, bounce);
	struct counters a, b;
	size_t pmd;

	check(buf != NULL, "no alias: data in rvram%d, rvram%d is a plain mirror", owner, near);
	if (!buf)
		return;
	a = counters(near);
	check(dmirror_all(plain[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 5) == 0, "no alias: rvram%d reads the right data", near);
	b = counters(near);
	report("no alias", a, b);
	/* Counted per folio: a PMD-mapped folio migrates whole. */
	check(b.to_ram - a.to_ram >= NPAGES / 512 && b.to_ram - a.to_ram <= NPAGES,
	      "no alias: the range migrated to RAM (%lld folios)", b.to_ram - a.to_ram);
	check(b.grants == a.grants && b.accesses == a.accesses, "no alias: no alias granted or used");
	check(resident(buf, &pmd) == 0, "no alias: nothing left in VRAM");
}

/* FAR cannot reach OWNER peer to peer: core falls back to migration. */
static void fallback(unsigned char *bounce)
{
	unsigned char *buf = vram_buffer(6, bounce);
	struct counters a, b;
	size_t pmd;

	check(buf != NULL,
	      "fallback: data in rvram%d, rvram%d (across the host bridge) is a DMA alias client", owner, far);
	if (!buf)
		return;
	a = counters(far);
	check(dmirror_all(dma[far], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 6) == 0, "fallback: rvram%d reads the right data", far);
	b = counters(far);
	report("fallback", a, b);
	/* Counted per folio: a PMD-mapped folio migrates whole. */
	check(b.to_ram - a.to_ram >= NPAGES / 512 && b.to_ram - a.to_ram <= NPAGES,
	      "fallback: the range migrated to RAM (%lld folios)", b.to_ram - a.to_ram);
	check(b.accesses == a.accesses, "fallback: rvram%d used no alias", far);
	check(resident(buf, &pmd) == 0, "fallback: nothing left in VRAM");

	/* The virtual-DMA rule: a CPU client can use any alias. */
	buf = vram_buffer(7, bounce);
	check(buf != NULL, "cpu client: data in rvram%d, rvram%d is a virtual-DMA alias client",
	      owner, far);
	if (!buf)
		return;
	a = counters(far);
	check(dmirror_all(cpu[far], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 7) == 0, "cpu client: reads the right data");
	b = counters(far);
	report("cpu client", a, b);
	check(b.to_ram == a.to_ram && b.accesses - a.accesses == NPAGES,
	      "cpu client: read through aliases, nothing migrated");
	check(resident(buf, &pmd) == NPAGES, "cpu client: the pages are still in VRAM");
}

/* debugfs p2p_alias of a GPU: 'Y' or 'N', 0 if it cannot be read. */
static char p2p_alias_of(int gpu)
{
	char path[96], c = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/rvram/rvram%d/p2p_alias", gpu);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, " %c", &c) != 1)
		c = 0;
	fclose(f);
	return c;
}

/* Takes CAP_SYS_ADMIN out of the calling process's effective set. */
static int drop_sys_admin(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
	return syscall(SYS_capset, &h, d);
}

/*
 * HMM_DMIRROR_FLAG_NO_ALIAS: the owner's aliases are off while any of its
 * files keeps the flag set, and setting it needs CAP_SYS_ADMIN. (As on
 * test_hmm, HMM_DMIRROR_FLAGS cannot set no flag at all: cmd.npages 0 is
 * EINVAL. A file clears NO_ALIAS by setting another flag, here ALIAS.)
 */
static void no_alias(void)
{
	char path[32];
	int first, second, status = -1;
	pid_t pid;

	snprintf(path, sizeof(path), "/dev/rvram%d", owner);
	first = open(path, O_RDWR);
	second = open(path, O_RDWR);
	check(first >= 0 && second >= 0 && p2p_alias_of(owner) == 'Y',
	      "no-alias: rvram%d's aliases are on", owner);
	check(set_flags(first, HMM_DMIRROR_FLAG_NO_ALIAS) == 0 && p2p_alias_of(owner) == 'N',
	      "no-alias: a file turns them off");
	check(set_flags(second, HMM_DMIRROR_FLAG_NO_ALIAS) == 0,
	      "no-alias: a second file sets the flag too");
	check(set_flags(first, HMM_DMIRROR_FLAG_ALIAS) == 0 && p2p_alias_of(owner) == 'N',
	      "no-alias: still off when the first file clears it");
	close(second);
	check(p2p_alias_of(owner) == 'Y', "no-alias: on again once the second file is closed");
	close(first);

	pid = fork();
	if (pid == 0) {
		int fd = open(path, O_RDWR);

		if (fd < 0 || drop_sys_admin())
			_exit(2);
		_exit(set_flags(fd, HMM_DMIRROR_FLAG_NO_ALIAS) == -EPERM ? 0 : 1);
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0 && p2p_alias_of(owner) == 'Y',
	      "no-alias: EPERM without CAP_SYS_ADMIN, aliases still on");
}

/* Writes debugfs p2p_alias of a GPU; 0 or -errno. */
static int set_p2p_alias(int gpu, const char *val)
{
	char path[96];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/sys/kernel/debug/rvram/rvram%d/p2p_alias", gpu);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * The debugfs switch and the files that keep the aliases off: they are off
 * while either does. (The switch used to turn them on under such a file,
 * and the last file's close to turn them on under the switch.)
 */
static void no_alias_switch(void)
{
	char path[32];
	int fd;

	snprintf(path, sizeof(path), "/dev/rvram%d", owner);
	fd = open(path, O_RDWR);
	check(fd >= 0 && set_flags(fd, HMM_DMIRROR_FLAG_NO_ALIAS) == 0 &&
	      p2p_alias_of(owner) == 'N', "no-alias switch: a file turns them off");
	check(set_p2p_alias(owner, "Y") == 0 && p2p_alias_of(owner) == 'N',
	      "no-alias switch: the switch on does not turn them on under the file");
	check(set_p2p_alias(owner, "N") == 0, "no-alias switch: the switch off");
	close(fd);
	check(p2p_alias_of(owner) == 'N',
	      "no-alias switch: closing the file does not turn them on under the switch");
	check(set_p2p_alias(owner, "Y") == 0 && p2p_alias_of(owner) == 'Y',
	      "no-alias switch: the switch on turns them on");
}

static int race_fd;
static volatile int race_stop;

/* Sets and clears NO_ALIAS, each time with FAIL_ALLOC, until told to stop. */
static void *flip_no_alias(void *arg)
{
	struct hmm_dmirror_cmd cmd = { 0 };
	long bad = 0;

	(void)arg;
	while (!race_stop) {
		cmd.npages = HMM_DMIRROR_FLAG_FAIL_ALLOC | HMM_DMIRROR_FLAG_NO_ALIAS;
		bad += ioctl(race_fd, HMM_DMIRROR_FLAGS, &cmd) != 0;
		cmd.npages = HMM_DMIRROR_FLAG_FAIL_ALLOC;
		bad += ioctl(race_fd, HMM_DMIRROR_FLAGS, &cmd) != 0;
	}
	return (void *)bad;
}

/*
 * FAIL_ALLOC is one-shot: a migration takes it. Taking it must not undo a
 * FLAGS call of another thread of the same file that lands in between, or
 * the file's NO_ALIAS bit and the GPU's count of such files disagree and
 * the aliases stay off (or come on) for good. One thread sets and clears
 * NO_ALIAS, with FAIL_ALLOC each time, while another migrates a page back
 * and forth; a second file keeps NO_ALIAS throughout, so that the flips
 * change only the count and come fast. At the end the first file clears
 * its flag: the aliases must stay off for the second file alone, and come
 * on when it closes. Bounded by a count of migrations, not a time.
 */
static void fail_alloc_race(void)
{
	struct hmm_dmirror_cmd cmd = { 0 };
	long to_dev = 0, to_sys = 0, refused = 0, other_err = 0, bad;
	unsigned char bounce[4096];
	char path[32];
	pthread_t t;
	void *ret;
	char *page;
	int i, other;

	snprintf(path, sizeof(path), "/dev/rvram%d", owner);
	race_fd = open(path, O_RDWR);
	other = open(path, O_RDWR);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (race_fd < 0 || other < 0 || page == MAP_FAILED ||
	    set_flags(other, HMM_DMIRROR_FLAG_NO_ALIAS)) {
		check(0, "fail-alloc race: set up");
		return;
	}
	memset(page, 0x5a, 4096);
	race_stop = 0;
	if (pthread_create(&t, NULL, flip_no_alias, NULL)) {
		check(0, "fail-alloc race: thread");
		return;
	}
	cmd.addr = (uintptr_t)page;
	cmd.ptr = (uintptr_t)bounce;
	cmd.npages = 1;
	/*
	 * Into VRAM and back. A migration into VRAM takes FAIL_ALLOC and
	 * still moves a single page (the flag fails only PMD-sized VRAM);
	 * one back to system memory that finds the flag set moves nothing,
	 * and the page stays in VRAM for the next round.
	 */
	for (i = 0; i < 4000; i++) {
		unsigned long req = i & 1 ? HMM_DMIRROR_MIGRATE_TO_SYS : HMM_DMIRROR_MIGRATE_TO_DEV;

		cmd.cpages = 0;
		if (ioctl(race_fd, req, &cmd))
			other_err++;
		else if (!cmd.cpages)
			refused += req == HMM_DMIRROR_MIGRATE_TO_SYS;
		else if (req == HMM_DMIRROR_MIGRATE_TO_DEV)
			to_dev++;
		else
			to_sys++;
	}
	race_stop = 1;
	pthread_join(t, &ret);
	bad = (long)ret;
	printf("# fail-alloc race: %d migrations: %ld into VRAM, %ld back, %ld back refused by FAIL_ALLOC, %ld errors\n",
	       i, to_dev, to_sys, refused, other_err);
	check(bad == 0 && other_err == 0 && to_dev > 0 && refused > 0,
	      "fail-alloc race: both threads ran, FAIL_ALLOC taken (%ld FLAGS errors)", bad);
	check(set_flags(race_fd, HMM_DMIRROR_FLAG_ALIAS) == 0 && p2p_alias_of(owner) == 'N',
	      "fail-alloc race: still off for the other file");
	close(race_fd);
	close(other);
	check(p2p_alias_of(owner) == 'Y', "fail-alloc race: on once both files are closed");
	check(page[0] == 0x5a && page[4095] == 0x5a, "fail-alloc race: the page's data");
	munmap(page, 4096);
}

/* Unbinding the owner revokes the aliases; the data survives in RAM. */
static void unbind(unsigned char *bounce, const char *pci)
{
	unsigned char *buf = vram_buffer(8, bounce);
	struct counters a;

	check(buf &&
	      dmirror_all(dma[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 8) == 0, "unbind: rvram%d reads through aliases", near);
	if (!buf)
		return;
	a = counters(near);
	check(rvram_unbind(pci) == 0, "unbind: rvram%d unbound", owner);
	memset(bounce, 0, SIZE);
	check(dmirror_all(dma[near], HMM_DMIRROR_READ, buf, bounce, NPAGES) == 0 &&
	      mismatches(bounce, 8) == 0, "unbind: the client reads the evicted data");
	check(stat_of(near, "alias_accesses") == a.accesses, "unbind: no alias of the unbound GPU is used");
	check(mismatches(buf, 8) == 0, "unbind: the CPU reads the evicted data");
	check(rvram_bind(pci) == 0, "unbind: rebound");
}

int main(int argc, char **argv)
{
	unsigned char *bounce;
	char path[32];
	int i;

	if (argc != 5) {
		fprintf(stderr, "usage: %s OWNER NEAR FAR OWNER_PCI\n", argv[0]);
		return 2;
	}
	owner = atoi(argv[1]);
	near = atoi(argv[2]);
	far = atoi(argv[3]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	if (owner < 0 || owner > 7 || near < 0 || near > 7 || far < 0 || far > 7) {
		fprintf(stderr, "rvram indices are 0..7\n");
		return 2;
	}
	for (i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "/dev/rvram%d", i);
		plain[i] = open(path, O_RDWR);
		dma[i] = open(path, O_RDWR);
		cpu[i] = open(path, O_RDWR);
	}
	check(plain[owner] >= 0 && dma[near] >= 0 && dma[far] >= 0 && cpu[far] >= 0,
	      "open rvram%d, rvram%d, rvram%d", owner, near, far);
	check(set_flags(dma[near], RVRAM_FLAG_ALIAS_DMA) == 0 &&
	      set_flags(dma[far], RVRAM_FLAG_ALIAS_DMA) == 0 &&
	      set_flags(cpu[far], RVRAM_FLAG_ALIAS_CPU) == 0, "set the alias client flags");
	check(set_flags(cpu[near], RVRAM_FLAG_ALIAS_DMA | RVRAM_FLAG_ALIAS_CPU) == -EINVAL,
	      "both alias modes at once: EINVAL");
	check(set_flags(cpu[near], 1ULL << 40) == -EINVAL, "unknown flag: EINVAL");
	bounce = malloc(SIZE);

	alias_allowed(bounce);
	alias_per_page_table(bounce);
	alias_not_allowed(bounce);
	fallback(bounce);
	no_alias();
	no_alias_switch();
	fail_alloc_race();
	unbind(bounce, argv[4]);

	printf("1..%d\n", n);
	return failed ? 1 : 0;
}
