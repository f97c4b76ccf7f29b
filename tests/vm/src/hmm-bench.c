// SPDX-License-Identifier: GPL-2.0
/*
 * Migration throughput of a dmirror device (lib/test_hmm or rvram), for
 * 4 KiB pages and for THPs, both ways: the measurement of hmm-tests'
 * benchmark_thp_migration, without its harness timeout and with a data
 * check after every round trip.
 *
 *   hmm-bench DEVICE SIZE_MIB ITERATIONS [4k|thp]
 *
 * Prints one line per mode (both, or the one named): "MODE SIZE_MIB S2D_MS
 * D2S_MS" (medians) and exits non-zero if a migration fails or data does
 * not survive it.
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

static int run(int fd, int thp, size_t size, int iters, double *s2d,
	       double *d2s)
{
	/* Twice the size, so that a PMD-aligned window fits. */
	char *map = mmap(NULL, size + PMD_SIZE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *mirror = malloc(size);
	uint32_t *p;
	char *buf;
	int i, ret = -1;
	size_t w;

	if (map == MAP_FAILED || !mirror)
		goto out;
	buf = (char *)(((uintptr_t)map + PMD_SIZE - 1) & ~(PMD_SIZE - 1));
	if (madvise(buf, size, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
		goto out;
	p = (uint32_t *)buf;
	for (w = 0; w < size / 4; w++)
		p[w] = w * 2654435761u;
	/* One warm-up round trip, then the measured ones. */
	for (i = -1; i < iters; i++) {
		double a, b;

		if (migrate(fd, MIGRATE_TO_DEV, buf, mirror, size, &a) ||
		    migrate(fd, MIGRATE_TO_SYS, buf, mirror, size, &b))
			goto out;
		if (memcmp(mirror, buf, size)) {
			fprintf(stderr, "hmm-bench: device read wrong data\n");
			goto out;
		}
		for (w = 0; w < size / 4; w++) {
			if (p[w] != (uint32_t)(w * 2654435761u)) {
				fprintf(stderr, "hmm-bench: word %zu wrong\n", w);
				goto out;
			}
		}
		if (i >= 0) {
			s2d[i] = a;
			d2s[i] = b;
		}
	}
	qsort(s2d, iters, sizeof(*s2d), cmp);
	qsort(d2s, iters, sizeof(*d2s), cmp);
	ret = 0;
out:
	if (map != MAP_FAILED)
		munmap(map, size + PMD_SIZE);
	free(mirror);
	return ret;
}

int main(int argc, char **argv)
{
	double s2d[64], d2s[64];
	int fd, iters, thp, first = 0, last = 1;
	size_t size;

	if (argc == 5 && !strcmp(argv[4], "4k")) {
		last = 0;
	} else if (argc == 5 && !strcmp(argv[4], "thp")) {
		first = 1;
	} else if (argc != 4) {
		fprintf(stderr,
			"usage: hmm-bench DEVICE SIZE_MIB ITERATIONS [4k|thp]\n");
		return 2;
	}
	size = strtoul(argv[2], NULL, 0) << 20;
	iters = atoi(argv[3]);
	if (!size || size % PMD_SIZE || iters < 1 || iters > 64) {
		fprintf(stderr, "hmm-bench: bad size or iteration count\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	for (thp = first; thp <= last; thp++) {
		if (run(fd, thp, size, iters, s2d, d2s))
			return 1;
		printf("%s %zu %.3f %.3f\n", thp ? "thp" : "4k", size >> 20,
		       s2d[iters / 2], d2s[iters / 2]);
		fflush(stdout);
	}
	close(fd);
	return 0;
}
