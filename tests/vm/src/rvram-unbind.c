// SPDX-License-Identifier: GPL-2.0
/*
 * Unbinding a GPU while process data is resident in its VRAM evacuates
 * the data to system RAM: every byte survives, the process keeps running.
 *
 *   rvram-unbind /dev/rvramN PCI_ADDR [MIB]
 *
 * MIB (default 4) is the size of the data moved into VRAM before the
 * unbind.
 *
 * Prints TAP.
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

#include "dmirror.h"

static int n, failed;

static void check(int ok, const char *what)
{
	printf("%sok %d %s\n", ok ? "" : "not ", ++n, what);
	if (!ok)
		failed++;
}

int main(int argc, char **argv)
{
	size_t npages = 1024, size;
	struct hmm_dmirror_cmd cmd = { 0 };
	unsigned char *buf, *mirror, *snap;
	size_t i, resident = 0, bad = 0;
	struct timespec t0, t1;
	int fd, rc;

	if (argc == 4)
		npages = strtoul(argv[3], NULL, 10) * 256;
	if ((argc != 3 && argc != 4) || !npages || npages > (1UL << 20)) {
		fprintf(stderr, "usage: %s /dev/rvramN PCI_ADDR [MIB]\n", argv[0]);
		return 2;
	}
	size = npages * 4096;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	fd = open(argv[1], O_RDWR);
	check(fd >= 0, "open the GPU");
	buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mirror = malloc(size);
	snap = malloc(npages);
	for (i = 0; i < size; i++)
		buf[i] = (unsigned char)(i * 7 + i / 4096);

	cmd.addr = (uintptr_t)buf;
	cmd.ptr = (uintptr_t)mirror;
	cmd.npages = npages;
	check(ioctl(fd, HMM_DMIRROR_MIGRATE_TO_DEV, &cmd) == 0 && cmd.cpages == npages,
	      "migrate the data into VRAM");
	cmd.ptr = (uintptr_t)snap;
	check(ioctl(fd, HMM_DMIRROR_SNAPSHOT, &cmd) == 0, "snapshot");
	for (i = 0; i < npages; i++)
		resident += (snap[i] & 0xf0) == HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL;
	check(resident == npages, "every page is resident in VRAM");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = rvram_unbind(argv[2]);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	check(rc == 0, "unbind the GPU with data resident");
	printf("# unbind took %ld us\n",
	       (long)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000));

	cmd.ptr = (uintptr_t)snap;
	check(ioctl(fd, HMM_DMIRROR_SNAPSHOT, &cmd) < 0 && errno == ENODEV,
	      "the open file reports ENODEV after unbind");
	for (i = 0; i < size; i++)
		bad += buf[i] != (unsigned char)(i * 7 + i / 4096);
	check(bad == 0, "every byte survived the unbind (CPU reads)");
	if (bad)
		printf("# %zu bytes differ\n", bad);
	close(fd);
	check(rvram_bind(argv[2]) == 0, "bind it again");
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}
