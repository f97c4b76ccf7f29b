// SPDX-License-Identifier: GPL-2.0
/*
 * HMM stress test: concurrent dmirror commands against migrations and
 * CPU page table changes of the same ranges, for lib/test_hmm (or any
 * driver of its ioctl ABI).
 *
 *   hmm-race [-R] [-p PEER [-f FLAGS]] DEVICE [SECONDS [SEED]]
 *
 * e.g. "hmm-race /dev/hmm_dmirror0 60", or test_hmm.sh race. One process,
 * eight threads, on one 64-page anonymous region (the "race region") and
 * one 2 MiB-aligned region of 512 pages that asks for transparent huge
 * pages (the "huge region", MADV_HUGEPAGE), plus a read-only, a PROT_NONE
 * and a shared memfd region:
 *
 *  - three ioctl threads issue random READ, WRITE, READ_UNLOCKED,
 *    MIGRATE_TO_DEV, MIGRATE_TO_SYS, SNAPSHOT, EXCLUSIVE, CHECK_EXCLUSIVE,
 *    RELEASE and FLAGS commands, most with valid arguments on the race
 *    region or (one in four) the huge region, some with hostile ones
 *    (unaligned, address 0, kernel addresses, holes, huge and wrapping page
 *    counts, NULL and read-only buffers, unknown commands); every call must
 *    return 0 or an errno of the ABI;
 *  - one chaos thread, every 0-2 ms, zaps a piece (MADV_DONTNEED), makes a
 *    piece read-only and writable again, maps fresh anonymous memory over a
 *    piece (MAP_FIXED), writes a piece with the CPU, migrates the whole
 *    region to the device, or asks for THPs; a second one, on the huge
 *    region, zaps or write-protects a piece of its PMD (splitting it),
 *    writes all of it (a THP fault, or a huge device page migrated back),
 *    migrates all of it to the device (a PMD-sized folio when it is one),
 *    maps a fresh THP region over it or collapses it (MADV_COLLAPSE);
 *  - one data thread owns a private buffer (and its own file, so that the
 *    others' FLAGS do not reach it): it writes a pattern with the CPU,
 *    migrates it to the device, writes a new pattern with the device,
 *    migrates it back, and checks every byte after each step (if the
 *    device goes away meanwhile, every page must hold the data from
 *    before or after the command that ENODEV cut short);
 *  - with -p, a peer thread reads and writes the race and huge regions
 *    through a second device, whose files first get FLAGS with
 *    HMM_DMIRROR_FLAGS (default 0): with none, PEER's faults migrate
 *    DEVICE's pages back to system memory; a driver flag that has PEER
 *    reach them where they are (a P2P DMA alias, say) races that access
 *    with their migration instead;
 *  - a THP thread owns a second 2 MiB-aligned 512-page buffer (a THP) and
 *    its own file: each round it writes new contents, with the CPU or
 *    through the device, then migrates all of it (one PMD-sized folio) or
 *    a part of it (splitting the folio) to the device and back, four
 *    times, checking what each migration copied, SNAPSHOT telling whether
 *    the buffer sits in device memory as one PMD; then it checks every
 *    byte through the device and with the CPU. Meanwhile a THP reader
 *    thread reads random ranges of the buffer through PEER (with -p;
 *    otherwise through a second file of DEVICE) and with the CPU (a
 *    fault that migrates a huge device page back), and checks every byte.
 *    Contents change only while the reader waits (a lock); the
 *    migrations race the reads. A round maps a fresh THP when the last one
 *    was split. At least one round must have had the buffer in device
 *    memory as one PMD (unless the device went away first).
 *
 * -R leaves RELEASE out of the mix: test_hmm's RELEASE tears down the
 * device's memory (memunmap_pages()) while other threads migrate into it,
 * which is a test hook, not a use every driver must survive.
 *
 * The device reads and writes pages while they are migrated and unmapped
 * under it: a driver that uses a stale translation reads or writes freed
 * memory, which KASAN reports in the kernel log (check it after a run),
 * and which may also corrupt this process.
 *
 * SECONDS defaults to 60. The sequence of operations of each thread is a
 * function of SEED (printed; the default is the time): a failure replays
 * with the same seed, up to thread interleaving.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kselftest.h"
#include <lib/test_hmm_uapi.h>

typedef unsigned long long u64;

#define PAGE 4096UL
#define RACE_PAGES 64
/* One PMD of 4 KiB pages: the huge region and the THP buffer. */
#define HUGE_PAGES 512
#define HUGE_SIZE (HUGE_PAGES * PAGE)
#define SIDE_PAGES 16
#define DATA_PAGES 32
#define IOCTL_THREADS 3

static const struct {
	unsigned long cmd;
	const char *name;
	int weight;
} cmds[] = {
	{ HMM_DMIRROR_READ, "READ", 6 },
	{ HMM_DMIRROR_WRITE, "WRITE", 5 },
	{ HMM_DMIRROR_READ_UNLOCKED, "READ_UNLOCKED", 3 },
	{ HMM_DMIRROR_MIGRATE_TO_DEV, "MIGRATE_TO_DEV", 5 },
	{ HMM_DMIRROR_MIGRATE_TO_SYS, "MIGRATE_TO_SYS", 4 },
	{ HMM_DMIRROR_SNAPSHOT, "SNAPSHOT", 2 },
	{ HMM_DMIRROR_EXCLUSIVE, "EXCLUSIVE", 1 },
	{ HMM_DMIRROR_CHECK_EXCLUSIVE, "CHECK_EXCLUSIVE", 1 },
	{ HMM_DMIRROR_RELEASE, "RELEASE", 0 },
	{ HMM_DMIRROR_FLAGS, "FLAGS", 1 },
	{ 0, "unknown", 1 },
};

#define NCMDS ARRAY_SIZE(cmds)
#define CMD_MIGRATE_TO_DEV 3
#define CMD_RELEASE 8
#define CMD_FLAGS 9

/*
 * The errnos a command may return: test_hmm's, and ENODEV, EOPNOTSUPP and
 * EINTR, which a driver of the same ABI returns once its device is gone,
 * for a command it does not implement and when a signal interrupts it.
 */
static const int abi_errnos[] = {
	EINVAL, EFAULT, ENOMEM, EPERM, ENOENT, EBUSY, E2BIG, EOPNOTSUPP, EINTR, ENODEV,
};

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static const char *dev, *peer;
static u64 peer_flags;
static int no_release;
static u64 seed;
static char *race, *huge, *ro, *none, *shared;
static atomic_int stop;
static atomic_ulong calls[NCMDS], ok_calls[NCMDS], hostile_calls, must_fail_calls, bad_errno;
static atomic_ulong chaos_ops, huge_chaos_ops, data_rounds, data_bytes, data_bad, data_errs;
static atomic_ulong peer_calls, peer_ok, busy_retries;
static atomic_int device_gone;
static atomic_int first_bad_errno, first_bad_cmd;

/*
 * The THP buffer: what it holds (`thp_want`), what it held before
 * (`thp_old`: pages may hold either once `thp_torn` says a device write was
 * cut short by ENODEV). Contents change under the write lock only.
 */
static char *thp, *thp_want, *thp_old;
static pthread_rwlock_t thp_lock;
static atomic_int thp_torn;
static atomic_ulong thp_gen;
static atomic_ulong thp_rounds, thp_pmd_rounds, thp_migrations, thp_migrations_ok;
static atomic_ulong thp_reads, thp_reads_ok, thp_cpu_reads, thp_bytes, thp_bad, thp_errs;

static u64 next(u64 *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static u64 below(u64 *s, u64 n)
{
	return n ? next(s) % n : 0;
}

static int is_abi_errno(int e)
{
	for (size_t i = 0; i < ARRAY_SIZE(abi_errnos); i++)
		if (abi_errnos[i] == e)
			return 1;
	return 0;
}

static int pick_cmd(u64 *s)
{
	int total = 0, r;
	size_t i;

	for (i = 0; i < NCMDS; i++)
		total += cmds[i].weight;
	/* RELEASE evicts the whole device: rare, but part of the mix. */
	if (below(s, 400) == 0 && !no_release)
		return CMD_RELEASE;
	r = below(s, total);
	for (i = 0; i < NCMDS; i++) {
		if (r < cmds[i].weight)
			return i;
		r -= cmds[i].weight;
	}
	return 0;
}

/*
 * Hostile arguments: each is a case a user may pass. Returns 2 for the
 * ones every command must refuse (EINVAL: both drivers check alignment,
 * a count of 0 and wrapping before they look at the command), 1 for the
 * others, which some commands ignore (FLAGS and RELEASE take no range).
 */
static int hostile(u64 *s, struct hmm_dmirror_cmd *c, char *buf)
{
	switch (below(s, 14)) {
	case 0:
		/* Unaligned. */
		c->addr += 1 + below(s, PAGE - 1);
		return 2;
	case 1:
		c->addr = 0;
		break;
	case 2:
		/* A kernel address. */
		c->addr = 0xffff888000000000ULL;
		break;
	case 3:
		/* The unmapped page after the race region. */
		c->addr = (uintptr_t)race + RACE_PAGES * PAGE;
		break;
	case 4:
		c->npages = 0;
		return 2;
	case 5:
		/* Huge. */
		c->npages = 1ULL << (40 + below(s, 13));
		break;
	case 6:
		/* The end wraps. */
		c->npages = ~0ULL - below(s, 4);
		return 2;
	case 7:
		/* The size in bytes wraps. */
		c->npages = (1ULL << 52) - below(s, 2);
		return 2;
	case 8:
		c->ptr = 0;
		break;
	case 9:
		/* A read-only buffer. */
		c->ptr = (uintptr_t)ro;
		break;
	case 10:
		c->addr = (uintptr_t)none;
		c->npages = 1 + below(s, SIDE_PAGES);
		break;
	case 11:
		c->addr = (uintptr_t)ro;
		c->npages = 1 + below(s, SIDE_PAGES);
		break;
	case 12:
		c->addr = (uintptr_t)shared;
		c->npages = 1 + below(s, SIDE_PAGES);
		break;
	default:
		/* A buffer that overlaps the range. */
		c->ptr = (uintptr_t)race;
		break;
	}
	(void)buf;
	return 1;
}

static void *ioctl_thread(void *arg)
{
	u64 s = seed * 0x9e3779b97f4a7c15ULL + (uintptr_t)arg + 1;
	size_t buflen = (HUGE_PAGES + SIDE_PAGES) * PAGE;
	char *buf = malloc(buflen);
	int fd = open(dev, O_RDWR);

	if (fd < 0 || !buf) {
		perror("hmm-race: ioctl thread");
		atomic_fetch_add(&data_errs, 1);
		return NULL;
	}
	memset(buf, 0x5a, buflen);
	while (!atomic_load(&stop)) {
		int i = pick_cmd(&s), ret, e, must_fail;
		int h = below(&s, 4) == 0;
		u64 pages = h ? HUGE_PAGES : RACE_PAGES, first = below(&s, pages);
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)(h ? huge : race) + first * PAGE,
			.ptr = (uintptr_t)buf,
			.npages = 1 + below(&s, pages - first),
		};
		unsigned long nr = cmds[i].cmd;

		if (i == CMD_FLAGS) {
			/* FLAGS: fail the next allocation, or bad flags. */
			c.npages = below(&s, 4) ? 1 : next(&s);
		} else if (cmds[i].cmd == 0) {
			/* Type 'H' only: other types reach generic VFS ioctls. */
			nr = _IOC(below(&s, 4), 'H', below(&s, 64), below(&s, 64));
		}
		must_fail = 0;
		if (below(&s, 6) == 0) {
			must_fail = hostile(&s, &c, buf) == 2;
			atomic_fetch_add(&hostile_calls, 1);
			atomic_fetch_add(&must_fail_calls, must_fail);
		}
		atomic_fetch_add(&calls[i], 1);
		ret = ioctl(fd, nr, &c);
		e = errno;
		if (ret == 0 && must_fail) {
			/* A range no driver may accept was accepted. */
			if (atomic_fetch_add(&bad_errno, 1) == 0) {
				atomic_store(&first_bad_errno, 0);
				atomic_store(&first_bad_cmd, i);
			}
		} else if (ret == 0) {
			atomic_fetch_add(&ok_calls[i], 1);
		} else if (ret != -1 || !is_abi_errno(e)) {
			if (atomic_fetch_add(&bad_errno, 1) == 0) {
				atomic_store(&first_bad_errno, ret == -1 ? e : 0);
				atomic_store(&first_bad_cmd, i);
			}
		}
	}
	close(fd);
	free(buf);
	return NULL;
}

/* A fresh 2 MiB-aligned THP mapping at `p`: 0, or -1. */
static int map_thp(char *p)
{
	if (mmap(p, HUGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0) == MAP_FAILED)
		return -1;
	/* THP may be "madvise" only: ask; "never" makes every round split. */
	madvise(p, HUGE_SIZE, MADV_HUGEPAGE);
	return 0;
}

/*
 * A chaos thread's region: `pages` pages at `base`, its RNG salt, its
 * operation (`op` picks one of six on `n` pages at `p`, or on the whole
 * region) and its count of operations.
 */
struct chaos {
	const char *name;
	char **base;
	size_t pages;
	u64 salt;
	void (*op)(u64 *s, int fd, struct hmm_dmirror_cmd *c, char *p, size_t n);
	atomic_ulong *ops;
};

/*
 * The small region's operations: zap, write-protect and restore, map
 * fresh anonymous pages over, write, migrate all of it to the device,
 * ask for THP.
 */
static void chaos_op(u64 *s, int fd, struct hmm_dmirror_cmd *c, char *p, size_t n)
{
	switch (below(s, 6)) {
	case 0:
		madvise(p, n * PAGE, MADV_DONTNEED);
		break;
	case 1:
		mprotect(p, n * PAGE, PROT_READ);
		mprotect(p, n * PAGE, PROT_READ | PROT_WRITE);
		break;
	case 2:
		if (mmap(p, n * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			atomic_fetch_add(&data_errs, 1);
		break;
	case 3:
		memset(p, (int)below(s, 256), n * PAGE);
		break;
	case 4:
		ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, c);
		break;
	default:
		madvise(race, RACE_PAGES * PAGE, MADV_HUGEPAGE);
		break;
	}
}

/*
 * The huge region's operations: splits its PMD (a zap or a write-protect
 * of a piece), faults all of it in (a THP, or a huge device page migrated
 * back), migrates all of it to the device, maps a fresh THP region over it
 * or collapses it again.
 */
static void huge_chaos_op(u64 *s, int fd, struct hmm_dmirror_cmd *c, char *p, size_t n)
{
	switch (below(s, 6)) {
	case 0:
		madvise(p, n * PAGE, MADV_DONTNEED);
		break;
	case 1:
		mprotect(p, n * PAGE, PROT_READ);
		mprotect(p, n * PAGE, PROT_READ | PROT_WRITE);
		break;
	case 2:
		memset(huge, (int)below(s, 256), HUGE_SIZE);
		break;
	case 3:
		ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, c);
		break;
	case 4:
		if (map_thp(huge))
			atomic_fetch_add(&data_errs, 1);
		break;
	default:
		madvise(huge, HUGE_SIZE, MADV_COLLAPSE);
		break;
	}
}

static struct chaos small_chaos = {
	"chaos thread", &race, RACE_PAGES, 101, chaos_op, &chaos_ops,
};

static struct chaos big_chaos = {
	"huge chaos thread", &huge, HUGE_PAGES, 505, huge_chaos_op, &huge_chaos_ops,
};

/* A region's chaos: one of its operations on a random piece every 0-2 ms. */
static void *chaos_thread(void *arg)
{
	struct chaos *ch = arg;
	u64 s = seed * 0x9e3779b97f4a7c15ULL + ch->salt;
	char *tmp = malloc(ch->pages * PAGE);
	int fd = open(dev, O_RDWR);

	if (fd < 0 || !tmp) {
		fprintf(stderr, "hmm-race: %s: %s\n", ch->name, strerror(errno));
		atomic_fetch_add(&data_errs, 1);
		return NULL;
	}
	while (!atomic_load(&stop)) {
		char *base = *ch->base;
		u64 first = below(&s, ch->pages);
		size_t n = 1 + below(&s, ch->pages - first);
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)base, .ptr = (uintptr_t)tmp, .npages = ch->pages,
		};
		struct timespec ts = { 0, (long)below(&s, 2000000) };

		ch->op(&s, fd, &c, base + first * PAGE, n);
		atomic_fetch_add(ch->ops, 1);
		nanosleep(&ts, NULL);
	}
	close(fd);
	free(tmp);
	return NULL;
}

static void *peer_thread(void *arg)
{
	u64 s = seed * 0x9e3779b97f4a7c15ULL + 202;
	char *buf = malloc(HUGE_SIZE);
	struct hmm_dmirror_cmd f = { .npages = peer_flags };
	int fd = open(peer, O_RDWR);

	(void)arg;
	if (fd < 0 || !buf || ioctl(fd, HMM_DMIRROR_FLAGS, &f)) {
		perror("hmm-race: peer thread");
		atomic_fetch_add(&data_errs, 1);
		return NULL;
	}
	memset(buf, 0x77, HUGE_SIZE);
	while (!atomic_load(&stop)) {
		int h = below(&s, 4) == 0;
		u64 pages = h ? HUGE_PAGES : RACE_PAGES, first = below(&s, pages);
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)(h ? huge : race) + first * PAGE,
			.ptr = (uintptr_t)buf,
			.npages = 1 + below(&s, pages - first),
		};
		int ret = ioctl(fd, below(&s, 3) ? HMM_DMIRROR_READ : HMM_DMIRROR_WRITE, &c);

		atomic_fetch_add(&peer_calls, 1);
		if (ret == 0)
			atomic_fetch_add(&peer_ok, 1);
		else if (!is_abi_errno(errno) && atomic_fetch_add(&bad_errno, 1) == 0)
			atomic_store(&first_bad_errno, errno);
	}
	close(fd);
	free(buf);
	return NULL;
}

static void fill(char *p, size_t len, u64 gen)
{
	for (size_t i = 0; i < len; i += 8) {
		u64 v = gen * 0x100000001b3ULL ^ (i / 8);

		memcpy(p + i, &v, 8);
	}
}

static size_t differ(const char *a, const char *b, size_t len)
{
	size_t bad = 0;

	for (size_t i = 0; i < len; i++)
		bad += a[i] != b[i];
	return bad;
}

/*
 * One data-thread step: 0, or -errno. A failure is only an error for
 * `must`, and never once the device is gone (ENODEV: unbound).
 */
static int data_ioctl(int fd, unsigned long nr, char *buf, void *ptr, u64 npages,
		      int must, atomic_ulong *errs)
{
	struct hmm_dmirror_cmd c;
	int tries = 0;

	for (;;) {
		c = (struct hmm_dmirror_cmd){
			.addr = (uintptr_t)buf, .ptr = (uintptr_t)ptr, .npages = npages,
		};
		if (ioctl(fd, nr, &c) == 0)
			return 0;
		/*
		 * The device's fault kept being restarted for the whole fault
		 * timeout by invalidations, which the file's mirror sees
		 * anywhere in this process (the other threads' zaps and
		 * migrations): an answer of the ABI, and the command is whole
		 * on a retry (a WRITE writes all of it again). Four in a row
		 * are an error.
		 */
		if (errno != EBUSY || !must || ++tries == 4)
			break;
		atomic_fetch_add(&busy_retries, 1);
	}
	if (errno == ENODEV) {
		atomic_store(&device_gone, 1);
		return -ENODEV;
	}
	/*
	 * A RELEASE by another thread may evict the buffer between the
	 * migration and its read-back (ENOENT), and a busy page may make a
	 * migration skip it; data must still be intact.
	 */
	if (must || (errno != ENOENT && errno != EBUSY && errno != ENOMEM)) {
		fprintf(stderr, "hmm-race: data ioctl %#lx: %s\n", nr, strerror(errno));
		atomic_fetch_add(errs, 1);
	}
	return -errno;
}

/* Pages of `buf` that hold neither `a` nor `b` (a write cut short). */
static size_t pages_neither(const char *buf, const char *a, const char *b, size_t len)
{
	size_t bad = 0;

	for (size_t i = 0; i < len; i += PAGE)
		bad += memcmp(buf + i, a + i, PAGE) && memcmp(buf + i, b + i, PAGE);
	return bad * PAGE;
}

static void *data_thread(void *arg)
{
	size_t len = DATA_PAGES * PAGE;
	char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *old = malloc(len), *want = malloc(len), *got = malloc(len);
	int fd = open(dev, O_RDWR);
	u64 gen = seed << 16;

	(void)arg;
	if (fd < 0 || buf == MAP_FAILED || !old || !want || !got) {
		perror("hmm-race: data thread");
		atomic_fetch_add(&data_errs, 1);
		return NULL;
	}
	while (!atomic_load(&stop)) {
		size_t bad = 0;
		int r;

		fill(old, len, ++gen);
		memcpy(buf, old, len);
		r = data_ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, buf, got, DATA_PAGES, 0, &data_errs);
		if (r == 0)
			bad += differ(got, old, len);
		fill(want, len, ++gen);
		if (r != -ENODEV)
			r = data_ioctl(fd, HMM_DMIRROR_WRITE, buf, want, DATA_PAGES, 1, &data_errs);
		if (r == 0) {
			r = data_ioctl(fd, HMM_DMIRROR_MIGRATE_TO_SYS, buf, got, DATA_PAGES, 0,
				       &data_errs);
			if (r != -ENODEV &&
			    data_ioctl(fd, HMM_DMIRROR_READ, buf, got, DATA_PAGES, 1,
				       &data_errs) == 0)
				bad += differ(got, want, len);
			bad += differ(buf, want, len);
		} else if (r == -ENODEV) {
			/*
			 * The device went away (unbind): it evicted the buffer
			 * to system memory, each page with the data from before
			 * the WRITE or from after it.
			 */
			bad += pages_neither(buf, old, want, len);
		}
		atomic_fetch_add(&data_bytes, 3 * len);
		atomic_fetch_add(&data_bad, bad);
		atomic_fetch_add(&data_rounds, 1);
		if (atomic_load(&device_gone))
			break;
	}
	close(fd);
	free(old);
	free(want);
	free(got);
	return NULL;
}

/*
 * What a wrong page holds, for the log: zeroes, or (from its first word)
 * which page of which generation of fill() — the data thread's or the THP
 * thread's — or "something else". At most 16 such lines a run.
 */
static void describe_page(const char *what, u64 page, const char *got)
{
	static atomic_int lines;
	static const char *const bufs[] = { "data", "THP" };
	u64 v, w;
	size_t zero = 0;
	struct timespec ts;

	if (atomic_fetch_add(&lines, 1) >= 16)
		return;
	/* The kernel log's clock, to place it against unbind's lines. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (size_t i = 0; i < PAGE; i++)
		zero += !got[i];
	memcpy(&v, got, 8);
	for (int b = 0; b < 2; b++) {
		u64 base = (seed << 16) + ((u64)b << 48);

		for (u64 g = 0; g <= 100000; g++) {
			w = v ^ ((base + g) * 0x100000001b3ULL);
			if (w % (PAGE / 8) || w / (PAGE / 8) >= HUGE_PAGES)
				continue;
			fprintf(stderr,
				"hmm-race: [%ld.%03ld] %s: page %llu holds page %llu of %s generation %llu (THP is at %llu)\n",
				(long)ts.tv_sec, ts.tv_nsec / 1000000, what, page,
				w / (PAGE / 8), bufs[b], g,
				(u64)(atomic_load(&thp_gen) - ((seed << 16) + (1ULL << 48))));
			return;
		}
	}
	fprintf(stderr,
		"hmm-race: [%ld.%03ld] %s: page %llu holds something else (%zu zero bytes, first word %#llx)\n",
		(long)ts.tv_sec, ts.tv_nsec / 1000000, what, page, zero, v);
}

/*
 * Bytes of the `n` pages at page `first` of the THP buffer, as `got` holds
 * them, that are not what the buffer holds: a page may also hold its old
 * contents once a device write was cut short (`thp_torn`). `what` names
 * the check in the log.
 */
static size_t thp_differ(const char *what, const char *got, u64 first, u64 n)
{
	const char *want = thp_want + first * PAGE, *old = thp_old + first * PAGE;
	int torn = atomic_load(&thp_torn);
	size_t bad = 0;

	for (u64 i = 0; i < n * PAGE; i += PAGE) {
		if (!memcmp(got + i, want + i, PAGE) || (torn && !memcmp(got + i, old + i, PAGE)))
			continue;
		bad += differ(got + i, want + i, PAGE);
		describe_page(what, first + i / PAGE, got + i);
	}
	return bad;
}

/*
 * One THP migration of the `n` pages at page `first`, under the readers:
 * what MIGRATE_TO_DEV read back must be the contents. 0, or -errno.
 */
static int thp_migrate(int fd, unsigned long nr, u64 first, u64 n, char *got)
{
	int r = data_ioctl(fd, nr, thp + first * PAGE, got, n, 0, &thp_errs);

	atomic_fetch_add(&thp_migrations, 1);
	if (r)
		return r;
	atomic_fetch_add(&thp_migrations_ok, 1);
	if (nr == HMM_DMIRROR_MIGRATE_TO_DEV) {
		size_t bad = thp_differ("THP: MIGRATE_TO_DEV read-back", got, first, n);

		if (bad)
			fprintf(stderr,
				"hmm-race: THP: MIGRATE_TO_DEV of pages %llu-%llu read back %zu wrong bytes\n",
				first, first + n - 1, bad);
		atomic_fetch_add(&thp_bad, bad);
		atomic_fetch_add(&thp_bytes, n * PAGE);
	}
	return 0;
}

static void *thp_thread(void *arg)
{
	u64 s = seed * 0x9e3779b97f4a7c15ULL + 303, gen = (seed << 16) + (1ULL << 48);
	unsigned char *snap = malloc(HUGE_PAGES);
	char *got = malloc(HUGE_SIZE);
	int fd = open(dev, O_RDWR), pmd = 0;

	(void)arg;
	if (fd < 0 || !snap || !got) {
		perror("hmm-race: THP thread");
		atomic_fetch_add(&thp_errs, 1);
		return NULL;
	}
	while (!atomic_load(&stop) && !atomic_load(&device_gone)) {
		int r = 0;

		/* New contents, the reader held off. */
		pthread_rwlock_wrlock(&thp_lock);
		if (!pmd) {
			if (map_thp(thp)) {
				perror("hmm-race: THP thread: mmap");
				atomic_fetch_add(&thp_errs, 1);
			} else {
				/*
				 * A fresh mapping: zeroes are what a WRITE
				 * that ENODEV cuts short leaves behind.
				 */
				memset(thp_want, 0, HUGE_SIZE);
			}
		}
		memcpy(thp_old, thp_want, HUGE_SIZE);
		fill(thp_want, HUGE_SIZE, ++gen);
		atomic_store(&thp_gen, gen);
		if (below(&s, 2)) {
			memcpy(thp, thp_want, HUGE_SIZE);
		} else {
			r = data_ioctl(fd, HMM_DMIRROR_WRITE, thp, thp_want, HUGE_PAGES, 1,
				       &thp_errs);
			/* Unbound: each page has the old or the new contents. */
			if (r == -ENODEV)
				atomic_store(&thp_torn, 1);
		}
		pthread_rwlock_unlock(&thp_lock);
		if (r)
			break;

		/* Migrations under the reader: the whole PMD, or part of it. */
		pmd = 0;
		for (int k = 0; k < 4 && !atomic_load(&stop) && r != -ENODEV; k++) {
			u64 first = 0, n = HUGE_PAGES;
			int to_dev = below(&s, 2);

			if (below(&s, 3) == 0) {
				first = below(&s, HUGE_PAGES);
				n = 1 + below(&s, HUGE_PAGES - first);
			}
			r = thp_migrate(fd, to_dev ? HMM_DMIRROR_MIGRATE_TO_DEV :
					HMM_DMIRROR_MIGRATE_TO_SYS, first, n, got);
			if (r || !to_dev || n != HUGE_PAGES)
				continue;
			/* In device memory as one PMD: the path this thread is for. */
			if (data_ioctl(fd, HMM_DMIRROR_SNAPSHOT, thp, snap, HUGE_PAGES, 0,
				       &thp_errs) == 0 &&
			    (snap[0] & 0xf0) == HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL &&
			    (snap[0] & HMM_DMIRROR_PROT_PMD))
				pmd = 1;
		}
		if (r == -ENODEV)
			break;
		atomic_fetch_add(&thp_pmd_rounds, pmd);

		/* Every byte through the device, then with the CPU. */
		r = data_ioctl(fd, HMM_DMIRROR_READ, thp, got, HUGE_PAGES, 1, &thp_errs);
		if (r == -ENODEV)
			break;
		if (r == 0) {
			atomic_fetch_add(&thp_bad, thp_differ("THP: READ", got, 0, HUGE_PAGES));
			atomic_fetch_add(&thp_bytes, HUGE_SIZE);
		}
		atomic_fetch_add(&thp_bad, thp_differ("THP: CPU check", thp, 0, HUGE_PAGES));
		atomic_fetch_add(&thp_bytes, HUGE_SIZE);
		atomic_fetch_add(&thp_rounds, 1);
	}
	/* Whatever happened to the device, the buffer holds its contents. */
	pthread_rwlock_rdlock(&thp_lock);
	atomic_fetch_add(&thp_bad, thp_differ("THP: last CPU check", thp, 0, HUGE_PAGES));
	atomic_fetch_add(&thp_bytes, HUGE_SIZE);
	pthread_rwlock_unlock(&thp_lock);
	close(fd);
	free(snap);
	free(got);
	return NULL;
}

/*
 * Reads random ranges of the THP buffer while the THP thread migrates
 * it: through PEER's P2P aliases (or a second file of DEVICE), and with
 * the CPU (faulting a huge device page back). Every byte must be right.
 */
static void *thp_reader(void *arg)
{
	u64 s = seed * 0x9e3779b97f4a7c15ULL + 404;
	char *buf = malloc(HUGE_SIZE);
	struct hmm_dmirror_cmd f = { .npages = peer_flags };
	int fd = open(peer ? peer : dev, O_RDWR), gone = 0;

	(void)arg;
	if (fd < 0 || !buf || (peer && ioctl(fd, HMM_DMIRROR_FLAGS, &f))) {
		perror("hmm-race: THP reader");
		atomic_fetch_add(&thp_errs, 1);
		return NULL;
	}
	while (!atomic_load(&stop)) {
		u64 first = 0, n = HUGE_PAGES;
		size_t bad;

		if (below(&s, 2)) {
			first = below(&s, HUGE_PAGES);
			n = 1 + below(&s, HUGE_PAGES - first);
		}
		pthread_rwlock_rdlock(&thp_lock);
		if (gone || below(&s, 4) == 0) {
			/* One page with the CPU. */
			bad = thp_differ("THP reader: CPU", thp + first * PAGE, first, 1);
			atomic_fetch_add(&thp_cpu_reads, 1);
			atomic_fetch_add(&thp_bytes, PAGE);
		} else {
			struct hmm_dmirror_cmd c = {
				.addr = (uintptr_t)thp + first * PAGE,
				.ptr = (uintptr_t)buf,
				.npages = n,
			};
			int ret = ioctl(fd, HMM_DMIRROR_READ, &c), e = errno;

			bad = 0;
			atomic_fetch_add(&thp_reads, 1);
			if (ret == 0) {
				atomic_fetch_add(&thp_reads_ok, 1);
				bad = thp_differ("THP reader: READ", buf, first, n);
				atomic_fetch_add(&thp_bytes, n * PAGE);
			} else if (e == ENODEV && !peer) {
				/* DEVICE was unbound: the CPU reads from now on. */
				gone = 1;
			} else if (!is_abi_errno(e) &&
				   atomic_fetch_add(&bad_errno, 1) == 0) {
				atomic_store(&first_bad_errno, e);
			}
		}
		pthread_rwlock_unlock(&thp_lock);
		if (bad)
			fprintf(stderr, "hmm-race: THP reader: pages %llu-%llu: %zu wrong bytes\n",
				first, first + n - 1, bad);
		atomic_fetch_add(&thp_bad, bad);
	}
	close(fd);
	free(buf);
	return NULL;
}

static char *map(size_t len, int prot, int flags, int fd)
{
	char *p = mmap(NULL, len, prot, flags, fd, 0);

	if (p == MAP_FAILED)
		ksft_exit_fail_perror("mmap");
	return p;
}

/* A 2 MiB-aligned THP region of HUGE_PAGES, PROT_NONE around it. */
static char *map_huge(void)
{
	char *area = map(2 * HUGE_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	char *p = (char *)(((uintptr_t)area + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1));

	if (map_thp(p))
		ksft_exit_fail_perror("mmap");
	return p;
}

int main(int argc, char **argv)
{
	pthread_t th[IOCTL_THREADS + 6];
	pthread_rwlockattr_t attr;
	unsigned long total = 0, ok = 0;
	int seconds, fd, i, nth, opt;
	char *area, *end;

	while ((opt = getopt(argc, argv, "Rp:f:")) != -1) {
		switch (opt) {
		case 'R':
			no_release = 1;
			break;
		case 'p':
			peer = optarg;
			break;
		case 'f':
			errno = 0;
			peer_flags = strtoull(optarg, &end, 0);
			if (errno || *end || end == optarg)
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	argc -= optind - 1;
	argv += optind - 1;
	seconds = argc > 2 ? atoi(argv[2]) : 60;
	if (argc < 2 || argc > 4 || seconds <= 0 || (peer_flags && !peer)) {
usage:
		fprintf(stderr,
			"usage: hmm-race [-R] [-p PEER [-f FLAGS]] DEVICE [SECONDS [SEED]]\n");
		return KSFT_FAIL;
	}
	dev = argv[1];
	seed = argc > 3 ? strtoull(argv[3], NULL, 0) : (u64)time(NULL);
	if (!seed)
		seed = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ksft_print_header();
	ksft_print_msg("hmm-race: %s, peer %s (FLAGS %#llx), %d s, RELEASE %s, seed %llu\n",
		       dev, peer ? peer : "none", peer_flags, seconds, no_release ? "off" : "on",
		       seed);

	fd = open(dev, O_RDWR);
	if (fd < 0)
		ksft_exit_skip("cannot open %s: %s\n", dev, strerror(errno));
	close(fd);
	ksft_set_plan(peer ? 10 : 9);

	/* A 2 MiB aligned race region with an unmapped page after it. */
	area = map(4UL << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	race = (char *)(((uintptr_t)area + (2UL << 20) - 1) & ~((2UL << 20) - 1));
	if (mmap(race, RACE_PAGES * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		ksft_exit_fail_perror("mmap");
	memset(race, 0x11, RACE_PAGES * PAGE);
	ro = map(SIDE_PAGES * PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	none = map(SIDE_PAGES * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	fd = memfd_create("hmm-race", 0);
	if (fd < 0 || ftruncate(fd, SIDE_PAGES * PAGE))
		ksft_exit_fail_perror("memfd");
	shared = map(SIDE_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
	memset(shared, 0x22, SIDE_PAGES * PAGE);
	huge = map_huge();
	memset(huge, 0x33, HUGE_SIZE);
	thp = map_huge();
	thp_want = map(HUGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	thp_old = map(HUGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	/* The THP thread's rewrites must not wait behind a stream of reads. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&thp_lock, &attr);

	for (i = 0; i < IOCTL_THREADS; i++)
		pthread_create(&th[i], NULL, ioctl_thread, (void *)(uintptr_t)i);
	pthread_create(&th[i++], NULL, chaos_thread, &small_chaos);
	pthread_create(&th[i++], NULL, chaos_thread, &big_chaos);
	pthread_create(&th[i++], NULL, data_thread, NULL);
	pthread_create(&th[i++], NULL, thp_thread, NULL);
	pthread_create(&th[i++], NULL, thp_reader, NULL);
	if (peer)
		pthread_create(&th[i++], NULL, peer_thread, NULL);
	nth = i;
	sleep(seconds);
	atomic_store(&stop, 1);
	for (i = 0; i < nth; i++)
		pthread_join(th[i], NULL);

	for (i = 0; i < (int)NCMDS; i++) {
		ksft_print_msg("%-16s %8lu calls, %8lu returned 0\n", cmds[i].name,
			       atomic_load(&calls[i]), atomic_load(&ok_calls[i]));
		total += atomic_load(&calls[i]);
		ok += atomic_load(&ok_calls[i]);
	}
	ksft_print_msg("ioctls: %lu (%lu returned 0, %lu hostile, %lu invalid ranges)\n",
		       total, ok, atomic_load(&hostile_calls), atomic_load(&must_fail_calls));
	ksft_print_msg("chaos: %lu, on the huge region: %lu; data rounds: %lu, %lu bytes checked\n",
		       atomic_load(&chaos_ops), atomic_load(&huge_chaos_ops),
		       atomic_load(&data_rounds), atomic_load(&data_bytes));
	/* Every kind of command ran, and most valid ones succeeded. */
	ksft_test_result(total > 0 && ok > 0 && atomic_load(&calls[CMD_MIGRATE_TO_DEV]) > 0,
			 "the ioctl threads ran\n");
	if (atomic_load(&bad_errno))
		ksft_print_msg("%lu bad returns, first: %s errno %d\n", atomic_load(&bad_errno),
			       cmds[atomic_load(&first_bad_cmd)].name,
			       atomic_load(&first_bad_errno));
	ksft_test_result(atomic_load(&bad_errno) == 0,
			 "every ioctl returned 0 or an errno of the ABI, EINVAL for a range no command may take\n");
	ksft_test_result(atomic_load(&chaos_ops) > 0 && atomic_load(&huge_chaos_ops) > 0,
			 "the chaos threads ran\n");
	if (peer) {
		ksft_print_msg("peer: %lu calls, %lu returned 0\n", atomic_load(&peer_calls),
			       atomic_load(&peer_ok));
		ksft_test_result(atomic_load(&peer_ok) > 0,
				 "the peer device read and wrote the region\n");
	}
	if (atomic_load(&device_gone))
		ksft_print_msg("the device went away during the run (ENODEV)\n");
	ksft_test_result(atomic_load(&data_rounds) > 0 && atomic_load(&data_errs) == 0,
			 "the data thread's migrations, reads and writes succeeded\n");
	if (atomic_load(&busy_retries))
		ksft_print_msg("data and THP threads: READ and WRITE retried %lu times (EBUSY)\n",
			       atomic_load(&busy_retries));
	if (atomic_load(&data_bad))
		ksft_print_msg("%lu bytes differ\n", atomic_load(&data_bad));
	ksft_test_result(atomic_load(&data_bad) == 0,
			 "every byte of the data thread's buffer was right\n");
	ksft_print_msg("THP: %lu rounds, %lu with one device PMD; migrations: %lu (%lu ok)\n",
		       atomic_load(&thp_rounds), atomic_load(&thp_pmd_rounds),
		       atomic_load(&thp_migrations), atomic_load(&thp_migrations_ok));
	ksft_print_msg("THP: reads %s: %lu (%lu returned 0), by the CPU: %lu; %lu bytes checked\n",
		       peer ? "through the peer" : "through a second file",
		       atomic_load(&thp_reads), atomic_load(&thp_reads_ok),
		       atomic_load(&thp_cpu_reads), atomic_load(&thp_bytes));
	ksft_test_result((atomic_load(&thp_rounds) > 0 || atomic_load(&device_gone)) &&
			 atomic_load(&thp_errs) == 0,
			 "THP: the THP thread's migrations, reads and writes of its 2 MiB buffer succeeded\n");
	ksft_test_result(atomic_load(&thp_pmd_rounds) > 0 || atomic_load(&device_gone),
			 "THP: the buffer was migrated to device memory as one PMD-sized folio\n");
	ksft_test_result(atomic_load(&thp_reads_ok) > 0 && atomic_load(&thp_cpu_reads) > 0,
			 "THP: the reader read the buffer through the device and with the CPU meanwhile\n");
	if (atomic_load(&thp_bad))
		ksft_print_msg("THP: %lu bytes differ\n", atomic_load(&thp_bad));
	ksft_test_result(atomic_load(&thp_bad) == 0,
			 "THP: every byte read, migrated or checked of the THP buffer was right\n");
	ksft_finished();
}
