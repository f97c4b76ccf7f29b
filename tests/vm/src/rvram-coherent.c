// SPDX-License-Identifier: GPL-2.0
/*
 * Device-coherent VRAM (a GPU bound to driver rvram-coherent): process
 * memory migrated into it is mapped by the CPU as it is. CPU reads and
 * writes do not migrate it, the device sees the CPU's writes and the CPU
 * the device's, migration back to system memory moves every page, and
 * buffer objects are refused.
 *
 *   rvram-coherent /dev/rvramN
 *   rvram-coherent /dev/rvramN pin-unbind PCI_ADDRESS
 *   rvram-coherent /dev/rvramN zerocopy
 *   rvram-coherent /dev/rvramN longterm
 *
 * N must be a device-coherent GPU. The second form pins a page of VRAM in
 * a pipe and unbinds the GPU (PCI_ADDRESS) under it: the unbind must
 * return, the page keep its data while the pipe holds it, a bind meanwhile
 * fail, and a bind after the page is freed succeed. The third sends
 * device-coherent pages over loopback TCP with MSG_ZEROCOPY and unmaps them
 * at once: the ACK that frees the sender's skb, in softirq, drops the last
 * reference to the pages, and the GPU's folio_free runs there (it took a
 * lock that process context takes with softirqs enabled: lockdep's
 * "inconsistent lock state", which fails the run, until the fix). The
 * fourth takes a long-term pin (FOLL_LONGTERM: io_uring's fixed buffers)
 * of device-coherent pages: core mm must move them to system memory first
 * (migrate_device_coherent_folio()), as a GPU could not migrate them away
 * from under the pin, and the pinned buffer must then be what the CPU maps.
 * Prints TAP.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "dmirror.h"
#include "kcov.h"
#include "../../../drivers/rvram/include/uapi/misc/rvram.h"

/* SNAPSHOT: a device-coherent page of this GPU. */
#define PROT_DEV_COHERENT_LOCAL 0x40

static int n, failed;

static void check(int ok, const char *what)
{
	printf("%sok %d %s\n", ok ? "" : "not ", ++n, what);
	if (!ok)
		failed++;
}

/* The value of counter NAME in the GPU's debugfs stats, or -1. */
static long long counter(const char *path, const char *name)
{
	char line[128];
	long long v = -1;
	size_t len = strlen(name);
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, len) && line[len] == ' ')
			v = atoll(line + len + 1);
	fclose(f);
	return v;
}

static unsigned char pattern(size_t i, unsigned int seed)
{
	return (unsigned char)(i * 7 + i / PAGE + seed);
}

/* How many bytes of BUF differ from PATTERN(., SEED). */
static size_t mismatches(const unsigned char *buf, size_t size, unsigned int seed)
{
	size_t i, bad = 0;

	for (i = 0; i < size; i++)
		bad += buf[i] != pattern(i, seed);
	return bad;
}

/*
 * How many pages SNAPSHOT reports as this GPU's writable coherent pages;
 * -1 if SNAPSHOT fails (so that a check for none cannot pass on an error).
 */
static long coherent_pages(int fd, unsigned char *buf, unsigned char *snap, size_t npages)
{
	struct hmm_dmirror_cmd cmd = {
		.addr = (uintptr_t)buf, .ptr = (uintptr_t)snap, .npages = npages,
	};
	size_t i;
	long local = 0;

	if (ioctl(fd, HMM_DMIRROR_SNAPSHOT, &cmd))
		return -1;
	for (i = 0; i < npages; i++)
		local += (snap[i] & 0xf0) == PROT_DEV_COHERENT_LOCAL &&
			 (snap[i] & HMM_DMIRROR_PROT_WRITE);
	return local;
}

static int pin_unbind(const char *dev, const char *pci)
{
	const size_t npages = 16, size = npages * PAGE;
	struct hmm_dmirror_cmd cmd = { 0 };
	unsigned char *buf, *mirror, *snap, page[PAGE];
	char path[256];
	struct iovec iov;
	int fd, pipefd[2], e;
	size_t i;

	fd = open(dev, O_RDWR);
	check(fd >= 0, "pin: open the GPU");
	buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mirror = malloc(size);
	snap = malloc(npages);
	if (fd < 0 || buf == MAP_FAILED || !mirror || !snap || pipe(pipefd))
		return 1;
	madvise(buf, size, MADV_NOHUGEPAGE);
	for (i = 0; i < size; i++)
		buf[i] = pattern(i, 9);
	cmd.addr = (uintptr_t)buf;
	cmd.ptr = (uintptr_t)mirror;
	cmd.npages = npages;
	check(ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, &cmd) == 0 &&
	      coherent_pages(fd, buf, snap, npages) == (long)npages,
	      "pin: 16 pages migrated into device-coherent VRAM");
	/*
	 * vmsplice() takes a reference on the page (a short-term GUP, which
	 * device-coherent pages allow) and the pipe keeps it until read: the
	 * page cannot move out of VRAM meanwhile.
	 */
	iov = (struct iovec){ buf, PAGE };
	check(vmsplice(pipefd[1], &iov, 1, 0) == PAGE, "pin: vmsplice() the first page into a pipe");
	/* No open file holds the GPU: the unbind drops its last reference. */
	close(fd);

	e = rvram_unbind(pci);
	check(e == 0, "pin: the unbind returns, with the page still pinned");
	/* The device's driver link: rvram-coherent's while it is bound. */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", pci);
	check(access(path, F_OK) != 0, "pin: ... and the GPU is unbound");
	check(mismatches(buf, size, 9) == 0,
	      "pin: the pinned page and the 15 evicted ones keep their data");
	e = rvram_bind(pci);
	check(e == -EBUSY, "pin: a bind while the page is in use fails with EBUSY");

	check(read(pipefd[0], page, PAGE) == PAGE && mismatches(page, PAGE, 9) == 0,
	      "pin: the pipe delivers the page's data");
	close(pipefd[0]);
	close(pipefd[1]);
	/* The page was still mapped: unmapping it frees it. */
	munmap(buf, size);
	e = rvram_bind(pci);
	check(e == 0 && access(path, F_OK) == 0,
	      "pin: a bind after the page is freed succeeds");
	free(mirror);
	free(snap);
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

/* A connected loopback TCP pair: *tx and *rx. */
static int tcp_pair(int *tx, int *rx)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l, one = 1, buf = 1 << 20;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		return -1;
	*tx = socket(AF_INET, SOCK_STREAM, 0);
	if (*tx < 0 || connect(*tx, (struct sockaddr *)&a, sizeof(a)))
		return -1;
	*rx = accept(l, NULL, NULL);
	close(l);
	/* Room for a whole round in flight: one thread sends, then receives. */
	if (*rx < 0 || setsockopt(*tx, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) ||
	    setsockopt(*tx, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf)) ||
	    setsockopt(*rx, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf)))
		return -1;
	return 0;
}

/*
 * Whether lockdep still checks: a report earlier in the boot turns it off,
 * and then nothing would catch this mode's. 1 without lockdep.
 */
static int lockdep_on(void)
{
	char line[128];
	int on = 1;
	FILE *f = fopen("/proc/lockdep_stats", "r");

	if (!f)
		return 1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "debug_locks:"))
			on = atoi(strchr(line, ':') + 1) == 1;
	fclose(f);
	return on;
}

/* Reads the zero-copy completions queued on `s`; how many sends they cover. */
static long zc_completions(int s)
{
	char control[128];
	long done = 0;

	for (;;) {
		struct msghdr msg = { .msg_control = control,
				      .msg_controllen = sizeof(control) };
		struct cmsghdr *cm;
		struct sock_extended_err *ee;

		if (recvmsg(s, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return done;
		cm = CMSG_FIRSTHDR(&msg);
		if (!cm)
			continue;
		ee = (struct sock_extended_err *)CMSG_DATA(cm);
		if (ee->ee_origin == SO_EE_ORIGIN_ZEROCOPY)
			done += ee->ee_data - ee->ee_info + 1;
	}
}

static int zerocopy(const char *dev)
{
	const size_t npages = 64, size = npages * PAGE;
	const int rounds = 32;
	unsigned char *buf, *mirror, *snap, *in;
	struct hmm_dmirror_cmd cmd = { 0 };
	long sends = 0, done = 0;
	int fd, tx = -1, rx = -1, r, coherent = 0, bad = 0, sent_all = 1, pair;
	char stats[128], what[160];
	long long resident;
	size_t got, sent, i;

	snprintf(stats, sizeof(stats), "/sys/kernel/debug/rvram/%s/stats", dev + 5);
	fd = open(dev, O_RDWR);
	mirror = malloc(size);
	snap = malloc(npages);
	in = malloc(size);
	pair = tcp_pair(&tx, &rx);
	check(fd >= 0 && mirror && snap && in && pair == 0,
	      "zerocopy: open the GPU and a loopback TCP pair with SO_ZEROCOPY");
	if (fd < 0 || !mirror || !snap || !in || pair) {
		printf("1..%d\n", n);
		return 1;
	}
	resident = counter(stats, "pages_resident");
	for (r = 0; r < rounds; r++) {
		buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (buf == MAP_FAILED) {
			check(0, "zerocopy: mmap() a round's buffer");
			break;
		}
		madvise(buf, size, MADV_NOHUGEPAGE);
		for (i = 0; i < size; i++)
			buf[i] = pattern(i, r);
		cmd = (struct hmm_dmirror_cmd){ .addr = (uintptr_t)buf, .ptr = (uintptr_t)mirror,
						.npages = npages };
		if (ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, &cmd) == 0 &&
		    coherent_pages(fd, buf, snap, npages) == (long)npages)
			coherent++;
		/* The socket takes references to the pages, not copies. */
		for (got = 0; got < size;) {
			ssize_t k = send(tx, buf + got, size - got, MSG_ZEROCOPY);

			if (k <= 0) {
				sent_all = 0;
				break;
			}
			got += k;
			sends++;
		}
		/* Unmapped before anything is received or acknowledged. */
		munmap(buf, size);
		sent = got;
		for (got = 0; got < sent;) {
			ssize_t k = recv(rx, in + got, sent - got, 0);

			if (k <= 0)
				break;
			got += k;
		}
		bad += got != size || mismatches(in, size, r) != 0;
		if (!sent_all)
			break;
		done += zc_completions(tx);
	}
	snprintf(what, sizeof(what),
		 "zerocopy: %d rounds of 256 KiB of coherent VRAM sent and unmapped at once", rounds);
	check(coherent == rounds, what);
	check(sent_all && bad == 0, "zerocopy: the receiver got every byte as written");
	close(tx);
	close(rx);
	/* Completions of the last sends may still be queued: not counted. */
	snprintf(what, sizeof(what), "zerocopy: completions for %ld of %ld sends (pages held by the stack)",
		 done, sends);
	check(done > 0, what);
	/* The stack drops the last references shortly after the ACKs. */
	for (i = 0; i < 100 && counter(stats, "pages_resident") != resident; i++)
		usleep(20000);
	snprintf(what, sizeof(what), "zerocopy: every page freed (pages_resident %lld, %lld before)",
		 counter(stats, "pages_resident"), resident);
	check(counter(stats, "pages_resident") == resident, what);
	check(lockdep_on(), "zerocopy: lockdep still checks (/proc/lockdep_stats debug_locks)");
	close(fd);
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}

/* An io_uring with its rings mapped: enough for one request at a time. */
struct ring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r)
{
	struct io_uring_params p = { 0 };
	size_t sq_size, cq_size;
	char *sq, *cq;

	r->fd = syscall(__NR_io_uring_setup, 4, &p);
	if (r->fd < 0)
		return -1;
	sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	sq = mmap(NULL, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, IORING_OFF_SQ_RING);
	cq = mmap(NULL, cq_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, IORING_OFF_CQ_RING);
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED, r->fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
		return -1;
	r->sq_tail = (unsigned int *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned int *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned int *)(sq + p.sq_off.array);
	r->cq_head = (unsigned int *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned int *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned int *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* Runs one request and returns its result (a byte count or -errno). */
static int ring_run(struct ring *r, const struct io_uring_sqe *sqe)
{
	unsigned int tail = *r->sq_tail, idx = tail & *r->sq_mask, head;
	int res;

	r->sqes[idx] = *sqe;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		return -errno;
	head = *r->cq_head;
	if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		return -EAGAIN;
	res = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

/* How many of the NPAGES (at most 64) pages at BUF are coherent pages of this GPU; -1 on error. */
static long coherent_in(int fd, unsigned char *buf, size_t npages)
{
	unsigned char snap[64];

	return npages <= sizeof(snap) ? coherent_pages(fd, buf, snap, npages) : -1;
}

static int longterm(const char *dev)
{
	const size_t npages = 64, pinned = 16, size = npages * PAGE, psize = pinned * PAGE;
	unsigned char *buf, *mirror, *out;
	struct hmm_dmirror_cmd cmd = { 0 };
	struct io_uring_sqe sqe;
	long long resident;
	struct iovec iov;
	struct ring ring = { .fd = -1 };
	char stats[128], what[160];
	int fd, mfd, r;
	size_t i;

	snprintf(stats, sizeof(stats), "/sys/kernel/debug/rvram/%s/stats", dev + 5);
	fd = open(dev, O_RDWR);
	mfd = memfd_create("rvram-longterm", 0);
	buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mirror = malloc(size);
	out = malloc(psize);
	r = ring_init(&ring);
	check(fd >= 0 && mfd >= 0 && buf != MAP_FAILED && mirror && out && r == 0,
	      "longterm: open the GPU, a memfd and an io_uring");
	if (fd < 0 || mfd < 0 || buf == MAP_FAILED || !mirror || !out || r) {
		printf("1..%d\n", n);
		return 1;
	}
	madvise(buf, size, MADV_NOHUGEPAGE);
	for (i = 0; i < size; i++)
		buf[i] = pattern(i, 5);
	resident = counter(stats, "pages_resident");
	cmd = (struct hmm_dmirror_cmd){ .addr = (uintptr_t)buf, .ptr = (uintptr_t)mirror,
					.npages = npages };
	r = ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, &cmd);
	check(r == 0 && coherent_in(fd, buf, npages) == (long)npages,
	      "longterm: 64 pages migrated to coherent VRAM");

	/* io_uring pins fixed buffers with FOLL_LONGTERM. */
	iov = (struct iovec){ .iov_base = buf, .iov_len = psize };
	r = syscall(__NR_io_uring_register, ring.fd, IORING_REGISTER_BUFFERS, &iov, 1);
	check(r == 0, "longterm: register the first 16 pages as an io_uring fixed buffer");
	check(coherent_in(fd, buf, pinned) == 0,
	      "longterm: the 16 pinned pages were moved to system memory (SNAPSHOT)");
	check(coherent_in(fd, buf + psize, npages - pinned) == (long)(npages - pinned),
	      "longterm: the 48 others are still in VRAM");
	snprintf(what, sizeof(what), "longterm: pages_resident is %lld + 48 (%lld)", resident,
		 counter(stats, "pages_resident"));
	check(counter(stats, "pages_resident") == resident + (long long)(npages - pinned), what);
	check(mismatches(buf, size, 5) == 0, "longterm: data intact in both");

	/* The pinned pages are the ones the CPU maps: its writes reach them. */
	for (i = 0; i < psize; i++)
		buf[i] = pattern(i, 6);
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = IORING_OP_WRITE_FIXED;
	sqe.fd = mfd;
	sqe.addr = (uintptr_t)buf;
	sqe.len = psize;
	sqe.buf_index = 0;
	r = ring_run(&ring, &sqe);
	memset(out, 0, psize);
	snprintf(what, sizeof(what), "longterm: WRITE_FIXED from the pinned buffer wrote 64 KiB (%d)", r);
	check(r == (int)psize, what);
	check(pread(mfd, out, psize, 0) == (ssize_t)psize && mismatches(out, psize, 6) == 0,
	      "longterm: ... what the CPU wrote after the pin");

	/* A migration cannot take pinned pages back into VRAM. */
	cmd = (struct hmm_dmirror_cmd){ .addr = (uintptr_t)buf, .ptr = (uintptr_t)mirror,
					.npages = pinned };
	ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, &cmd);
	check(coherent_in(fd, buf, pinned) == 0,
	      "longterm: MIGRATE_TO_DEV leaves the pinned pages in system memory");
	check(mismatches(buf, psize, 6) == 0, "longterm: ... with their data");

	r = syscall(__NR_io_uring_register, ring.fd, IORING_UNREGISTER_BUFFERS, NULL, 0);
	check(r == 0, "longterm: unregister the fixed buffer");
	munmap(buf, size);
	for (i = 0; i < 100 && counter(stats, "pages_resident") != resident; i++)
		usleep(20000);
	check(counter(stats, "pages_resident") == resident,
	      "longterm: every VRAM page freed after munmap() (pages_resident)");
	close(ring.fd);
	close(mfd);
	close(fd);
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	const size_t npages = 1024, size = npages * PAGE;
	struct rvram_alloc_dmabuf bo = { .size = PAGE, .fd = -1 };
	struct hmm_dmirror_cmd cmd = { 0 };
	unsigned char *buf, *mirror, *snap;
	long long faults, to_ram, resident;
	char stats[128], what[160];
	size_t i;
	int fd, r;

	if (argc == 4 && !strcmp(argv[2], "pin-unbind") && !strncmp(argv[1], "/dev/", 5)) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		printf("TAP version 13\n");
		return pin_unbind(argv[1], argv[3]);
	}
	if (argc == 3 && !strcmp(argv[2], "zerocopy") && !strncmp(argv[1], "/dev/", 5)) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		printf("TAP version 13\n");
		return zerocopy(argv[1]);
	}
	if (argc == 3 && !strcmp(argv[2], "longterm") && !strncmp(argv[1], "/dev/", 5)) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		printf("TAP version 13\n");
		return longterm(argv[1]);
	}
	if (argc != 2 || strncmp(argv[1], "/dev/", 5)) {
		fprintf(stderr, "usage: %s /dev/rvramN [pin-unbind PCI_ADDRESS | zerocopy | longterm]\n",
			argv[0]);
		return 2;
	}
	snprintf(stats, sizeof(stats), "/sys/kernel/debug/rvram/%s/stats", argv[1] + 5);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	fd = open(argv[1], O_RDWR);
	check(fd >= 0, "open the GPU");
	if (fd < 0)
		return 1;

	r = ioctl(fd, RVRAM_IOCTL_ALLOC_DMABUF, &bo);
	check(r == -1 && errno == EOPNOTSUPP,
	      "a buffer object of coherent VRAM: EOPNOTSUPP (the BAR is not P2PDMA memory)");

	/* 4 KiB pages: the snapshot then reports every page on its own. */
	buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mirror = malloc(size);
	snap = malloc(npages);
	if (buf == MAP_FAILED || !mirror || !snap)
		return 1;
	madvise(buf, size, MADV_NOHUGEPAGE);
	for (i = 0; i < size; i++)
		buf[i] = pattern(i, 0);
	resident = counter(stats, "pages_resident");

	cmd.addr = (uintptr_t)buf;
	cmd.ptr = (uintptr_t)mirror;
	cmd.npages = npages;
	r = ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, &cmd);
	check(r == 0 && cmd.cpages == npages, "MIGRATE_TO_DEV of 4 MiB");
	check(mismatches(mirror, size, 0) == 0, "the device read back what the CPU wrote");
	check(coherent_pages(fd, buf, snap, npages) == (long)npages,
	      "SNAPSHOT: every page is a writable device-coherent page of this GPU (0x42)");
	snprintf(what, sizeof(what), "pages_resident rose by %zu", npages);
	check(counter(stats, "pages_resident") == resident + (long long)npages, what);

	faults = counter(stats, "cpu_faults");
	to_ram = counter(stats, "migrated_to_ram");
	check(mismatches(buf, size, 0) == 0, "the CPU reads the data in VRAM");
	for (i = 0; i < size; i++)
		buf[i] = pattern(i, 1);
	check(counter(stats, "cpu_faults") == faults && counter(stats, "migrated_to_ram") == to_ram,
	      "CPU reads and writes did not fault or migrate (cpu_faults, migrated_to_ram flat)");
	check(coherent_pages(fd, buf, snap, npages) == (long)npages,
	      "after CPU access every page is still in VRAM");

	cmd.ptr = (uintptr_t)mirror;
	memset(mirror, 0, size);
	r = ioctl(fd, HMM_DMIRROR_READ, &cmd);
	check(r == 0 && mismatches(mirror, size, 1) == 0, "the device reads what the CPU wrote");
	for (i = 0; i < size; i++)
		mirror[i] = pattern(i, 2);
	r = ioctl(fd, HMM_DMIRROR_WRITE, &cmd);
	check(r == 0 && mismatches(buf, size, 2) == 0, "the CPU reads what the device wrote");
	check(coherent_pages(fd, buf, snap, npages) == (long)npages,
	      "after device access every page is still in VRAM");

	cmd.ptr = 0;
	r = ioctl(fd, HMM_DMIRROR_MIGRATE_TO_SYS, &cmd);
	check(r == 0 && cmd.cpages == npages, "MIGRATE_TO_SYS moves all 1024 pages");
	check(coherent_pages(fd, buf, snap, npages) == 0, "SNAPSHOT: no page is in VRAM");
	check(counter(stats, "pages_resident") == resident, "pages_resident is back");
	check(mismatches(buf, size, 2) == 0, "data intact in system memory");

	munmap(buf, size);
	close(fd);
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}
