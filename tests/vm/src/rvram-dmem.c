// SPDX-License-Identifier: GPL-2.0
/*
 * VRAM limits: rvram charges every buffer object (RVRAM_IOCTL_ALLOC_DMABUF),
 * and every page of process memory migrated into VRAM while it is there,
 * to the dmem cgroup of the process that allocates it, against the region
 * "rvram/<PCI address>/vram" it registers per GPU, so that an opener of
 * /dev/rvramN cannot take more VRAM than its cgroup's dmem.max allows.
 *
 *   rvram-dmem N PCI CGROUP_ROOT
 *
 * N is the index of a device-private GPU, PCI its address (it is unbound
 * and bound again), CGROUP_ROOT the cgroup2 root, with the dmem controller
 * enabled in its cgroup.subtree_control. The program makes a child cgroup
 * of its own, moves itself into it and back, and removes it. Prints TAP.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "dmirror.h"
#include "rvram-bo.h"

#define MIB (1ULL << 20)
/* keyed(): the key is absent, or its value is "max". */
#define KEY_ABSENT (-1LL)
#define KEY_MAX (-2LL)

static int owner, gpu = -1;
static const char *pci, *root;
static char dev[32], region[64], cg[256];

static int open_gpu(void)
{
	gpu = open(dev, O_RDWR);
	return gpu;
}

/* A dma-buf of size bytes of VRAM, or -errno. */
static int alloc_bo(uint64_t size)
{
	return rvram_alloc_bo(gpu, size, 0);
}

/*
 * The value of KEY in the nested-keyed cgroup file DIR/FILE ("KEY VALUE"
 * lines): KEY_ABSENT, KEY_MAX or the number.
 */
static long long keyed(const char *dir, const char *file, const char *key)
{
	char path[320], line[256];
	size_t len = strlen(key);
	long long v = KEY_ABSENT;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		return KEY_ABSENT;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, len) || line[len] != ' ')
			continue;
		if (!strncmp(line + len + 1, "max", 3))
			v = KEY_MAX;
		else
			v = strtoll(line + len + 1, NULL, 10);
	}
	fclose(f);
	return v;
}

/* What the child cgroup holds in the GPU's region (dmem.current). */
static long long held(void)
{
	return keyed(cg, "dmem.current", region);
}

/* Writes "REGION LIMIT" to the child's dmem.max: 0 or -errno. */
static int set_max(const char *limit)
{
	char path[320], val[128];

	snprintf(path, sizeof(path), "%s/dmem.max", cg);
	snprintf(val, sizeof(val), "%s %s", region, limit);
	return sysfs_write(path, val);
}

/* Moves the calling process into the cgroup DIR: 0 or -errno. */
static int move_to(const char *dir)
{
	char path[320], pid[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", getpid());
	return sysfs_write(path, pid);
}

static long long vram_size(void)
{
	return rvram_vram_size(owner);
}

/* Requests over the limit: ENOSPC every time, and nothing else changes. */
static void over_limit(void)
{
	int enospc = 0, other = 0, e;

	for (int i = 0; i < 1000; i++) {
		e = alloc_bo(PAGE);
		if (e == -ENOSPC) {
			enospc++;
			continue;
		}
		if (e >= 0)
			close(e);
		other++;
	}
	tap(enospc == 1000 && other == 0,
	    "1000 more pages over the limit: ENOSPC every time (%d ENOSPC, %d other)", enospc,
	    other);
	tap(held() == (long long)MIB && rvram_stat(dev, "dmabuf_pages") == MIB / PAGE,
	    "refused requests charge and reserve nothing (dmem.current %lld, dmabuf_pages %ld)",
	    held(), rvram_stat(dev, "dmabuf_pages"));
}

/*
 * A buffer passed to another process (here: a forked child, which leaves
 * for the root cgroup) stays charged to the allocator's cgroup until the
 * last reference goes, and counts against its limit meanwhile.
 */
static void passed_on(void)
{
	int ready[2], go[2], fd = alloc_bo(MIB), status = -1, e;
	pid_t pid;
	char c;

	if (fd < 0 || pipe(ready) || pipe(go)) {
		tap(0, "passed on: a 1 MiB buffer and pipes (fd %d, errno %d)", fd, errno);
		return;
	}
	pid = fork();
	if (pid == 0) {
		int bad = move_to(root) != 0;

		bad |= write(ready[1], "r", 1) != 1;
		bad |= read(go[0], &c, 1) != 1;
		bad |= close(fd) != 0;
		_exit(bad);
	}
	close(ready[1]);
	close(go[0]);
	tap(pid > 0 && read(ready[0], &c, 1) == 1,
	    "passed on: a child holds the buffer, in the root cgroup");
	tap(close(fd) == 0, "passed on: the allocator closes its file descriptor");
	tap(held() == (long long)MIB,
	    "passed on: still charged to the allocator's cgroup (dmem.current %lld)", held());
	e = alloc_bo(PAGE);
	tap(e == -ENOSPC, "passed on: and counted against its limit (a page: %d)", e);
	if (e >= 0)
		close(e);
	(void)!write(go[1], "g", 1);
	close(go[1]);
	close(ready[0]);
	waitpid(pid, &status, 0);
	tap(WIFEXITED(status) && WEXITSTATUS(status) == 0, "passed on: the child closes it");
	tap(held() == 0 && rvram_stat(dev, "dmabuf_pages") == 0,
	    "passed on: uncharged with the last reference (dmem.current %lld, dmabuf_pages %ld)",
	    held(), rvram_stat(dev, "dmabuf_pages"));
}

/* A 2 MiB-aligned anonymous region of `len` bytes filled with `byte`. */
static unsigned char *region_of(size_t len, int advice, int byte)
{
	unsigned char *p = mmap(NULL, len + 2 * MIB, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	p = (unsigned char *)(((uintptr_t)p + 2 * MIB - 1) & ~(2 * MIB - 1));
	madvise(p, len, advice);
	memset(p, byte, len);
	return p;
}

/* SNAPSHOT's mark of a page in this GPU's VRAM: private unless coherent. */
static unsigned char vram_mark = HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL;

/* Pages of [p, p + len) whose SNAPSHOT byte, masked with `mask`, is `want`. */
static long snapshot_count(int fd, unsigned char *p, size_t len, unsigned char mask,
			   unsigned char want)
{
	static unsigned char snap[2 * MIB / PAGE];
	long n = 0;

	if (dmirror(fd, HMM_DMIRROR_SNAPSHOT, p, snap, len / PAGE))
		return -1;
	for (size_t i = 0; i < len / PAGE; i++)
		n += (snap[i] & mask) == want;
	return n;
}

/* Pages of [p, p + len) in this GPU's VRAM. */
static long in_vram(int fd, unsigned char *p, size_t len)
{
	return snapshot_count(fd, p, len, 0xf0, vram_mark);
}

/* Pages of [p, p + len) mapped by a PMD. */
static long pmd_mapped(int fd, unsigned char *p, size_t len)
{
	return snapshot_count(fd, p, len, HMM_DMIRROR_PROT_PMD, HMM_DMIRROR_PROT_PMD);
}

static int all_bytes(const unsigned char *p, size_t len, int byte)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != byte)
			return 0;
	return 1;
}

/*
 * Process memory migrated into VRAM (HMM_DMIRROR_MIGRATE_TO_DEV) is VRAM
 * too: each page is charged to the migrating process's cgroup while it is
 * in VRAM, and uncharged however it leaves (migrated back, faulted back by
 * the CPU, its mapping gone, the file closed). Over the limit, what fits
 * moves and the call fails with ENOSPC. Limit: 1 MiB.
 */
static void migrated(void)
{
	static unsigned char out[2 * MIB];
	unsigned char *p = region_of(2 * MIB, MADV_NOHUGEPAGE, 0x5a), *t, v;
	int fd = open(dev, O_RDWR), e;
	long n;

	if (!p || fd < 0) {
		tap(0, "migrated: a 2 MiB region and a file (errno %d)", errno);
		return;
	}
	/* migrate_vma() may skip a page still in a per-CPU LRU batch. */
	e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, out, 2 * MIB / PAGE);
	n = in_vram(fd, p, 2 * MIB);
	tap(e == -ENOSPC && n > 0 && n <= (long)(MIB / PAGE) && held() == n * PAGE,
	    "migrated: 2 MiB into VRAM over a 1 MiB limit: ENOSPC, what fit moved and is charged (%d, %ld pages, dmem.current %lld)",
	    e, n, held());
	e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_SYS, p, out, 2 * MIB / PAGE);
	tap(e == 0 && in_vram(fd, p, 2 * MIB) == 0 && held() == 0,
	    "migrated: MIGRATE_TO_SYS: back in system memory, uncharged (%d, dmem.current %lld)", e,
	    held());
	e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, out, MIB / PAGE);
	tap(e == 0 && in_vram(fd, p, MIB) == MIB / PAGE && held() == (long long)MIB,
	    "migrated: 1 MiB into VRAM, at the limit (%d, dmem.current %lld)", e, held());
	e = alloc_bo(PAGE);
	tap(e == -ENOSPC, "migrated: buffers and migrated pages share the limit (a page: %d)", e);
	if (e >= 0)
		close(e);
	/* The CPU faults one page back. */
	v = p[PAGE + 7];
	tap(v == 0x5a && held() == (long long)(MIB - PAGE),
	    "migrated: a CPU fault brings a page back and uncharges it (dmem.current %lld)", held());
	munmap(p, 64 * PAGE);
	tap(held() == (long long)(MIB - 64 * PAGE),
	    "migrated: munmap() of 64 pages uncharges them (dmem.current %lld)", held());
	tap(all_bytes(p + 64 * PAGE, MIB - 64 * PAGE, 0x5a),
	    "migrated: the rest reads back intact from VRAM");
	e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p + 64 * PAGE, out, MIB / PAGE - 64);
	tap(e == 0 && held() == (long long)(MIB - 64 * PAGE),
	    "migrated: in VRAM again (%d, dmem.current %lld)", e, held());
	e = dmirror(fd, HMM_DMIRROR_RELEASE, p, NULL, 1);
	tap(e == 0 && held() == 0 && in_vram(fd, p + 64 * PAGE, MIB - 64 * PAGE) == 0,
	    "migrated: RELEASE evicts the file's pages and uncharges them (%d, dmem.current %lld)",
	    e, held());
	tap(all_bytes(p + 64 * PAGE, MIB - 64 * PAGE, 0x5a), "migrated: their data intact");
	e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p + 64 * PAGE, out, MIB / PAGE - 64);
	close(fd);
	/* Like test_hmm, closing the file leaves the process's pages in VRAM. */
	tap(e == 0 && held() == (long long)(MIB - 64 * PAGE) &&
	    held() == rvram_stat(dev, "pages_resident") * PAGE,
	    "migrated: in VRAM again, then the file closed: still charged while in VRAM (%d, dmem.current %lld)",
	    e, held());
	tap(all_bytes(p + 64 * PAGE, MIB - 64 * PAGE, 0x5a) && held() == 0,
	    "migrated: the CPU faults them back, intact, and they are uncharged (dmem.current %lld)",
	    held());
	munmap(p + 64 * PAGE, 2 * MIB - 64 * PAGE);

	/*
	 * A THP split in VRAM: freed page by page. The case is one only if
	 * the buffer is PMD-mapped before (a THP in system memory) and after
	 * the migration (a device THP), which SNAPSHOT's PROT_PMD says.
	 */
	tap(set_max("2M") == 0, "migrated: dmem.max 2 MiB");
	t = region_of(2 * MIB, MADV_HUGEPAGE, 0x3c);
	fd = open(dev, O_RDWR);
	n = fd >= 0 && t ? pmd_mapped(fd, t, 2 * MIB) : -1;
	tap(n == 2 * MIB / PAGE, "migrated: the 2 MiB buffer is a THP (%ld of 512 pages PMD-mapped)",
	    n);
	e = t && fd >= 0 ? dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, t, out, 2 * MIB / PAGE) : -1;
	n = fd >= 0 && t ? in_vram(fd, t, 2 * MIB) : -1;
	tap(e == 0 && n == 2 * MIB / PAGE && held() == (long long)(2 * MIB),
	    "migrated: a 2 MiB THP into VRAM, charged (%d, %ld pages, dmem.current %lld)", e, n,
	    held());
	n = fd >= 0 && t ? pmd_mapped(fd, t, 2 * MIB) : -1;
	tap(n == 2 * MIB / PAGE, "migrated: ... as a device THP (%ld of 512 pages PMD-mapped)", n);
	if (t)
		munmap(t + MIB, MIB);
	/*
	 * A device THP is split, and the unmapped half freed, now or when the
	 * deferred split gets to it: the charge follows the VRAM in use.
	 */
	tap(held() >= (long long)MIB && held() == rvram_stat(dev, "pages_resident") * PAGE,
	    "migrated: after munmap() of its second half, the charge is the VRAM in use (dmem.current %lld, pages_resident %ld)",
	    held(), rvram_stat(dev, "pages_resident"));
	tap(t && all_bytes(t, MIB, 0x3c), "migrated: the first half reads back intact");
	if (fd >= 0)
		close(fd);
	tap(held() == 0, "migrated: all uncharged at the end (%lld)", held());
	if (t)
		munmap(t, MIB);
	tap(set_max("1M") == 0, "migrated: dmem.max 1 MiB again");
}

/* Without a limit, buffers up to all of VRAM, as before. */
static void unlimited(long long vram)
{
	int fd, e;

	tap(set_max("max") == 0 && keyed(cg, "dmem.max", region) == KEY_MAX,
	    "unlimited: dmem.max set back to max");
	fd = alloc_bo(vram);
	tap(fd >= 0, "unlimited: a buffer of all of VRAM (%lld bytes: %d)", vram, fd);
	tap(held() == vram, "unlimited: dmem.current is the VRAM size (%lld)", held());
	e = alloc_bo(PAGE);
	tap(e == -ENOMEM, "unlimited: one more page: ENOMEM, VRAM is exhausted (%d)", e);
	if (e >= 0)
		close(e);
	if (fd >= 0)
		close(fd);
	tap(held() == 0, "unlimited: closed, dmem.current back to 0 (%lld)", held());
}

/* dmem.current of the cgroup DIR in the GPU's region. */
static long long held_by(const char *dir)
{
	return keyed(dir, "dmem.current", region);
}

/* Writes "REGION LIMIT" to DIR/dmem.max: 0 or -errno. */
static int set_max_of(const char *dir, const char *limit)
{
	char path[320], val[128];

	snprintf(path, sizeof(path), "%s/dmem.max", dir);
	snprintf(val, sizeof(val), "%s %s", region, limit);
	return sysfs_write(path, val);
}

/*
 * The cgroup changes under what it holds: dmem.max set below dmem.current,
 * a THP migrated under a limit smaller than the folio, the allocating
 * process moving to another cgroup, and a cgroup removed while a buffer
 * is still charged to it. Limit: 1 MiB on entry.
 */
static void cgroup_changes(void)
{
	static unsigned char out[2 * MIB];
	char inner[320], path[320];
	unsigned char *m, *t;
	int fd, e, f;
	long n;

	/* dmem.max below dmem.current. */
	fd = alloc_bo(MIB);
	m = fd >= 0 ? mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (m != MAP_FAILED)
		memset(m, 0x6d, MIB);
	tap(m != MAP_FAILED && held() == (long long)MIB, "below: a 1 MiB buffer, mapped (%d)", fd);
	e = set_max("512K");
	tap(e == 0 && keyed(cg, "dmem.max", region) == (long long)(MIB / 2) &&
	    held() == (long long)MIB,
	    "below: dmem.max 512 KiB under 1 MiB held: written, the charge stays (%d, %lld)", e,
	    held());
	e = alloc_bo(PAGE);
	tap(e == -ENOSPC, "below: a page more: ENOSPC (%d)", e);
	if (e >= 0)
		close(e);
	tap(m != MAP_FAILED && all_bytes(m, MIB, 0x6d), "below: the buffer keeps its data");
	if (m != MAP_FAILED)
		munmap(m, MIB);
	if (fd >= 0)
		close(fd);
	fd = alloc_bo(MIB / 4);
	tap(fd >= 0 && held() == (long long)(MIB / 4),
	    "below: closed; 256 KiB fit under the new limit (%d, %lld)", fd, held());
	if (fd >= 0)
		close(fd);
	tap(set_max("1M") == 0 && held() == 0, "below: dmem.max 1 MiB again, nothing held");

	/*
	 * A 2 MiB THP under a 1 MiB limit: the folio cannot be charged whole;
	 * what fits moves page by page, the rest stays, every byte intact.
	 */
	t = region_of(2 * MIB, MADV_HUGEPAGE, 0x4e);
	f = open(dev, O_RDWR);
	n = f >= 0 && t ? pmd_mapped(f, t, 2 * MIB) : -1;
	tap(n == 2 * MIB / PAGE, "thp: a 2 MiB THP (%ld of 512 pages PMD-mapped)", n);
	e = t && f >= 0 ? dmirror(f, HMM_DMIRROR_MIGRATE_TO_DEV, t, out, 2 * MIB / PAGE) : -1;
	n = t && f >= 0 ? in_vram(f, t, 2 * MIB) : -1;
	tap(e == -ENOSPC && n > 0 && n <= (long)(MIB / PAGE) && held() == n * PAGE,
	    "thp: migrated under a 1 MiB limit: ENOSPC, %ld pages moved and charged (%d, %lld)", n,
	    e, held());
	tap(t && all_bytes(t, 2 * MIB, 0x4e), "thp: all 2 MiB read back intact");
	if (f >= 0)
		close(f);
	tap(held() == 0, "thp: the file closed, nothing held (%lld)", held());
	if (t)
		munmap(t, 2 * MIB);

	/*
	 * The migrating process moves to the root cgroup. (migrate_vma() may
	 * skip a page in another CPU's LRU batch: the pages are counted.)
	 */
	f = open(dev, O_RDWR);
	t = region_of(MIB, MADV_NOHUGEPAGE, 0x2d);
	e = t && f >= 0 ? dmirror(f, HMM_DMIRROR_MIGRATE_TO_DEV, t, out, MIB / PAGE / 2) : -1;
	n = t && f >= 0 ? in_vram(f, t, MIB / 2) : -1;
	tap(e == 0 && n > 0 && held() == n * PAGE,
	    "moving: 512 KiB migrated, %ld pages charged (%lld)", n, held());
	tap(move_to(root) == 0, "moving: the process moves to the root cgroup");
	e = t && f >= 0 ? dmirror(f, HMM_DMIRROR_MIGRATE_TO_DEV, t + MIB / 2, out, MIB / PAGE / 2) :
			  -1;
	tap(e == 0 && t && in_vram(f, t + MIB / 2, MIB / 2) > 0 && held() == n * PAGE,
	    "moving: 512 KiB more migrated from the root cgroup are not charged to the child (%lld)",
	    held());
	e = t && f >= 0 ? dmirror(f, HMM_DMIRROR_MIGRATE_TO_SYS, t, NULL, MIB / PAGE) : -1;
	tap(e == 0 && held() == 0 && all_bytes(t, MIB, 0x2d),
	    "moving: migrated back, the child's charge is given back, data intact (%lld)", held());
	if (t)
		munmap(t, MIB);
	if (f >= 0)
		close(f);

	/* A cgroup removed with a buffer charged to it. */
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", cg);
	snprintf(inner, sizeof(inner), "%s/inner", cg);
	rmdir(inner);
	tap(sysfs_write(path, "+dmem") == 0 && mkdir(inner, 0755) == 0 && move_to(inner) == 0,
	    "removed: a cgroup inside the child, the process in it");
	fd = alloc_bo(MIB);
	m = fd >= 0 ? mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (m != MAP_FAILED)
		memset(m, 0x7e, MIB);
	tap(m != MAP_FAILED && held_by(inner) == (long long)MIB && held() == (long long)MIB,
	    "removed: a 1 MiB buffer charged to it and to its parent (%lld, %lld)",
	    held_by(inner), held());
	tap(move_to(root) == 0 && rmdir(inner) == 0,
	    "removed: the process leaves, the cgroup is removed while the buffer is charged");
	tap(held() == (long long)MIB, "removed: the parent still counts it (%lld)", held());
	tap(m != MAP_FAILED && all_bytes(m, MIB, 0x7e), "removed: the buffer keeps its data");
	if (m != MAP_FAILED)
		munmap(m, MIB);
	e = fd >= 0 ? close(fd) : -1;
	tap(e == 0 && held() == 0, "removed: closing it gives the charge back to the parent (%lld)",
	    held());
	tap(sysfs_write(path, "-dmem") == 0 && move_to(cg) == 0, "removed: back into the child");
}

/* What a writer of dmem.max got while the region came and went. */
static struct limit_writer {
	volatile int stop;
	long ok, gone, other;
	int last_other;
} writer;

static void *write_limits(void *arg)
{
	(void)arg;
	for (long i = 0; !writer.stop; i++) {
		int e = set_max_of(cg, i % 2 ? "max" : "1M");

		if (!e)
			writer.ok++;
		else if (e == -EINVAL || e == -ENODEV)
			writer.gone++;
		else
			writer.other++, writer.last_other = e;
	}
	return NULL;
}

/* dmem.max written without pause while the GPU is unbound and bound. */
static void limit_during_unbind(void)
{
	pthread_t t;
	int e;

	close(gpu);
	gpu = -1;
	pthread_create(&t, NULL, write_limits, NULL);
	usleep(20000);
	e = rvram_unbind(pci);
	tap(e == 0, "limits: %s unbound while dmem.max is written (%d)", pci, e);
	usleep(20000);
	e = rvram_bind(pci);
	tap(e == 0 && open_gpu() >= 0, "limits: ... and bound again (%d)", e);
	usleep(20000);
	writer.stop = 1;
	pthread_join(t, NULL);
	tap(writer.other == 0 && writer.ok > 0,
	    "limits: every write succeeded or found no region (EINVAL): %ld ok, %ld without a region, %ld other (last %d)",
	    writer.ok, writer.gone, writer.other, writer.last_other);
	tap(set_max("1M") == 0 && keyed(cg, "dmem.max", region) == (long long)MIB,
	    "limits: the new region takes a limit");
}

/*
 * Unbinding unregisters the region with a buffer still charged; closing
 * the buffer later uncharges it, and the region registered at the next
 * bind starts from zero, without the old limit.
 */
static void rebind(long long vram)
{
	int fd, e;

	tap(set_max("1M") == 0, "rebind: dmem.max 1 MiB again");
	fd = alloc_bo(MIB);
	tap(fd >= 0 && held() == (long long)MIB, "rebind: a 1 MiB buffer (%d)", fd);
	tap(rvram_unbind(pci) == 0,
	    "rebind: %s unbound with the buffer held", pci);
	tap(keyed(root, "dmem.capacity", region) == KEY_ABSENT && held() == KEY_ABSENT,
	    "rebind: the region left dmem.capacity and dmem.current");
	tap(fd >= 0 && close(fd) == 0, "rebind: the buffer closes after the region is gone");
	close(gpu);
	gpu = -1;
	e = rvram_bind(pci);
	tap(e == 0 && open_gpu() >= 0, "rebind: %s bound again, %s opens (%d)", pci, dev, e);
	tap(keyed(root, "dmem.capacity", region) == vram,
	    "rebind: the region is back in dmem.capacity");
	tap(held() == 0 && keyed(cg, "dmem.max", region) == KEY_MAX,
	    "rebind: a new region: nothing charged, no limit (dmem.current %lld)", held());
	fd = alloc_bo(2 * MIB);
	tap(fd >= 0 && held() == (long long)(2 * MIB),
	    "rebind: a 2 MiB buffer, charged (%d, dmem.current %lld)", fd, held());
	if (fd >= 0)
		close(fd);
}

/*
 * Device-coherent VRAM (rvram-coherent.sh): migrations into it are charged
 * as into device-private VRAM. The CPU reads the pages in place, so they
 * stay charged until they leave VRAM. The child cgroup is at 1 MiB.
 */
static void coherent(void)
{
	static unsigned char out[2 * MIB];
	unsigned char *p = region_of(2 * MIB, MADV_NOHUGEPAGE, 0x5a);
	int fd = open(dev, O_RDWR), e;
	long n;

	if (!p || fd < 0) {
		tap(0, "coherent: a 2 MiB region and a file (errno %d)", errno);
		return;
	}
	e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, out, 2 * MIB / PAGE);
	n = in_vram(fd, p, 2 * MIB);
	tap(e == -ENOSPC && n > 0 && n <= (long)(MIB / PAGE) && held() == n * PAGE,
	    "coherent: 2 MiB into VRAM over a 1 MiB limit: ENOSPC, what fit moved and is charged (%d, %ld pages, dmem.current %lld)",
	    e, n, held());
	tap(all_bytes(p, 2 * MIB, 0x5a) && in_vram(fd, p, 2 * MIB) == n && held() == n * PAGE,
	    "coherent: the CPU reads every byte in place, nothing moves, all still charged (dmem.current %lld)",
	    held());
	e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_SYS, p, out, 2 * MIB / PAGE);
	tap(e == 0 && in_vram(fd, p, 2 * MIB) == 0 && held() == 0,
	    "coherent: MIGRATE_TO_SYS: back in system memory, uncharged (%d, dmem.current %lld)", e,
	    held());
	e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, out, MIB / PAGE);
	n = in_vram(fd, p, MIB);
	tap(e == 0 && n == MIB / PAGE && held() == (long long)MIB,
	    "coherent: 1 MiB into VRAM, at the limit (%d, %ld pages, dmem.current %lld)", e, n,
	    held());
	munmap(p, 64 * PAGE);
	n = in_vram(fd, p + 64 * PAGE, MIB - 64 * PAGE);
	tap(n == MIB / PAGE - 64 && held() == n * PAGE,
	    "coherent: munmap() of 64 pages uncharges them (%ld pages left, dmem.current %lld)", n,
	    held());
	e = dmirror(fd, HMM_DMIRROR_RELEASE, p, NULL, 1);
	tap(e == 0 && held() == 0 && in_vram(fd, p + 64 * PAGE, MIB - 64 * PAGE) == 0,
	    "coherent: RELEASE evicts the file's pages and uncharges them (%d, dmem.current %lld)",
	    e, held());
	tap(all_bytes(p + 64 * PAGE, 2 * MIB - 64 * PAGE, 0x5a), "coherent: their data intact");
	close(fd);
	munmap(p + 64 * PAGE, 2 * MIB - 64 * PAGE);
}

int main(int argc, char **argv)
{
	long long vram;
	int fd, e;

	if (argc < 4 || (argc > 4 && strcmp(argv[4], "coherent"))) {
		fprintf(stderr, "usage: rvram-dmem N PCI CGROUP_ROOT [coherent]\n");
		return 2;
	}
	owner = atoi(argv[1]);
	pci = argv[2];
	root = argv[3];
	snprintf(dev, sizeof(dev), "/dev/rvram%d", owner);
	snprintf(region, sizeof(region), "rvram/%s/vram", pci);
	snprintf(cg, sizeof(cg), "%s/rvram-dmem", root);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n# region %s\n", region);

	vram = vram_size();
	tap(vram > 0 && keyed(root, "dmem.capacity", region) == vram,
	    "dmem.capacity lists %s with the VRAM size (%lld)", region, vram);
	rmdir(cg);
	tap(mkdir(cg, 0755) == 0 && held() == 0, "a child cgroup, holding nothing (%lld)", held());
	tap(set_max("1M") == 0 && keyed(cg, "dmem.max", region) == (long long)MIB,
	    "dmem.max of the child: 1 MiB of the region");
	tap(move_to(cg) == 0, "into the child cgroup");
	if (argc > 4) {
		/* A device-coherent GPU: no buffer objects, migrations only. */
		vram_mark = HMM_DMIRROR_PROT_DEV_COHERENT_LOCAL;
		coherent();
		tap(move_to(root) == 0 && rmdir(cg) == 0, "back to the root cgroup, child removed");
		return tap_end();
	}
	if (open_gpu() < 0) {
		tap(0, "open %s (errno %d)", dev, errno);
		return tap_end();
	}

	fd = alloc_bo(MIB);
	tap(fd >= 0, "a 1 MiB buffer, at the limit (%d)", fd);
	tap(held() == (long long)MIB, "dmem.current is 1 MiB (%lld)", held());
	e = alloc_bo(PAGE);
	tap(e == -ENOSPC, "one page more: ENOSPC (%d)", e);
	if (e >= 0)
		close(e);
	over_limit();
	if (fd >= 0)
		close(fd);
	tap(held() == 0 && rvram_stat(dev, "dmabuf_pages") == 0,
	    "closed: dmem.current back to 0, VRAM back (%lld, dmabuf_pages %ld)", held(),
	    rvram_stat(dev, "dmabuf_pages"));
	fd = alloc_bo(MIB);
	tap(fd >= 0, "1 MiB again (%d)", fd);
	if (fd >= 0)
		close(fd);

	passed_on();
	migrated();
	cgroup_changes();
	unlimited(vram);
	rebind(vram);
	limit_during_unbind();

	tap(rvram_stat(dev, "dmabuf_pages") == 0, "no VRAM reserved at the end (dmabuf_pages %ld)",
	    rvram_stat(dev, "dmabuf_pages"));
	close(gpu);
	tap(move_to(root) == 0 && rmdir(cg) == 0, "back to the root cgroup, child removed");
	return tap_end();
}
