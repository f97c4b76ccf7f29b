// SPDX-License-Identifier: GPL-2.0
/*
 * The dma-buf file descriptor of a VRAM buffer object, as an attacker holds
 * it: whoever receives one (it is made to be passed between processes) may
 * map it in every way mmap(), mprotect(), mremap(), madvise() and fork()
 * allow, register the mapping with userfaultfd, hand it to system calls
 * that pin user pages (GUP), issue its ioctls with hostile arguments and
 * do all of that while the GPU is unbound under it; use the fd as a file
 * (read, write, lseek, poll, splice, sendfile); export as many as its file
 * descriptors allow (charged to its memory cgroup), or one of all of VRAM;
 * and keep it, alone, after every file of the GPU is closed, across rmmod
 * and unbind.
 *
 *   rvram-dmabuf-abuse OWNER OWNER_PCI [SEED]
 *
 * OWNER is the rvram index of a device-private GPU, OWNER_PCI its PCI
 * address (it is unbound and bound again). Every case asserts an exact
 * errno, signal or data outcome; the kernel log must stay free of reports
 * (tools/report/src/report.rs reads it). The racing part's choices are a
 * function of SEED (printed; random when not given).
 *
 * Prints TAP.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "dmirror.h"
#include "rvram-bo.h"

#define BO_PAGES 8UL
#define BO_SIZE (BO_PAGES * PAGE)

static int owner, gpu = -1;
static char gpu_name[16];
static const char *owner_pci;
static uint64_t seed;

static int open_gpu(void)
{
	char path[32];

	snprintf(path, sizeof(path), "/dev/rvram%d", owner);
	gpu = open(path, O_RDWR);
	return gpu;
}

/* A dma-buf of size bytes of VRAM, or -errno. */
static int alloc_bo(uint64_t size)
{
	return rvram_alloc_bo(gpu, size, 0);
}

/* mmap() of the dma-buf: the address, or NULL with errno set. */
static unsigned char *map(int fd, size_t len, int prot, int flags, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);

	return p == MAP_FAILED ? NULL : p;
}

/* mmap()'s errno for a mapping expected to fail, 0 if it succeeded. */
static int map_errno(int fd, size_t len, int prot, int flags, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);

	if (p != MAP_FAILED) {
		munmap(p, len);
		return 0;
	}
	return errno;
}

/*
 * Accesses to a mapping that may fault: the signal they raise (SIGSEGV,
 * SIGBUS) or 0. Per thread, so that the racing threads may use them.
 */
static __thread sigjmp_buf jump;
static __thread volatile int in_probe;

static void on_signal(int sig)
{
	if (in_probe)
		siglongjmp(jump, sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_NODEFER };

	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
}

static int load(volatile unsigned char *p, unsigned char *val)
{
	int sig = sigsetjmp(jump, 1);

	if (!sig) {
		in_probe = 1;
		*val = *p;
	}
	in_probe = 0;
	return sig;
}

static int store(volatile unsigned char *p, unsigned char val)
{
	int sig = sigsetjmp(jump, 1);

	if (!sig) {
		in_probe = 1;
		*p = val;
	}
	in_probe = 0;
	return sig;
}

/* The byte each page of a buffer holds in these tests. */
static unsigned char pat(size_t page, unsigned int gen)
{
	return (unsigned char)(0x11 * (page + 1) + 0x35 * gen);
}

/* Writes the pattern of gen to the first byte of every page: 0 or a signal. */
static int stamp(unsigned char *m, size_t pages, unsigned int gen)
{
	int sig = 0;

	for (size_t i = 0; i < pages && !sig; i++)
		sig = store(m + i * PAGE, pat(i, gen));
	return sig;
}

/* Pages of m whose first byte differs from gen's pattern (or faults). */
static size_t unstamped(unsigned char *m, size_t pages, unsigned int gen)
{
	size_t bad = 0;
	unsigned char v;

	for (size_t i = 0; i < pages; i++)
		bad += load(m + i * PAGE, &v) || v != pat(i, gen);
	return bad;
}

static long long stat_of(const char *key)
{
	return rvram_stat(gpu_name, key);
}

/* ----------------------------------------------------------- mmap flags */

static const struct {
	int prot;
	const char *name;
} prots[] = {
	{ PROT_NONE, "PROT_NONE" },
	{ PROT_READ, "PROT_READ" },
	{ PROT_WRITE, "PROT_WRITE" },
	{ PROT_READ | PROT_WRITE, "PROT_READ|PROT_WRITE" },
	{ PROT_READ | PROT_EXEC, "PROT_READ|PROT_EXEC" },
};

/*
 * MAP_PRIVATE of a buffer is refused whatever the protection: a private
 * writable mapping of PFNs without struct page would be copied on write,
 * which the kernel cannot do (it BUGs). MAP_SHARED maps the VRAM as it is.
 */
static void mmap_flags(int fd)
{
	unsigned char *m, v;

	/* The read-only cases below read what this wrote. */
	m = map(fd, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	tap(m && stamp(m, BO_PAGES, 0) == 0, "mmap: MAP_SHARED read-write fills the buffer");
	if (m)
		munmap(m, BO_SIZE);
	for (size_t i = 0; i < sizeof(prots) / sizeof(prots[0]); i++) {
		int prot = prots[i].prot, e, want;

		m = map(fd, BO_SIZE, prot, MAP_PRIVATE, 0);
		e = m ? 0 : errno;
		/* The dma-buf file system is mounted noexec: EPERM comes first. */
		want = prot & PROT_EXEC ? EPERM : EINVAL;
		tap(e == want, "mmap: MAP_PRIVATE %s gets %s (got %d)", prots[i].name,
		    strerror(want), e);
		if (m) {
			/* What an attacker does next (a kernel BUG before the fix). */
			if (prot & PROT_WRITE)
				store(m, 1);
			else if (prot & PROT_READ)
				load(m, &v);
			munmap(m, BO_SIZE);
		}
		if (prot & PROT_EXEC) {
			e = map_errno(fd, BO_SIZE, prot, MAP_SHARED, 0);
			tap(e == EPERM, "mmap: MAP_SHARED %s gets EPERM (got %d)",
			    prots[i].name, e);
			continue;
		}
		m = map(fd, BO_SIZE, prot, MAP_SHARED, 0);
		if (!m) {
			tap(0, "mmap: MAP_SHARED %s maps (errno %d)", prots[i].name, errno);
			continue;
		}
		if (prot == PROT_NONE)
			tap(load(m, &v) == SIGSEGV && store(m, 1) == SIGSEGV,
			    "mmap: MAP_SHARED PROT_NONE: loads and stores get SIGSEGV");
		else if (prot == PROT_READ)
			tap(unstamped(m, BO_PAGES, 0) == 0 && store(m, 1) == SIGSEGV,
			    "mmap: MAP_SHARED PROT_READ reads the buffer, a store gets SIGSEGV");
		else
			tap(stamp(m, BO_PAGES, 0) == 0 && unstamped(m, BO_PAGES, 0) == 0,
			    "mmap: MAP_SHARED %s writes and reads every page", prots[i].name);
		munmap(m, BO_SIZE);
	}
	/*
	 * MAP_SHARED_VALIDATE with flags no file supports, and a shared
	 * mapping over a copy of the fd: the same buffer.
	 */
	{
		int dup_fd = dup(fd), e;

		e = map_errno(fd, BO_SIZE, PROT_READ, MAP_SHARED_VALIDATE | MAP_SYNC, 0);
		tap(e == EOPNOTSUPP, "mmap: MAP_SHARED_VALIDATE|MAP_SYNC gets EOPNOTSUPP (got %d)",
		    e);
		char path[64];
		int ro;

		/* Reopening the file read-only (to map it shared without
		 * VM_SHARED) is not possible: anonymous inodes do not open. */
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ro = open(path, O_RDONLY);
		e = ro < 0 ? errno : 0;
		tap(e == ENXIO, "mmap: reopening the dma-buf read-only gets ENXIO (got %d)", e);
		if (ro >= 0)
			close(ro);
		m = map(dup_fd, BO_SIZE, PROT_READ, MAP_SHARED, 0);
		tap(m && unstamped(m, BO_PAGES, 0) == 0,
		    "mmap: a dup()ed fd maps the same VRAM");
		if (m)
			munmap(m, BO_SIZE);
		close(dup_fd);
	}
}

/* ----------------------------------------------------- ranges and offsets */

static void mmap_ranges(int fd)
{
	unsigned char *m;
	int e;

	e = map_errno(fd, BO_SIZE + PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	tap(e == EINVAL, "range: a length one page past the end gets EINVAL (got %d)", e);
	e = map_errno(fd, PAGE, PROT_READ, MAP_SHARED, BO_SIZE);
	tap(e == EINVAL, "range: an offset at the end gets EINVAL (got %d)", e);
	e = map_errno(fd, 2 * PAGE, PROT_READ, MAP_SHARED, BO_SIZE - PAGE);
	tap(e == EINVAL, "range: the last page plus one past the end gets EINVAL (got %d)", e);
	e = map_errno(fd, PAGE, PROT_READ, MAP_SHARED, (off_t)1 << 52);
	tap(e == EINVAL, "range: an offset of 2^52 gets EINVAL (got %d)", e);
	e = map_errno(fd, PAGE, PROT_READ, MAP_SHARED, -(off_t)PAGE);
	tap(e == EINVAL || e == EOVERFLOW,
	    "range: a negative offset gets EINVAL or EOVERFLOW (got %d)", e);
	e = map_errno(fd, PAGE, PROT_READ, MAP_SHARED, 1);
	tap(e == EINVAL, "range: an unaligned offset gets EINVAL (got %d)", e);
	e = map_errno(fd, 0, PROT_READ, MAP_SHARED, 0);
	tap(e == EINVAL, "range: length 0 gets EINVAL (got %d)", e);
	m = map(fd, PAGE, PROT_READ, MAP_SHARED, BO_SIZE - PAGE);
	tap(m && m[0] == pat(BO_PAGES - 1, 0),
	    "range: the last page alone maps at its offset and reads its data");
	if (m)
		munmap(m, PAGE);
	m = map(fd, 3 * PAGE, PROT_READ, MAP_SHARED, 2 * PAGE);
	tap(m && m[0] == pat(2, 0) && m[2 * PAGE] == pat(4, 0),
	    "range: three pages from page 2 map pages 2-4");
	if (m)
		munmap(m, 3 * PAGE);
}

/* ------------------------------------- mprotect, mremap, munmap, madvise */

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

/*
 * What madvise() answers for a shared VM_IO | VM_PFNMAP mapping (7.3's
 * mm/madvise.c), -1 where any answer will do.
 */
static const struct {
	int advice, err;
	const char *name;
} advice[] = {
	{ MADV_DONTNEED, EINVAL, "MADV_DONTNEED" },
	{ MADV_FREE, EINVAL, "MADV_FREE" },
	{ MADV_PAGEOUT, EINVAL, "MADV_PAGEOUT" },
	{ MADV_COLD, EINVAL, "MADV_COLD" },
	{ MADV_WIPEONFORK, EINVAL, "MADV_WIPEONFORK" },
	{ MADV_GUARD_INSTALL, EINVAL, "MADV_GUARD_INSTALL" },
	{ MADV_POPULATE_READ, EINVAL, "MADV_POPULATE_READ" },
	{ MADV_POPULATE_WRITE, EINVAL, "MADV_POPULATE_WRITE" },
	{ MADV_MERGEABLE, EINVAL, "MADV_MERGEABLE" },
	/* Advice only (the file system's answer): the data must stay. */
	{ MADV_REMOVE, -1, "MADV_REMOVE" },
	{ MADV_WILLNEED, -1, "MADV_WILLNEED" },
	{ MADV_HUGEPAGE, -1, "MADV_HUGEPAGE" },
};

static void vma_ops(int fd)
{
	unsigned char *m, *n, *hole, v;
	int e;

	m = map(fd, BO_SIZE, PROT_READ, MAP_SHARED, 0);
	if (!m) {
		tap(0, "vma: map (errno %d)", errno);
		return;
	}
	tap(mprotect(m, BO_SIZE, PROT_READ | PROT_WRITE) == 0 && stamp(m, BO_PAGES, 1) == 0,
	    "vma: mprotect() up to PROT_WRITE (the fd is read-write) and write");
	e = mprotect(m, BO_SIZE, PROT_READ | PROT_EXEC) ? errno : 0;
	tap(e == EACCES, "vma: mprotect() to PROT_EXEC gets EACCES (noexec, got %d)", e);
	/* Growing a VM_DONTEXPAND mapping fails; moving it keeps the data. */
	n = mremap(m, BO_SIZE, 2 * BO_SIZE, MREMAP_MAYMOVE);
	e = n == MAP_FAILED ? errno : 0;
	tap(e == EFAULT, "vma: mremap() growing the mapping gets EFAULT (got %d)", e);
	if (n != MAP_FAILED)
		m = n;
	hole = mmap(NULL, BO_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	n = mremap(m, BO_SIZE, BO_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
	tap(n == hole && unstamped(n, BO_PAGES, 1) == 0,
	    "vma: mremap() moving the mapping keeps every page");
	if (n == hole)
		m = n;
	n = mremap(m, BO_SIZE, BO_SIZE / 2, 0);
	tap(n == m && unstamped(m, BO_PAGES / 2, 1) == 0 &&
	    load(m + BO_SIZE / 2, &v) == SIGSEGV,
	    "vma: mremap() shrinking it keeps the front, the rest is gone");
	munmap(m, BO_SIZE / 2);

	m = map(fd, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	if (!m) {
		tap(0, "vma: map (errno %d)", errno);
		return;
	}
	tap(munmap(m + 2 * PAGE, PAGE) == 0 && load(m + 2 * PAGE, &v) == SIGSEGV &&
	    unstamped(m, 2, 1) == 0 && m[3 * PAGE] == pat(3, 1),
	    "vma: a partial munmap() leaves the pages around the hole");
	/* madvise() and friends on a VM_PFNMAP mapping: refused, data intact. */
	for (size_t i = 0; i < sizeof(advice) / sizeof(advice[0]); i++) {
		e = madvise(m, 2 * PAGE, advice[i].advice) ? errno : 0;
		tap((advice[i].err < 0 || e == advice[i].err) && unstamped(m, 2, 1) == 0,
		    "vma: %s gets %s, the pages are intact (got %d)", advice[i].name,
		    advice[i].err < 0 ? "its answer" : advice[i].err ? strerror(advice[i].err) : "0",
		    e);
	}
	/* mlock() leaves VM_IO | VM_PFNMAP mappings alone (not populated). */
	e = mlock(m, 2 * PAGE) ? errno : 0;
	tap(e == 0 && unstamped(m, 2, 1) == 0, "vma: mlock() succeeds, the pages are intact (got %d)",
	    e);
	munlock(m, 2 * PAGE);
	/* A dma-buf file has no fsync: MS_SYNC of a shared mapping fails. */
	e = msync(m, 2 * PAGE, MS_SYNC) ? errno : 0;
	tap(e == EINVAL && unstamped(m, 2, 1) == 0, "vma: msync(MS_SYNC) gets EINVAL (got %d)", e);
	e = msync(m, 2 * PAGE, MS_ASYNC | MS_INVALIDATE) ? errno : 0;
	tap(e == 0 && unstamped(m, 2, 1) == 0, "vma: msync(MS_ASYNC|MS_INVALIDATE) succeeds (got %d)",
	    e);
	munmap(m, 2 * PAGE);
	munmap(m + 3 * PAGE, BO_SIZE - 3 * PAGE);
}

/* ----------------------------------------------------------- userfaultfd */

/* Since Linux 6.7; the build host's headers may be older. */
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

/* A userfaultfd with FEATURES, or -errno. */
static int uffd_open(uint64_t features)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int u = syscall(__NR_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);

	if (u < 0)
		return -errno;
	if (ioctl(u, UFFDIO_API, &api)) {
		int e = errno;

		close(u);
		return -e;
	}
	return u;
}

/*
 * userfaultfd on the mapping: the pages are the BAR's, inserted by the
 * exporter's fault handler, and no fault of them may be handed to user
 * space to resolve. Every registration mode is refused (VM_PFNMAP is
 * VM_SPECIAL), asynchronous write protection included, which core mm
 * otherwise allows on any memory.
 */
static void uffd(int fd)
{
	static const struct {
		const char *name;
		uint64_t features, mode;
	} modes[] = {
		{ "MISSING", 0, UFFDIO_REGISTER_MODE_MISSING },
		{ "WP", 0, UFFDIO_REGISTER_MODE_WP },
		{ "MINOR", 0, UFFDIO_REGISTER_MODE_MINOR },
		{ "WP with UFFD_FEATURE_WP_ASYNC", UFFD_FEATURE_WP_ASYNC, UFFDIO_REGISTER_MODE_WP },
	};
	unsigned char *m = map(fd, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);

	if (!m) {
		tap(0, "uffd: map (errno %d)", errno);
		return;
	}
	stamp(m, BO_PAGES, 11);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct uffdio_register reg = {
			.range = { .start = (uintptr_t)m, .len = BO_SIZE },
			.mode = modes[i].mode,
		};
		int u = uffd_open(modes[i].features), e;

		if (u < 0) {
			tap(0, "uffd: userfaultfd() for %s (got %d)", modes[i].name, u);
			continue;
		}
		e = ioctl(u, UFFDIO_REGISTER, &reg) ? errno : 0;
		tap(e == EINVAL && unstamped(m, BO_PAGES, 11) == 0,
		    "uffd: registering the mapping for %s gets EINVAL, the pages are intact (got %d)",
		    modes[i].name, e);
		close(u);
	}
	munmap(m, BO_SIZE);
}

/* ------------------------------------------------------------------ fork */

static void forks(int fd)
{
	unsigned char *m, *dont;
	int status = -1;
	pid_t pid;

	m = map(fd, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	dont = map(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	if (!m || !dont) {
		tap(0, "fork: map (errno %d)", errno);
		return;
	}
	tap(madvise(dont, PAGE, MADV_DONTFORK) == 0, "fork: MADV_DONTFORK on a second mapping");
	stamp(m, BO_PAGES, 2);
	pid = fork();
	if (pid == 0) {
		unsigned char v;
		int bad = unstamped(m, BO_PAGES, 2) != 0;

		/* The child writes the odd pages, the parent the even ones. */
		for (size_t i = 1; i < BO_PAGES; i += 2)
			bad |= store(m + i * PAGE, pat(i, 3)) != 0;
		bad |= load(dont, &v) != SIGSEGV;
		_exit(bad);
	}
	/* The child checked the pages before the parent writes its half. */
	waitpid(pid, &status, 0);
	for (size_t i = 0; i < BO_PAGES; i += 2)
		m[i * PAGE] = pat(i, 3);
	tap(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "fork: the child sees the parent's data, writes its pages, has no DONTFORK mapping");
	tap(unstamped(m, BO_PAGES, 3) == 0,
	    "fork: parent and child share the buffer: both halves of the writes are here");
	munmap(dont, PAGE);
	munmap(m, BO_SIZE);
}

/* ------------------------------------------------------------------- GUP */

/*
 * O_DIRECT I/O pins the user buffer with GUP for the device's DMA, which
 * refuses VM_IO | VM_PFNMAP mappings: a read into the mapping and a write
 * from it fail with EFAULT before any I/O. tools/vm.sh attaches a small
 * NVMe disk for this (a block device: tmpfs and 9p copy O_DIRECT reads
 * through the CPU instead). The same reads into plain memory show that
 * O_DIRECT works on the disk.
 */
#define DIRECT_DISK "/dev/nvme0n1"

static void direct_io(unsigned char *m)
{
	unsigned char *plain;
	ssize_t n;
	int disk, e;

	disk = open(DIRECT_DISK, O_RDWR | O_DIRECT);
	if (disk < 0) {
		tap(0, "gup: open " DIRECT_DISK " with O_DIRECT (errno %d; tools/vm.sh attaches it)",
		    errno);
		return;
	}
	plain = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (plain == MAP_FAILED) {
		tap(0, "gup: map a plain page (errno %d)", errno);
		close(disk);
		return;
	}
	memset(plain, 0xa5, PAGE);
	n = pwrite(disk, plain, PAGE, PAGE);
	e = n < 0 ? errno : 0;
	tap(n == PAGE, "gup: O_DIRECT write from plain memory (got %zd, %d)", n, e);
	memset(plain, 0, PAGE);
	n = pread(disk, plain, PAGE, PAGE);
	e = n < 0 ? errno : 0;
	tap(n == PAGE && plain[0] == 0xa5 && plain[PAGE - 1] == 0xa5,
	    "gup: O_DIRECT read into plain memory reads the disk (got %zd, %d)", n, e);
	n = pread(disk, m, PAGE, PAGE);
	e = n < 0 ? errno : 0;
	tap(n < 0 && e == EFAULT, "gup: O_DIRECT read into the mapping gets EFAULT (got %zd, %d)",
	    n, e);
	n = pwrite(disk, m + PAGE, PAGE, 0);
	e = n < 0 ? errno : 0;
	tap(n < 0 && e == EFAULT,
	    "gup: O_DIRECT write from the mapping gets EFAULT (got %zd, %d)", n, e);
	/* Nothing was written from the mapping: block 0 still reads back zeroes. */
	n = pread(disk, plain, PAGE, 0);
	tap(n == PAGE && plain[0] == 0 && plain[PAGE - 1] == 0,
	    "gup: the refused write left the disk alone (got %zd)", n);
	munmap(plain, PAGE);
	close(disk);
}

static void gup(int fd)
{
	unsigned char *m, buf[64];
	char path[64];
	ssize_t n;
	int mem, e, pipefd[2];

	m = map(fd, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	if (!m) {
		tap(0, "gup: map (errno %d)", errno);
		return;
	}
	stamp(m, BO_PAGES, 4);
	/*
	 * process_vm_readv()/writev() pin the other side's pages with GUP,
	 * which refuses VM_IO | VM_PFNMAP mappings. The same call on plain
	 * memory shows that the syscall is there (CROSS_MEMORY_ATTACH).
	 */
	{
		unsigned char plain[64] = { 0x5a };
		struct iovec local = { buf, sizeof(buf) }, remote = { plain, sizeof(plain) };

		n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
		e = n < 0 ? errno : 0;
		tap(n == (ssize_t)sizeof(buf) && buf[0] == 0x5a,
		    "gup: process_vm_readv() of plain memory copies (got %zd, %d)", n, e);
		remote.iov_base = m;
		n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
		e = n < 0 ? errno : 0;
		tap(n < 0 && e == EFAULT,
		    "gup: process_vm_readv() of the mapping gets EFAULT (got %zd, %d)", n, e);
		n = process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
		e = n < 0 ? errno : 0;
		tap(n < 0 && e == EFAULT,
		    "gup: process_vm_writev() into the mapping gets EFAULT (got %zd, %d)", n, e);
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", getpid());
	mem = open(path, O_RDWR);
	n = pread(mem, buf, sizeof(buf), (off_t)(uintptr_t)m);
	e = n < 0 ? errno : 0;
	tap(n < 0 && e == EIO, "gup: /proc/self/mem read of the mapping gets EIO (got %zd, %d)", n, e);
	n = pwrite(mem, buf, sizeof(buf), (off_t)(uintptr_t)m);
	e = n < 0 ? errno : 0;
	tap(n < 0 && e == EIO, "gup: /proc/self/mem write of the mapping gets EIO (got %zd, %d)", n,
	    e);
	close(mem);
	/* vmsplice() takes references on the user pages: GUP of the mapping. */
	if (pipe(pipefd) == 0) {
		struct iovec iov = { m, PAGE };

		n = vmsplice(pipefd[1], &iov, 1, 0);
		e = n < 0 ? errno : 0;
		tap(n < 0 && e == EFAULT, "gup: vmsplice() of the mapping gets EFAULT (got %zd, %d)",
		    n, e);
		close(pipefd[0]);
		close(pipefd[1]);
	}
	direct_io(m);
	tap(unstamped(m, BO_PAGES, 4) == 0, "gup: the buffer is intact afterwards");
	munmap(m, BO_SIZE);
}

/* --------------------------------------------------------------- ioctls */

static void dmabuf_ioctls(int fd)
{
	struct dma_buf_sync sync = { DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW };
	static const char long_name[] = "a-name-that-is-longer-than-DMA_BUF_NAME_LEN-bytes";
	int e;

	tap(ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) == 0, "ioctl: SYNC START|RW succeeds");
	sync.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW;
	tap(ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) == 0, "ioctl: SYNC END|RW succeeds");
	sync.flags = ~0ULL;
	e = ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) ? errno : 0;
	tap(e == EINVAL, "ioctl: SYNC with unknown flags gets EINVAL (got %d)", e);
	sync.flags = DMA_BUF_SYNC_START;
	e = ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) ? errno : 0;
	tap(e == EINVAL, "ioctl: SYNC with no direction gets EINVAL (got %d)", e);
	e = ioctl(fd, DMA_BUF_IOCTL_SYNC, (void *)8) ? errno : 0;
	tap(e == EFAULT, "ioctl: SYNC with a bad pointer gets EFAULT (got %d)", e);
	tap(ioctl(fd, DMA_BUF_SET_NAME_B, "rvram-abuse") == 0, "ioctl: SET_NAME succeeds");
	e = ioctl(fd, DMA_BUF_SET_NAME_B, long_name) ? errno : 0;
	tap(e == EINVAL, "ioctl: SET_NAME longer than DMA_BUF_NAME_LEN gets EINVAL (got %d)", e);
	e = ioctl(fd, DMA_BUF_SET_NAME_B, (void *)8) ? errno : 0;
	tap(e == EFAULT, "ioctl: SET_NAME with a bad pointer gets EFAULT (got %d)", e);
	e = ioctl(fd, _IOWR('b', 0x7f, uint64_t), &sync) ? errno : 0;
	tap(e == ENOTTY, "ioctl: an unknown dma-buf ioctl gets ENOTTY (got %d)", e);
	e = ioctl(gpu, _IOWR('R', 0x7f, struct rvram_alloc_dmabuf), &sync) ? errno : 0;
	tap(e == EINVAL || e == ENOTTY,
	    "ioctl: an unknown rvram ioctl gets EINVAL or ENOTTY (got %d)", e);
}

/* --------------------------------------------------------- file ops */

/*
 * The fd as a file: the dma-buf core's answers (it has no read, write or
 * splice; lseek finds the size only), and no change to the buffer.
 */
static void file_ops(int fd)
{
	unsigned char buf[64] = { 0 }, *m;
	struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLOUT };
	int pipefd[2], e, devnull;
	ssize_t n;
	off_t o;

	m = map(fd, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	if (!m) {
		tap(0, "file: map (errno %d)", errno);
		return;
	}
	stamp(m, BO_PAGES, 7);
	n = read(fd, buf, sizeof(buf));
	e = n < 0 ? errno : 0;
	tap(n < 0 && e == EINVAL, "file: read() gets EINVAL (got %zd, %d)", n, e);
	n = write(fd, buf, sizeof(buf));
	e = n < 0 ? errno : 0;
	tap(n < 0 && e == EINVAL, "file: write() gets EINVAL (got %zd, %d)", n, e);
	o = lseek(fd, 0, SEEK_END);
	tap(o == (off_t)BO_SIZE, "file: lseek(0, SEEK_END) is the buffer's size (%lld)",
	    (long long)o);
	o = lseek(fd, 0, SEEK_SET);
	tap(o == 0, "file: lseek(0, SEEK_SET) is 0 (%lld)", (long long)o);
	o = lseek(fd, PAGE, SEEK_SET);
	e = o < 0 ? errno : 0;
	tap(o < 0 && e == EINVAL, "file: lseek(4096, SEEK_SET) gets EINVAL (got %lld, %d)",
	    (long long)o, e);
	o = lseek(fd, 0, SEEK_CUR);
	e = o < 0 ? errno : 0;
	tap(o < 0 && e == EINVAL, "file: lseek(0, SEEK_CUR) gets EINVAL (got %lld, %d)",
	    (long long)o, e);
	/* No fence is attached: readable and writable at once. */
	n = poll(&pfd, 1, 0);
	tap(n == 1 && (pfd.revents & (POLLIN | POLLOUT)) == (POLLIN | POLLOUT),
	    "file: poll() without fences: POLLIN | POLLOUT at once (%zd, %#x)", n, pfd.revents);
	if (pipe(pipefd) == 0) {
		n = splice(fd, NULL, pipefd[1], NULL, PAGE, SPLICE_F_NONBLOCK);
		e = n < 0 ? errno : 0;
		tap(n < 0 && e == EINVAL, "file: splice() from it gets EINVAL (got %zd, %d)", n, e);
		tap(write(pipefd[1], buf, sizeof(buf)) == sizeof(buf), "file: a pipe with 64 bytes");
		n = splice(pipefd[0], NULL, fd, NULL, sizeof(buf), SPLICE_F_NONBLOCK);
		e = n < 0 ? errno : 0;
		tap(n < 0 && e == EINVAL, "file: splice() into it gets EINVAL (got %zd, %d)", n, e);
		close(pipefd[0]);
		close(pipefd[1]);
	} else {
		tap(0, "file: pipe()");
	}
	devnull = open("/dev/null", O_WRONLY);
	n = sendfile(devnull, fd, NULL, PAGE);
	e = n < 0 ? errno : 0;
	tap(n < 0 && e == EINVAL, "file: sendfile() from it gets EINVAL (got %zd, %d)", n, e);
	close(devnull);
	tap(unstamped(m, BO_PAGES, 7) == 0, "file: the buffer is intact afterwards");
	munmap(m, BO_SIZE);
}

/* ---------------------------------------------------- ALLOC_DMABUF args */

static void alloc_args(void)
{
	struct rvram_alloc_dmabuf a;
	long long exported = stat_of("dmabufs_exported");
	static const uint64_t sizes[] = { 0, 1, PAGE - 1, PAGE + 1, ~0ULL, ~0ULL - PAGE + 1,
					  1ULL << 63, (1ULL << 52) };
	int e, fd;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fd = alloc_bo(sizes[i]);
		tap(fd == -EINVAL, "alloc: size %#llx gets EINVAL (got %d)",
		    (unsigned long long)sizes[i], fd);
		if (fd >= 0)
			close(fd);
	}
	for (uint32_t bit = 0; bit < 32; bit += 7) {
		a = (struct rvram_alloc_dmabuf){ .size = PAGE, .flags = 1U << bit, .fd = -1 };
		e = ioctl(gpu, RVRAM_IOCTL_ALLOC_DMABUF, &a) ? errno : 0;
		tap(e == EINVAL && a.fd == -1, "alloc: flags bit %u gets EINVAL (got %d)", bit, e);
		if (!e)
			close(a.fd);
	}
	e = ioctl(gpu, RVRAM_IOCTL_ALLOC_DMABUF, (void *)8) ? errno : 0;
	tap(e == EFAULT, "alloc: a bad pointer gets EFAULT (got %d)", e);
	/* The argument is written back: a read-only page faults after the
	 * export, and nothing may leak. */
	{
		struct rvram_alloc_dmabuf *ro = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
						     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ro->size = PAGE;
		mprotect(ro, PAGE, PROT_READ);
		e = ioctl(gpu, RVRAM_IOCTL_ALLOC_DMABUF, ro) ? errno : 0;
		tap(e == EFAULT, "alloc: a read-only argument gets EFAULT (got %d)", e);
		munmap(ro, PAGE);
	}
	tap(stat_of("dmabuf_pages") == 0 && stat_of("dmabufs_released") == stat_of("dmabufs_exported"),
	    "alloc: no hostile argument left VRAM reserved (%lld exported before, %lld now)",
	    exported, stat_of("dmabufs_exported"));
}

/* ------------------------------------------------ many buffers, and memcg */

/*
 * Active objects of the kmalloc caches that are not charged to a memory
 * cgroup (kmalloc-<size>), or of those that are (kmalloc-cg-<size>).
 */
static long long kmalloc_objs(int charged)
{
	char line[512], name[64];
	long long active, sum = 0;
	FILE *f = fopen("/proc/slabinfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %lld", name, &active) != 2 || strncmp(name, "kmalloc-", 8))
			continue;
		if (charged ? strncmp(name + 8, "cg-", 3) == 0 : isdigit((unsigned char)name[8]))
			sum += active;
	}
	fclose(f);
	return sum;
}

/*
 * Each exported buffer is an object of the exporter's as well as a dma-buf:
 * what the exporter allocates for it must be charged to the exporting
 * process' memory cgroup, not left to the kernel (any user who can open
 * the GPU exports as many buffers as its file descriptors allow), and
 * must not be bounded per GPU for all users together (a vector of every
 * buffer, kmalloc()ed, would be: half a million buffers, and nobody could
 * export). Export MANY one-page buffers and count kmalloc objects: the
 * uncharged ones may grow by the dma-buf core's one per buffer (struct
 * dma_buf), not by the exporter's as well (before the fix, three per
 * buffer: the core's, the exporter's record and the driver's).
 */
#define MANY 2048

static void many(void)
{
	static int fds[MANY];
	struct rlimit rl;
	long long plain0, cg0, plain, cg, pages = stat_of("dmabuf_pages");
	int n = 0, err = 0;

	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < MANY + 64) {
		rl.rlim_cur = MANY + 64;
		if (rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	plain0 = kmalloc_objs(0);
	cg0 = kmalloc_objs(1);
	while (n < MANY) {
		int fd = alloc_bo(PAGE);

		if (fd < 0) {
			err = fd;
			break;
		}
		fds[n++] = fd;
	}
	plain = kmalloc_objs(0) - plain0;
	cg = kmalloc_objs(1) - cg0;
	tap(n == MANY, "many: %d one-page buffers exported (stopped at %d: %d)", MANY, n, err);
	tap(stat_of("dmabuf_pages") == pages + n, "many: the GPU counts %d pages exported (%lld)",
	    n, stat_of("dmabuf_pages") - pages);
	tap(plain0 >= 0 && plain < MANY * 3 / 2,
	    "many: uncharged kmalloc objects grew by %lld for %d buffers (< 1.5 a buffer: the dma-buf core's)",
	    plain, n);
	tap(cg >= n, "many: charged kmalloc objects grew by %lld for %d buffers (at least one a buffer)",
	    cg, n);
	/* Released in an order unlike the export's: from both ends. */
	for (int i = 0; i < n / 2; i++) {
		close(fds[i]);
		close(fds[n - 1 - i]);
	}
	if (n % 2)
		close(fds[n / 2]);
	tap(stat_of("dmabuf_pages") == pages, "many: every page given back at close (%lld left)",
	    stat_of("dmabuf_pages") - pages);
}

/* ------------------------------------------------------ all of VRAM */

/* Whether page PAGE of the mapping M reads as zeroes. */
static int zero_page_at(const unsigned char *m, size_t page)
{
	for (size_t i = 0; i < PAGE; i += 8)
		if (*(const volatile uint64_t *)(m + page * PAGE + i))
			return 0;
	return 1;
}

/*
 * One buffer of all of VRAM (16 GiB in the scale plan): the size is
 * accepted, every page is cleared before the buffer is handed out (the
 * cases before left their data in the first pages), nothing else fits
 * while it lives, and every page comes back at close.
 */
static void whole(void)
{
	long long total = stat_of("pages_total"), resident = stat_of("pages_resident");
	long long held = stat_of("dmabuf_pages");
	size_t size = (size_t)total * PAGE, pages[] = { 0, 1, BO_PAGES - 1, total / 2, total - 1 };
	unsigned char *m;
	int fd, e, zero = 1;

	tap(total > 0 && resident == 0 && held == 0,
	    "whole: VRAM is empty: %lld pages, %lld resident, %lld in buffers", total, resident,
	    held);
	if (total <= 0 || resident || held)
		return;
	fd = alloc_bo(size);
	tap(fd >= 0 && stat_of("dmabuf_pages") == total,
	    "whole: a buffer of all %lld MiB of VRAM (got %d, %lld pages held)", total >> 8, fd,
	    stat_of("dmabuf_pages"));
	if (fd < 0)
		return;
	e = alloc_bo(PAGE);
	tap(e == -ENOMEM, "whole: one page more gets ENOMEM (got %d)", e);
	if (e >= 0)
		close(e);
	m = map(fd, size, PROT_READ, MAP_SHARED, 0);
	tap(m != NULL, "whole: mapped whole (errno %d)", m ? 0 : errno);
	if (m) {
		for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
			zero &= zero_page_at(m, pages[i]);
		tap(zero, "whole: the first, middle and last pages read zeroes");
		munmap(m, size);
	}
	close(fd);
	tap(stat_of("dmabuf_pages") == 0, "whole: every page given back at close (%lld held)",
	    stat_of("dmabuf_pages"));
	fd = alloc_bo(PAGE);
	tap(fd >= 0, "whole: a page can be exported again (got %d)", fd);
	if (fd >= 0)
		close(fd);
}

/* ----------------------------------------------------- revocation races */

struct racer {
	unsigned char *m;
	uint64_t rng;
	volatile int stop;
	long ops, sigbus, other;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	unsigned char v;

	while (!r->stop) {
		size_t page = rnd_below(&r->rng, BO_PAGES);
		int sig;

		if (rnd_below(&r->rng, 2))
			sig = load(r->m + page * PAGE, &v);
		else
			sig = store(r->m + page * PAGE + 1, (unsigned char)r->ops);
		r->ops++;
		if (sig == SIGBUS)
			r->sigbus++;
		else if (sig)
			r->other++;
	}
	return NULL;
}

/*
 * The other system calls on the buffer while it is revoked: its own
 * mapping made, protected, moved, advised, partly unmapped and forked,
 * GUP of it, the dma-buf's ioctls. Each must get the answer it gets on a
 * live buffer, or, once the GPU is gone, ENODEV for a new mapping and
 * SIGBUS for an access: anything else is counted in `other`.
 */
struct vma_racer {
	int fd;
	uint64_t rng;
	volatile int stop;
	long ops, revoked, other;
	char what[96];
};

static void vma_other(struct vma_racer *r, const char *op, long got)
{
	if (r->other++ == 0)
		snprintf(r->what, sizeof(r->what), "%s: %ld (errno %d)", op, got, errno);
}

static void *vma_race(void *arg)
{
	struct vma_racer *r = arg;
	struct dma_buf_sync sync = { DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW };
	unsigned char *m, *moved, *hole, v, buf[64];
	struct iovec local = { buf, sizeof(buf) }, remote;
	int status;
	long n;
	pid_t pid;

	while (!r->stop) {
		int sig;

		r->ops++;
		m = mmap(NULL, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (m == MAP_FAILED) {
			if (errno == ENODEV)
				r->revoked++;
			else
				vma_other(r, "mmap", -1);
			continue;
		}
		switch (rnd_below(&r->rng, 7)) {
		case 0:
			if (mprotect(m, BO_SIZE, PROT_READ) || mprotect(m, BO_SIZE, PROT_READ | PROT_WRITE))
				vma_other(r, "mprotect", -1);
			break;
		case 1:
			if (madvise(m, PAGE, MADV_DONTNEED) == 0 || errno != EINVAL)
				vma_other(r, "madvise(DONTNEED)", 0);
			break;
		case 2:
			hole = mmap(NULL, BO_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			moved = mremap(m, BO_SIZE, BO_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
			if (moved == MAP_FAILED) {
				vma_other(r, "mremap", -1);
				munmap(hole, BO_SIZE);
			} else {
				m = moved;
			}
			break;
		case 3:
			if (munmap(m + PAGE, PAGE))
				vma_other(r, "munmap of one page", -1);
			break;
		case 4:
			remote = (struct iovec){ m, sizeof(buf) };
			n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
			if (n >= 0 || errno != EFAULT)
				vma_other(r, "process_vm_readv", n);
			break;
		case 5:
			if (ioctl(r->fd, DMA_BUF_IOCTL_SYNC, &sync))
				vma_other(r, "SYNC", -1);
			break;
		case 6:
			/* The child touches the mapping it inherited. */
			pid = fork();
			if (pid == 0) {
				sig = load(m, &v);
				_exit(sig == 0 || sig == SIGBUS ? 0 : 1);
			}
			if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
			    WEXITSTATUS(status))
				vma_other(r, "fork, the child's load", pid);
			break;
		}
		sig = load(m, &v);
		if (sig == SIGBUS)
			r->revoked++;
		else if (sig)
			vma_other(r, "load", sig);
		munmap(m, BO_SIZE);
	}
	return NULL;
}

static int unbind_gpu(void)
{
	return rvram_unbind(owner_pci);
}

static int bind_gpu(void)
{
	close(gpu);
	gpu = -1;
	if (rvram_bind(owner_pci))
		return -1;
	return open_gpu() < 0 ? -1 : 0;
}

/*
 * The GPU is unbound while threads touch a live mapping, after a fork, and
 * under mremap() and mprotect(): accesses end in SIGBUS, nothing else.
 */
static void revocation(int round)
{
	struct racer r[2];
	struct vma_racer vr;
	pthread_t t[2], vt;
	unsigned char *m, *moved, *hole, v;
	struct dma_buf_sync sync = { DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW };
	int fd = alloc_bo(BO_SIZE), status = -1, e, pipefd[2];
	pid_t pid;
	char c;

	m = fd >= 0 ? map(fd, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0) : NULL;
	if (!m) {
		tap(0, "revoke %d: a mapped buffer (fd %d, errno %d)", round, fd, errno);
		if (fd >= 0)
			close(fd);
		return;
	}
	stamp(m, BO_PAGES, 5);
	/* A child holds the mapping across the unbind and checks it after. */
	if (pipe(pipefd))
		pipefd[0] = pipefd[1] = -1;
	pid = fork();
	if (pid == 0) {
		int bad = unstamped(m, 1, 5) != 0;

		close(pipefd[1]);
		bad |= read(pipefd[0], &c, 1) != 1;
		bad |= load(m, &v) != SIGBUS;
		_exit(bad);
	}
	close(pipefd[0]);
	for (int i = 0; i < 2; i++) {
		r[i] = (struct racer){ .m = m, .rng = rnd_stream(seed, 100 * round + i) };
		pthread_create(&t[i], NULL, race, &r[i]);
	}
	vr = (struct vma_racer){ .fd = fd, .rng = rnd_stream(seed, 100 * round + 50) };
	pthread_create(&vt, NULL, vma_race, &vr);
	usleep(1000 * (1 + rnd_below(&r[0].rng, 50)));
	tap(unbind_gpu() == 0,
	    "revoke %d: rvram%d unbound under two threads touching the mapping and one mapping, moving, forking and pinning it",
	    round, owner);
	usleep(20000);
	/* Until the third thread has met the revoked buffer a few times. */
	for (int i = 0; i < 200 && vr.revoked < 8; i++)
		usleep(10000);
	for (int i = 0; i < 2; i++) {
		r[i].stop = 1;
		pthread_join(t[i], NULL);
	}
	vr.stop = 1;
	pthread_join(vt, NULL);
	tap(vr.other == 0 && vr.revoked > 0,
	    "revoke %d: VMA operations, GUP, SYNC and fork across the unbind got only their answers (%ld rounds, %ld revoked; %s)",
	    round, vr.ops, vr.revoked, vr.other ? vr.what : "nothing else");
	tap(r[0].other + r[1].other == 0 && load(m, &v) == SIGBUS && store(m, 1) == SIGBUS,
	    "revoke %d: accesses after the unbind get SIGBUS, nothing else (%ld ops, %ld SIGBUS)",
	    round, r[0].ops + r[1].ops, r[0].sigbus + r[1].sigbus);
	(void)!write(pipefd[1], "x", 1);
	close(pipefd[1]);
	waitpid(pid, &status, 0);
	tap(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "revoke %d: a forked child's mapping is revoked too (SIGBUS)", round);
	e = map_errno(fd, PAGE, PROT_READ, MAP_SHARED, 0);
	tap(e == ENODEV, "revoke %d: a new mapping gets ENODEV (got %d)", round, e);
	e = map_errno(fd, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);
	tap(e == ENODEV || e == EINVAL,
	    "revoke %d: a new private mapping gets ENODEV or EINVAL (got %d)", round, e);
	hole = mmap(NULL, BO_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	moved = mremap(m, BO_SIZE, BO_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
	tap(moved == hole && load(moved, &v) == SIGBUS,
	    "revoke %d: the revoked mapping moves with mremap() and still gets SIGBUS", round);
	if (moved == hole)
		m = moved;
	tap(mprotect(m, BO_SIZE, PROT_READ) == 0 && load(m + PAGE, &v) == SIGBUS,
	    "revoke %d: mprotect() of the revoked mapping, still SIGBUS", round);
	tap(ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) == 0, "revoke %d: SYNC still answers", round);
	e = ioctl(gpu, RVRAM_IOCTL_ALLOC_DMABUF,
		  &(struct rvram_alloc_dmabuf){ .size = PAGE, .fd = -1 }) ? errno : 0;
	tap(e == ENODEV, "revoke %d: ALLOC_DMABUF on the unbound GPU gets ENODEV (got %d)",
	    round, e);
	munmap(m, BO_SIZE);
	tap(close(fd) == 0, "revoke %d: the revoked buffer closes", round);
	tap(bind_gpu() == 0 && stat_of("dmabuf_pages") == 0,
	    "revoke %d: rvram%d bound again, no VRAM reserved", round, owner);
}

/*
 * Buffers that outlive every file of the GPU: one mapped, one not. rvram
 * cannot be unloaded while they exist (the dma-buf holds the module); the
 * GPU can be unbound, which revokes the mapping.
 */
static void orphaned(void)
{
	int fd = alloc_bo(BO_SIZE), bare = alloc_bo(BO_SIZE), r, e;
	unsigned char *m = fd >= 0 ? map(fd, BO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0) : NULL;
	struct dma_buf_sync sync = { DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW };
	unsigned char v;

	if (!m || bare < 0) {
		tap(0, "orphan: two buffers, one mapped (errno %d)", errno);
		if (m)
			munmap(m, BO_SIZE);
		if (fd >= 0)
			close(fd);
		if (bare >= 0)
			close(bare);
		return;
	}
	stamp(m, BO_PAGES, 8);
	close(gpu);
	gpu = -1;
	tap(unstamped(m, BO_PAGES, 8) == 0,
	    "orphan: every file of rvram%d closed, the mapped buffer keeps its data", owner);
	r = syscall(__NR_delete_module, "rvram", O_NONBLOCK);
	e = r ? errno : 0;
	tap(r == -1 && e == EWOULDBLOCK,
	    "orphan: rmmod rvram while only the buffers hold it: EWOULDBLOCK (got %d, %d)", r, e);
	tap(unstamped(m, BO_PAGES, 8) == 0, "orphan: ... the buffer is intact");
	tap(unbind_gpu() == 0, "orphan: unbind with only the buffers alive");
	tap(load(m, &v) == SIGBUS && store(m + PAGE, 1) == SIGBUS,
	    "orphan: the mapping is revoked (SIGBUS)");
	tap(ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) == 0 && ioctl(bare, DMA_BUF_IOCTL_SYNC, &sync) == 0,
	    "orphan: both buffers still answer SYNC");
	e = map_errno(bare, PAGE, PROT_READ, MAP_SHARED, 0);
	tap(e == ENODEV, "orphan: a new mapping of the other buffer gets ENODEV (got %d)", e);
	munmap(m, BO_SIZE);
	tap(close(fd) == 0 && close(bare) == 0, "orphan: both close");
	tap(bind_gpu() == 0 && stat_of("dmabuf_pages") == 0,
	    "orphan: rvram%d bound again, no VRAM reserved", owner);
}

int main(int argc, char **argv)
{
	int fd, rounds = 3;

	if (argc < 3) {
		fprintf(stderr, "usage: rvram-dmabuf-abuse OWNER OWNER_PCI [SEED]\n");
		return 2;
	}
	owner = atoi(argv[1]);
	owner_pci = argv[2];
	seed = argc > 3 ? strtoull(argv[3], NULL, 0) : (uint64_t)time(NULL) ^ getpid();
	snprintf(gpu_name, sizeof(gpu_name), "rvram%d", owner);
	printf("TAP version 13\n# seed %llu (replay: rvram-dmabuf-abuse %d %s %llu)\n",
	       (unsigned long long)seed, owner, owner_pci, (unsigned long long)seed);
	catch_signals();
	fd = open_gpu() >= 0 ? alloc_bo(BO_SIZE) : -errno;
	tap(fd >= 0, "setup: rvram%d exports a %lu-page buffer (%d)", owner, BO_PAGES, fd);
	if (fd < 0)
		return tap_end();
	mmap_flags(fd);
	mmap_ranges(fd);
	vma_ops(fd);
	uffd(fd);
	forks(fd);
	gup(fd);
	dmabuf_ioctls(fd);
	file_ops(fd);
	close(fd);
	alloc_args();
	many();
	whole();
	for (int round = 0; round < rounds; round++)
		revocation(round);
	orphaned();
	return tap_end();
}
