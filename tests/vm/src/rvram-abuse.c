// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/rvramN in hostile hands: what one user of the device can do to the
 * others and to the kernel (Documentation/misc-devices/rvram.rst).
 *
 * - HMM_DMIRROR_RELEASE evicts the caller's file's pages only: another
 *   process's RELEASE (and another file's of the same process) leaves ours
 *   in VRAM, ours moves them out with their data;
 * - a file acts on its opener's address space only: a forked child, an
 *   unrelated process the fd is passed to (SCM_RIGHTS) and the opener
 *   itself after an exec() get EBADF from every command and from mmap(),
 *   and the opener's memory is untouched; an exec() frees the VRAM pages
 *   of the address space it ends, though the file stays open;
 * - mmap() of the device file is bounded (ENOMEM past 2 MiB, nothing
 *   allocated) and charged to the caller's memory cgroup; a mapping grown
 *   by mremap() gets no pages past the bound (SIGBUS, EFAULT for GUP),
 *   and keeps its data through fork and GUP;
 * - refused requests (bad FLAGS, bad ALLOC_DMABUF, VRAM exhausted) repeated
 *   10,000 times log at most a few lines.
 *
 *   rvram-abuse /dev/rvramN [MEMCG_DIR]
 *
 * MEMCG_DIR is the cgroup v2 directory the program runs in, for the
 * accounting checks (skipped without it). Prints TAP.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "../../../drivers/rvram/include/uapi/misc/rvram.h"
#include "dmirror.h"

#define NPAGES 256UL
#define SIZE (NPAGES * PAGE)
#define MAX_MMAP (2UL << 20)
#define REPEAT 10000

static const char *dev;

static void tap_skip(const char *what, const char *why)
{
	printf("ok %d %s # SKIP %s\n", ++tap_n, what, why);
}

static unsigned char pattern(size_t i, unsigned int seed)
{
	return (unsigned char)(i * 13 + i / PAGE + seed);
}

static void fill(unsigned char *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(i, seed);
}

static size_t mismatches(const unsigned char *p, size_t len, unsigned int seed)
{
	size_t bad = 0;

	for (size_t i = 0; i < len; i++)
		bad += p[i] != pattern(i, seed);
	return bad;
}

static int open_dev(void)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		perror(dev);
		exit(2);
	}
	return fd;
}

/* How many pages of [buf, buf + npages) SNAPSHOT reports in this GPU's VRAM; -1 on error. */
static long resident(int fd, void *buf, size_t npages)
{
	unsigned char snap[NPAGES];
	long n = 0;

	if (npages > NPAGES || dmirror(fd, HMM_DMIRROR_SNAPSHOT, buf, snap, npages))
		return -1;
	for (size_t i = 0; i < npages; i++)
		n += (snap[i] & 0xf0) == HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL;
	return n;
}

/* A buffer of NPAGES pages filled with SEED's pattern and moved into VRAM through FD. */
static unsigned char *vram_buffer(int fd, unsigned int seed)
{
	static unsigned char bounce[SIZE];
	unsigned char *p = map_anon(SIZE);

	fill(p, SIZE, seed);
	if (dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, bounce, NPAGES))
		return NULL;
	return p;
}

/* ------------------------------------------------------------ RELEASE */

static void release_is_scoped(void)
{
	int fd = open_dev(), other = open_dev(), status = 0;
	unsigned char *buf = vram_buffer(fd, 1);
	long before = rvram_stat(dev, "pages_resident");
	pid_t pid;

	tap(buf && resident(fd, buf, NPAGES) == NPAGES, "release: %lu pages in VRAM", NPAGES);
	if (!buf)
		return;

	/* Another process, its own file and pages: RELEASE moves its pages only. */
	pid = fork();
	if (pid == 0) {
		int cfd = open_dev();
		unsigned char *mine = vram_buffer(cfd, 2);
		int bad = !mine || resident(cfd, mine, NPAGES) != NPAGES;

		bad |= (dmirror(cfd, HMM_DMIRROR_RELEASE, mine, NULL, 1) != 0) << 1;
		bad |= (!mine || resident(cfd, mine, NPAGES) != 0) << 2;
		bad |= (!mine || mismatches(mine, SIZE, 2) != 0) << 3;
		_exit(bad);
	}
	waitpid(pid, &status, 0);
	tap(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "release: another process's RELEASE evicts its own pages, data intact (status %#x)", status);
	tap(resident(fd, buf, NPAGES) == NPAGES,
	    "release: ... and leaves ours in VRAM (%ld of %lu)", resident(fd, buf, NPAGES), NPAGES);

	/* Another file of this process: its own (no) pages only. */
	tap(dmirror(other, HMM_DMIRROR_RELEASE, buf, NULL, 1) == 0 &&
	    resident(fd, buf, NPAGES) == NPAGES,
	    "release: RELEASE on another file of ours leaves this file's pages in VRAM");

	/* Ours: every page moves out with its data. */
	tap(dmirror(fd, HMM_DMIRROR_RELEASE, buf, NULL, 1) == 0 && resident(fd, buf, NPAGES) == 0,
	    "release: RELEASE on our file evicts our pages");
	tap(rvram_stat(dev, "pages_resident") == before - (long)NPAGES,
	    "release: pages_resident back to %ld (is %ld)", before - (long)NPAGES,
	    rvram_stat(dev, "pages_resident"));
	tap(mismatches(buf, SIZE, 1) == 0, "release: the CPU reads the evicted data");
	munmap(buf, SIZE);
	close(other);
	close(fd);
}

/* ------------------------------------------------------- foreign mm */

/* What a process that does not own FD gets from each use of it: errno per attempt. */
enum {
	T_READ, T_WRITE, T_TO_DEV, T_TO_SYS, T_SNAP, T_RELEASE, T_FLAGS, T_EXCL, T_CHECK_EXCL,
	T_READ_UNLOCKED, T_DMABUF, T_MMAP, T_N
};
static const char *const t_name[T_N] = {
	"READ", "WRITE", "MIGRATE_TO_DEV", "MIGRATE_TO_SYS", "SNAPSHOT", "RELEASE", "FLAGS",
	"EXCLUSIVE", "CHECK_EXCLUSIVE", "READ_UNLOCKED", "ALLOC_DMABUF", "mmap",
};

/* Uses FD from a process that is not its opener; BUF is an address of the opener's. */
static void foreign_uses(int fd, void *buf, int err[T_N])
{
	static unsigned char bounce[SIZE];
	struct rvram_alloc_dmabuf bo = { .size = PAGE };
	void *m;

	fill(bounce, SIZE, 9);
	err[T_READ] = -dmirror(fd, HMM_DMIRROR_READ, buf, bounce, NPAGES);
	err[T_WRITE] = -dmirror(fd, HMM_DMIRROR_WRITE, buf, bounce, NPAGES);
	err[T_TO_DEV] = -dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, buf, bounce, NPAGES);
	err[T_TO_SYS] = -dmirror(fd, HMM_DMIRROR_MIGRATE_TO_SYS, buf, bounce, NPAGES);
	err[T_SNAP] = -dmirror(fd, HMM_DMIRROR_SNAPSHOT, buf, bounce, NPAGES);
	err[T_RELEASE] = -dmirror(fd, HMM_DMIRROR_RELEASE, buf, NULL, 1);
	err[T_FLAGS] = -dmirror(fd, HMM_DMIRROR_FLAGS, buf, NULL, RVRAM_FLAG_ALIAS_CPU);
	err[T_EXCL] = -dmirror(fd, HMM_DMIRROR_EXCLUSIVE, buf, bounce, NPAGES);
	err[T_CHECK_EXCL] = -dmirror(fd, HMM_DMIRROR_CHECK_EXCLUSIVE, buf, bounce, NPAGES);
	err[T_READ_UNLOCKED] = -dmirror(fd, HMM_DMIRROR_READ_UNLOCKED, buf, bounce, NPAGES);
	err[T_DMABUF] = ioctl(fd, RVRAM_IOCTL_ALLOC_DMABUF, &bo) ? errno : 0;
	if (!err[T_DMABUF])
		close(bo.fd);
	m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err[T_MMAP] = m == MAP_FAILED ? errno : 0;
	if (m != MAP_FAILED)
		munmap(m, PAGE);
}

/*
 * The opener's state after a foreign process used its file: SYS (in
 * system memory, SEED_SYS's pattern) and DEV (in VRAM, SEED_DEV's) are as
 * they were, and the file still works for the opener.
 */
static void check_opener(const char *who, int fd, const int err[T_N], unsigned char *sys,
			 unsigned char *dev_buf)
{
	static unsigned char bounce[SIZE];
	int all = 1;

	for (int i = 0; i < T_N; i++) {
		if (err[i] != EBADF)
			printf("# %s: %s got errno %d\n", who, t_name[i], err[i]);
		all &= err[i] == EBADF;
	}
	tap(all, "%s: every command and mmap() on the opener's file gets EBADF", who);
	tap(mismatches(sys, SIZE, 3) == 0 && resident(fd, sys, NPAGES) == 0,
	    "%s: the opener's memory is untouched (not written, not migrated)", who);
	tap(resident(fd, dev_buf, NPAGES) == NPAGES && mismatches(dev_buf, SIZE, 4) == 0,
	    "%s: the opener's VRAM pages are still there (not released), data intact", who);
	tap(dmirror(fd, HMM_DMIRROR_READ, sys, bounce, NPAGES) == 0 &&
	    mismatches(bounce, SIZE, 3) == 0, "%s: the file still works for its opener", who);
}

static void forked_child(void)
{
	int fd = open_dev(), status = 0;
	unsigned char *sys = map_anon(SIZE), *dev_buf = vram_buffer(fd, 4);
	int *err = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid;

	fill(sys, SIZE, 3);
	if (!dev_buf || err == MAP_FAILED) {
		tap(0, "fork: setup");
		return;
	}
	pid = fork();
	if (pid == 0) {
		foreign_uses(fd, sys, err);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	check_opener("fork", fd, err, sys, dev_buf);
	munmap(err, PAGE);
	munmap(sys, SIZE);
	munmap(dev_buf, SIZE);
	close(fd);
}

/* The receiving end of SCM_RIGHTS: a fresh program, its own address space. */
static int receiver(int sock, uintptr_t addr)
{
	char c;
	int err[T_N] = { 0 }, fd = -1;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm;

	if (recvmsg(sock, &msg, 0) != 1)
		return 2;
	cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return 2;
	memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	/* The opener's address: here it is whatever this program has there. */
	foreign_uses(fd, (void *)addr, err);
	return write(sock, err, sizeof(err)) == sizeof(err) ? 0 : 2;
}

static void passed_fd(const char *self)
{
	int fd = open_dev(), sv[2], status = 0, err[T_N];
	unsigned char *sys = map_anon(SIZE), *dev_buf = vram_buffer(fd, 4);
	char c = 'x', sock[16], addr[32];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u = { 0 };
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	pid_t pid;

	fill(sys, SIZE, 3);
	if (!dev_buf || socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		tap(0, "scm_rights: setup");
		return;
	}
	/* An unrelated process: a fresh exec, which never had the file. */
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		snprintf(sock, sizeof(sock), "%d", sv[1]);
		snprintf(addr, sizeof(addr), "%lu", (unsigned long)(uintptr_t)sys);
		execl(self, self, "--receive", sock, addr, (char *)NULL);
		_exit(2);
	}
	close(sv[1]);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	memset(err, 0, sizeof(err));
	tap(sendmsg(sv[0], &msg, 0) == 1 && read(sv[0], err, sizeof(err)) == sizeof(err),
	    "scm_rights: the file is passed to an unrelated process, which reports back");
	waitpid(pid, &status, 0);
	close(sv[0]);
	check_opener("scm_rights", fd, err, sys, dev_buf);
	munmap(sys, SIZE);
	munmap(dev_buf, SIZE);
	close(fd);
}

/*
 * The new program of a process that opened the GPU and exec()ed with the
 * file open: uses it, reports, and holds it until told to exit.
 */
static int inherited(int fd, int sock, uintptr_t addr)
{
	int err[T_N] = { 0 };
	char c;

	foreign_uses(fd, (void *)addr, err);
	if (write(sock, err, sizeof(err)) != sizeof(err) || read(sock, &c, 1) != 1)
		return 2;
	close(fd);
	return 0;
}

static void exec_inherited(const char *self)
{
	long before = rvram_stat(dev, "pages_resident"), mid = -1, after_exec, after_close;
	int sv[2], status = 0, err[T_N], ok, all = 1;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		tap(0, "exec: setup");
		return;
	}
	pid = fork();
	if (pid == 0) {
		/* No O_CLOEXEC: the file stays open across the exec(). */
		int fd = open(dev, O_RDWR);
		unsigned char *buf = fd < 0 ? NULL : vram_buffer(fd, 6);
		char fds[16], sock[16], addr[32];
		long now = rvram_stat(dev, "pages_resident");

		close(sv[0]);
		if (!buf || write(sv[1], &now, sizeof(now)) != sizeof(now))
			_exit(2);
		snprintf(fds, sizeof(fds), "%d", fd);
		snprintf(sock, sizeof(sock), "%d", sv[1]);
		snprintf(addr, sizeof(addr), "%lu", (unsigned long)(uintptr_t)buf);
		execl(self, self, "--inherited", fds, sock, addr, (char *)NULL);
		_exit(2);
	}
	close(sv[1]);
	memset(err, 0, sizeof(err));
	ok = read(sv[0], &mid, sizeof(mid)) == sizeof(mid) &&
	     read(sv[0], err, sizeof(err)) == sizeof(err);
	/* The new program still holds the file here. */
	after_exec = rvram_stat(dev, "pages_resident");
	ok &= write(sv[0], "x", 1) == 1;
	waitpid(pid, &status, 0);
	close(sv[0]);
	after_close = rvram_stat(dev, "pages_resident");
	tap(ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 && mid == before + (long)NPAGES,
	    "exec: a process moves %lu pages into VRAM (pages_resident %ld -> %ld) and execs, the file open",
	    NPAGES, before, mid);
	for (int i = 0; i < T_N; i++) {
		if (err[i] != EBADF)
			printf("# exec: %s got errno %d\n", t_name[i], err[i]);
		all &= err[i] == EBADF;
	}
	tap(ok && all, "exec: every command and mmap() on the file gets EBADF in the new program");
	tap(after_exec == before,
	    "exec: the old address space's VRAM pages were freed at exec, the file still open (pages_resident %ld)",
	    after_exec);
	tap(after_close == before, "exec: none left after the file is closed (%ld)", after_close);
}

/* ------------------------------------------------------------- mmap */

/* The memory cgroup's charge in bytes, or -1. */
static long long memcg_current(const char *memcg)
{
	char path[256];

	if (!memcg)
		return -1;
	snprintf(path, sizeof(path), "%s/memory.current", memcg);
	return read_number(path);
}

static int mmap_errno(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return errno;
	munmap(p, len);
	return 0;
}

static void mmap_bounded(const char *memcg)
{
	int fd = open_dev();
	long long a, b, c;
	unsigned char *p;
	int ok = 1;

	tap(mmap_errno(fd, PAGE) == 0, "mmap: one page (hmm-tests' mixedmap)");
	tap(mmap_errno(fd, MAX_MMAP) == 0, "mmap: 2 MiB");
	tap(mmap_errno(fd, MAX_MMAP + PAGE) == ENOMEM, "mmap: 2 MiB + 4 KiB: ENOMEM");
	a = memcg_current(memcg);
	ok = mmap_errno(fd, 64UL << 20) == ENOMEM;
	tap(ok, "mmap: 64 MiB: ENOMEM");
	/* Only once it is bounded: unbounded, this would take all memory. */
	if (ok)
		tap(mmap_errno(fd, 1UL << 40) == ENOMEM, "mmap: 1 TiB: ENOMEM");
	else
		tap(0, "mmap: 1 TiB: not tried, 64 MiB was mapped");
	b = memcg_current(memcg);
	ok = 1;
	if (a < 0 || b < 0) {
		tap_skip("mmap: refused lengths charge nothing", "no memory cgroup");
		tap_skip("mmap: the pages are charged to the caller's memory cgroup",
			 "no memory cgroup");
		close(fd);
		return;
	}
	printf("# memory.current %lld -> %lld around the refused mmap()s\n", a, b);
	tap(b - a < (256 << 10), "mmap: refused lengths charge nothing (%lld bytes)", b - a);

	p = mmap(NULL, MAX_MMAP, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = memcg_current(memcg);
	if (p != MAP_FAILED) {
		for (size_t i = 0; i < MAX_MMAP; i += PAGE)
			ok &= p[i] == 0;
		munmap(p, MAX_MMAP);
	}
	c = memcg_current(memcg);
	printf("# memory.current %lld -> %lld (mapped 2 MiB) -> %lld (unmapped)\n", a, b, c);
	/* Charges are batched per CPU: up to 64 pages of slack. */
	tap(p != MAP_FAILED && ok && b - a >= (long long)(MAX_MMAP - 64 * PAGE) &&
	    b - c >= (long long)(MAX_MMAP - 64 * PAGE),
	    "mmap: the zeroed pages are charged to the caller's memory cgroup, and uncharged");
	close(fd);
}

static sigjmp_buf probe_env;

static void probe_fault(int sig)
{
	siglongjmp(probe_env, sig);
}

/* The signal a read of P raises, or 0. */
static int touch_signal(volatile unsigned char *p)
{
	struct sigaction sa = { .sa_handler = probe_fault }, old_bus, old_segv;
	int sig;

	sigaction(SIGBUS, &sa, &old_bus);
	sigaction(SIGSEGV, &sa, &old_segv);
	sig = sigsetjmp(probe_env, 1);
	if (!sig)
		(void)*p;
	sigaction(SIGBUS, &old_bus, NULL);
	sigaction(SIGSEGV, &old_segv, NULL);
	return sig;
}

/*
 * Reads LEN bytes at ADDR of process PID through process_vm_readv(),
 * which pins the pages with GUP; -1 and errno on failure.
 */
static ssize_t gup_read(pid_t pid, void *addr, void *dst, size_t len)
{
	struct iovec local = { .iov_base = dst, .iov_len = len };
	struct iovec remote = { .iov_base = addr, .iov_len = len };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

static void mremap_grown(void)
{
	static unsigned char got[MAX_MMAP];
	int fd = open_dev(), status = -1;
	unsigned char *p, *q;
	ssize_t n;
	pid_t pid;

	p = mmap(NULL, MAX_MMAP, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		tap(0, "mremap: map 2 MiB of the device");
		close(fd);
		return;
	}
	fill(p, MAX_MMAP, 7);
	q = mremap(p, MAX_MMAP, 2 * MAX_MMAP, MREMAP_MAYMOVE);
	tap(q != MAP_FAILED, "mremap: the 2 MiB mapping grows to 4 MiB (%s)",
	    q == MAP_FAILED ? strerror(errno) : "moved or in place");
	if (q == MAP_FAILED) {
		munmap(p, MAX_MMAP);
		close(fd);
		return;
	}
	tap(mismatches(q, MAX_MMAP, 7) == 0, "mremap: the first 2 MiB keep their data");
	tap(touch_signal(q + MAX_MMAP) == SIGBUS,
	    "mremap: a read past the 2 MiB the device mapped: SIGBUS, no page allocated");
	tap(touch_signal(q + 2 * MAX_MMAP - PAGE) == SIGBUS, "mremap: ... at its last page too");
	n = gup_read(getpid(), q, got, MAX_MMAP);
	tap(n == (ssize_t)MAX_MMAP && mismatches(got, MAX_MMAP, 7) == 0,
	    "mremap: GUP (process_vm_readv) of the first 2 MiB reads the data");
	n = gup_read(getpid(), q + MAX_MMAP, got, PAGE);
	tap(n == -1 && errno == EFAULT, "mremap: GUP past the bound: EFAULT (%zd, %s)", n,
	    n < 0 ? strerror(errno) : "read");
	pid = fork();
	if (pid == 0) {
		/* The child's copy of the mapping: the same pages, and the same bound. */
		int ok = mismatches(q, MAX_MMAP, 7) == 0 && touch_signal(q + MAX_MMAP) == SIGBUS &&
			 gup_read(getpid(), q, got, PAGE) == (ssize_t)PAGE;

		q[0] ^= 0xff;	/* MAP_SHARED: the parent sees it */
		_exit(ok ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	tap(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "mremap: a forked child reads the data, and gets SIGBUS past the bound");
	tap(q[0] == (pattern(0, 7) ^ 0xff), "mremap: the child's write reached the shared pages");
	tap(munmap(q, 2 * MAX_MMAP) == 0, "mremap: munmap() of the grown mapping");
	close(fd);
}

/* ---------------------------------------------------------- logging */

/* Kernel log records since KMSG was positioned: all, and those about rvram. */
static void kmsg_count(int kmsg, long *all, long *ours)
{
	char rec[2048];
	ssize_t n;

	*all = *ours = 0;
	for (;;) {
		n = read(kmsg, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE) {	/* overwritten: a flood */
			*all += 1000;
			*ours += 1000;
			continue;
		}
		if (n <= 0)
			break;
		rec[n] = 0;
		(*all)++;
		if (strstr(rec, "rvram") || strstr(rec, "DMIRROR") || strstr(rec, "DMABUF")) {
			if (*ours < 3)
				printf("# logged: %s", strchr(rec, ';') ? strchr(rec, ';') + 1 : rec);
			(*ours)++;
		}
	}
}

static void no_log_flood(void)
{
	int fd = open_dev(), kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	long vram = rvram_stat(dev, "pages_total") * (long)PAGE, all, ours;
	unsigned char *hold;
	int e_flags = 1, e_bo = 1, e_full = 1;

	if (kmsg < 0 || lseek(kmsg, 0, SEEK_END) < 0) {
		tap_skip("log: refused requests do not flood the kernel log", "no /dev/kmsg");
		close(fd);
		return;
	}
	/* One page in VRAM: no run of free VRAM as long as VRAM is left. */
	hold = vram_buffer(fd, 5);
	for (int i = 0; i < REPEAT; i++) {
		uint64_t bad = i & 1 ? 1ULL << 20 : RVRAM_FLAG_ALIAS_DMA | RVRAM_FLAG_ALIAS_CPU;
		struct rvram_alloc_dmabuf bo = {
			.size = i % 3 == 0 ? 0 : i % 3 == 1 ? PAGE + 1 : PAGE,
			.flags = i % 3 == 2,
		};
		struct rvram_alloc_dmabuf full = { .size = vram };

		e_flags &= dmirror(fd, HMM_DMIRROR_FLAGS, NULL, NULL, bad) == -EINVAL;
		e_bo &= ioctl(fd, RVRAM_IOCTL_ALLOC_DMABUF, &bo) && errno == EINVAL;
		e_full &= hold && ioctl(fd, RVRAM_IOCTL_ALLOC_DMABUF, &full) && errno == ENOMEM;
	}
	kmsg_count(kmsg, &all, &ours);
	tap(e_flags, "log: %d bad FLAGS get EINVAL", REPEAT);
	tap(e_bo, "log: %d bad ALLOC_DMABUF requests get EINVAL", REPEAT);
	tap(e_full, "log: %d ALLOC_DMABUF of more VRAM than is free get ENOMEM", REPEAT);
	printf("# %ld kernel log lines during the requests, %ld about rvram\n", all, ours);
	tap(ours <= 3, "log: %d refused requests logged at most 3 lines (%ld)", 3 * REPEAT, ours);
	if (hold) {
		dmirror(fd, HMM_DMIRROR_RELEASE, hold, NULL, 1);
		munmap(hold, SIZE);
	}
	close(kmsg);
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--receive"))
		return receiver(atoi(argv[2]), strtoul(argv[3], NULL, 10));
	if (argc == 5 && !strcmp(argv[1], "--inherited"))
		return inherited(atoi(argv[2]), atoi(argv[3]), strtoul(argv[4], NULL, 10));
	if (argc < 2) {
		fprintf(stderr, "usage: rvram-abuse /dev/rvramN [MEMCG_DIR]\n");
		return 2;
	}
	dev = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	release_is_scoped();
	forked_child();
	passed_fd("/proc/self/exe");
	exec_inherited("/proc/self/exe");
	mmap_bounded(argc > 2 ? argv[2] : NULL);
	mremap_grown();
	no_log_flood();
	tap(rvram_stat(dev, "pages_resident") == 0, "no page left in VRAM (%ld)",
	    rvram_stat(dev, "pages_resident"));
	return tap_end();
}
