// SPDX-License-Identifier: GPL-2.0
/*
 * Unbinding a GPU while process data is resident in its VRAM evacuates
 * the data to system RAM: every byte survives, the process keeps running.
 *
 *   rvram-unbind /dev/rvramN PCI_ADDR [MIB [STARVE]]
 *
 * MIB (default 4) is the size of the data moved into VRAM before the
 * unbind.
 *
 * With STARVE (seconds), the unbind runs in a thread of its own whose
 * allocations from rvram's code fail (fail_page_alloc, set up by the
 * caller with task-filter and rvram's text as require-start/require-end;
 * this program turns probability to 100 for STARVE seconds): eviction
 * finds no system memory for that long. A device-private page's data has
 * no other home once the BAR is unmapped, so the unbind must still wait
 * when STARVE seconds are up (more than the driver's 10 s of patience
 * with pages users can pin) and return once memory can be had, every
 * byte intact.
 *
 * Prints TAP.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
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

#define FAIL_PAGE_ALLOC "/sys/kernel/debug/fail_page_alloc/"

static int fail_knob(const char *knob, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), FAIL_PAGE_ALLOC "%s", knob);
	return sysfs_write(path, val);
}

struct unbinder {
	const char *pci;
	int rc;
	atomic_int done;
};

/* Unbinds with this thread's page allocations from rvram failing. */
static void *unbind_starved(void *arg)
{
	struct unbinder *u = arg;
	int fd = open("/proc/thread-self/make-it-fail", O_WRONLY);

	if (fd < 0 || write(fd, "1", 1) != 1) {
		u->rc = -errno;
	} else {
		u->rc = rvram_unbind(u->pci);
		if (write(fd, "0", 1) != 1)
			u->rc = u->rc ? u->rc : -errno;
	}
	if (fd >= 0)
		close(fd);
	atomic_store(&u->done, 1);
	return NULL;
}

/* Waits up to SECONDS for U's unbind; whether it returned. */
static int unbind_returned(struct unbinder *u, int seconds)
{
	int i;

	for (i = 0; i < seconds * 10 && !atomic_load(&u->done); i++)
		usleep(100000);
	return atomic_load(&u->done);
}

int main(int argc, char **argv)
{
	struct unbinder u = { .pci = NULL };
	pthread_t thread;
	int starve = 0;
	size_t npages = 1024, size;
	struct hmm_dmirror_cmd cmd = { 0 };
	unsigned char *buf, *mirror, *snap;
	size_t i, resident = 0, bad = 0;
	struct timespec t0, t1;
	int fd, rc;

	if (argc >= 4)
		npages = strtoul(argv[3], NULL, 10) * 256;
	if (argc == 5)
		starve = atoi(argv[4]);
	if (argc < 3 || argc > 5 || !npages || npages > (1UL << 20) ||
	    (argc == 5 && (starve <= 0 || starve > 600))) {
		fprintf(stderr, "usage: %s /dev/rvramN PCI_ADDR [MIB [STARVE]]\n", argv[0]);
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
	if (!starve) {
		rc = rvram_unbind(argv[2]);
	} else {
		u.pci = argv[2];
		check(fail_knob("probability", "100") == 0,
		      "page allocations from rvram in the unbinding thread fail from now on");
		rc = pthread_create(&thread, NULL, unbind_starved, &u);
		check(rc == 0, "start the unbind in a thread of its own");
		if (rc)
			return 1;
		sleep(starve);
		check(!atomic_load(&u.done),
		      "the unbind still waits for system memory after STARVE seconds");
		check(fail_knob("probability", "0") == 0, "page allocations succeed again");
		if (!unbind_returned(&u, 300)) {
			check(0, "the unbind returns within 300 s once they do");
			printf("1..%d\n", n);
			/* The thread stays in the kernel: nothing to join. */
			fflush(stdout);
			_exit(1);
		}
		check(1, "the unbind returns within 300 s once they do");
		pthread_join(thread, NULL);
		rc = u.rc;
	}
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
