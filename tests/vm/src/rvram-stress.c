// SPDX-License-Identifier: GPL-2.0
/*
 * Stress and fuzz tests of rvram (the dmirror ABI, migration, P2P aliases)
 * for what real processes do at once, and for hostile input.
 *
 *   rvram-stress race DEV PEER|- NIC|- SECONDS SEED
 *   rvram-stress cow DEV NIC|- SEED
 *   rvram-stress exhaust DEV PEER|- SEED
 *   rvram-stress kill DEV PEER|- ROUNDS SEED
 *   rvram-stress fuzz DEV CALLS SEED
 *   rvram-stress unbind DEV PCI_ADDR PEER|- NIC|- SECONDS SEED
 *
 * DEV is /dev/rvramN; PEER a second rvram device under the same PCIe switch,
 * used as a DMA client that reaches DEV's VRAM through P2P aliases, or "-";
 * NIC the odp_dma test NIC (tests/odp-dma/, /dev/odp_dmaN) under the same
 * switch, whose DMA engine reads and writes ODP MRs as mlx5 does, or "-".
 * Every random choice is a function of SEED (printed): a failure replays
 * with the same seed, up to thread interleaving. Prints TAP.
 *
 * race: THREADS threads on one shared anonymous region. The region has
 * "word pages", in which thread t owns every THREADS-th 64-bit word, and
 * "own pages", of which thread t owns every THREADS-th. Each thread keeps a
 * shadow copy of what it owns and, at random: writes and checks its words
 * and pages with the CPU; writes and reads its own pages through the device
 * (dmirror WRITE / READ), through PEER's aliases and with NIC's DMA engine
 * through an ODP MR over the whole region; migrates random ranges
 * of the whole region to the device and back; zaps (MADV_DONTNEED),
 * write-protects (mprotect) and moves away and back (mremap) one of its own
 * pages; fork()s a child that checks the thread's words and pages as they
 * were at the fork. At the end every word equals its shadow.
 *
 * cow: a region of 4 KiB pages and a 2 MiB folio in VRAM, shared
 * copy-on-write with a child. Parent and child write different halves, with
 * the CPU and through the device; each sees its own writes and the original
 * data elsewhere, before and after migrating back. With NIC, the parent
 * has an ODP MR over the region: the NIC's writes after the fork land in
 * the parent's memory only, and its reads see what the parent sees.
 *
 * exhaust: 5/4 of DEV's VRAM is migrated to DEV: what does not fit fails
 * with ENOMEM or stays in system memory; VRAM is full, every byte stays
 * right (read by the device, by PEER through aliases, then by the CPU) and
 * VRAM empties when the memory is unmapped.
 *
 * kill: a child migrates 64 MiB to the device and back in a loop (or, with
 * PEER, keeps 64 MiB in DEV's VRAM and reads and writes it through PEER's
 * aliases) and is killed with SIGKILL at a random moment, ROUNDS times:
 * after each, DEV's resident-page count is back to its value before; then
 * the device still migrates and returns data correctly.
 *
 * fuzz: CALLS calls. Four in five are ioctls with random command numbers,
 * sizes and argument pointers, and valid commands with hostile arguments
 * (the table in Documentation/misc-devices/rvram.rst), while a second
 * thread unmaps, write-protects and remaps their targets: every call
 * returns 0 or an errno of that table. One in five is a VRAM buffer object
 * call (see "dma-bufs" below): RVRAM_IOCTL_ALLOC_DMABUF with valid and
 * hostile sizes, flags and argument pointers, and on the dma-bufs it
 * returns mmap() with random protections, types, offsets and lengths, CPU
 * loads and stores through the mappings, munmap(), mprotect(),
 * DMA_BUF_IOCTL_SYNC, DMA_BUF_SET_NAME, unknown ioctls and close(); the
 * dmirror commands also get the buffers' mappings as their range and result
 * buffer. Every such call gets the exact answer the ABI fixes (a hostile
 * call that returns 0 fails the test), every read sees the buffer's last
 * data (zeroes, when new), and once all are closed no VRAM stays reserved
 * and no fd is left.
 *
 * unbind: the race, and in its middle DEV's GPU (at PCI_ADDR) is unbound
 * or removed from the bus: the threads' commands on DEV fail with ENODEV
 * from then on, nothing else fails and no word is lost; the GPU comes back
 * (bound again, or rescanned and assigned to its driver again: a new
 * device has no driver_override) and works. Meanwhile a fifth thread makes
 * the buffer object calls of the fuzz on DEV: before the unbind they
 * succeed, during it they may also fail with ENODEV (new buffers and
 * mappings) or SIGBUS (accesses), after it they must; a buffer mapped and
 * written before it is revoked. With RVRAM_KO (the module's path) in the
 * environment, rvram is then unloaded while the CPU and NIC use data in
 * its VRAM, and loaded again: the GPUs, still assigned to it, bind at load.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/dma-buf.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dmirror.h"
#include "kcov.h"
#include "../../odp-dma/odp_dma_uapi.h"
#include "../../../drivers/rvram/include/uapi/misc/rvram.h"

static const char *dev, *peer, *nic;
static uint64_t seed;

/* `len` bytes at a `align`-aligned address, the rest of the reservation unmapped. */
static char *map_aligned(size_t len, size_t align)
{
	char *area = mmap(NULL, len + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p;

	if (area == MAP_FAILED) {
		perror("rvram-stress: mmap");
		exit(2);
	}
	p = (char *)(((uintptr_t)area + align - 1) & ~(align - 1));
	if (mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
		 0) == MAP_FAILED) {
		perror("rvram-stress: mmap");
		exit(2);
	}
	return p;
}

static int open_dev(const char *path, uint64_t flags)
{
	int fd = open(path, O_RDWR);

	if (fd < 0) {
		fprintf(stderr, "rvram-stress: open %s: %s\n", path, strerror(errno));
		exit(2);
	}
	if (flags && dmirror(fd, HMM_DMIRROR_FLAGS, NULL, NULL, flags)) {
		fprintf(stderr, "rvram-stress: %s: FLAGS %#" PRIx64 ": %s\n", path, flags,
			strerror(errno));
		exit(2);
	}
	return fd;
}

/* The 64-bit word a writer puts at index `i` in generation `gen`. */
static uint64_t word(uint64_t gen, uint64_t i)
{
	return (gen * 0x100000001b3ULL) ^ (i * 0x9e3779b97f4a7c15ULL) ^ 0x5555;
}

static void fill(void *p, size_t len, uint64_t gen)
{
	uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = word(gen, i);
}

/* Bytes of p that differ from q. */
static size_t differ(const void *p, const void *q, size_t len)
{
	const unsigned char *a = p, *b = q;
	size_t bad = 0;

	for (size_t i = 0; i < len; i++)
		bad += a[i] != b[i];
	return bad;
}

/* After the abuse: a fresh file migrates n pages and returns them intact. */
static void still_works(const char *test, size_t n)
{
	size_t len = n * PAGE;
	char *p = map_anon(len), *buf = map_anon(len), *want = map_anon(len);
	int fd = open_dev(dev, 0);

	fill(want, len, n);
	memcpy(p, want, len);
	tap(dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, buf, n) == 0 && !memcmp(buf, want, len) &&
		    !memcmp(p, want, len),
	    "%s: afterwards the device migrates %zu pages and returns them intact", test, n);
	close(fd);
	munmap(p, len);
	munmap(buf, len);
	munmap(want, len);
}

/* One page between buf and the NIC's MR at iova: 0 or -errno. */
static int nic_xfer(int nic_fd, uint32_t mr, int to_mr, void *iova, void *buf)
{
	struct odp_dma_xfer x = {
		.mr = mr,
		.flags = to_mr ? ODP_DMA_TO_MR : 0,
		.iova = (uintptr_t)iova,
		.len = PAGE,
		.buf = (uintptr_t)buf,
	};

	return ioctl(nic_fd, ODP_DMA_XFER, &x) ? -errno : 0;
}

/* ---------------------------------------------------------------- race */

#define THREADS 4
#define WORD_PAGES 16
#define OWN_PER_THREAD 8
#define OWN_PAGES (THREADS * OWN_PER_THREAD)
#define RACE_PAGES (WORD_PAGES + OWN_PAGES)
#define WORDS_PER_PAGE (PAGE / 8)

static char *region;
static atomic_int stop;
/* Unbind: DEV's GPU is going or gone; only the CPU and the NIC run. */
static atomic_int dev_gone, cpu_and_nic_only;

struct racer {
	int t;
	uint64_t s;
	int fd, peer_fd, nic_fd;
	uint32_t mr;
	/* Shadows: this thread's words of the word pages, and its own pages. */
	uint64_t words[WORD_PAGES * WORDS_PER_PAGE / THREADS];
	char own[OWN_PER_THREAD][PAGE];
	char buf[RACE_PAGES * PAGE];
	unsigned long ops[16], failed_ops[16], bad_errno, bad_bytes, forks, bad_children, gone;
	char first_error[160];
};

static const char *const race_op_names[] = {
	"cpu write words", "cpu check words", "cpu write page", "cpu check page",
	"device write", "device read", "migrate to device", "migrate to system or release",
	"madvise dontneed", "mprotect", "mremap", "fork", "peer write", "peer read",
	"nic write", "nic read",
};
#define RACE_OPS (sizeof(race_op_names) / sizeof(race_op_names[0]))

static uint64_t *region_word(int t, size_t k)
{
	/* k-th word of thread t: words t, t + THREADS, ... of the word pages. */
	return (uint64_t *)region + k * THREADS + t;
}

static char *own_page(int t, int k)
{
	return region + (WORD_PAGES + (size_t)k * THREADS + t) * PAGE;
}

static void race_error(struct racer *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void race_error(struct racer *r, const char *fmt, ...)
{
	va_list ap;

	if (r->first_error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(r->first_error, sizeof(r->first_error), fmt, ap);
	va_end(ap);
}

/* Checks this thread's words and own pages against its shadow; bad bytes. */
static size_t race_check_all(struct racer *r)
{
	size_t bad = 0;

	for (size_t k = 0; k < sizeof(r->words) / 8; k++)
		bad += *region_word(r->t, k) != r->words[k] ? 8 : 0;
	for (int k = 0; k < OWN_PER_THREAD; k++)
		bad += differ(own_page(r->t, k), r->own[k], PAGE);
	return bad;
}

/*
 * A command on the thread's own page, which is never a hole nor shared
 * with another writer: any failure is an error. Returns ret.
 */
static int race_must(struct racer *r, int op, int ret)
{
	if (ret == -ENODEV && (op == 4 || op == 5) && atomic_load(&dev_gone)) {
		r->gone++;
		return ret;
	}
	if (ret) {
		r->failed_ops[op]++;
		r->bad_errno++;
		race_error(r, "%s: errno %d", race_op_names[op], -ret);
	}
	return ret;
}

/* A dmirror command whose failure is expected under the race. */
static int race_may_fail(struct racer *r, int op, int ret)
{
	if (ret == 0)
		return 0;
	r->failed_ops[op]++;
	if (!dmirror_errno_ok(-ret)) {
		r->bad_errno++;
		race_error(r, "%s: errno %d", race_op_names[op], -ret);
	}
	return ret;
}

static void *racer_thread(void *arg)
{
	struct racer *r = arg;
	const size_t nwords = sizeof(r->words) / 8;

	while (!atomic_load(&stop)) {
		int op = (int)rnd_below(&r->s, RACE_OPS);
		int k = (int)rnd_below(&r->s, OWN_PER_THREAD);
		char *pg = own_page(r->t, k);
		uint64_t first = rnd_below(&r->s, RACE_PAGES);
		uint64_t n = 1 + rnd_below(&r->s, RACE_PAGES - first);
		size_t bad;
		int ret;

		if (op >= 12 && op < 14 && r->peer_fd < 0)
			op = 4 + (op & 1);
		/* A DMA engine transfer takes 100 ms of emulated time: rarely. */
		if (op >= 14 && (r->nic_fd < 0 || rnd_below(&r->s, 8)))
			op = 4 + (op & 1);
		/* With rvram unloading: the CPU's operations instead of the devices'. */
		if (atomic_load(&cpu_and_nic_only) && ((op >= 4 && op < 8) || op == 12 || op == 13))
			op &= 3;
		r->ops[op]++;
		switch (op) {
		case 0:
			for (int i = 0; i < 32; i++) {
				size_t w = rnd_below(&r->s, nwords);

				r->words[w] = rnd(&r->s);
				*region_word(r->t, w) = r->words[w];
			}
			break;
		case 1:
			for (size_t w = 0; w < nwords; w++) {
				if (*region_word(r->t, w) != r->words[w]) {
					r->bad_bytes += 8;
					race_error(r, "word %zu: %#" PRIx64 ", shadow %#" PRIx64, w,
						   *region_word(r->t, w), r->words[w]);
				}
			}
			break;
		case 2:
			fill(r->own[k], PAGE, rnd(&r->s));
			memcpy(pg, r->own[k], PAGE);
			break;
		case 3:
			bad = differ(pg, r->own[k], PAGE);
			if (bad)
				race_error(r, "own page %d: %zu bytes differ (cpu)", k, bad);
			r->bad_bytes += bad;
			break;
		case 4:
		case 12:
			fill(r->buf, PAGE, rnd(&r->s));
			ret = dmirror(op == 4 ? r->fd : r->peer_fd, HMM_DMIRROR_WRITE, pg, r->buf, 1);
			if (race_must(r, op, ret))
				break;
			memcpy(r->own[k], r->buf, PAGE);
			break;
		case 5:
		case 13:
			ret = dmirror(op == 5 ? r->fd : r->peer_fd, HMM_DMIRROR_READ, pg, r->buf, 1);
			if (race_must(r, op, ret))
				break;
			bad = differ(r->buf, r->own[k], PAGE);
			if (bad)
				race_error(r, "own page %d: %zu bytes differ (%s)", k, bad,
					   race_op_names[op]);
			r->bad_bytes += bad;
			break;
		case 6:
			/*
			 * Others move, zap and remap their pages meanwhile: a
			 * migration may hit a hole (EFAULT), a busy page or a
			 * page that left again before the read-back (ENOENT).
			 */
			ret = dmirror(r->fd, HMM_DMIRROR_MIGRATE_TO_DEV, region + first * PAGE,
				      r->buf, n);
			race_may_fail(r, op, ret);
			break;
		case 7:
			/*
			 * One in four: RELEASE, which evicts every page this
			 * file moved in, wherever the others' faults, zaps and
			 * migrations have got with them meanwhile (the data
			 * stays). It missed the double migration of a page
			 * that had just migrated away until it raced them.
			 */
			if (!rnd_below(&r->s, 4))
				ret = dmirror(r->fd, HMM_DMIRROR_RELEASE, region, r->buf, 0);
			else
				ret = dmirror(r->fd, HMM_DMIRROR_MIGRATE_TO_SYS, region + first * PAGE,
					      r->buf, n);
			race_may_fail(r, op, ret);
			break;
		case 14:
		case 15: {
			/* Half a page: one transfer of the engine. */
			size_t half = rnd_below(&r->s, 2) * (PAGE / 2);
			struct odp_dma_xfer x = {
				.mr = r->mr,
				.flags = op == 14 ? ODP_DMA_TO_MR : 0,
				.iova = (uintptr_t)pg + half,
				.len = PAGE / 2,
				.buf = (uintptr_t)r->buf,
			};

			if (op == 14)
				fill(r->buf, PAGE / 2, rnd(&r->s));
			if (race_must(r, op, ioctl(r->nic_fd, ODP_DMA_XFER, &x) ? -errno : 0))
				break;
			if (op == 14) {
				memcpy(r->own[k] + half, r->buf, PAGE / 2);
				break;
			}
			bad = differ(r->buf, r->own[k] + half, PAGE / 2);
			if (bad)
				race_error(r, "own page %d: %zu bytes differ (nic read)", k, bad);
			r->bad_bytes += bad;
			break;
		}
		case 8:
			madvise(pg, PAGE, MADV_DONTNEED);
			memset(r->own[k], 0, PAGE);
			break;
		case 9:
			if (mprotect(pg, PAGE, PROT_READ) ||
			    mprotect(pg, PAGE, PROT_READ | PROT_WRITE))
				race_error(r, "mprotect: %s", strerror(errno));
			break;
		case 10: {
			/* Away to a fresh address and back (device-private entries move). */
			void *tmp = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (tmp == MAP_FAILED ||
			    mremap(pg, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, tmp) == MAP_FAILED ||
			    mremap(tmp, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, pg) == MAP_FAILED) {
				r->bad_errno++;
				race_error(r, "mremap: %s", strerror(errno));
			}
			break;
		}
		case 11: {
			/* The child sees this thread's data as it was at the fork. */
			pid_t pid = fork();
			int status;

			if (pid == 0)
				_exit(race_check_all(r) ? 1 : 0);
			r->forks++;
			if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
			    WEXITSTATUS(status)) {
				r->bad_children++;
				race_error(r, "fork child: status %#x", status);
			}
			break;
		}
		}
	}
	r->bad_bytes += race_check_all(r);
	return NULL;
}

/* The threads of one race, and what they had before it. */
struct race {
	struct racer *rs[THREADS];
	pthread_t th[THREADS];
	long resident0, grants0;
	struct odp_dma_stats nic0;
};

static void race_setup(struct race *x)
{
	x->resident0 = rvram_stat(dev, "pages_resident");
	x->grants0 = peer ? rvram_stat(dev, "alias_grants") : -1;
	region = map_aligned(RACE_PAGES * PAGE, PMD_SIZE);
	memset(region, 0, RACE_PAGES * PAGE);
	for (int t = 0; t < THREADS; t++) {
		struct racer *r = map_anon(sizeof(*r));

		r->t = t;
		r->s = rnd_stream(seed, t);
		r->fd = open_dev(dev, 0);
		r->peer_fd = peer ? open_dev(peer, RVRAM_FLAG_ALIAS_DMA) : -1;
		r->nic_fd = -1;
		if (nic) {
			/* Each thread's own ODP MR over the whole region. */
			struct odp_dma_reg reg = {
				.addr = (uintptr_t)region,
				.len = RACE_PAGES * PAGE,
				.flags = ODP_DMA_WRITABLE,
			};

			r->nic_fd = open(nic, O_RDWR);
			if (r->nic_fd < 0 || ioctl(r->nic_fd, ODP_DMA_REG_MR, &reg)) {
				fprintf(stderr, "rvram-stress: %s: %s\n", nic, strerror(errno));
				exit(2);
			}
			r->mr = reg.mr;
			if (t == 0)
				ioctl(r->nic_fd, ODP_DMA_STATS, &x->nic0);
		}
		x->rs[t] = r;
	}
}

static void race_start(struct race *x)
{
	atomic_store(&stop, 0);
	for (int t = 0; t < THREADS; t++)
		pthread_create(&x->th[t], NULL, racer_thread, x->rs[t]);
}

static void race_stop(struct race *x)
{
	atomic_store(&stop, 1);
	for (int t = 0; t < THREADS; t++)
		pthread_join(x->th[t], NULL);
}

/*
 * Sums up the threads' operations since the last report and checks them:
 * every command returned what the ABI allows, every child and every word
 * saw the right data. `migrations` asks for successful migrations.
 */
static void race_report(struct race *x, const char *test, int seconds, int migrations)
{
	unsigned long total = 0, failed = 0, bad_errno = 0, bad_bytes = 0, forks = 0;
	unsigned long bad_children = 0, gone = 0, ops[RACE_OPS] = { 0 }, fails[RACE_OPS] = { 0 };

	for (int t = 0; t < THREADS; t++) {
		struct racer *r = x->rs[t];

		for (size_t i = 0; i < RACE_OPS; i++) {
			ops[i] += r->ops[i];
			fails[i] += r->failed_ops[i];
			total += r->ops[i];
			failed += r->failed_ops[i];
		}
		bad_errno += r->bad_errno;
		bad_bytes += r->bad_bytes;
		forks += r->forks;
		bad_children += r->bad_children;
		gone += r->gone;
		if (r->first_error[0])
			printf("# %s: thread %d: first error: %s\n", test, t, r->first_error);
		memset(r->ops, 0, sizeof(r->ops));
		memset(r->failed_ops, 0, sizeof(r->failed_ops));
		r->bad_errno = r->bad_bytes = r->forks = r->bad_children = r->gone = 0;
		r->first_error[0] = 0;
	}
	for (size_t i = 0; i < RACE_OPS; i++)
		printf("# %-18s %7lu (%lu failed)\n", race_op_names[i], ops[i], fails[i]);
	printf("# %lu operations in %d s by %d threads, %lu failed as the ABI allows, %lu with ENODEV from a removed GPU\n",
	       total, seconds, THREADS, failed, gone);
	tap(total > 0 && (!migrations || (ops[6] > fails[6] && ops[7] > fails[7])),
	    "%s: the threads ran%s", test, migrations ? ", and migrations succeeded" : "");
	tap(bad_errno == 0, "%s: every command returned 0 or an errno of the ABI (%lu did not)",
	    test, bad_errno);
	tap(forks > 0 && bad_children == 0,
	    "%s: %lu fork children saw their parent thread's data (%lu did not)", test, forks,
	    bad_children);
	tap(bad_bytes == 0, "%s: every word and page equals its shadow (%lu bytes differ)", test,
	    bad_bytes);
}

static void race_close(struct race *x)
{
	munmap(region, RACE_PAGES * PAGE);
	for (int t = 0; t < THREADS; t++) {
		close(x->rs[t]->fd);
		if (x->rs[t]->peer_fd >= 0)
			close(x->rs[t]->peer_fd);
		if (x->rs[t]->nic_fd >= 0)
			close(x->rs[t]->nic_fd);
		munmap(x->rs[t], sizeof(*x->rs[t]));
	}
}

/*
 * The NIC's counters since race_setup() or the last report: its engine
 * moved data and, with
 * `aliases`, reached VRAM through aliases.
 */
static void race_nic_report(struct race *x, const char *test, int aliases)
{
	struct odp_dma_stats n1 = { 0 }, *n0 = &x->nic0;

	ioctl(x->rs[0]->nic_fd, ODP_DMA_STATS, &n1);
	printf("# %s: faults +%llu, pages mapped: RAM +%llu, bus +%llu (aliases +%llu); invalidations +%llu; DMA ops +%llu\n",
	       nic, n1.faults - n0->faults, n1.map_ram - n0->map_ram, n1.map_bus - n0->map_bus,
	       n1.map_alias - n0->map_alias, n1.invalidations - n0->invalidations,
	       n1.dma_ops - n0->dma_ops);
	tap(n1.dma_ops > n0->dma_ops && (!aliases || n1.map_alias > n0->map_alias),
	    "%s: %s's DMA engine moved data%s", test, nic,
	    aliases ? ", and reached VRAM through aliases" : "");
	*n0 = n1;
}

static int do_race(int seconds)
{
	struct race x;
	int fd = open_dev(dev, 0);
	size_t bad = 0;
	char *check;

	race_setup(&x);
	race_start(&x);
	sleep(seconds);
	race_stop(&x);
	race_report(&x, "race", seconds, 1);

	/* The whole region to the device and back through it: still every word. */
	check = map_anon(RACE_PAGES * PAGE);
	tap(dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, region, check, RACE_PAGES) == 0 &&
		    dmirror(fd, HMM_DMIRROR_READ, region, check, RACE_PAGES) == 0 &&
		    !memcmp(check, region, RACE_PAGES * PAGE),
	    "race: afterwards the region migrates and reads back through the device");
	for (int t = 0; t < THREADS; t++)
		bad += race_check_all(x.rs[t]);
	tap(bad == 0, "race: and every word still equals its shadow");
	if (peer) {
		long grants = rvram_stat(dev, "alias_grants");

		printf("# %s alias_grants +%ld\n", dev, grants - x.grants0);
		tap(grants > x.grants0, "race: %s reached the VRAM through P2P aliases", peer);
	}
	if (nic)
		race_nic_report(&x, "race", 1);
	race_close(&x);
	munmap(check, RACE_PAGES * PAGE);
	close(fd);
	tap(rvram_stat(dev, "pages_resident") == x.resident0,
	    "race: no VRAM page stays resident after the region is gone");
	return 0;
}

/* ------------------------------------------------------------ dma-bufs */

/*
 * VRAM buffer objects (RVRAM_IOCTL_ALLOC_DMABUF) and what their dma-buf
 * file descriptors allow, at random: hostile and valid allocations, mmap()
 * with any protection, type, offset and length, CPU accesses through the
 * mappings, munmap(), mprotect(), DMA_BUF_IOCTL_SYNC, DMA_BUF_SET_NAME,
 * unknown ioctls and close(). Each call is held to the answer the kernel
 * must give (include/uapi/misc/rvram.h, drivers/rvram/bo.rs, the dma-buf
 * core and mm of Linux 7.3), an exact errno wherever the ABI fixes one;
 * every page a CPU access reads must hold what was last written to it
 * through any mapping of its buffer (zeroes, for a buffer never written).
 * Used by the fuzz, interleaved with its dmirror commands, and by a thread
 * of the unbind test, where the GPU goes away under the buffers.
 */

#define BO_MAX 8
#define BO_MAPS 16
/*
 * Where the buffers' mappings go: a 1 TiB window far below the kernel's
 * mmap() area, each mapping at a fresh address in it. The other tests'
 * threads unmap and remap their pages (the fuzz's chaos thread, the race's
 * mremap()): a mapping the kernel placed in the hole they leave for a
 * moment would be replaced under us.
 */
#define BO_WINDOW 0x300000000000ULL
#define BO_WINDOW_SIZE (1ULL << 40)
/* A page whose last store was cut short: its contents are not known. */
#define BO_UNKNOWN UINT32_MAX

enum {
	BO_ALLOC, BO_MMAP, BO_ACCESS, BO_MUNMAP, BO_MPROTECT, BO_SYNC, BO_NAME, BO_IOCTL,
	BO_CLOSE, BO_OPS
};

static const char *const bo_op_names[] = {
	"ALLOC_DMABUF", "mmap", "access", "munmap", "mprotect", "SYNC", "SET_NAME",
	"other ioctl", "close",
};

/* How far DEV's GPU has gone: bound, being unbound (either answer), gone. */
enum { BO_BOUND, BO_GOING, BO_GONE };
static atomic_int bo_phase;

struct bo {
	int fd;			/* -1 once closed (its mappings may live on) */
	uint64_t pages;
	uint32_t *gen;		/* per page: what was last stored, 0 for zeroes */
	int maps;
};

struct bo_map {
	struct bo *bo;
	char *addr;
	uint64_t pgoff, pages;
	int prot;
};

struct bos {
	const char *test;
	int dev_fd, coherent, small;
	uint64_t s, vram_pages, reserved; /* pages of our live buffers */
	uint64_t next;			/* the next address in BO_WINDOW */
	uint32_t gen;
	struct bo *bo[BO_MAX];
	struct bo_map map[BO_MAPS];
	int nbo, nmap;
	/* Arguments end at the end of `arg`, whose next page is a hole. */
	char *arg, *none;
	struct rvram_alloc_dmabuf *ro;	/* a valid request, read-only */
	unsigned long calls[BO_OPS], ok[BO_OPS], bad[BO_OPS], gone_calls;
	unsigned long bytes, bad_bytes, sigbus, sigsegv;
};

/* Accesses that may fault: the signal they got, per thread. */
static __thread sigjmp_buf probe_jump;
static __thread volatile sig_atomic_t probing;

static void probe_signal(int sig)
{
	if (probing)
		siglongjmp(probe_jump, sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_probe_signals(void)
{
	struct sigaction sa = { .sa_handler = probe_signal, .sa_flags = SA_NODEFER };

	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
}

/* Writes a page with the words of generation gen: 0, or the signal. */
static int probe_fill(volatile uint64_t *w, uint32_t gen)
{
	int sig = sigsetjmp(probe_jump, 1);

	if (!sig) {
		probing = 1;
		for (size_t i = 0; i < WORDS_PER_PAGE; i++)
			w[i] = word(gen, i);
	}
	probing = 0;
	return sig;
}

/* Bytes of a page that are not generation gen's (0: zeroes) into *bad: 0, or the signal. */
static int probe_check(volatile uint64_t *w, uint32_t gen, size_t *bad)
{
	volatile size_t n = 0;
	int sig = sigsetjmp(probe_jump, 1);

	if (!sig) {
		probing = 1;
		for (size_t i = 0; i < WORDS_PER_PAGE; i++)
			n += w[i] != (gen ? word(gen, i) : 0) ? 8 : 0;
	}
	probing = 0;
	*bad = n;
	return sig;
}

/* One byte loaded or stored (a store alone, no load first): 0, or the signal. */
static int probe_byte(volatile char *p, int store)
{
	int sig = sigsetjmp(probe_jump, 1);

	if (!sig) {
		probing = 1;
		if (store)
			*p = 0x5a;
		else
			(void)*p;
	}
	probing = 0;
	return sig;
}

static void bo_fail(struct bos *st, int op, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* An answer the kernel must not give: counted, the first ones printed. */
static void bo_fail(struct bos *st, int op, const char *fmt, ...)
{
	unsigned long n = 0;
	va_list ap;

	st->bad[op]++;
	for (int i = 0; i < BO_OPS; i++)
		n += st->bad[i];
	if (n > 10)
		return;
	printf("# %s: dma-buf %s (call %lu, phase %d): ", st->test, bo_op_names[op],
	       st->calls[op], atomic_load(&bo_phase));
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* Whether errno e (0: success) is one of the n answers in want. */
static int one_of(int e, const int *want, int n)
{
	for (int i = 0; i < n; i++)
		if (want[i] == e)
			return 1;
	return 0;
}

/* An errno's name, "0" for success. */
static const char *errname(int e)
{
	const char *name = e > 0 ? strerrorname_np(e) : NULL;

	return !e ? "0" : name ? name : "?";
}

/* The n answers in want, as "0|ENOMEM". */
static const char *answers(const int *want, int n, char *buf, size_t len)
{
	buf[0] = 0;
	for (int i = 0; i < n; i++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? "|" : "",
			 errname(want[i]));
	return buf;
}

/*
 * mmap() at a fresh address of the window (a hint: where the kernel takes
 * it, nothing of anyone else's is there), with a guard page after it.
 */
static void *bo_mmap_fresh(struct bos *st, uint64_t len, int prot, int flags, int fd, off_t off)
{
	uint64_t at = BO_WINDOW + st->next;

	if (len < BO_WINDOW_SIZE / 4)
		st->next = (st->next + ((len + PAGE - 1) & ~(PAGE - 1)) + PAGE) % BO_WINDOW_SIZE;
	return mmap((void *)(uintptr_t)at, len, prot, flags, fd, off);
}

static void *bo_map_anon(struct bos *st, uint64_t len)
{
	void *p = bo_mmap_fresh(st, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);

	if (p == MAP_FAILED) {
		perror("rvram-stress: mmap");
		exit(2);
	}
	return p;
}

static void bo_setup(struct bos *st, const char *test, int dev_fd, uint64_t s, int small)
{
	memset(st, 0, sizeof(*st));
	st->test = test;
	st->dev_fd = dev_fd;
	st->s = s;
	st->small = small;
	st->vram_pages = rvram_stat(dev, "pages_total");
	/* The argument page, and after it a page no access may reach. */
	st->arg = bo_map_anon(st, 2 * PAGE);
	mprotect(st->arg + PAGE, PAGE, PROT_NONE);
	st->none = bo_map_anon(st, PAGE);
	mprotect(st->none, PAGE, PROT_NONE);
	st->ro = bo_map_anon(st, PAGE);
	st->ro->size = PAGE;
	st->ro->fd = -1;
	mprotect(st->ro, PAGE, PROT_READ);
	/* Device-coherent VRAM exports nothing: every readable request gets EOPNOTSUPP. */
	{
		struct rvram_alloc_dmabuf a = { .size = PAGE, .fd = -1 };

		if (ioctl(dev_fd, RVRAM_IOCTL_ALLOC_DMABUF, &a) == 0)
			close(a.fd);
		else
			st->coherent = errno == EOPNOTSUPP;
	}
	catch_probe_signals();
}

static void bo_free_if_unused(struct bos *st, struct bo *bo)
{
	if (bo->fd >= 0 || bo->maps)
		return;
	for (int i = 0; i < st->nbo; i++) {
		if (st->bo[i] == bo) {
			st->bo[i] = st->bo[--st->nbo];
			break;
		}
	}
	st->reserved -= bo->pages;
	free(bo->gen);
	free(bo);
}

static void bo_forget_map(struct bos *st, int i)
{
	struct bo *bo = st->map[i].bo;

	st->map[i] = st->map[--st->nmap];
	bo->maps--;
	bo_free_if_unused(st, bo);
}

/* A random buffer with an open fd, or NULL. */
static struct bo *bo_pick_open(struct bos *st)
{
	int open_bos[BO_MAX], n = 0;

	for (int i = 0; i < st->nbo; i++)
		if (st->bo[i]->fd >= 0)
			open_bos[n++] = i;
	return n ? st->bo[open_bos[rnd_below(&st->s, n)]] : NULL;
}

static void bo_alloc(struct bos *st)
{
	uint64_t *s = &st->s, vram = st->vram_pages * PAGE, size, free_max;
	struct rvram_alloc_dmabuf *a = (void *)(st->arg + PAGE - sizeof(*a)), *arg = a;
	int readable = 1, ro = 0, partial = 0, pb = atomic_load(&bo_phase), pa, ret, e, n = 0;
	int nofile = 0, want[4] = { 0 };
	struct rlimit rl0, rl;
	uint32_t flags = 0;
	const char *where = "";
	char wbuf[64];

	/* VRAM that can be free: a larger request must fail. */
	free_max = (st->vram_pages - st->reserved) * PAGE;
	switch (rnd_below(s, 16)) {
	case 0:
		size = 0;
		break;
	case 1:
		size = 1 + rnd_below(s, PAGE - 1);
		break;
	case 2:	/* unaligned */
		size = (1 + rnd_below(s, 64)) * PAGE + 1 + rnd_below(s, PAGE - 1);
		break;
	case 3:	/* past VRAM */
		size = vram + PAGE * (1 + rnd_below(s, 1024));
		break;
	case 4:	/* wraps */
		size = ~0ULL - rnd_below(s, 2 * PAGE);
		break;
	case 5:	/* 1 GiB to 2^63 */
		size = 1ULL << (30 + rnd_below(s, 34));
		break;
	case 6:	/* more than can be free */
		size = free_max + PAGE * (1 + rnd_below(s, 16));
		break;
	case 7:	/* all that can be free, rarely: the whole VRAM cleared */
		size = !st->small && !rnd_below(s, 256) && free_max ? free_max :
		       (1 + rnd_below(s, 16)) * PAGE;
		break;
	case 8:	/* up to 2 MiB */
		size = (1 + rnd_below(s, 512)) * PAGE;
		break;
	default:
		size = (1 + rnd_below(s, 16)) * PAGE;
		break;
	}
	if (!rnd_below(s, 8))
		flags = rnd_below(s, 2) ? 1U << rnd_below(s, 32) : (uint32_t)rnd(s) | 1;
	switch (rnd_below(s, 16)) {
	case 0:
		arg = NULL;
		readable = 0;
		where = "NULL ";
		break;
	case 1:
		arg = (void *)0xffff888000001000ULL;
		readable = 0;
		where = "kernel ";
		break;
	case 2:
		arg = (void *)st->none;
		readable = 0;
		where = "PROT_NONE ";
		break;
	case 3:	/* size readable, flags in the hole */
		arg = (void *)(st->arg + PAGE - 8);
		readable = 0;
		where = "into a hole ";
		break;
	case 4:	/* size and flags readable, the fd in the hole */
		arg = (void *)(st->arg + PAGE - 12);
		readable = 0;
		partial = 1;
		where = "fd in a hole ";
		break;
	case 5:
		arg = st->ro;
		ro = 1;
		size = st->ro->size;
		flags = 0;
		where = "read-only ";
		break;
	}
	if (arg == a) {
		a->size = size;
		a->flags = flags;
		a->fd = -1;
	} else if (partial) {
		memcpy(arg, &size, 8);
		memcpy((char *)arg + 8, &flags, 4);
	} else if (arg == (void *)(st->arg + PAGE - 8)) {
		memcpy(arg, &size, 8);
	}

	/*
	 * Rarely, no descriptor free below RLIMIT_NOFILE (not where other
	 * threads open files meanwhile: the unbind test's).
	 */
	if (!st->small && arg == a && !rnd_below(s, 64) && !getrlimit(RLIMIT_NOFILE, &rl0)) {
		int lowest = dup(st->dev_fd);

		close(lowest);
		rl = rl0;
		rl.rlim_cur = lowest;
		nofile = lowest > 0 && !setrlimit(RLIMIT_NOFILE, &rl);
		where = nofile ? "no free fd, " : "";
	}
	ret = ioctl(st->dev_fd, RVRAM_IOCTL_ALLOC_DMABUF, arg);
	e = ret == 0 ? 0 : ret == -1 ? errno : -1000;
	pa = atomic_load(&bo_phase);
	st->calls[BO_ALLOC]++;
	if (nofile)
		setrlimit(RLIMIT_NOFILE, &rl0);
	if (!readable) {
		want[n++] = EFAULT;
	} else if (st->coherent) {
		want[n++] = EOPNOTSUPP;
	} else if (flags || !size || size % PAGE || size > vram) {
		want[n++] = EINVAL;
	} else if (nofile) {
		/* A descriptor is reserved before the GPU is asked. */
		want[n++] = EMFILE;
	} else {
		/* ENODEV once the GPU is going; no VRAM: ENOMEM. */
		if (pa != BO_BOUND)
			want[n++] = ENODEV;
		if (pb != BO_GONE) {
			want[n++] = ENOMEM;
			/* The request is written back after the export: EFAULT. */
			if (ro)
				want[n++] = EFAULT;
			else if (size <= free_max)
				want[n++] = 0;
		}
	}
	if (!one_of(e, want, n)) {
		bo_fail(st, BO_ALLOC, "%sargument, size %#" PRIx64 " (VRAM %#" PRIx64 ", %" PRIu64 " pages ours), flags %#x: got %s (%d), want %s",
			where, size, vram, st->reserved, flags, errname(e), e,
			answers(want, n, wbuf, sizeof(wbuf)));
		if (!e && arg == a && a->fd >= 0)
			close(a->fd);
		return;
	}
	if (e)
		return;
	st->ok[BO_ALLOC]++;
	if (a->fd < 0 || a->size != size || a->flags || !(fcntl(a->fd, F_GETFD) & FD_CLOEXEC)) {
		bo_fail(st, BO_ALLOC, "size %#" PRIx64 ": returned fd %d, size %#llx, flags %#x, FD_CLOEXEC %d",
			size, a->fd, (unsigned long long)a->size, a->flags,
			!!(fcntl(a->fd, F_GETFD) & FD_CLOEXEC));
		if (a->fd >= 0)
			close(a->fd);
		return;
	}
	if (st->nbo == BO_MAX) {
		close(a->fd);
		return;
	}
	{
		struct bo *bo = calloc(1, sizeof(*bo));

		bo->fd = a->fd;
		bo->pages = size / PAGE;
		bo->gen = calloc(bo->pages, sizeof(*bo->gen));
		st->bo[st->nbo++] = bo;
		st->reserved += bo->pages;
	}
}

static void bo_mmap(struct bos *st, struct bo *bo)
{
	static const int prots[] = { PROT_NONE, PROT_READ, PROT_WRITE, PROT_READ | PROT_WRITE };
	static const int shared[] = { MAP_SHARED, MAP_SHARED, MAP_SHARED_VALIDATE,
				      MAP_SHARED | MAP_POPULATE };
	uint64_t *s = &st->s, pgoff = rnd_below(s, bo->pages), pages;
	int prot = prots[rnd_below(s, 4)], flags = shared[rnd_below(s, 4)];
	int pb = atomic_load(&bo_phase), pa, kind = (int)rnd_below(s, 16), n = 0, e;
	int want[3] = { 0 };
	uint64_t len, off;
	char wbuf[64];
	char *p;

	pages = 1 + rnd_below(s, bo->pages - pgoff);
	len = pages * PAGE - rnd_below(s, PAGE);	/* a partial last page maps it whole */
	off = pgoff * PAGE;
	switch (kind) {
	case 0:
		len = 0;
		want[n++] = EINVAL;
		break;
	case 1:
		off += 1 + rnd_below(s, PAGE - 1);
		want[n++] = EINVAL;
		break;
	case 2:	/* past the end */
		pgoff = rnd_below(s, bo->pages + 1);
		len = (bo->pages - pgoff + 1 + rnd_below(s, 4)) * PAGE;
		off = pgoff * PAGE;
		want[n++] = EINVAL;
		break;
	case 3:	/* 2^40 to 2^52 */
		off = 1ULL << (40 + rnd_below(s, 13));
		len = PAGE;
		want[n++] = EINVAL;
		break;
	case 4:	/* negative */
		off = -(1 + rnd_below(s, 16)) * PAGE;
		len = PAGE;
		want[n++] = EINVAL;
		want[n++] = EOVERFLOW;
		break;
	case 5:	/* rounds up to 0 */
		len = ~0ULL - rnd_below(s, PAGE - 1);
		want[n++] = ENOMEM;
		break;
	case 6:	/* longer than the address space */
		len = 1ULL << (47 + rnd_below(s, 17));
		want[n++] = ENOMEM;
		break;
	case 7:	/* the dma-buf file system is noexec */
		prot |= PROT_EXEC;
		if (rnd_below(s, 2))
			flags = MAP_PRIVATE;
		want[n++] = EPERM;
		break;
	case 8:	/* a copy-on-write PFN mapping; revoked first: ENODEV */
		flags = MAP_PRIVATE;
		break;
	case 9:
		flags = MAP_SHARED_VALIDATE | MAP_SYNC;
		want[n++] = EOPNOTSUPP;
		break;
	case 10:	/* no mapping type */
		flags = 0;
		want[n++] = EINVAL;
		break;
	}
	p = bo_mmap_fresh(st, len, prot, flags, bo->fd, (off_t)off);
	e = p == MAP_FAILED ? errno : 0;
	pa = atomic_load(&bo_phase);
	st->calls[BO_MMAP]++;
	if (kind == 8 || kind > 10) {
		if (pb != BO_GONE)
			want[n++] = kind == 8 ? EINVAL : 0;
		if (pa != BO_BOUND)
			want[n++] = ENODEV;
	}
	if (!one_of(e, want, n))
		bo_fail(st, BO_MMAP, "fd of %" PRIu64 " pages, len %#" PRIx64 ", offset %#" PRIx64 ", prot %#x, flags %#x: got %s, want %s",
			bo->pages, len, off, prot, flags, errname(e),
			answers(want, n, wbuf, sizeof(wbuf)));
	if (e)
		return;
	st->ok[BO_MMAP]++;
	if (kind <= 10 || st->nmap == BO_MAPS) {
		munmap(p, len);
		return;
	}
	st->map[st->nmap++] = (struct bo_map){
		.bo = bo, .addr = p, .pgoff = pgoff, .pages = (len + PAGE - 1) / PAGE, .prot = prot,
	};
	bo->maps++;
}

static void bo_access(struct bos *st, struct bo_map *m)
{
	uint64_t page = rnd_below(&st->s, m->pages), bpage = m->pgoff + page;
	int store = (int)rnd_below(&st->s, 2), pb = atomic_load(&bo_phase), pa, sig;
	int allowed = store ? m->prot & PROT_WRITE : m->prot & (PROT_READ | PROT_WRITE);
	volatile uint64_t *w = (volatile uint64_t *)(m->addr + page * PAGE);
	uint32_t *gen = &m->bo->gen[bpage];
	size_t bad = 0;

	st->calls[BO_ACCESS]++;
	if (!allowed) {
		sig = probe_byte((volatile char *)w, store);
		st->sigsegv += sig == SIGSEGV;
		if (sig != SIGSEGV)
			bo_fail(st, BO_ACCESS, "%s of a PROT %#x mapping: signal %d, want SIGSEGV",
				store ? "store" : "load", m->prot, sig);
		return;
	}
	if (store) {
		uint32_t g = ++st->gen;

		sig = probe_fill(w, g);
		*gen = sig ? BO_UNKNOWN : g;
	} else {
		sig = probe_check(w, *gen == BO_UNKNOWN ? 0 : *gen, &bad);
		if (!sig && *gen != BO_UNKNOWN) {
			st->bytes += PAGE;
			st->bad_bytes += bad;
			if (bad)
				bo_fail(st, BO_ACCESS, "page %" PRIu64 " of %" PRIu64 ": %zu bytes differ from generation %u",
					bpage, m->bo->pages, bad, *gen);
		}
	}
	pa = atomic_load(&bo_phase);
	st->sigbus += sig == SIGBUS;
	/* SIGBUS once the GPU is going, and from the end of the unbind on. */
	if ((sig == 0 && pb == BO_GONE) || (sig == SIGBUS && pa == BO_BOUND) ||
	    (sig && sig != SIGBUS)) {
		bo_fail(st, BO_ACCESS, "%s of page %" PRIu64 ": signal %d",
			store ? "store" : "load", bpage, sig);
		return;
	}
	if (!sig)
		st->ok[BO_ACCESS]++;
}

static void bo_munmap(struct bos *st, int i)
{
	struct bo_map *m = &st->map[i];
	int ret;

	st->calls[BO_MUNMAP]++;
	if (m->pages > 1 && rnd_below(&st->s, 3) == 0) {
		/* The tail: the front stays mapped. */
		uint64_t keep = 1 + rnd_below(&st->s, m->pages - 1);

		ret = munmap(m->addr + keep * PAGE, (m->pages - keep) * PAGE);
		if (ret)
			bo_fail(st, BO_MUNMAP, "tail: %s", errname(errno));
		else
			m->pages = keep;
	} else {
		ret = munmap(m->addr, m->pages * PAGE);
		if (ret)
			bo_fail(st, BO_MUNMAP, "%s", errname(errno));
		else
			bo_forget_map(st, i);
	}
	st->ok[BO_MUNMAP] += !ret;
}

static void bo_mprotect(struct bos *st, struct bo_map *m)
{
	static const int prots[] = { PROT_NONE, PROT_READ, PROT_WRITE, PROT_READ | PROT_WRITE,
				     PROT_READ | PROT_EXEC };
	int prot = prots[rnd_below(&st->s, 5)], e;

	e = mprotect(m->addr, m->pages * PAGE, prot) ? errno : 0;
	st->calls[BO_MPROTECT]++;
	/* No VM_MAYEXEC on a noexec mount. */
	if (e != (prot & PROT_EXEC ? EACCES : 0))
		bo_fail(st, BO_MPROTECT, "to %#x: got %s", prot, errname(e));
	if (!e) {
		m->prot = prot;
		st->ok[BO_MPROTECT]++;
	}
}

static void bo_sync(struct bos *st, struct bo *bo)
{
	uint64_t *s = &st->s, flags = (rnd_below(s, 2) ? DMA_BUF_SYNC_END : DMA_BUF_SYNC_START) |
				  (1 + rnd_below(s, 3));
	struct dma_buf_sync *arg = (void *)(st->arg + PAGE - sizeof(*arg));
	int want = 0, e;

	switch (rnd_below(s, 8)) {
	case 0:	/* unknown bits */
		flags |= 1ULL << (3 + rnd_below(s, 61));
		want = EINVAL;
		break;
	case 1:	/* no direction */
		flags &= DMA_BUF_SYNC_END;
		want = EINVAL;
		break;
	case 2:
		arg = rnd_below(s, 2) ? NULL : (void *)st->none;
		want = EFAULT;
		break;
	case 3:
		arg = (void *)(st->arg + PAGE - 4);
		want = EFAULT;
		break;
	}
	if (arg == (void *)(st->arg + PAGE - sizeof(*arg)))
		arg->flags = flags;
	e = ioctl(bo->fd, DMA_BUF_IOCTL_SYNC, arg) ? errno : 0;
	st->calls[BO_SYNC]++;
	if (e != want)
		bo_fail(st, BO_SYNC, "flags %#" PRIx64 ", argument %p: got %s, want %s", flags,
			(void *)arg, errname(e), errname(want));
	st->ok[BO_SYNC] += !e;
}

static void bo_name(struct bos *st, struct bo *bo)
{
	static const unsigned long cmds[] = { DMA_BUF_SET_NAME, DMA_BUF_SET_NAME_A,
					      DMA_BUF_SET_NAME_B };
	uint64_t *s = &st->s;
	size_t len = rnd_below(s, DMA_BUF_NAME_LEN);	/* with its NUL, fits */
	char *name;
	int want = 0, e;

	switch (rnd_below(s, 6)) {
	case 0:	/* too long */
		len = DMA_BUF_NAME_LEN + rnd_below(s, 32);
		want = EINVAL;
		break;
	case 1:	/* no NUL before the hole */
		len = 1 + rnd_below(s, DMA_BUF_NAME_LEN - 1);
		want = EFAULT;
		break;
	}
	name = st->arg + PAGE - len - (want == EFAULT ? 0 : 1);
	for (size_t i = 0; i < len; i++)
		name[i] = (char)('a' + rnd_below(s, 26));
	if (want != EFAULT)
		name[len] = 0;
	if (rnd_below(s, 8) == 0) {
		name = rnd_below(s, 2) ? NULL : st->none;
		want = EFAULT;
	}
	e = ioctl(bo->fd, cmds[rnd_below(s, 3)], name) ? errno : 0;
	st->calls[BO_NAME]++;
	if (e != want)
		bo_fail(st, BO_NAME, "%zu bytes at %p: got %s, want %s", len, (void *)name,
			errname(e), errname(want));
	st->ok[BO_NAME] += !e;
}

static void bo_ioctl(struct bos *st, struct bo *bo)
{
	static const int types[] = { 'b', 'b', 'R', 'H' };
	uint64_t *s = &st->s;
	unsigned long nr = _IOC(rnd_below(s, 4), types[rnd_below(s, 4)], rnd_below(s, 256),
				rnd_below(s, 1 << 14));
	int e;

	/* The dma-buf's own; EXPORT/IMPORT_SYNC_FILE are absent (no SYNC_FILE). */
	if (nr == DMA_BUF_IOCTL_SYNC || nr == DMA_BUF_SET_NAME_A || nr == DMA_BUF_SET_NAME_B)
		return;
	e = ioctl(bo->fd, nr, st->arg + PAGE - 64) ? errno : 0;
	st->calls[BO_IOCTL]++;
	if (e != ENOTTY)
		bo_fail(st, BO_IOCTL, "%#lx: got %s, want ENOTTY", nr, errname(e));
	st->ok[BO_IOCTL] += !e;
}

static void bo_close(struct bos *st, struct bo *bo)
{
	int e, dup_fd = -1;

	/* Sometimes through a dup(), which the buffer lives on in. */
	if (rnd_below(&st->s, 3) == 0)
		dup_fd = dup(bo->fd);
	e = close(bo->fd) ? errno : 0;
	st->calls[BO_CLOSE]++;
	if (e)
		bo_fail(st, BO_CLOSE, "%s", errname(e));
	st->ok[BO_CLOSE] += !e;
	bo->fd = dup_fd;
	bo_free_if_unused(st, bo);
}

/* One random operation on the buffers. */
static void bo_step(struct bos *st)
{
	/* Percent of the calls below each kind's end, in enum order. */
	static const int below_end[BO_OPS] = { 30, 50, 75, 83, 86, 90, 93, 96, 100 };
	int r = (int)rnd_below(&st->s, 100), op = 0;
	struct bo *bo = bo_pick_open(st);

	while (r >= below_end[op])
		op++;
	/* A mapping's operation needs a mapping, an fd's an open buffer. */
	if ((op == BO_ACCESS || op == BO_MUNMAP || op == BO_MPROTECT) && !st->nmap)
		op = BO_MMAP;
	if (op != BO_ALLOC && op != BO_ACCESS && op != BO_MUNMAP && op != BO_MPROTECT && !bo)
		op = st->nmap ? BO_MUNMAP : BO_ALLOC;
	if (atomic_load(&bo_phase) == BO_GONE)
		st->gone_calls++;
	switch (op) {
	case BO_ALLOC:
		bo_alloc(st);
		break;
	case BO_MMAP:
		bo_mmap(st, bo);
		break;
	case BO_ACCESS:
		bo_access(st, &st->map[rnd_below(&st->s, st->nmap)]);
		break;
	case BO_MUNMAP:
		bo_munmap(st, (int)rnd_below(&st->s, st->nmap));
		break;
	case BO_MPROTECT:
		bo_mprotect(st, &st->map[rnd_below(&st->s, st->nmap)]);
		break;
	case BO_SYNC:
		bo_sync(st, bo);
		break;
	case BO_NAME:
		bo_name(st, bo);
		break;
	case BO_IOCTL:
		bo_ioctl(st, bo);
		break;
	default:
		/* Closing the fd leaves its mappings: the buffer lives on. */
		bo_close(st, bo);
		break;
	}
}

/* Unmaps and closes everything. */
static void bo_teardown(struct bos *st)
{
	while (st->nmap) {
		if (munmap(st->map[0].addr, st->map[0].pages * PAGE))
			bo_fail(st, BO_MUNMAP, "teardown: errno %d", errno);
		bo_forget_map(st, 0);
	}
	while (st->nbo) {
		struct bo *bo = st->bo[0];

		if (bo->fd >= 0 && close(bo->fd))
			bo_fail(st, BO_CLOSE, "teardown: errno %d", errno);
		bo->fd = -1;
		bo_free_if_unused(st, bo);
	}
	munmap(st->arg, 2 * PAGE);
	munmap(st->none, PAGE);
	munmap(st->ro, PAGE);
}

/* A random mapping of a buffer, for the dmirror commands to target, or 0. */
static uint64_t bo_any_mapping(struct bos *st, uint64_t *s)
{
	return st->nmap ? (uintptr_t)st->map[rnd_below(s, st->nmap)].addr : 0;
}

/*
 * A command may have written `npages` pages at p (the kernel copying a
 * result out), through the mappings of buffers there: their contents are
 * not known any more.
 */
static void bo_written(struct bos *st, uint64_t p, uint64_t npages)
{
	/* Commands of more than 1 GiB of pages fail with ENOMEM first. */
	uint64_t end = p + (npages < (1ULL << 18) ? npages : 1ULL << 18) * PAGE;

	if (end < p)
		end = UINT64_MAX;
	for (int i = 0; i < st->nmap; i++) {
		struct bo_map *m = &st->map[i];
		uint64_t start = (uintptr_t)m->addr;

		if (p < start + m->pages * PAGE && end > start)
			for (uint64_t k = 0; k < m->pages; k++)
				m->bo->gen[m->pgoff + k] = BO_UNKNOWN;
	}
}

/* TAP: every call answered as it must; the data was right. */
static void bo_report(struct bos *st)
{
	unsigned long calls = 0, bad = 0;

	for (int op = 0; op < BO_OPS; op++) {
		printf("# %s: dma-buf %-12s %7lu (%lu returned 0, %lu wrong)\n", st->test,
		       bo_op_names[op], st->calls[op], st->ok[op], st->bad[op]);
		calls += st->calls[op];
		bad += st->bad[op];
	}
	printf("# %s: %lu bytes of buffers checked, %lu SIGSEGV, %lu SIGBUS\n", st->test,
	       st->bytes, st->sigsegv, st->sigbus);
	tap(bad == 0,
	    "%s: %lu dma-buf calls (ALLOC_DMABUF, mmap, accesses, munmap, mprotect, SYNC, SET_NAME, other ioctls, close) answered as the ABI requires (%lu did not)",
	    st->test, calls, bad);
	tap(st->bad_bytes == 0,
	    "%s: every read through a dma-buf mapping saw the buffer's last data, fresh buffers zeroes (%lu of %lu bytes differ)",
	    st->test, st->bad_bytes, st->bytes);
}

/*
 * The unbind test's dma-buf thread: bo_step() until the race stops, with
 * one buffer (the anchor) mapped and written before the GPU goes, which
 * must then be revoked: its accesses SIGBUS, a new mmap() and a new
 * buffer get ENODEV, SYNC still answers, close() is clean.
 */
struct bo_thread_state {
	struct bos st;
	int anchor_ok, revoked_ok;
	char revoked[160];
};

static void *bo_thread(void *arg)
{
	struct bo_thread_state *b = arg;
	struct bos *st = &b->st;
	struct rvram_alloc_dmabuf a = { .size = 4 * PAGE, .fd = -1 };
	struct dma_buf_sync sync = { DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW };
	char *m = MAP_FAILED;
	size_t bad = 1;

	if (ioctl(st->dev_fd, RVRAM_IOCTL_ALLOC_DMABUF, &a) == 0)
		m = bo_mmap_fresh(st, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd, 0);
	if (m != MAP_FAILED && !probe_fill((uint64_t *)m, 1u << 31))
		probe_check((uint64_t *)m, 1u << 31, &bad);
	b->anchor_ok = m != MAP_FAILED && !bad;
	if (a.fd >= 0)
		st->reserved += 4;
	while (!atomic_load(&stop))
		bo_step(st);
	if (b->anchor_ok && atomic_load(&bo_phase) == BO_GONE) {
		struct rvram_alloc_dmabuf n = { .size = PAGE, .fd = -1 };
		int load = probe_byte(m + PAGE, 0), store = probe_byte(m + 3 * PAGE, 1);
		void *p = bo_mmap_fresh(st, PAGE, PROT_READ, MAP_SHARED, a.fd, 0);
		int map_e = p == MAP_FAILED ? errno : 0;
		int alloc_e = ioctl(st->dev_fd, RVRAM_IOCTL_ALLOC_DMABUF, &n) ? errno : 0;
		int sync_e = ioctl(a.fd, DMA_BUF_IOCTL_SYNC, &sync) ? errno : 0;

		if (p != MAP_FAILED)
			munmap(p, PAGE);
		if (!alloc_e)
			close(n.fd);
		b->revoked_ok = load == SIGBUS && store == SIGBUS && map_e == ENODEV &&
				alloc_e == ENODEV && sync_e == 0;
		snprintf(b->revoked, sizeof(b->revoked),
			 "load signal %d, store signal %d, mmap errno %d, ALLOC_DMABUF errno %d, SYNC errno %d",
			 load, store, map_e, alloc_e, sync_e);
	}
	if (m != MAP_FAILED)
		munmap(m, 4 * PAGE);
	if (a.fd >= 0 && close(a.fd))
		b->revoked_ok = 0;
	bo_teardown(st);
	return NULL;
}

/* -------------------------------------------------------------- unbind */

/*
 * The unbind test's fuzzer: random and hostile rvram ioctls through the
 * unbind and the rebind, each call on a file opened anew now and then (the
 * old file of an unbound GPU answers ENODEV forever; the device node is
 * gone until the GPU is back). A hostile argument must never return 0,
 * every other call 0 or an errno of the ABI, every open succeed or fail
 * with ENOENT, ENXIO or ENODEV.
 */
struct rebind_fuzz {
	uint64_t rng;
	atomic_int stop;
	atomic_int phase;	/* 0 bound, 1 gone, 2 bound again */
	unsigned long calls[3], hostile, allocs, bad;
	char what[128];
};

static void rebind_bad(struct rebind_fuzz *f, const char *op, unsigned long nr, int ret, int e)
{
	if (f->bad++ == 0)
		snprintf(f->what, sizeof(f->what), "%s %#lx: returned %d errno %d", op, nr, ret, e);
}

static void *rebind_fuzz_thread(void *arg)
{
	static const unsigned long cmds[] = {
		HMM_DMIRROR_READ, HMM_DMIRROR_WRITE, HMM_DMIRROR_MIGRATE_TO_DEV,
		HMM_DMIRROR_MIGRATE_TO_SYS, HMM_DMIRROR_SNAPSHOT, HMM_DMIRROR_EXCLUSIVE,
		HMM_DMIRROR_CHECK_EXCLUSIVE, HMM_DMIRROR_READ_UNLOCKED,
	};
	struct rebind_fuzz *f = arg;
	char *buf = map_anon(16 * PAGE), *ro = map_anon(PAGE);
	int fd = -1;

	mprotect(ro, PAGE, PROT_READ);
	memset(buf, 0x3c, 16 * PAGE);
	while (!atomic_load(&f->stop)) {
		struct hmm_dmirror_cmd c = {
			.addr = (uintptr_t)buf, .ptr = (uintptr_t)(buf + 8 * PAGE),
			.npages = 1 + rnd_below(&f->rng, 8),
		};
		struct rvram_alloc_dmabuf a = {
			.size = PAGE * (1 + rnd_below(&f->rng, 4)), .fd = -1,
		};
		unsigned long nr = cmds[rnd_below(&f->rng, sizeof(cmds) / sizeof(cmds[0]))];
		int phase = atomic_load(&f->phase), hostile = 0, ret, e;
		void *argp = &c;

		if (fd < 0 || rnd_below(&f->rng, 64) == 0) {
			if (fd >= 0)
				close(fd);
			fd = open(dev, O_RDWR);
			if (fd < 0 && errno != ENOENT && errno != ENXIO && errno != ENODEV)
				rebind_bad(f, "open", 0, fd, errno);
			if (fd < 0) {
				usleep(1000);
				continue;
			}
		}
		switch (rnd_below(&f->rng, 8)) {
		case 0: argp = NULL; hostile = 1; break;
		case 1: argp = ro; hostile = 1; break;
		case 2: argp = (void *)0xffff888000001000ULL; hostile = 1; break;
		case 3: c.addr += 1 + rnd_below(&f->rng, PAGE - 1); hostile = 1; break;
		case 4: c.npages = ~0ULL - rnd_below(&f->rng, 4); hostile = 1; break;
		case 5:
			nr = RVRAM_IOCTL_ALLOC_DMABUF;
			argp = &a;
			if (rnd_below(&f->rng, 2)) {
				a.size = rnd(&f->rng) | 1;	/* never a page multiple */
				hostile = 1;
			}
			break;
		}
		f->calls[phase]++;
		f->hostile += hostile;
		ret = ioctl(fd, nr, argp);
		e = errno;
		if (ret == 0 && nr == RVRAM_IOCTL_ALLOC_DMABUF && !hostile) {
			f->allocs++;
			close(a.fd);
		}
		if (ret == 0 && hostile)
			rebind_bad(f, "hostile ioctl", nr, ret, e);
		else if (ret != 0 && (ret != -1 || !dmirror_errno_ok(e)))
			rebind_bad(f, "ioctl", nr, ret, e);
	}
	if (fd >= 0)
		close(fd);
	munmap(buf, 16 * PAGE);
	munmap(ro, PAGE);
	return NULL;
}

/* Waits up to 10 s for `path` to exist. */
static int wait_for(const char *path)
{
	for (int i = 0; i < 100; i++) {
		if (!access(path, F_OK))
			return 0;
		usleep(100000);
	}
	return -1;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/*
 * Puts the whole region in DEV's VRAM through a fresh file (the racers
 * may move pages meanwhile: no error is one), then has the NIC read one
 * page of each thread, mapping it: pages found resident.
 */
static long race_region_to_vram(struct race *x, long *nic_aliases)
{
	int fd = open_dev(dev, 0);
	char *buf = map_anon(RACE_PAGES * PAGE);
	unsigned char *snap = map_anon(RACE_PAGES);
	struct odp_dma_stats st0 = { 0 }, st1 = { 0 };
	long n = 0;

	dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, region, buf, RACE_PAGES);
	if (!dmirror(fd, HMM_DMIRROR_SNAPSHOT, region, snap, RACE_PAGES))
		for (size_t i = 0; i < RACE_PAGES; i++)
			n += (snap[i] & HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL) ==
			     HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL;
	*nic_aliases = 0;
	if (nic) {
		ioctl(x->rs[0]->nic_fd, ODP_DMA_STATS, &st0);
		for (int t = 0; t < THREADS; t++)
			nic_xfer(x->rs[0]->nic_fd, x->rs[0]->mr, 0, own_page(t, 0), buf);
		ioctl(x->rs[0]->nic_fd, ODP_DMA_STATS, &st1);
		*nic_aliases = (long)(st1.map_alias - st0.map_alias);
	}
	close(fd);
	munmap(buf, RACE_PAGES * PAGE);
	munmap(snap, RACE_PAGES);
	return n;
}

/*
 * The race of do_race(), and in its middle DEV's GPU goes away: unbound
 * from rvram or removed from the PCI bus (the seed chooses). Its data is
 * evicted while the threads keep migrating, reading and writing: device
 * commands on DEV then fail with ENODEV, everything else goes on and no
 * word is lost. Then the GPU comes back. With RVRAM_KO set, the module is
 * also unloaded while the CPU and the NIC use VRAM-resident data (its
 * files closed, as unloading requires), and loaded again from RVRAM_KO.
 */
static int do_unbind(const char *pci, int seconds)
{
	const char *ko = getenv("RVRAM_KO");
	uint64_t s = rnd_stream(seed, 100);
	int remove = (int)rnd_below(&s, 2), before = 1 + (int)rnd_below(&s, seconds / 2 + 1);
	struct bo_thread_state *bt = map_anon(sizeof(*bt));
	struct rebind_fuzz *rf;
	pthread_t rf_th;
	char path[256], drv[64];
	struct timespec t0;
	struct race x;
	long resident, aliases, grants;
	int ret, enodev = 0;
	pthread_t bo_th;

	race_setup(&x);
	race_start(&x);
	/* DEV's buffer objects, their fds and mappings, used throughout. */
	atomic_store(&bo_phase, BO_BOUND);
	bo_setup(&bt->st, "unbind", open_dev(dev, 0), rnd_stream(seed, 101), 1);
	pthread_create(&bo_th, NULL, bo_thread, bt);
	rf = map_anon(sizeof(*rf));
	rf->rng = rnd_stream(seed, 102);
	pthread_create(&rf_th, NULL, rebind_fuzz_thread, rf);
	sleep(before);
	ret = syscall(SYS_delete_module, "rvram", O_NONBLOCK) ? errno : 0;
	tap(ret == EWOULDBLOCK || ret == EBUSY,
	    "unbind: rvram refuses to unload while its files are open (errno %d)", ret);

	resident = race_region_to_vram(&x, &aliases);
	grants = rvram_stat(dev, "alias_grants") - x.grants0;
	if (peer)
		tap(grants > 0, "unbind: %s holds P2P aliases of %s's VRAM (%ld granted so far)",
		    peer, dev, grants);
	atomic_store(&dev_gone, 1);
	atomic_store(&bo_phase, BO_GOING);
	/* A device removed from the bus comes back with no assignment. */
	if (rvram_assigned(pci, drv, sizeof(drv)))
		snprintf(drv, sizeof(drv), "rvram");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (remove) {
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/remove", pci);
		ret = sysfs_write(path, "1");
	} else {
		ret = rvram_unbind(pci);
	}
	atomic_store(&bo_phase, BO_GONE);
	atomic_store(&rf->phase, 1);
	tap(ret == 0, "unbind: %s %s while %d threads race on its VRAM (%ld pages resident, %ld mapped by the NIC as aliases, just before; %ld ms)",
	    remove ? "remove" : "unbind", pci, THREADS, resident, aliases, ms_since(&t0));
	sleep(seconds - before > 1 ? seconds - before : 1);
	race_stop(&x);
	pthread_join(bo_th, NULL);
	race_report(&x, "unbind", seconds, 0);
	bo_report(&bt->st);
	tap(bt->anchor_ok && bt->st.gone_calls > 0,
	    "unbind: the dma-buf thread mapped and wrote a buffer before, and went on after the GPU was gone (%lu calls)",
	    bt->st.gone_calls);
	tap(bt->revoked_ok,
	    "unbind: that buffer is revoked: accesses SIGBUS, a new mmap and ALLOC_DMABUF ENODEV, SYNC 0, close 0 (%s)",
	    bt->revoked);
	close(bt->st.dev_fd);
	munmap(bt, sizeof(*bt));
	for (int t = 0; t < THREADS; t++)
		enodev += dmirror(x.rs[t]->fd, HMM_DMIRROR_READ, own_page(t, 0), x.rs[t]->buf, 1) ==
			  -ENODEV;
	tap(enodev == THREADS, "unbind: %d of %d open files of the removed GPU return ENODEV",
	    enodev, THREADS);
	if (nic)
		race_nic_report(&x, "unbind", 0);

	if (remove) {
		ret = sysfs_write("/sys/bus/pci/rescan", "1");
		if (!ret)
			ret = rvram_assign(pci, drv);
		tap(ret == 0 && wait_for(dev) == 0,
		    "unbind: rescan, %s assigned to %s again and probed: %s is back", pci, drv, dev);
	} else {
		ret = rvram_bind(pci);
		tap(ret == 0 && wait_for(dev) == 0, "unbind: bind %s again: %s is back", pci, dev);
	}
	atomic_store(&rf->phase, 2);
	/* The fuzzer on the GPU that is back, until it has made some calls. */
	for (int i = 0; i < 300 && rf->calls[2] < 200; i++)
		usleep(10000);
	atomic_store(&rf->stop, 1);
	pthread_join(rf_th, NULL);
	tap(rf->bad == 0 && rf->calls[0] && rf->calls[1] && rf->calls[2],
	    "unbind: random and hostile rvram ioctls across the unbind and the rebind got ABI answers, a hostile one never 0 (%lu bound, %lu gone, %lu back; %lu hostile, %lu buffers; %s)",
	    rf->calls[0], rf->calls[1], rf->calls[2], rf->hostile, rf->allocs,
	    rf->bad ? rf->what : "nothing else");
	munmap(rf, sizeof(*rf));
	tap(rvram_stat(dev, "pages_resident") == 0 && rvram_stat(dev, "dmabuf_pages") == 0,
	    "unbind: the new %s starts with empty VRAM, no buffer reserved", dev);
	still_works("unbind", 64);

	if (ko) {
		/* Files closed, the data in VRAM, the NIC's MRs over it. */
		for (int t = 0; t < THREADS; t++) {
			close(x.rs[t]->fd);
			x.rs[t]->fd = -1;
			if (x.rs[t]->peer_fd >= 0)
				close(x.rs[t]->peer_fd);
			x.rs[t]->peer_fd = -1;
		}
		resident = race_region_to_vram(&x, &aliases);
		if (nic)
			tap(aliases > 0, "unload: the NIC maps %ld VRAM pages through aliases",
			    aliases);
		atomic_store(&cpu_and_nic_only, 1);
		race_start(&x);
		/* The CPU takes pages back fast: unload soon. */
		usleep(rnd_below(&s, 100000));
		resident = rvram_stat(dev, "pages_resident");
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = syscall(SYS_delete_module, "rvram", O_NONBLOCK) ? errno : 0;
		tap(ret == 0, "unload: rmmod rvram while %d threads use its VRAM (%ld pages resident) with the CPU%s (errno %d; %ld ms)",
		    THREADS, resident, nic ? " and the NIC" : "", ret, ms_since(&t0));
		sleep(1);
		race_stop(&x);
		race_report(&x, "unload", 1, 0);
		if (nic)
			race_nic_report(&x, "unload", 0);
		atomic_store(&cpu_and_nic_only, 0);
		if (!ret) {
			int kfd = open(ko, O_RDONLY | O_CLOEXEC);

			ret = kfd < 0 || syscall(SYS_finit_module, kfd, "", 0) ? errno : 0;
			if (kfd >= 0)
				close(kfd);
			tap(ret == 0 && wait_for(dev) == 0 && (!peer || wait_for(peer) == 0),
			    "unload: rvram loads again from %s (errno %d)", ko, ret);
			still_works("unload", 64);
		}
	}
	race_close(&x);
	tap(rvram_stat(dev, "pages_resident") == 0,
	    "unbind: no VRAM page stays resident after the region is gone");
	return 0;
}

/* ----------------------------------------------------------------- cow */

static int cow_round(int fd, int nic_fd, size_t npages, int thp)
{
	size_t len = npages * PAGE, half = len / 2;
	char *p = thp ? map_aligned(len, PMD_SIZE) : map_anon(len);
	char *orig = map_anon(len), *mine = map_anon(len), *buf = map_anon(len);
	const char *what = thp ? "2 MiB folio" : "4 KiB pages";
	uint64_t gen = rnd_stream(seed, thp);
	int pipefd[2], status = -1;
	unsigned char *snap = map_anon(npages);
	size_t dev_pages = 0;
	struct odp_dma_reg reg = { 0 };
	struct odp_dma_stats st0 = { 0 }, st1 = { 0 };
	pid_t pid;

	if (thp)
		madvise(p, len, MADV_HUGEPAGE);
	fill(orig, len, gen);
	memcpy(p, orig, len);
	tap(dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, buf, npages) == 0 &&
		    !memcmp(buf, orig, len),
	    "cow %s: migrated to VRAM", what);
	if (dmirror(fd, HMM_DMIRROR_SNAPSHOT, p, snap, npages) == 0)
		for (size_t i = 0; i < npages; i++)
			dev_pages += (snap[i] & HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL) ==
				     HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL;
	tap(dev_pages == npages, "cow %s: %zu of %zu pages in VRAM before fork", what, dev_pages,
	    npages);
	if (thp)
		tap(snap[0] & HMM_DMIRROR_PROT_PMD, "cow %s: mapped by one PMD", what);
	if (nic_fd >= 0) {
		/* The parent's ODP MR; the NIC maps the VRAM before the fork. */
		reg.addr = (uintptr_t)p;
		reg.len = len;
		reg.flags = ODP_DMA_WRITABLE;
		ioctl(nic_fd, ODP_DMA_STATS, &st0);
		tap(ioctl(nic_fd, ODP_DMA_REG_MR, &reg) == 0 &&
			    nic_xfer(nic_fd, reg.mr, 0, p, buf) == 0 && !memcmp(buf, orig, PAGE),
		    "cow %s: the parent's ODP MR reads the VRAM-resident data by DMA", what);
	}

	if (pipe(pipefd))
		return 2;
	pid = fork();
	if (pid == 0) {
		/*
		 * Child: once the parent's NIC has written its MR, checks
		 * that it sees none of that; writes the first half (half the
		 * pages with the CPU, half through its own file), expects the
		 * original in the second half; migrates back and checks again.
		 */
		int cfd = open_dev(dev, 0), bad = 0;
		char c;

		close(pipefd[1]);
		bad |= read(pipefd[0], &c, 1) != 1;
		bad |= memcmp(p, orig, len) != 0;
		memcpy(mine, orig, len);
		fill(mine, half, gen + 100);
		memcpy(p, mine, half / 2);
		bad |= dmirror(cfd, HMM_DMIRROR_WRITE, p + half / 2, mine + half / 2,
			       half / 2 / PAGE) != 0;
		/* Wait for the parent's writes to be done. */
		bad |= read(pipefd[0], &c, 1) != 1;
		bad |= memcmp(p, mine, len) != 0;
		bad |= dmirror(cfd, HMM_DMIRROR_READ, p, buf, npages) != 0 ||
		       memcmp(buf, mine, len) != 0;
		bad |= dmirror(cfd, HMM_DMIRROR_MIGRATE_TO_DEV, p, buf, npages) != 0 ||
		       memcmp(buf, mine, len) != 0;
		bad |= dmirror(cfd, HMM_DMIRROR_MIGRATE_TO_SYS, p, buf, npages) != 0;
		bad |= memcmp(p, mine, len) != 0;
		_exit(bad);
	}
	close(pipefd[0]);
	memcpy(mine, orig, len);
	if (nic_fd >= 0) {
		/*
		 * The NIC writes, into the parent's memory only, a page of
		 * the child's half and one of the parent's: the shared pages
		 * must not take the write.
		 */
		fill(mine, PAGE, gen + 300);
		fill(mine + len - PAGE, PAGE, gen + 301);
		tap(nic_xfer(nic_fd, reg.mr, 1, p, mine) == 0 &&
			    nic_xfer(nic_fd, reg.mr, 1, p + len - PAGE, mine + len - PAGE) == 0,
		    "cow %s: the NIC writes the parent's MR after fork", what);
	}
	tap(write(pipefd[1], "x", 1) == 1, "cow %s: child started", what);
	/* Parent: the second half but its last page, half by CPU, half through the device. */
	fill(mine + half, half - PAGE, gen + 200);
	memcpy(p + half, mine + half, half / 2);
	tap(dmirror(fd, HMM_DMIRROR_WRITE, p + half + half / 2, mine + half + half / 2,
		    half / 2 / PAGE - 1) == 0,
	    "cow %s: parent writes through the device after fork", what);
	tap(write(pipefd[1], "x", 1) == 1, "cow %s: child released", what);
	tap(!memcmp(p, mine, len), "cow %s: parent sees its writes and the original elsewhere",
	    what);
	tap(dmirror(fd, HMM_DMIRROR_READ, p, buf, npages) == 0 && !memcmp(buf, mine, len),
	    "cow %s: and so does the parent's device", what);
	if (nic_fd >= 0) {
		tap(nic_xfer(nic_fd, reg.mr, 0, p, buf) == 0 && !memcmp(buf, mine, PAGE) &&
			    nic_xfer(nic_fd, reg.mr, 0, p + half + half / 2, buf) == 0 &&
			    !memcmp(buf, mine + half + half / 2, PAGE),
		    "cow %s: and so does the NIC, through the parent's MR", what);
		ioctl(nic_fd, ODP_DMA_STATS, &st1);
		printf("# cow %s: NIC faults +%llu, pages mapped: RAM +%llu, aliases +%llu; invalidations +%llu\n",
		       what, st1.faults - st0.faults, st1.map_ram - st0.map_ram,
		       st1.map_alias - st0.map_alias, st1.invalidations - st0.invalidations);
		tap(st1.map_alias > st0.map_alias && st1.invalidations > st0.invalidations,
		    "cow %s: the NIC mapped VRAM through aliases, and the fork invalidated them",
		    what);
	}
	tap(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "cow %s: the child saw its writes and the original elsewhere, before and after migrating back",
	    what);
	tap(dmirror(fd, HMM_DMIRROR_MIGRATE_TO_SYS, p, buf, npages) == 0 &&
		    !memcmp(p, mine, len),
	    "cow %s: parent's data intact after migrating back", what);
	close(pipefd[1]);
	if (nic_fd >= 0)
		ioctl(nic_fd, ODP_DMA_DEREG_MR, &reg.mr);
	munmap(p, len);
	munmap(orig, len);
	munmap(mine, len);
	munmap(buf, len);
	munmap(snap, npages);
	return 0;
}

static int do_cow(void)
{
	long resident0 = rvram_stat(dev, "pages_resident");
	int fd = open_dev(dev, 0), nic_fd = -1;

	if (nic) {
		nic_fd = open(nic, O_RDWR);
		if (nic_fd < 0) {
			fprintf(stderr, "rvram-stress: %s: %s\n", nic, strerror(errno));
			return 2;
		}
	}
	cow_round(fd, nic_fd, 64, 0);
	cow_round(fd, nic_fd, PMD_SIZE / PAGE, 1);
	if (nic_fd >= 0)
		close(nic_fd);
	close(fd);
	tap(rvram_stat(dev, "pages_resident") == resident0,
	    "cow: no VRAM page stays resident afterwards");
	return 0;
}

/* ------------------------------------------------------------- exhaust */

/* Bytes of `n` pages at page `first` of p that are not the pattern fill() gave them. */
static size_t differ_from_fill(const char *p, size_t first, size_t n, uint64_t gen)
{
	const uint64_t *w = (const uint64_t *)p;
	size_t bad = 0;

	for (size_t i = 0; i < n * PAGE / 8; i++)
		bad += w[i] != word(gen, first * PAGE / 8 + i) ? 8 : 0;
	return bad;
}

/* Reads npages at p through fd, chunk pages at a time; bytes not as fill(seed) wrote them. */
static size_t read_and_check(int fd, char *p, size_t npages, char *buf, size_t chunk)
{
	size_t bad = 0;

	for (size_t done = 0; done < npages; done += chunk) {
		size_t n = npages - done < chunk ? npages - done : chunk;

		if (dmirror(fd, HMM_DMIRROR_READ, p + done * PAGE, buf, n))
			bad += n * PAGE;
		else
			bad += differ_from_fill(buf, done, n, seed);
	}
	return bad;
}

static int do_exhaust(void)
{
	const size_t chunk = 4096; /* 16 MiB pieces, as a driver would migrate */
	long total = rvram_stat(dev, "pages_total");
	long resident0 = rvram_stat(dev, "pages_resident"), resident, fails0, grants0;
	size_t npages, len, done, bad;
	char *p, *buf;
	int fd = open_dev(dev, 0), pfd = peer ? open_dev(peer, RVRAM_FLAG_ALIAS_DMA) : -1;
	unsigned long ok = 0, nofit = 0, other = 0;

	if (total <= 0) {
		tap(0, "exhaust: %s reports its VRAM size", dev);
		return 1;
	}
	npages = total + total / 4;
	len = npages * PAGE;
	p = map_aligned(len, PMD_SIZE);
	buf = map_anon(chunk * PAGE);
	fill(p, len, seed);
	fails0 = rvram_stat(dev, "alloc_failures");
	for (done = 0; done < npages; done += chunk) {
		size_t n = npages - done < chunk ? npages - done : chunk;
		int ret = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p + done * PAGE, buf, n);

		if (ret == 0) {
			ok++;
		} else if (ret == -ENOMEM || ret == -ENOENT) {
			nofit++;
		} else {
			if (!other++)
				printf("# migrate to device at page %zu: errno %d\n", done, -ret);
		}
	}
	resident = rvram_stat(dev, "pages_resident");
	printf("# %zu pages (%zu MiB) for %ld pages of VRAM: %lu pieces migrated, %lu did not fit, %lu other errors; resident %ld, alloc_failures +%ld\n",
	       npages, len >> 20, total, ok, nofit, other, resident,
	       rvram_stat(dev, "alloc_failures") - fails0);
	tap(other == 0, "exhaust: migrations past the end of VRAM fail with ENOMEM or ENOENT");
	tap(nofit > 0, "exhaust: some migrations did not fit");
	tap(resident > total * 9 / 10 && resident <= total,
	    "exhaust: VRAM is (almost) full: %ld of %ld pages", resident, total);

	/* Every byte: through the device, then through the peer's aliases. */
	bad = read_and_check(fd, p, npages, buf, chunk);
	tap(bad == 0, "exhaust: the device reads every byte right (%zu differ)", bad);
	if (pfd >= 0) {
		grants0 = rvram_stat(dev, "alias_grants");
		bad = read_and_check(pfd, p, npages, buf, chunk);
		tap(bad == 0, "exhaust: %s reads every byte right (%zu differ)", peer, bad);
		tap(rvram_stat(dev, "alias_grants") > grants0 &&
			    rvram_stat(dev, "pages_resident") == resident,
		    "exhaust: %s reached the resident part through aliases, and it stayed in VRAM",
		    peer);
	}

	/* The CPU: migrates back whatever it touches. */
	bad = differ_from_fill(p, 0, npages, seed);
	tap(bad == 0, "exhaust: every byte is right when the CPU reads it (%zu differ)", bad);
	tap(rvram_stat(dev, "pages_resident") == resident0,
	    "exhaust: the CPU's reads brought every page back");

	/* Fill VRAM again from the other end, while the device reads. */
	bad = 0;
	for (done = 0; done < npages; done += chunk) {
		size_t first = npages - done > chunk ? npages - done - chunk : 0;
		size_t n = npages - done - first;

		dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p + first * PAGE, buf, n);
		if (dmirror(fd, HMM_DMIRROR_READ, p + first * PAGE, buf, n))
			bad += n * PAGE;
		else
			bad += differ_from_fill(buf, first, n, seed);
	}
	tap(bad == 0 && rvram_stat(dev, "pages_resident") > total * 9 / 10,
	    "exhaust: VRAM full again, the device reads every byte right (%zu differ)", bad);
	munmap(p, len);
	tap(rvram_stat(dev, "pages_resident") == resident0,
	    "exhaust: VRAM is empty again once the memory is unmapped");
	close(fd);
	if (pfd >= 0)
		close(pfd);
	munmap(buf, chunk * PAGE);
	return 0;
}

/* ---------------------------------------------------------------- kill */

/* 64 MiB migrating in a loop; 16 MiB in VRAM accessed through aliases. */
#define KILL_PAGES (64UL << 20 >> 12)
#define KILL_ALIAS_PAGES (16UL << 20 >> 12)

static void kill_child(int alias, int round, int ready)
{
	size_t npages = alias ? KILL_ALIAS_PAGES : KILL_PAGES;
	char *p = map_aligned(npages * PAGE, PMD_SIZE);
	char *buf = map_anon(npages * PAGE);
	int fd = open_dev(dev, 0), pfd = alias ? open_dev(peer, RVRAM_FLAG_ALIAS_DMA) : -1;
	uint64_t s = rnd_stream(seed, 1000 + round);

	memset(p, round, npages * PAGE);
	if (alias)
		dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, buf, npages);
	/* The parent's clock for the kill starts now. */
	if (write(ready, "r", 1) != 1)
		_exit(2);
	for (;;) {
		uint64_t first = rnd_below(&s, npages), n = 1 + rnd_below(&s, npages - first);

		if (!alias) {
			dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, buf, npages);
			dmirror(fd, HMM_DMIRROR_MIGRATE_TO_SYS, p, buf, npages);
		} else {
			dmirror(pfd, rnd_below(&s, 2) ? HMM_DMIRROR_READ : HMM_DMIRROR_WRITE,
				p + first * PAGE, buf, n);
		}
	}
}

static int do_kill(int rounds)
{
	long resident0 = rvram_stat(dev, "pages_resident");
	unsigned long leaked = 0, rounds_done = 0, max_seen = 0, with_pages[2] = { 0 };
	uint64_t s = rnd_stream(seed, 7);

	for (int i = 0; i < rounds; i++) {
		int alias = peer && (i & 1), pipefd[2];
		/*
		 * Up to 1 s after the child has its memory: in the middle of
		 * a 64 MiB migration (each takes longer under TCG) or of alias
		 * accesses.
		 */
		struct timespec ts = { 0, 0 };
		uint64_t ms = rnd_below(&s, 1000);
		long r = -1;
		int status;
		pid_t pid;
		char c;

		if (pipe(pipefd))
			return 2;
		pid = fork();
		if (pid == 0) {
			close(pipefd[0]);
			kill_child(alias, i, pipefd[1]);
		}
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) != 1)
			printf("# round %d: the child died before it was ready\n", i);
		close(pipefd[0]);
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (ms % 1000) * 1000000;
		nanosleep(&ts, NULL);
		r = rvram_stat(dev, "pages_resident");
		if (r > (long)max_seen)
			max_seen = r;
		with_pages[alias] += r > resident0;
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		/* The mm is torn down before the parent reaps the child; settle briefly. */
		for (int w = 0; w < 100; w++) {
			r = rvram_stat(dev, "pages_resident");
			if (r == resident0)
				break;
			usleep(100000);
		}
		if (r != resident0) {
			leaked++;
			printf("# round %d (%s, killed after %" PRIu64 " ms): %ld pages resident, want %ld\n",
			       i, alias ? "aliases" : "migration", ms, r, resident0);
		}
		rounds_done++;
	}
	printf("# kills with pages in VRAM: %lu while migrating, %lu during alias accesses\n",
	       with_pages[0], with_pages[1]);
	printf("# %lu rounds, up to %lu pages seen resident before a kill\n", rounds_done, max_seen);
	tap(with_pages[0] > 0 && (!peer || with_pages[1] > 0),
	    "kill: children were killed with pages in VRAM, migrating%s",
	    peer ? " and during alias accesses" : "");
	tap(leaked == 0, "kill: after each of %lu SIGKILLs the resident count went back to %ld",
	    rounds_done, resident0);
	still_works("kill", 512);
	tap(rvram_stat(dev, "pages_resident") == resident0, "kill: and VRAM is empty again");
	return 0;
}

/* ---------------------------------------------------------------- fuzz */

/* Open file descriptors of this process. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

#define FUZZ_PAGES 64
#define SIDE 16

static char *fz_anon, *fz_ro, *fz_none, *fz_shared, *fz_file, *fz_devmap;
static atomic_ulong fz_chaos;
/* The fuzz's buffer objects (the main thread's only). */
static struct bos fz_bos;

static void *fuzz_chaos(void *arg)
{
	uint64_t s = rnd_stream(seed, 99);

	(void)arg;
	while (!atomic_load(&stop)) {
		uint64_t first = rnd_below(&s, FUZZ_PAGES), n = 1 + rnd_below(&s, FUZZ_PAGES - first);
		char *p = fz_anon + first * PAGE;

		switch (rnd_below(&s, 5)) {
		case 0:
			munmap(p, n * PAGE);
			usleep(rnd_below(&s, 500));
			mmap(p, n * PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			break;
		case 1:
			mprotect(p, n * PAGE, rnd_below(&s, 2) ? PROT_READ : PROT_NONE);
			usleep(rnd_below(&s, 500));
			mprotect(p, n * PAGE, PROT_READ | PROT_WRITE);
			break;
		case 2: {
			void *t = mmap(NULL, n * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (t != MAP_FAILED &&
			    mremap(p, n * PAGE, n * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, t) != MAP_FAILED)
				mremap(t, n * PAGE, n * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, p);
			break;
		}
		case 3:
			madvise(p, n * PAGE, MADV_DONTNEED);
			break;
		default:
			memset(p, (int)rnd_below(&s, 256), n * PAGE);
			break;
		}
		atomic_fetch_add(&fz_chaos, 1);
	}
	return NULL;
}

static uint64_t fuzz_addr(uint64_t *s)
{
	uint64_t bo_map;

	switch (rnd_below(s, 13)) {
	case 0: return 0;
	case 1: return (uintptr_t)fz_anon + 1 + rnd_below(s, PAGE - 1);	/* unaligned */
	case 2: return 0xffff888000000000ULL + rnd_below(s, 1 << 20) * PAGE;	/* kernel */
	case 3: return (uintptr_t)fz_anon + FUZZ_PAGES * PAGE;	/* past the end: a hole */
	case 4: return (uintptr_t)fz_ro;
	case 5: return (uintptr_t)fz_none;
	case 6: return (uintptr_t)fz_shared;
	case 7: return (uintptr_t)fz_file;
	case 8: return (uintptr_t)fz_devmap;
	case 9: return rnd(s) & ~(PAGE - 1);				/* anywhere */
	case 10: return ~0ULL & ~(PAGE - 1);
	case 11:
		/* A dma-buf's mapping of VRAM: VM_IO | VM_PFNMAP. */
		bo_map = bo_any_mapping(&fz_bos, s);
		if (bo_map)
			return bo_map;
		break;
	}
	return (uintptr_t)fz_anon + rnd_below(s, FUZZ_PAGES) * PAGE;
}

static uint64_t fuzz_npages(uint64_t *s)
{
	switch (rnd_below(s, 8)) {
	case 0: return 0;
	case 1: return 1ULL << (20 + rnd_below(s, 44));	/* huge */
	case 2: return ~0ULL - rnd_below(s, 4);		/* wraps */
	case 3: return (1ULL << 52) - rnd_below(s, 2);	/* bytes wrap */
	case 4: return rnd(s);
	default: return 1 + rnd_below(s, 16);
	}
}

static uint64_t fuzz_ptr(uint64_t *s, char *buf, uint64_t addr)
{
	uint64_t bo_map;

	switch (rnd_below(s, 9)) {
	case 0: return 0;
	case 1: return (uintptr_t)fz_ro;
	case 2: return addr;				/* overlaps addr */
	case 3: return 0xffff888000000000ULL;
	case 4: return (uintptr_t)fz_none;
	case 5: return (uintptr_t)buf + 1 + rnd_below(s, 7);	/* unaligned */
	case 6:
		/* Results copied out into a dma-buf's mapping. */
		bo_map = bo_any_mapping(&fz_bos, s);
		if (bo_map)
			return bo_map;
		break;
	}
	return (uintptr_t)buf;
}

static int do_fuzz(unsigned long calls)
{
	static const unsigned long valid[] = {
		HMM_DMIRROR_READ, HMM_DMIRROR_WRITE, HMM_DMIRROR_MIGRATE_TO_DEV,
		HMM_DMIRROR_MIGRATE_TO_SYS, HMM_DMIRROR_SNAPSHOT, HMM_DMIRROR_EXCLUSIVE,
		HMM_DMIRROR_CHECK_EXCLUSIVE, HMM_DMIRROR_RELEASE, HMM_DMIRROR_FLAGS,
		HMM_DMIRROR_READ_UNLOCKED,
	};
	/* Big enough for the largest valid count a call may name. */
	size_t buflen = (FUZZ_PAGES + 1) * PAGE;
	char *buf = map_anon(buflen), *argbuf = map_anon(2 * PAGE);
	unsigned long n_ok = 0, n_random = 0, n_bad = 0, n_hostile = 0, errs[256] = { 0 };
	long resident0 = rvram_stat(dev, "pages_resident"), bo_pages0, bo_live0, bo_pages, bo_live;
	uint64_t s = rnd_stream(seed, 1);
	int fd = open_dev(dev, 0), tfd, efd, fds0, fds, n_bo_kinds = 0;
	pthread_t chaos;
	time_t t0 = time(NULL);

	/* The command sits at the end of argbuf's first page; the second is a hole. */
	munmap(argbuf + PAGE, PAGE);
	fz_anon = map_aligned(FUZZ_PAGES * PAGE + PAGE, PMD_SIZE);
	munmap(fz_anon + FUZZ_PAGES * PAGE, PAGE);
	fz_ro = mmap(NULL, SIDE * PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fz_none = mmap(NULL, SIDE * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	tfd = memfd_create("rvram-stress", 0);
	if (tfd < 0 || ftruncate(tfd, SIDE * PAGE))
		return 2;
	fz_shared = mmap(NULL, SIDE * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, tfd, 0);
	efd = open("/proc/self/exe", O_RDONLY);
	fz_file = mmap(NULL, SIDE * PAGE, PROT_READ, MAP_PRIVATE, efd, 0);
	/* The device's own mmap(): zeroed system pages, VM_MIXEDMAP. */
	fz_devmap = mmap(NULL, SIDE * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fz_ro == MAP_FAILED || fz_none == MAP_FAILED || fz_shared == MAP_FAILED ||
	    fz_file == MAP_FAILED || fz_devmap == MAP_FAILED) {
		perror("rvram-stress: fuzz mappings");
		return 2;
	}
	memset(fz_anon, 0x11, FUZZ_PAGES * PAGE);
	memset(fz_shared, 0x22, SIDE * PAGE);
	/* VRAM buffer objects: what is reserved and open before them. */
	bo_setup(&fz_bos, "fuzz", fd, rnd_stream(seed, 2), 0);
	bo_pages0 = rvram_stat(dev, "dmabuf_pages");
	bo_live0 = rvram_stat(dev, "dmabufs_exported") - rvram_stat(dev, "dmabufs_released");
	fds0 = count_fds();
	pthread_create(&chaos, NULL, fuzz_chaos, NULL);

	for (unsigned long i = 0; i < calls; i++) {
		struct hmm_dmirror_cmd *c = (struct hmm_dmirror_cmd *)(argbuf + PAGE - sizeof(*c));
		unsigned long nr;
		void *arg = c;
		uint64_t addr, ptr, npages;
		int ret, e, hostile_arg;

		/* One call in five: the buffer objects and their dma-bufs. */
		if (rnd_below(&s, 5) == 0) {
			bo_step(&fz_bos);
			continue;
		}
		if (rnd_below(&s, 4) == 0) {
			/* A random command: type 'H', rvram's 'R' or one no VFS ioctl uses. */
			static const int types[] = { 'H', 'H', 'H', 'R', 'r', 'v', 0xfe };

			nr = _IOC(rnd_below(&s, 4), types[rnd_below(&s, 7)], rnd_below(&s, 256),
				  rnd_below(&s, 1 << 14));
			n_random++;
		} else {
			nr = valid[rnd_below(&s, sizeof(valid) / sizeof(valid[0]))];
		}
		c->addr = fuzz_addr(&s);
		c->npages = fuzz_npages(&s);
		c->ptr = fuzz_ptr(&s, buf, c->addr);
		c->cpages = rnd(&s);
		c->faults = rnd(&s);
		if (nr == HMM_DMIRROR_FLAGS) {
			/* Mostly valid flags: alias modes change how READ/WRITE fault. */
			static const uint64_t flags[] = { 0, 1, RVRAM_FLAG_ALIAS_DMA,
							  RVRAM_FLAG_ALIAS_CPU };

			c->npages = rnd_below(&s, 4) ? flags[rnd_below(&s, 4)] : rnd(&s);
		}
		if (nr == HMM_DMIRROR_RELEASE && rnd_below(&s, 50))
			nr = HMM_DMIRROR_SNAPSHOT; /* RELEASE evicts everything: rare */
		/*
		 * The argument itself: NULL, read-only, straddling a hole,
		 * kernel. rvram reads the whole command before it decides
		 * anything and writes it back after, so no command, known or
		 * not, may succeed with one of these.
		 */
		hostile_arg = 1;
		switch (rnd_below(&s, 16)) {
		case 0: arg = NULL; break;
		case 1: arg = fz_ro; break;
		case 2: arg = argbuf + PAGE - 8; break;	/* runs into the hole */
		case 3: arg = (void *)0xffff888000001000ULL; break;
		case 4: arg = fz_none; break;
		default: hostile_arg = 0; break;
		}
		n_hostile += hostile_arg;
		addr = c->addr;
		ptr = c->ptr;
		npages = c->npages;
		ret = ioctl(fd, nr, arg);
		e = errno;
		/* A buffer mapped at the range or the result: its data is anyone's now. */
		bo_written(&fz_bos, addr, npages);
		bo_written(&fz_bos, ptr, npages);
		if (ret == 0 && hostile_arg) {
			if (n_bad++ < 5)
				printf("# ioctl %#lx with a hostile argument %p returned 0\n", nr, arg);
		} else if (ret == 0) {
			n_ok++;
		} else if (ret != -1 || !dmirror_errno_ok(e)) {
			if (n_bad++ < 5)
				printf("# ioctl %#lx addr %#" PRIx64 " npages %#" PRIx64 " ptr %#" PRIx64
				       ": returned %d errno %d\n",
				       nr, c->addr, c->npages, c->ptr, ret, e);
		} else {
			errs[e & 255]++;
		}
	}
	atomic_store(&stop, 1);
	pthread_join(chaos, NULL);
	printf("# %lu ioctls in %ld s (%lu random command numbers), %lu returned 0; chaos ops: %lu\n",
	       calls, (long)(time(NULL) - t0), n_random, n_ok, atomic_load(&fz_chaos));
	for (int e = 0; e < 256; e++)
		if (errs[e])
			printf("#   %-12s %lu\n", strerrorname_np(e), errs[e]);
	tap(n_ok > 0, "fuzz: some calls succeeded");
	tap(n_hostile > 0, "fuzz: %lu calls had a hostile argument", n_hostile);
	tap(n_bad == 0,
	    "fuzz: %lu ioctls returned 0 or an errno of the table, never 0 for a hostile argument (%lu did not)",
	    calls, n_bad);
	bo_teardown(&fz_bos);
	bo_report(&fz_bos);
	for (int op = 0; op < BO_OPS; op++)
		n_bo_kinds += fz_bos.calls[op] > 0;
	tap(fz_bos.ok[BO_ALLOC] > 0 && fz_bos.ok[BO_MMAP] > 0 && fz_bos.ok[BO_ACCESS] > 0 &&
	    n_bo_kinds == BO_OPS,
	    "fuzz: buffers were allocated (%lu), mapped (%lu) and accessed (%lu), and every kind of buffer call was made",
	    fz_bos.ok[BO_ALLOC], fz_bos.ok[BO_MMAP], fz_bos.ok[BO_ACCESS]);
	bo_pages = rvram_stat(dev, "dmabuf_pages");
	bo_live = rvram_stat(dev, "dmabufs_exported") - rvram_stat(dev, "dmabufs_released");
	fds = count_fds();
	tap(bo_pages == bo_pages0 && bo_live == bo_live0 && fds == fds0,
	    "fuzz: with every buffer closed and unmapped, no VRAM stays reserved (%ld pages, %ld before) and no buffer (%ld, %ld before) or fd (%d, %d before) is left",
	    bo_pages, bo_pages0, bo_live, bo_live0, fds, fds0);
	still_works("fuzz", 32);
	/* Every target: MIGRATE_TO_DEV also fills the holes of read-only ones. */
	munmap(fz_anon, FUZZ_PAGES * PAGE);
	munmap(fz_devmap, SIDE * PAGE);
	munmap(fz_ro, SIDE * PAGE);
	munmap(fz_none, SIDE * PAGE);
	munmap(fz_shared, SIDE * PAGE);
	munmap(fz_file, SIDE * PAGE);
	munmap(buf, buflen);
	munmap(argbuf, PAGE);
	close(fd);
	close(tfd);
	close(efd);
	tap(rvram_stat(dev, "pages_resident") == resident0,
	    "fuzz: no VRAM page stays resident once the memory and file are gone");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[1] : "";
	int ret = 2;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr,
			"usage: %s race DEV PEER|- NIC|- SECONDS SEED\n"
			"       %s cow DEV NIC|- SEED\n"
			"       %s exhaust DEV PEER|- SEED\n"
			"       %s kill DEV PEER|- ROUNDS SEED\n"
			"       %s fuzz DEV CALLS SEED\n"
			"       %s unbind DEV PCI_ADDR PEER|- NIC|- SECONDS SEED\n",
			argv[0], argv[0], argv[0], argv[0], argv[0], argv[0]);
		return 2;
	}
	dev = argv[2];
	seed = strtoull(argv[argc - 1], NULL, 0);
	printf("TAP version 13\n# rvram-stress");
	for (int i = 1; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n");
	if (argc > 4 && (!strcmp(mode, "race") || !strcmp(mode, "exhaust") || !strcmp(mode, "kill")))
		peer = strcmp(argv[3], "-") ? argv[3] : NULL;

	if (!strcmp(mode, "race") && argc == 7) {
		nic = strcmp(argv[4], "-") ? argv[4] : NULL;
		ret = do_race(atoi(argv[5]));
	} else if (!strcmp(mode, "cow") && argc == 5) {
		nic = strcmp(argv[3], "-") ? argv[3] : NULL;
		ret = do_cow();
	}
	else if (!strcmp(mode, "exhaust") && argc == 5)
		ret = do_exhaust();
	else if (!strcmp(mode, "kill") && argc == 6)
		ret = do_kill(atoi(argv[4]));
	else if (!strcmp(mode, "fuzz") && argc == 5)
		ret = do_fuzz(strtoul(argv[3], NULL, 0));
	else if (!strcmp(mode, "unbind") && argc == 8) {
		peer = strcmp(argv[4], "-") ? argv[4] : NULL;
		nic = strcmp(argv[5], "-") ? argv[5] : NULL;
		ret = do_unbind(argv[3], atoi(argv[6]));
	}
	else
		fprintf(stderr, "rvram-stress: bad arguments for %s\n", mode);
	if (ret)
		return ret;
	return tap_end();
}
