// SPDX-License-Identifier: GPL-2.0
/*
 * Concurrent dmirror ioctls against migration and CPU page table changes
 * of the same range, for any driver of the lib/test_hmm ioctl ABI
 * (test_hmm's /dev/hmm_dmirrorN, rvram's /dev/rvramN).
 *
 *   hmm-race [-R] [-p PEER] DEVICE [SECONDS [SEED]]
 *
 * One process, five threads, all on one 64-page anonymous region (the
 * "race region"), plus a read-only, a PROT_NONE and a shared memfd region:
 *
 *  - three ioctl threads issue random READ, WRITE, READ_UNLOCKED,
 *    MIGRATE_TO_DEV, MIGRATE_TO_SYS, SNAPSHOT, EXCLUSIVE, CHECK_EXCLUSIVE,
 *    RELEASE and FLAGS commands, most with valid arguments on the race
 *    region, some with hostile ones (unaligned, address 0, kernel
 *    addresses, holes, huge and wrapping page counts, NULL and read-only
 *    buffers, unknown commands); every call must return 0 or an errno of
 *    the ABI;
 *  - one chaos thread, every 0-2 ms, zaps a piece (MADV_DONTNEED), makes a
 *    piece read-only and writable again, maps fresh anonymous memory over a
 *    piece (MAP_FIXED), writes a piece with the CPU, migrates the whole
 *    region to the device, or asks for THPs;
 *  - one data thread owns a private buffer (and its own file, so that the
 *    others' FLAGS do not reach it): it writes a pattern with the CPU,
 *    migrates it to the device, writes a new pattern with the device,
 *    migrates it back, and checks every byte after each step (if the
 *    device is unbound meanwhile, every page must hold the data from
 *    before or after the command that ENODEV cut short);
 *  - with -p, a peer thread reads and writes the race region through a
 *    second device (rvram's /dev/rvramN) that asks for P2P aliases
 *    (rvram's FLAGS bit 16): pages in DEVICE's memory are accessed through
 *    their PCI P2PDMA alias while they migrate and are revoked under it.
 *
 * -R leaves RELEASE out of the mix: test_hmm's RELEASE tears down the
 * device's memory (memunmap_pages()) while other threads migrate into it,
 * which is a test hook, not a use a driver must survive.
 *
 * The device reads and writes pages while they are migrated and unmapped
 * under it: a driver that uses a stale translation reads or writes freed
 * memory, which KASAN reports in the kernel log (`rvram report` fails the
 * run on it) and which may also corrupt this process.
 *
 * The sequence of operations of each thread is a function of SEED (printed;
 * the default is the time): a failure replays with the same seed, up to
 * thread interleaving. Prints TAP; exits non-zero on a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct hmm_dmirror_cmd {
	uint64_t addr, ptr, npages, cpages, faults;
};

#define CMD(nr) _IOWR('H', (nr), struct hmm_dmirror_cmd)
#define HMM_DMIRROR_READ CMD(0x00)
#define HMM_DMIRROR_WRITE CMD(0x01)
#define HMM_DMIRROR_MIGRATE_TO_DEV CMD(0x02)
#define HMM_DMIRROR_MIGRATE_TO_SYS CMD(0x03)
#define HMM_DMIRROR_SNAPSHOT CMD(0x04)
#define HMM_DMIRROR_EXCLUSIVE CMD(0x05)
#define HMM_DMIRROR_CHECK_EXCLUSIVE CMD(0x06)
#define HMM_DMIRROR_RELEASE CMD(0x07)
#define HMM_DMIRROR_FLAGS CMD(0x08)
#define HMM_DMIRROR_READ_UNLOCKED CMD(0x09)

#define PAGE 4096UL
#define RACE_PAGES 64
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
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* The errnos a dmirror command may return (Documentation/misc-devices/rvram.rst). */
static const int abi_errnos[] = {
	EINVAL, EFAULT, ENOMEM, EPERM, ENOENT, EBUSY, E2BIG, EOPNOTSUPP, EINTR, ENODEV,
};

/* rvram's HMM_DMIRROR_FLAGS bit: fault as a P2P DMA alias client. */
#define RVRAM_FLAG_ALIAS_DMA (1ULL << 16)

static const char *dev, *peer;
static int no_release;
static uint64_t seed;
static char *race, *ro, *none, *shared;
static atomic_int stop;
static atomic_ulong calls[NCMDS], ok_calls[NCMDS], hostile_calls, bad_errno;
static atomic_ulong chaos_ops, data_rounds, data_bytes, data_bad, data_errs;
static atomic_ulong peer_calls, peer_ok;
static atomic_int device_gone;
static atomic_int first_bad_errno, first_bad_cmd;

static uint64_t next(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? next(s) % n : 0;
}

static int is_abi_errno(int e)
{
	for (size_t i = 0; i < sizeof(abi_errnos) / sizeof(abi_errnos[0]); i++)
		if (abi_errnos[i] == e)
			return 1;
	return 0;
}

static int pick_cmd(uint64_t *s)
{
	int total = 0, r;
	size_t i;

	for (i = 0; i < NCMDS; i++)
		total += cmds[i].weight;
	/* RELEASE evicts the whole device: rare, but part of the mix. */
	if (below(s, 400) == 0 && !no_release)
		return 8;
	r = below(s, total);
	for (i = 0; i < NCMDS; i++) {
		if (r < cmds[i].weight)
			return i;
		r -= cmds[i].weight;
	}
	return 0;
}

/* Hostile arguments: each is a case a user may pass. */
static int hostile(uint64_t *s, struct hmm_dmirror_cmd *c, char *buf)
{
	switch (below(s, 14)) {
	case 0: c->addr += 1 + below(s, PAGE - 1); break;	/* unaligned */
	case 1: c->addr = 0; break;
	case 2: c->addr = 0xffff888000000000ULL; break;		/* kernel */
	case 3: c->addr = (uintptr_t)race + RACE_PAGES * PAGE; break;	/* guard hole */
	case 4: c->npages = 0; break;
	case 5: c->npages = 1ULL << (40 + below(s, 13)); break;	/* huge */
	case 6: c->npages = ~0ULL - below(s, 4); break;		/* wraps */
	case 7: c->npages = (1ULL << 52) - below(s, 2); break;	/* bytes wrap */
	case 8: c->ptr = 0; break;
	case 9: c->ptr = (uintptr_t)ro; break;			/* read-only buffer */
	case 10: c->addr = (uintptr_t)none; c->npages = 1 + below(s, SIDE_PAGES); break;
	case 11: c->addr = (uintptr_t)ro; c->npages = 1 + below(s, SIDE_PAGES); break;
	case 12: c->addr = (uintptr_t)shared; c->npages = 1 + below(s, SIDE_PAGES); break;
	default: c->ptr = (uintptr_t)race; break;		/* overlaps the range */
	}
	(void)buf;
	return 1;
}

static void *ioctl_thread(void *arg)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ULL + (uintptr_t)arg + 1;
	size_t buflen = (RACE_PAGES + SIDE_PAGES) * PAGE;
	char *buf = malloc(buflen);
	int fd = open(dev, O_RDWR);

	if (fd < 0 || !buf) {
		perror("hmm-race: ioctl thread");
		atomic_fetch_add(&data_errs, 1);
		return NULL;
	}
	memset(buf, 0x5a, buflen);
	while (!atomic_load(&stop)) {
		int i = pick_cmd(&s), ret, e;
		uint64_t first = below(&s, RACE_PAGES);
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)race + first * PAGE,
			.ptr = (uintptr_t)buf,
			.npages = 1 + below(&s, RACE_PAGES - first),
		};
		unsigned long nr = cmds[i].cmd;

		if (i == 9) {
			/* FLAGS: fail the next allocation, or bad flags. */
			c.npages = below(&s, 4) ? 1 : next(&s);
		} else if (cmds[i].cmd == 0) {
			/* Type 'H' only: other types reach generic VFS ioctls. */
			nr = _IOC(below(&s, 4), 'H', below(&s, 64), below(&s, 64));
		}
		if (below(&s, 6) == 0 && hostile(&s, &c, buf))
			atomic_fetch_add(&hostile_calls, 1);
		atomic_fetch_add(&calls[i], 1);
		ret = ioctl(fd, nr, &c);
		e = errno;
		if (ret == 0) {
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

static void *chaos_thread(void *arg)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 101;
	char *tmp = malloc(RACE_PAGES * PAGE);
	int fd = open(dev, O_RDWR);

	(void)arg;
	if (fd < 0 || !tmp) {
		perror("hmm-race: chaos thread");
		atomic_fetch_add(&data_errs, 1);
		return NULL;
	}
	while (!atomic_load(&stop)) {
		uint64_t first = below(&s, RACE_PAGES);
		size_t n = 1 + below(&s, RACE_PAGES - first);
		char *p = race + first * PAGE;
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)race, .ptr = (uintptr_t)tmp, .npages = RACE_PAGES,
		};
		struct timespec ts = { 0, (long)below(&s, 2000000) };

		switch (below(&s, 6)) {
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
			memset(p, (int)below(&s, 256), n * PAGE);
			break;
		case 4:
			ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, &c);
			break;
		default:
			madvise(race, RACE_PAGES * PAGE, MADV_HUGEPAGE);
			break;
		}
		atomic_fetch_add(&chaos_ops, 1);
		nanosleep(&ts, NULL);
	}
	close(fd);
	free(tmp);
	return NULL;
}

static void *peer_thread(void *arg)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 202;
	char *buf = malloc(RACE_PAGES * PAGE);
	struct hmm_dmirror_cmd f = { .npages = RVRAM_FLAG_ALIAS_DMA };
	int fd = open(peer, O_RDWR);

	(void)arg;
	if (fd < 0 || !buf || ioctl(fd, HMM_DMIRROR_FLAGS, &f)) {
		perror("hmm-race: peer thread");
		atomic_fetch_add(&data_errs, 1);
		return NULL;
	}
	memset(buf, 0x77, RACE_PAGES * PAGE);
	while (!atomic_load(&stop)) {
		uint64_t first = below(&s, RACE_PAGES);
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)race + first * PAGE,
			.ptr = (uintptr_t)buf,
			.npages = 1 + below(&s, RACE_PAGES - first),
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

static void fill(char *p, size_t len, uint64_t gen)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = gen * 0x100000001b3ULL ^ (i / 8);

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
static int data_ioctl(int fd, unsigned long nr, char *buf, void *ptr, int must)
{
	struct hmm_dmirror_cmd c = {
		.addr = (uintptr_t)buf, .ptr = (uintptr_t)ptr, .npages = DATA_PAGES,
	};

	if (ioctl(fd, nr, &c) == 0)
		return 0;
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
		atomic_fetch_add(&data_errs, 1);
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
	uint64_t gen = seed << 16;

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
		r = data_ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, buf, got, 0);
		if (r == 0)
			bad += differ(got, old, len);
		fill(want, len, ++gen);
		if (r != -ENODEV)
			r = data_ioctl(fd, HMM_DMIRROR_WRITE, buf, want, 1);
		if (r == 0) {
			r = data_ioctl(fd, HMM_DMIRROR_MIGRATE_TO_SYS, buf, got, 0);
			if (r != -ENODEV && data_ioctl(fd, HMM_DMIRROR_READ, buf, got, 1) == 0)
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

static int tap_n, tap_failed;

static void check(int ok, const char *what)
{
	printf("%sok %d %s\n", ok ? "" : "not ", ++tap_n, what);
	if (!ok)
		tap_failed++;
}

static char *map(size_t len, int prot, int flags, int fd)
{
	char *p = mmap(NULL, len, prot, flags, fd, 0);

	if (p == MAP_FAILED) {
		perror("hmm-race: mmap");
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	pthread_t th[IOCTL_THREADS + 3];
	unsigned long total = 0, ok = 0;
	int seconds, fd, i, nth;
	char *area;

	for (;;) {
		if (argc > 1 && !strcmp(argv[1], "-R")) {
			no_release = 1;
			argv++;
			argc--;
		} else if (argc > 2 && !strcmp(argv[1], "-p")) {
			peer = argv[2];
			argv += 2;
			argc -= 2;
		} else {
			break;
		}
	}
	seconds = argc > 2 ? atoi(argv[2]) : 30;
	if (argc < 2 || argc > 4 || seconds <= 0) {
		fprintf(stderr, "usage: %s [-R] [-p PEER] DEVICE [SECONDS [SEED]]\n", argv[0]);
		return 2;
	}
	dev = argv[1];
	seed = argc > 3 ? strtoull(argv[3], NULL, 0) : (uint64_t)time(NULL);
	if (!seed)
		seed = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	printf("# hmm-race %s%s%s %s %d %" PRIu64 "\n", no_release ? "-R " : "", peer ? "-p " : "",
	       peer ? peer : "", dev, seconds, seed);

	fd = open(dev, O_RDWR);
	check(fd >= 0, "open the device");
	if (fd < 0)
		return 1;
	close(fd);

	/* A 2 MiB aligned race region with an unmapped page after it. */
	area = map(4UL << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	race = (char *)(((uintptr_t)area + (2UL << 20) - 1) & ~((2UL << 20) - 1));
	if (mmap(race, RACE_PAGES * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		return 2;
	memset(race, 0x11, RACE_PAGES * PAGE);
	ro = map(SIDE_PAGES * PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	none = map(SIDE_PAGES * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	fd = memfd_create("hmm-race", 0);
	if (fd < 0 || ftruncate(fd, SIDE_PAGES * PAGE))
		return 2;
	shared = map(SIDE_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
	memset(shared, 0x22, SIDE_PAGES * PAGE);

	for (i = 0; i < IOCTL_THREADS; i++)
		pthread_create(&th[i], NULL, ioctl_thread, (void *)(uintptr_t)i);
	pthread_create(&th[i++], NULL, chaos_thread, NULL);
	pthread_create(&th[i++], NULL, data_thread, NULL);
	if (peer)
		pthread_create(&th[i++], NULL, peer_thread, NULL);
	nth = i;
	sleep(seconds);
	atomic_store(&stop, 1);
	for (i = 0; i < nth; i++)
		pthread_join(th[i], NULL);

	for (i = 0; i < (int)NCMDS; i++) {
		printf("# %-16s %8lu calls, %8lu returned 0\n", cmds[i].name,
		       atomic_load(&calls[i]), atomic_load(&ok_calls[i]));
		total += atomic_load(&calls[i]);
		ok += atomic_load(&ok_calls[i]);
	}
	printf("# ioctls: %lu (%lu returned 0, %lu with hostile arguments); chaos: %lu; data rounds: %lu, %lu bytes checked\n",
	       total, ok, atomic_load(&hostile_calls), atomic_load(&chaos_ops),
	       atomic_load(&data_rounds), atomic_load(&data_bytes));
	/* Every kind of command ran, and most valid ones succeeded. */
	check(total > 0 && ok > 0 && atomic_load(&calls[3]) > 0, "the ioctl threads ran");
	check(atomic_load(&bad_errno) == 0, "every ioctl returned 0 or an errno of the ABI");
	if (atomic_load(&bad_errno))
		printf("# %lu bad returns, first: %s errno %d\n", atomic_load(&bad_errno),
		       cmds[atomic_load(&first_bad_cmd)].name, atomic_load(&first_bad_errno));
	check(atomic_load(&chaos_ops) > 0, "the chaos thread ran");
	if (peer) {
		printf("# peer: %lu calls, %lu returned 0\n", atomic_load(&peer_calls),
		       atomic_load(&peer_ok));
		check(atomic_load(&peer_ok) > 0, "the peer device read and wrote the region");
	}
	if (atomic_load(&device_gone))
		printf("# the device went away during the run (ENODEV)\n");
	check(atomic_load(&data_rounds) > 0 && atomic_load(&data_errs) == 0,
	      "the data thread's migrations, reads and writes succeeded");
	check(atomic_load(&data_bad) == 0, "every byte of the data thread's buffer was right");
	if (atomic_load(&data_bad))
		printf("# %lu bytes differ\n", atomic_load(&data_bad));
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
