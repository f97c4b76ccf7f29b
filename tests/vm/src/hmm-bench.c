// SPDX-License-Identifier: GPL-2.0
/*
 * Migration throughput of a dmirror device (lib/test_hmm or rvram), for
 * 4 KiB pages and for THPs, both ways: the measurement of hmm-tests'
 * benchmark_thp_migration, without its harness timeout and with a data
 * check after every round trip.
 *
 *   hmm-bench DEVICE[,DEVICE2] SIZE_MIB ITERATIONS [4k|thp]
 *
 * Prints one line per mode (both, or the one named): "MODE SIZE_MIB S2D_MS
 * D2S_MS" (medians), and with two devices, which take turns round trip by
 * round trip, "MODE SIZE_MIB S2D_1 D2S_1 S2D_2 D2S_2 RATIO_S2D RATIO_D2S"
 * where a ratio is the median of the per-round-trip time ratios device 1 /
 * device 2. Exits non-zero if a migration fails or data does not survive
 * it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct dmirror_cmd {
	uint64_t addr, ptr, npages, cpages, faults;
};

#define MIGRATE_TO_DEV _IOWR('H', 0x02, struct dmirror_cmd)
#define MIGRATE_TO_SYS _IOWR('H', 0x03, struct dmirror_cmd)
#define PMD_SIZE (2UL << 20)

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int migrate(int fd, unsigned long req, void *addr, void *mirror,
		   size_t size, double *ms)
{
	struct dmirror_cmd c = {
		.addr = (uintptr_t)addr,
		.ptr = (uintptr_t)mirror,
		.npages = size / 4096,
	};
	double t = now_ms();

	if (ioctl(fd, req, &c)) {
		fprintf(stderr, "hmm-bench: migrate %s: %s\n",
			req == MIGRATE_TO_DEV ? "to device" : "to system",
			strerror(errno));
		return -1;
	}
	*ms = now_ms() - t;
	if (req == MIGRATE_TO_DEV && c.cpages != c.npages) {
		fprintf(stderr, "hmm-bench: %llu of %llu pages migrated\n",
			(unsigned long long)c.cpages,
			(unsigned long long)c.npages);
		return -1;
	}
	return 0;
}

/* One device's buffer and measurements. */
struct dev {
	const char *path;
	int fd;
	char *map, *buf, *mirror;
	double s2d[64], d2s[64];
};

static int dev_setup(struct dev *d, int thp, size_t size)
{
	uint32_t *p;
	size_t w;

	/* Twice the size, so that a PMD-aligned window fits. */
	d->map = mmap(NULL, size + PMD_SIZE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	d->mirror = malloc(size);
	if (d->map == MAP_FAILED || !d->mirror)
		return -1;
	d->buf = (char *)(((uintptr_t)d->map + PMD_SIZE - 1) & ~(PMD_SIZE - 1));
	if (madvise(d->buf, size, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
		return -1;
	p = (uint32_t *)d->buf;
	for (w = 0; w < size / 4; w++)
		p[w] = w * 2654435761u;
	return 0;
}

static void dev_teardown(struct dev *d, size_t size)
{
	if (d->map != MAP_FAILED)
		munmap(d->map, size + PMD_SIZE);
	free(d->mirror);
}

/* One round trip of d's buffer, checked; times into slot i (if i >= 0). */
static int round_trip(struct dev *d, size_t size, int i)
{
	uint32_t *p = (uint32_t *)d->buf;
	double a, b;
	size_t w;

	if (migrate(d->fd, MIGRATE_TO_DEV, d->buf, d->mirror, size, &a) ||
	    migrate(d->fd, MIGRATE_TO_SYS, d->buf, d->mirror, size, &b))
		return -1;
	if (memcmp(d->mirror, d->buf, size)) {
		fprintf(stderr, "hmm-bench: %s read wrong data\n", d->path);
		return -1;
	}
	for (w = 0; w < size / 4; w++) {
		if (p[w] != (uint32_t)(w * 2654435761u)) {
			fprintf(stderr, "hmm-bench: %s: word %zu wrong\n",
				d->path, w);
			return -1;
		}
	}
	if (i >= 0) {
		d->s2d[i] = a;
		d->d2s[i] = b;
	}
	return 0;
}

static double median(const double *v, int n)
{
	double s[64];

	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp);
	return s[n / 2];
}

/*
 * The devices take turns: iteration i runs them in order, or in reverse
 * for odd i, so that a drift of the host's speed hits all alike. Prints
 * the medians of each device, and with two devices the median of the
 * per-iteration ratios (first device's time / second's: the second's
 * throughput relative to the first).
 */
static int run(struct dev *devs, int ndev, int thp, size_t size, int iters)
{
	int i, k, ret = -1;

	for (k = 0; k < ndev; k++)
		devs[k].map = MAP_FAILED, devs[k].mirror = NULL;
	for (k = 0; k < ndev; k++)
		if (dev_setup(&devs[k], thp, size))
			goto out;
	/* One warm-up round trip each, then the measured ones. */
	for (i = -1; i < iters; i++) {
		for (k = 0; k < ndev; k++) {
			int d = (i & 1) ? ndev - 1 - k : k;

			if (round_trip(&devs[d], size, i))
				goto out;
		}
	}
	printf("%s %zu", thp ? "thp" : "4k", size >> 20);
	for (k = 0; k < ndev; k++)
		printf(" %.3f %.3f", median(devs[k].s2d, iters),
		       median(devs[k].d2s, iters));
	if (ndev == 2) {
		double rs[64], rd[64];

		for (i = 0; i < iters; i++) {
			rs[i] = devs[0].s2d[i] / devs[1].s2d[i];
			rd[i] = devs[0].d2s[i] / devs[1].d2s[i];
		}
		printf(" %.3f %.3f", median(rs, iters), median(rd, iters));
	}
	printf("\n");
	fflush(stdout);
	ret = 0;
out:
	for (k = 0; k < ndev; k++)
		dev_teardown(&devs[k], size);
	return ret;
}

int main(int argc, char **argv)
{
	struct dev devs[2];
	int ndev = 1, iters, thp, first = 0, last = 1, k;
	char *comma;
	size_t size;

	if (argc == 5 && !strcmp(argv[4], "4k")) {
		last = 0;
	} else if (argc == 5 && !strcmp(argv[4], "thp")) {
		first = 1;
	} else if (argc != 4) {
		fprintf(stderr,
			"usage: hmm-bench DEVICE[,DEVICE2] SIZE_MIB ITERATIONS [4k|thp]\n");
		return 2;
	}
	size = strtoul(argv[2], NULL, 0) << 20;
	iters = atoi(argv[3]);
	if (!size || size % PMD_SIZE || iters < 1 || iters > 64) {
		fprintf(stderr, "hmm-bench: bad size or iteration count\n");
		return 2;
	}
	devs[0].path = argv[1];
	comma = strchr(argv[1], ',');
	if (comma) {
		*comma = 0;
		devs[1].path = comma + 1;
		ndev = 2;
	}
	for (k = 0; k < ndev; k++) {
		devs[k].fd = open(devs[k].path, O_RDWR);
		if (devs[k].fd < 0) {
			perror(devs[k].path);
			return 1;
		}
	}
	for (thp = first; thp <= last; thp++)
		if (run(devs, ndev, thp, size, iters))
			return 1;
	for (k = 0; k < ndev; k++)
		close(devs[k].fd);
	return 0;
}
