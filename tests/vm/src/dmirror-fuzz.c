// SPDX-License-Identifier: GPL-2.0
/*
 * A bounded, seeded, concurrent fuzz of the lib/test_hmm dmirror ioctl ABI
 * (test_hmm's /dev/hmm_dmirrorN, rvram's /dev/rvramN), smaller than
 * hmm-race: a reproducer of kernel bugs that only concurrency triggers.
 *
 *   dmirror-fuzz DEVICE SECONDS [SEED]
 *
 * Four 64-page regions, 1 MiB of PROT_NONE guard around each: (a) private
 * anonymous read-write, (b) private anonymous read-only (written first),
 * (c) PROT_NONE, (d) a MAP_SHARED memfd. Five threads:
 *
 *  - three ioctl threads, each with its own file of DEVICE (and every other
 *    command through a file shared by all, so that RELEASE on a file races
 *    migrations and RELEASEs of the same file), issue random MIGRATE_TO_DEV,
 *    MIGRATE_TO_SYS, READ, WRITE, SNAPSHOT, EXCLUSIVE, CHECK_EXCLUSIVE,
 *    RELEASE and unknown commands, each as likely as the others, on random
 *    pieces of the regions, one in four with hostile arguments; every call must return 0 or an errno of
 *    the ABI;
 *  - a chaos thread, every 0-2 ms, zaps a piece of (a), write-protects it
 *    and makes it writable again, maps fresh memory over it, writes it with
 *    the CPU, migrates all of (a) to the device through the shared file,
 *    or asks for (no) THPs;
 *  - a data thread writes a pattern into its own 64-page buffer with the
 *    CPU, migrates it to the device through the shared file (and every
 *    other round back with MIGRATE_TO_SYS) and checks every byte with the
 *    CPU, while RELEASEs on the shared file evict it;
 *  - a hugetlb thread issues the ioctl threads' commands on a fifth region,
 *    (e) a 2 MiB hugetlbfs page (MAP_HUGETLB: vm.nr_hugepages must have
 *    one free), which HMM walks apart from the others
 *    (hmm_vma_walk_hugetlb_entry()). Its own thread, so that the other
 *    threads' choices for a seed stay what they were without it.
 *
 * Every thread's choices are a function of SEED (printed first; random if
 * absent). A thread that has not stopped 60 s after the deadline is a hang.
 * Prints TAP (1..1); exits 0, or 1 on a failure.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "dmirror.h"
#include "kcov.h"

#define PAGES 64
#define REGION (PAGES * PAGE)
#define GUARD (256 * PAGE)
/* The regions the ioctl threads pick from; then the hugetlb region. */
#define NREGIONS 4
#define HUGETLB NREGIONS
#define HUGETLB_SIZE (2UL << 20)
#define IOCTL_THREADS 3
/* The ioctl threads, chaos, data, hugetlb. */
#define NTHREADS (IOCTL_THREADS + 3)
#define HUGETLB_THREAD (IOCTL_THREADS + 2)
#define KERNEL_ADDR 0xffff888000000000ULL
#define HANG_SECONDS 60
#define MAX_LINES 32

/* The statistics' rows: the ioctl threads' commands, then the others'. */
enum {
	R_READ, R_WRITE, R_TO_DEV, R_TO_SYS, R_SNAPSHOT, R_EXCLUSIVE, R_CHECK_EXCLUSIVE,
	R_RELEASE, R_UNKNOWN, R_CHAOS_TO_DEV, R_DATA_TO_DEV, R_DATA_TO_SYS, NROWS
};

static const struct {
	unsigned long nr;
	const char *name;
	int weight;
} rows[NROWS] = {
	[R_READ] = { HMM_DMIRROR_READ, "READ", 1 },
	[R_WRITE] = { HMM_DMIRROR_WRITE, "WRITE", 1 },
	[R_TO_DEV] = { HMM_DMIRROR_MIGRATE_TO_DEV, "MIGRATE_TO_DEV", 1 },
	[R_TO_SYS] = { HMM_DMIRROR_MIGRATE_TO_SYS, "MIGRATE_TO_SYS", 1 },
	[R_SNAPSHOT] = { HMM_DMIRROR_SNAPSHOT, "SNAPSHOT", 1 },
	[R_EXCLUSIVE] = { HMM_DMIRROR_EXCLUSIVE, "EXCLUSIVE", 1 },
	[R_CHECK_EXCLUSIVE] = { HMM_DMIRROR_CHECK_EXCLUSIVE, "CHECK_EXCLUSIVE", 1 },
	[R_RELEASE] = { HMM_DMIRROR_RELEASE, "RELEASE", 1 },
	[R_UNKNOWN] = { 0, "unknown", 1 },
	[R_CHAOS_TO_DEV] = { HMM_DMIRROR_MIGRATE_TO_DEV, "chaos MIGRATE_TO_DEV", 0 },
	[R_DATA_TO_DEV] = { HMM_DMIRROR_MIGRATE_TO_DEV, "data MIGRATE_TO_DEV", 0 },
	[R_DATA_TO_SYS] = { HMM_DMIRROR_MIGRATE_TO_SYS, "data MIGRATE_TO_SYS", 0 },
};

/*
 * The errnos a command may return. EOPNOTSUPP is EXCLUSIVE on memory that
 * is not anonymous (the memfd region), for rvram (rvram.rst, "Errors") and
 * for test_hmm (make_device_exclusive()).
 */
static const struct {
	int e;
	const char *name;
} errs[] = {
	{ EINVAL, "EINVAL" }, { EFAULT, "EFAULT" }, { ENOMEM, "ENOMEM" },
	{ ENOENT, "ENOENT" }, { EBUSY, "EBUSY" }, { EPERM, "EPERM" },
	{ ENOTTY, "ENOTTY" }, { ENODEV, "ENODEV" }, { ENOSPC, "ENOSPC" },
	{ EAGAIN, "EAGAIN" }, { EINTR, "EINTR" }, { EIO, "EIO" },
	{ E2BIG, "E2BIG" }, { EOVERFLOW, "EOVERFLOW" }, { ERANGE, "ERANGE" },
	{ EACCES, "EACCES" }, { EOPNOTSUPP, "EOPNOTSUPP" },
};
#define NERRS (sizeof(errs) / sizeof(errs[0]))
/* Result columns: 0 is success, 1 + i errs[i], OTHER anything else. */
#define OTHER (NERRS + 1)

static const char *const region_names[NREGIONS + 1] = {
	"rw", "ro", "none", "shared", "hugetlb",
};
static const char *const chaos_names[] = {
	"dontneed", "mprotect", "mmap", "touch", "migrate", "hugepage", "nohugepage",
};
#define NCHAOS (sizeof(chaos_names) / sizeof(chaos_names[0]))

/* A thread, and what it is doing: for the report of a hang. */
struct thr {
	char name[16];
	int idx;
	pthread_t th;
	atomic_int tid;
	_Atomic(const char *) doing;
	atomic_ullong addr, npages;
};

static const char *dev;
static uint64_t seed;
static int shared_fd;
static char *region[NREGIONS + 1];
static struct thr thr[NTHREADS];
static atomic_int stop, lines;
static atomic_ulong failures, res[NROWS][OTHER + 1], chaos_ops[NCHAOS];
static atomic_ulong data_rounds, data_migrated, data_unmigrated, data_bad;
/* The hugetlb thread's calls and successes, by row. */
static atomic_ulong hugetlb_calls[NROWS], hugetlb_ok[NROWS];

static int err_col(int e)
{
	for (size_t i = 0; i < NERRS; i++)
		if (errs[i].e == e)
			return (int)i + 1;
	return OTHER;
}

/* A bounded number of detail lines a run. */
static int may_print(void)
{
	return atomic_fetch_add(&lines, 1) < MAX_LINES;
}

/*
 * Issues command `nr` (statistics row `row`) on `fd`; `fdname` names the
 * file. 0, the errno, or -1 for a return that is neither 0 nor -1. An errno
 * outside the ABI is a failure.
 */
static int issue(struct thr *t, int fd, const char *fdname, int row, unsigned long nr,
		 struct hmm_dmirror_cmd *c)
{
	struct hmm_dmirror_cmd in = *c;
	int ret, e, col;

	atomic_store(&t->addr, c->addr);
	atomic_store(&t->npages, c->npages);
	atomic_store(&t->doing, rows[row].name);
	errno = 0;
	ret = ioctl(fd, nr, c);
	e = errno;
	atomic_store(&t->doing, "nothing (between ioctls)");
	col = ret == 0 ? 0 : ret == -1 ? err_col(e) : (int)OTHER;
	atomic_fetch_add(&res[row][col], 1);
	if (t->idx == HUGETLB_THREAD) {
		atomic_fetch_add(&hugetlb_calls[row], 1);
		if (ret == 0)
			atomic_fetch_add(&hugetlb_ok[row], 1);
	}
	if (col == (int)OTHER) {
		atomic_fetch_add(&failures, 1);
		if (may_print())
			printf("not ok - dmirror-fuzz: unexpected errno: %s, %s on the %s file (nr %#lx) addr %#" PRIx64 " ptr %#" PRIx64 " npages %#" PRIx64 ": ret %d errno %d (%s)\n",
			       t->name, rows[row].name, fdname, nr, in.addr, in.ptr, in.npages,
			       ret, e, strerror(e));
	}
	return ret == 0 ? 0 : ret == -1 ? e : -1;
}

/*
 * A bounce buffer of PAGES pages with a PROT_NONE page after it: a command
 * that copies out more than PAGES pages' worth (a SNAPSHOT of a huge
 * count writes a byte a page) stops there with EFAULT instead of writing
 * over this process' other memory.
 */
static char *bounce(void)
{
	char *p = mmap(NULL, REGION + PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (mprotect(p + REGION, PAGE, PROT_NONE)) {
		munmap(p, REGION + PAGE);
		return NULL;
	}
	memset(p, 0x5a, REGION);
	return p;
}

static int pick_row(uint64_t *s)
{
	int total = 0, r;

	for (int i = 0; i <= R_UNKNOWN; i++)
		total += rows[i].weight;
	r = (int)rnd_below(s, total);
	for (int i = 0; i <= R_UNKNOWN; i++) {
		if (r < rows[i].weight)
			return i;
		r -= rows[i].weight;
	}
	return R_READ;
}

/* One hostile change to a command on page `first` of a region. */
static void hostile(uint64_t *s, struct hmm_dmirror_cmd *c, uint64_t first)
{
	switch (rnd_below(s, 10)) {
	case 0:
		c->addr += 1 + rnd_below(s, PAGE - 1);		/* unaligned */
		break;
	case 1:
		c->addr = 0;
		break;
	case 2:
		c->addr = KERNEL_ADDR;
		break;
	case 3:
		c->npages = ~0ULL - rnd_below(s, 4);		/* wraps */
		break;
	case 4:
		c->npages = 1ULL << 40;				/* huge */
		break;
	case 5:
		c->npages = (1ULL << 52) + rnd_below(s, 2);	/* the byte count wraps */
		break;
	case 6:
		c->npages = 0;
		break;
	case 7:
		c->ptr = 0;
		break;
	case 8:
		c->ptr = (uintptr_t)region[1];			/* read-only */
		break;
	default:
		c->npages = PAGES - first + 1 + rnd_below(s, PAGES);	/* past the end */
		break;
	}
}

static void *ioctl_thread(void *arg)
{
	struct thr *t = arg;
	uint64_t s = rnd_stream(seed, t->idx);
	char *buf = bounce();
	int fd = open(dev, O_RDWR);

	atomic_store(&t->tid, gettid());
	if (fd < 0 || !buf) {
		printf("not ok - dmirror-fuzz: %s: open or bounce buffer: %s\n", t->name,
		       strerror(errno));
		atomic_fetch_add(&failures, 1);
		return NULL;
	}
	while (!atomic_load(&stop)) {
		int row = pick_row(&s);
		int r = t->idx == HUGETLB_THREAD ? HUGETLB : (int)rnd_below(&s, NREGIONS);
		uint64_t first = rnd_below(&s, PAGES);
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)region[r] + first * PAGE,
			.ptr = (uintptr_t)buf,
			.npages = 1 + rnd_below(&s, PAGES - first),
		};
		unsigned long nr = rows[row].nr;
		int shared = rnd_below(&s, 2) == 0;

		/* Type 'H' only: other types reach the VFS' own ioctls. */
		if (row == R_UNKNOWN)
			nr = rnd_below(&s, 2) ? DMIRROR_CMD(0x7f) :
			     _IOC(rnd_below(&s, 4), 'H', 0x0a + rnd_below(&s, 0xf6),
				  rnd_below(&s, _IOC_SIZEMASK + 1));
		if (rnd_below(&s, 4) == 0) {
			hostile(&s, &c, first);
			if (rnd_below(&s, 4) == 0)
				hostile(&s, &c, first);
		}
		issue(t, shared ? shared_fd : fd, shared ? "shared" : "own", row, nr, &c);
	}
	close(fd);
	munmap(buf, REGION + PAGE);
	return NULL;
}

/*
 * The chaos thread: its operations on region (a) one at a time, so that
 * its CPU writes only meet pieces that are writable. A failed mmap() or
 * mprotect() may leave a piece unwritable: no CPU writes after one.
 */
static void *chaos_thread(void *arg)
{
	struct thr *t = arg;
	uint64_t s = rnd_stream(seed, t->idx);
	char *buf = bounce();
	/* The shared file: the ioctl threads' RELEASEs evict what it moves. */
	int fd = dup(shared_fd), writable = 1;

	atomic_store(&t->tid, gettid());
	if (fd < 0 || !buf) {
		printf("not ok - dmirror-fuzz: %s: open or bounce buffer: %s\n", t->name,
		       strerror(errno));
		atomic_fetch_add(&failures, 1);
		return NULL;
	}
	while (!atomic_load(&stop)) {
		uint64_t first = rnd_below(&s, PAGES), n = 1 + rnd_below(&s, PAGES - first);
		char *p = region[0] + first * PAGE;
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)region[0], .ptr = (uintptr_t)buf, .npages = PAGES,
		};
		unsigned int op = (unsigned int)rnd_below(&s, NCHAOS);
		int bad = 0;

		atomic_store(&t->addr, (uintptr_t)p);
		atomic_store(&t->npages, n);
		atomic_store(&t->doing, chaos_names[op]);
		switch (op) {
		case 0:
			bad = madvise(p, n * PAGE, MADV_DONTNEED);
			break;
		case 1:
			bad = mprotect(p, n * PAGE, PROT_READ) ||
			      mprotect(p, n * PAGE, PROT_READ | PROT_WRITE);
			break;
		case 2:
			bad = mmap(p, n * PAGE, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED;
			break;
		case 3:
			if (writable)
				memset(p, (int)rnd_below(&s, 256), n * PAGE);
			break;
		case 4:
			issue(t, fd, "chaos", R_CHAOS_TO_DEV, HMM_DMIRROR_MIGRATE_TO_DEV, &c);
			break;
		case 5:
			/* Without THP support: EINVAL, not a failure. */
			madvise(p, n * PAGE, MADV_HUGEPAGE);
			break;
		default:
			madvise(p, n * PAGE, MADV_NOHUGEPAGE);
			break;
		}
		if (bad) {
			writable = 0;
			atomic_fetch_add(&failures, 1);
			if (may_print())
				printf("not ok - dmirror-fuzz: chaos %s of pages %" PRIu64 "-%" PRIu64 " of region rw: %s\n",
				       chaos_names[op], first, first + n - 1, strerror(errno));
		}
		atomic_store(&t->doing, "usleep");
		atomic_fetch_add(&chaos_ops[op], 1);
		usleep((useconds_t)rnd_below(&s, 2001));
	}
	close(fd);
	munmap(buf, REGION + PAGE);
	return NULL;
}

/* The 64-bit word `w` of page `p` in round `r` of the data thread. */
static uint64_t pattern(uint64_t r, uint64_t p, uint64_t w)
{
	uint64_t z = ((r << 24) | (p << 12) | w) + 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fill(char *buf, uint64_t r)
{
	for (uint64_t p = 0; p < PAGES; p++)
		for (uint64_t w = 0; w < PAGE / 8; w++) {
			uint64_t v = pattern(r, p, w);

			memcpy(buf + p * PAGE + w * 8, &v, 8);
		}
}

/* Bytes of `buf` that are not round `r`'s; the first of each page printed. */
static unsigned long check(const char *buf, uint64_t r, const char *what)
{
	unsigned long bad = 0;

	for (uint64_t p = 0; p < PAGES; p++) {
		int first = 1;

		for (uint64_t o = 0; o < PAGE; o++) {
			uint64_t v = pattern(r, p, o / 8);
			unsigned char want = (unsigned char)(v >> (o % 8 * 8));
			unsigned char got = (unsigned char)buf[p * PAGE + o];

			if (got == want)
				continue;
			bad++;
			if (first && may_print())
				printf("# data mismatch round %" PRIu64 " page %" PRIu64 " offset %" PRIu64 " got %#04x want %#04x (%s)\n",
				       r, p, o, got, want, what);
			first = 0;
		}
	}
	return bad;
}

/*
 * A data thread migration: 1 if it moved the buffer, 0 if not (the device
 * may refuse: full, busy, a page not there), -1 on an errno that it may not
 * return for a valid private buffer.
 */
static int data_migrate(struct thr *t, int fd, int row, char *buf, char *got)
{
	struct hmm_dmirror_cmd c = {
		.addr = (uintptr_t)buf, .ptr = (uintptr_t)got, .npages = PAGES,
	};
	int e = issue(t, fd, "data", row, rows[row].nr, &c);

	if (!e)
		return 1;
	if (e == ENOMEM || e == ENOSPC || e == EBUSY || e == ENOENT)
		return 0;
	atomic_fetch_add(&failures, 1);
	if (may_print())
		printf("not ok - dmirror-fuzz: data: %s of its own buffer: %s\n",
		       rows[row].name, e > 0 ? strerror(e) : "a return neither 0 nor -1");
	return -1;
}

static void *data_thread(void *arg)
{
	struct thr *t = arg;
	char *buf = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	char *got = bounce();
	/*
	 * The shared file too: RELEASE evicts this buffer while it is
	 * checked, migrated and faulted back, and must keep every byte.
	 */
	int fd = dup(shared_fd);

	atomic_store(&t->tid, gettid());
	if (fd < 0 || buf == MAP_FAILED || !got) {
		printf("not ok - dmirror-fuzz: %s: open or buffers: %s\n", t->name,
		       strerror(errno));
		atomic_fetch_add(&failures, 1);
		return NULL;
	}
	for (uint64_t r = 0; !atomic_load(&stop); r++) {
		unsigned long bad = 0;
		int moved;

		atomic_store(&t->doing, "CPU fill");
		fill(buf, r);
		moved = data_migrate(t, fd, R_DATA_TO_DEV, buf, got);
		/* MIGRATE_TO_DEV copied out what it migrated. */
		if (moved == 1)
			bad += check(got, r, "MIGRATE_TO_DEV copy");
		atomic_fetch_add(moved == 1 ? &data_migrated : &data_unmigrated, 1);
		if (r % 2 && !atomic_load(&stop))
			data_migrate(t, fd, R_DATA_TO_SYS, buf, got);
		/* The CPU faults back what is still in device memory. */
		atomic_store(&t->doing, "CPU check");
		bad += check(buf, r, r % 2 ? "CPU after MIGRATE_TO_SYS" : "CPU");
		if (bad) {
			atomic_fetch_add(&failures, 1);
			atomic_fetch_add(&data_bad, bad);
			if (may_print())
				printf("# data round %" PRIu64 ": %lu bad bytes\n", r, bad);
		}
		atomic_fetch_add(&data_rounds, 1);
	}
	close(fd);
	munmap(buf, REGION);
	munmap(got, REGION + PAGE);
	return NULL;
}

/* Appends `str` to the `*n` bytes at `msg`: async-signal-safe. */
static void put(char *msg, size_t *n, const char *str)
{
	while (*str)
		msg[(*n)++] = *str++;
}

/* SIGSEGV, SIGBUS: a CPU access the kernel failed; say so in TAP. */
static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	uint64_t addr = (uintptr_t)si->si_addr;
	char msg[200], hex[19] = "0x";
	size_t n = 0;

	(void)uc;
	for (int i = 0; i < 16; i++)
		hex[2 + i] = "0123456789abcdef"[(addr >> (60 - 4 * i)) & 0xf];
	hex[18] = '\0';
	put(msg, &n, "# ");
	put(msg, &n, sig == SIGBUS ? "SIGBUS" : "SIGSEGV");
	put(msg, &n, " at ");
	put(msg, &n, hex);
	put(msg, &n, "\n1..1\nnot ok 1 - dmirror-fuzz: ");
	put(msg, &n, sig == SIGBUS ? "SIGBUS" : "SIGSEGV");
	put(msg, &n, " (a CPU access to a fuzzed page failed)\n");
	if (write(1, msg, n) < 0)
		_exit(1);
	_exit(1);
}

/* The kernel stack of a thread that does not stop, as comments. */
static void print_stack(int tid)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stack", tid);
	f = fopen(path, "r");
	if (!f)
		return;
	for (int i = 0; i < 64 && fgets(line, sizeof(line), f); i++)
		printf("#   %s", line);
	fclose(f);
}

static void print_stats(void)
{
	for (int i = 0; i < NROWS; i++) {
		unsigned long calls = 0;

		for (size_t k = 0; k <= OTHER; k++)
			calls += atomic_load(&res[i][k]);
		if (!calls)
			continue;
		printf("# %-20s %8lu calls: ok %lu", rows[i].name, calls,
		       atomic_load(&res[i][0]));
		for (size_t k = 1; k <= OTHER; k++)
			if (atomic_load(&res[i][k]))
				printf(", %s %lu", k == OTHER ? "other" : errs[k - 1].name,
				       atomic_load(&res[i][k]));
		printf("\n");
	}
	printf("# chaos:");
	for (size_t k = 0; k < NCHAOS; k++)
		printf(" %s %lu", chaos_names[k], atomic_load(&chaos_ops[k]));
	printf("\n# data: %lu rounds, %lu migrated to the device, %lu not, %lu bad bytes\n",
	       atomic_load(&data_rounds), atomic_load(&data_migrated),
	       atomic_load(&data_unmigrated), atomic_load(&data_bad));
	printf("# hugetlb:");
	for (int i = 0; i <= R_UNKNOWN; i++)
		printf(" %s %lu/%lu", rows[i].name, atomic_load(&hugetlb_ok[i]),
		       atomic_load(&hugetlb_calls[i]));
	printf(" (ok/calls)\n");
	printf("# failures: %lu\n", atomic_load(&failures));
}

static void __attribute__((noreturn)) setup_failed(const char *what)
{
	printf("# %s: %s\n1..1\nnot ok 1 - dmirror-fuzz: setup: %s\n", what, strerror(errno),
	       what);
	exit(1);
}

/* The four regions, in one reservation: PROT_NONE guards around each. */
static void map_regions(void)
{
	char *area = mmap(NULL, NREGIONS * (REGION + GUARD) + GUARD, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	int mfd;

	if (area == MAP_FAILED)
		setup_failed("mmap");
	for (int i = 0; i < NREGIONS; i++)
		region[i] = area + GUARD + i * (REGION + GUARD);
	for (int i = 0; i < 3; i++)
		if (mmap(region[i], REGION, i == 2 ? PROT_NONE : PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			setup_failed("mmap");
	memset(region[0], 0xa5, REGION);
	memset(region[1], 0xb5, REGION);
	if (mprotect(region[1], REGION, PROT_READ))
		setup_failed("mprotect");
	mfd = memfd_create("dmirror-fuzz", 0);
	if (mfd < 0 || ftruncate(mfd, REGION))
		setup_failed("memfd");
	if (mmap(region[3], REGION, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd,
		 0) == MAP_FAILED)
		setup_failed("mmap memfd");
	close(mfd);
	memset(region[3], 0xd5, REGION);
	region[HUGETLB] = mmap(NULL, HUGETLB_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (region[HUGETLB] == MAP_FAILED)
		setup_failed("mmap MAP_HUGETLB (no free huge page: vm.nr_hugepages)");
	memset(region[HUGETLB], 0xe5, HUGETLB_SIZE);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_fatal, .sa_flags = SA_SIGINFO };
	struct timespec end;
	int seconds, hung = -1;

	seconds = argc > 2 ? atoi(argv[2]) : 0;
	if (argc < 3 || argc > 4 || seconds <= 0) {
		fprintf(stderr, "usage: %s DEVICE SECONDS [SEED]\n", argv[0]);
		return 2;
	}
	dev = argv[1];
	if (argc > 3) {
		seed = strtoull(argv[3], NULL, 0);
	} else {
		int fd = open("/dev/urandom", O_RDONLY);

		if (fd < 0 || read(fd, &seed, sizeof(seed)) != sizeof(seed))
			seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
		if (fd >= 0)
			close(fd);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# seed %" PRIu64 "\n", seed);
	printf("# dmirror-fuzz %s %d s, regions:", dev, seconds);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);

	shared_fd = open(dev, O_RDWR);
	if (shared_fd < 0) {
		printf("\n");
		setup_failed(dev);
	}
	map_regions();
	for (int i = 0; i <= HUGETLB; i++)
		printf(" %s %p", region_names[i], (void *)region[i]);
	printf("\n");

	for (int i = 0; i < NTHREADS; i++) {
		void *(*fn)(void *) = i < IOCTL_THREADS || i == HUGETLB_THREAD ? ioctl_thread :
				      i == IOCTL_THREADS ? chaos_thread : data_thread;

		thr[i].idx = i;
		atomic_store(&thr[i].doing, "starting");
		if (i < IOCTL_THREADS)
			snprintf(thr[i].name, sizeof(thr[i].name), "ioctl%d", i);
		else
			snprintf(thr[i].name, sizeof(thr[i].name), "%s",
				 i == IOCTL_THREADS ? "chaos" :
				 i == HUGETLB_THREAD ? "hugetlb" : "data");
		errno = pthread_create(&thr[i].th, NULL, fn, &thr[i]);
		if (errno)
			setup_failed("pthread_create");
	}

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += seconds;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL) == EINTR)
		;
	atomic_store(&stop, 1);

	/* pthread_timedjoin_np() takes a CLOCK_REALTIME deadline. */
	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += HANG_SECONDS;
	for (int i = 0; i < NTHREADS; i++) {
		if (pthread_timedjoin_np(thr[i].th, NULL, &end) == 0)
			continue;
		if (hung < 0)
			hung = i;
		printf("# thread %s (tid %d) did not stop: in %s, addr %#llx npages %#llx\n",
		       thr[i].name, atomic_load(&thr[i].tid), atomic_load(&thr[i].doing),
		       atomic_load(&thr[i].addr), atomic_load(&thr[i].npages));
		print_stack(atomic_load(&thr[i].tid));
	}
	print_stats();
	if (hung >= 0) {
		printf("1..1\nnot ok 1 - dmirror-fuzz: thread %s did not stop (hang)\n",
		       thr[hung].name);
		fflush(stdout);
		_exit(1);
	}
	if (!atomic_load(&data_rounds)) {
		printf("# the data thread completed no round\n");
		atomic_fetch_add(&failures, 1);
	}
	/* Else the hugetlb thread measured argument checks only. */
	if (!atomic_load(&hugetlb_ok[R_SNAPSHOT]) || !atomic_load(&hugetlb_ok[R_READ])) {
		printf("# no SNAPSHOT or READ of the hugetlb region succeeded\n");
		atomic_fetch_add(&failures, 1);
	}
	close(shared_fd);
	printf("1..1\n%sok 1 - dmirror-fuzz %s %d s seed %" PRIu64 "\n",
	       atomic_load(&failures) ? "not " : "", dev, seconds, seed);
	return atomic_load(&failures) ? 1 : 0;
}
