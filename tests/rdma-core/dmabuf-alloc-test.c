// SPDX-License-Identifier: GPL-2.0
/*
 * Host test of pyverbs' rvram dma-buf backend (our rdma-core patch
 * 0002-pyverbs-Allocate-dma-bufs-from-rvram.patch): the patched
 * pyverbs/dmabuf_alloc.c, linked with open() and ioctl() wrapped
 * (-Wl,--wrap=open,--wrap=ioctl), against a fake /dev/rvram0 that answers
 * RVRAM_IOCTL_ALLOC_DMABUF as rvram does (drivers/rvram/bo.rs), with a
 * memfd for the dma-buf. No render node exists unless a case says so.
 *
 * The fake decodes the request with rvram's own uapi header, so the
 * patch's copy of the ioctl is held to it: the same number (which
 * encodes the argument's size), size and flags read where rvram reads
 * them, the fd found where rvram writes it.
 *
 *   dmabuf-alloc-test    (TAP; exit status 0 when every case passes)
 */
#define _GNU_SOURCE
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

#include "../../drivers/rvram/include/uapi/misc/rvram.h"
#include "dmabuf_alloc.h"

_Static_assert(sizeof(struct rvram_alloc_dmabuf) == 16, "rvram_alloc_dmabuf is 16 bytes");

int __real_open(const char *path, int flags, ...);
int __real_ioctl(int fd, unsigned long req, ...);

/* The fake devices. */
static int rvram_present;	/* /dev/rvram0 exists */
static int rvram_errno;		/* opening it fails with this, if not 0 */
static int render_errno;	/* opening /dev/dri/renderD128 fails with this (ENOENT if 0) */
static int dev_fd = -1;		/* the last /dev/rvram0 file handed out */
/* What the last RVRAM_IOCTL_ALLOC_DMABUF asked for, and its count. */
static int allocs;
static uint64_t asked_size;
static uint32_t asked_flags;
static int rvram_opens, render_opens;

int __wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (!strncmp(path, "/dev/dri/renderD", 16)) {
		render_opens++;
		errno = render_errno ? render_errno : ENOENT;
		return -1;
	}
	if (!strncmp(path, "/dev/rvram", 10)) {
		rvram_opens++;
		if (strcmp(path, "/dev/rvram0") || !rvram_present) {
			errno = ENOENT;
			return -1;
		}
		if (rvram_errno) {
			errno = rvram_errno;
			return -1;
		}
		if (!(flags & O_CLOEXEC)) {
			fprintf(stderr, "# /dev/rvram0 opened without O_CLOEXEC\n");
			errno = EINVAL;
			return -1;
		}
		dev_fd = __real_open("/dev/null", O_RDWR | O_CLOEXEC);
		return dev_fd;
	}
	va_start(ap, flags);
	if (flags & O_CREAT)
		mode = va_arg(ap, int);
	va_end(ap);
	return __real_open(path, flags, mode);
}

int __wrap_ioctl(int fd, unsigned long req, ...)
{
	struct rvram_alloc_dmabuf *a;
	long page = sysconf(_SC_PAGESIZE);
	void *arg;
	va_list ap;
	int buf;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (fd != dev_fd || dev_fd < 0)
		return __real_ioctl(fd, req, arg);
	if (req != RVRAM_IOCTL_ALLOC_DMABUF) {
		fprintf(stderr, "# ioctl %#lx on /dev/rvram0, not RVRAM_IOCTL_ALLOC_DMABUF %#lx\n",
			req, (unsigned long)RVRAM_IOCTL_ALLOC_DMABUF);
		errno = ENOTTY;
		return -1;
	}
	a = arg;
	allocs++;
	asked_size = a->size;
	asked_flags = a->flags;
	/* bo.rs: flags 0, a non-zero multiple of the page size (VRAM 256 MiB). */
	if (a->flags || !a->size || a->size % page || a->size > (256ULL << 20)) {
		errno = EINVAL;
		return -1;
	}
	buf = memfd_create("fake-rvram-dmabuf", MFD_CLOEXEC);
	if (buf < 0 || ftruncate(buf, a->size))
		return -1;
	a->fd = buf;
	return 0;
}

static int n, failed;

static void check(int ok, const char *what)
{
	n++;
	if (ok) {
		printf("ok %d %s\n", n, what);
	} else {
		printf("not ok %d %s\n", n, what);
		failed++;
	}
}

static int closed(int fd)
{
	return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

static void reset(void)
{
	allocs = 0;
	asked_size = asked_flags = 0;
	rvram_opens = render_opens = 0;
	dev_fd = -1;
}

/* Allocates SIZE; expects the request to be for WANT bytes and to work. */
static void alloc_ok(uint64_t size, uint64_t want)
{
	struct dmabuf *d;
	char what[160];
	int fd;

	reset();
	d = dmabuf_alloc(size, 0, 0);
	snprintf(what, sizeof(what), "size %llu: one request of %llu bytes, flags 0",
		 (unsigned long long)size, (unsigned long long)want);
	check(d && allocs == 1 && asked_size == want && asked_flags == 0, what);
	if (!d)
		return;
	snprintf(what, sizeof(what), "size %llu: /dev/rvram0 closed once allocated",
		 (unsigned long long)size);
	check(dev_fd >= 0 && closed(dev_fd), what);
	fd = dmabuf_get_fd(d);
	snprintf(what, sizeof(what),
		 "size %llu: drm_fd is the dma-buf's fd, map offset 0",
		 (unsigned long long)size);
	check(fd >= 0 && dmabuf_get_drm_fd(d) == fd && dmabuf_get_offset(d) == 0, what);
	dmabuf_free(d);
	snprintf(what, sizeof(what), "size %llu: freeing closes the dma-buf",
		 (unsigned long long)size);
	check(closed(fd), what);
}

/* Allocates SIZE from unit GPU (GTT if GTT); expects NULL with errno ERR. */
static void alloc_fails(uint64_t size, int gpu, int gtt, int err, const char *what)
{
	struct dmabuf *d;
	char buf[200];

	reset();
	errno = 0;
	d = dmabuf_alloc(size, gpu, gtt);
	snprintf(buf, sizeof(buf), "%s: %s (got %s)", what, strerror(err),
		 d ? "a buffer" : strerror(errno));
	check(!d && errno == err, buf);
	if (d)
		dmabuf_free(d);
}

int main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	struct dmabuf *d;
	char *p;

	printf("TAP version 13\n");

	/* Neither a render node nor rvram: the tests skip on ENOENT. */
	rvram_present = 0;
	alloc_fails(1, 0, 0, ENOENT, "no render node, no /dev/rvram0");
	check(render_opens == 1 && rvram_opens == 1, "no device: renderD128 tried, then /dev/rvram0");

	rvram_present = 1;
	alloc_fails(1, 1, 0, ENOENT, "GPU unit 1, only /dev/rvram0");

	/* Sizes round up to pages; 0 (and sizes that wrap) are refused. */
	alloc_ok(1, page);
	alloc_ok(page, page);
	alloc_ok(page + 1, 2 * page);
	alloc_ok(3 * (4194304 / 2), 3 * (4194304 / 2));
	alloc_ok(4194303 + 4194303 / 2, 6291456);
	alloc_fails(0, 0, 0, EINVAL, "size 0 (as on i915)");
	check(allocs == 1 && asked_size == 0, "size 0: asked for 0 bytes");
	alloc_fails(UINT64_MAX, 0, 0, EINVAL, "size 2^64-1 (wraps to 0)");
	check(allocs == 1 && asked_size == 0, "size 2^64-1: asked for 0 bytes");
	alloc_fails(512ULL << 20, 0, 0, EINVAL, "more than VRAM: rvram's EINVAL");

	/* No GTT on rvram. */
	alloc_fails(1, 0, 1, EOPNOTSUPP, "gtt");
	check(allocs == 0 && dev_fd >= 0 && closed(dev_fd), "gtt: no request, /dev/rvram0 closed");

	/* rvram's own open errors come through (EACCES: a skip). */
	rvram_errno = EACCES;
	alloc_fails(1, 0, 0, EACCES, "/dev/rvram0 not accessible");
	rvram_errno = 0;

	/* A render node that exists is DRM's business: no fallback. */
	render_errno = EACCES;
	alloc_fails(1, 0, 0, EACCES, "renderD128 exists but is not accessible");
	check(rvram_opens == 0, "renderD128 exists: /dev/rvram0 not tried");
	render_errno = 0;

	/* DmaBufMR.write()/read() map drm_fd at map_offset, shared. */
	reset();
	d = dmabuf_alloc(2 * page + 100, 0, 0);
	check(d != NULL, "2 pages + 100 bytes allocated");
	if (d) {
		p = mmap(NULL, 2 * page + 100, PROT_READ | PROT_WRITE, MAP_SHARED,
			 dmabuf_get_drm_fd(d), dmabuf_get_offset(d));
		check(p != MAP_FAILED, "mapped through drm_fd at map_offset");
		if (p != MAP_FAILED) {
			memset(p + page, 'a', page + 100);
			munmap(p, 2 * page + 100);
			p = mmap(NULL, 3 * page, PROT_READ, MAP_SHARED, dmabuf_get_fd(d), 0);
			check(p != MAP_FAILED && p[page] == 'a' && p[2 * page + 99] == 'a' &&
			      p[2 * page + 100] == 0, "a write through drm_fd reads back through fd");
			if (p != MAP_FAILED)
				munmap(p, 3 * page);
		}
		dmabuf_free(d);
	}
	dmabuf_free(NULL);
	check(dmabuf_get_drm_fd(NULL) == -1 && dmabuf_get_fd(NULL) == -1,
	      "NULL buffer: fds -1");

	printf("1..%d\n", n);
	printf("%d passed, %d failed\n", n - failed, failed);
	return failed ? 1 : 0;
}
