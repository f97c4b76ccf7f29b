// SPDX-License-Identifier: GPL-2.0
/*
 * CPU copies to and from a VRAM buffer object mapped into user space (the
 * mmap() of an RVRAM_IOCTL_ALLOC_DMABUF dma-buf: write-combined BAR pages),
 * next to the same copies to and from system RAM: what a gdrcopy-style
 * user pays for a small transfer.
 *
 *   rvram-cpumap-bench GPU
 *
 * For each size from 4 B to 4 MiB, the median over 5 runs of the time of
 * one memcpy() in each direction, as
 *   # cpumap SIZE TO_VRAM_NS FROM_VRAM_NS TO_RAM_NS FROM_RAM_NS
 * TAP points check data only: every byte written through the mapping reads
 * back through it and through a second mapping. Never a time.
 */
#include <sys/mman.h>
#include <time.h>

#include "../../../drivers/rvram/include/uapi/misc/rvram.h"
#include "dmirror.h"

#define MAX_SIZE (4UL << 20)
#define RUNS 5

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median ns of one memcpy(dst, src, size), over RUNS runs of reps copies. */
static double time_copy(unsigned char *dst, const unsigned char *src, size_t size)
{
	size_t reps = size >= (1UL << 20) ? 2 : (1UL << 20) / size;
	double t[RUNS];
	int r;

	if (reps > 4096)
		reps = 4096;
	for (r = 0; r < RUNS; r++) {
		double t0 = now_ns();
		size_t i;

		for (i = 0; i < reps; i++) {
			memcpy(dst, src, size);
			/* Every copy happens, in order. */
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		t[r] = (now_ns() - t0) / reps;
	}
	qsort(t, RUNS, sizeof(t[0]), cmp);
	return t[RUNS / 2];
}

int main(int argc, char **argv)
{
	struct rvram_alloc_dmabuf a = { .size = MAX_SIZE };
	unsigned char *vram, *again, *ram, *src, *dst;
	char path[32];
	size_t size, i;
	int gpu;

	if (argc != 2) {
		fprintf(stderr, "usage: rvram-cpumap-bench GPU\n");
		return 2;
	}
	printf("TAP version 13\n");
	snprintf(path, sizeof(path), "/dev/rvram%s", argv[1]);
	gpu = open(path, O_RDWR);
	if (gpu < 0 || ioctl(gpu, RVRAM_IOCTL_ALLOC_DMABUF, &a)) {
		printf("not ok 1 a %lu-byte VRAM buffer: %s\n1..1\n", MAX_SIZE, strerror(errno));
		return 1;
	}
	vram = mmap(NULL, MAX_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd, 0);
	ram = aligned_alloc(4096, MAX_SIZE);
	src = aligned_alloc(4096, MAX_SIZE);
	dst = aligned_alloc(4096, MAX_SIZE);
	tap(vram != MAP_FAILED && ram && src && dst,
	      "setup: 4 MiB of VRAM mapped, write-combined, and 3 RAM buffers");
	if (tap_failed)
		return tap_end();
	for (i = 0; i < MAX_SIZE; i++)
		src[i] = (unsigned char)(i * 13 + i / 4096);
	/* Fault every page in first: the copies time copying, not faults. */
	memset(vram, 0, MAX_SIZE);
	memset(ram, 0, MAX_SIZE);
	memset(dst, 0, MAX_SIZE);
	printf("# bench: CPU copies through an mmap() of a VRAM dma-buf, median of %d runs\n", RUNS);
	for (size = 4; size <= MAX_SIZE; size *= 4) {
		double to_vram = time_copy(vram, src, size);
		double from_vram = time_copy(dst, vram, size);
		double to_ram = time_copy(ram, src, size);
		double from_ram = time_copy(dst, ram, size);

		printf("# cpumap %zu %.1f %.1f %.1f %.1f\n", size, to_vram, from_vram,
		       to_ram, from_ram);
	}
	memcpy(vram, src, MAX_SIZE);
	memset(dst, 0, MAX_SIZE);
	memcpy(dst, vram, MAX_SIZE);
	tap(!memcmp(dst, src, MAX_SIZE), "data: 4 MiB written through the mapping read back");
	again = mmap(NULL, MAX_SIZE, PROT_READ, MAP_SHARED, a.fd, 0);
	tap(again != MAP_FAILED && !memcmp(again, src, MAX_SIZE),
	      "data: a second mapping of the buffer reads the same bytes");
	return tap_end();
}
