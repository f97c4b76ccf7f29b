// SPDX-License-Identifier: GPL-2.0
/*
 * One user's VRAM-sized request does not stall another user's ioctls.
 *
 *   rvram-share /dev/rvramN VRAM_BYTES ROUNDS
 *
 * Process A allocates a buffer object of all of VRAM but 4 MiB
 * (RVRAM_IOCTL_ALLOC_DMABUF clears every page of it before it returns),
 * ROUNDS times; process B, with a file of its own on the same GPU, moves
 * a page into VRAM and back (HMM_DMIRROR_MIGRATE_TO_DEV, _TO_SYS) over and
 * over. The bound is counted in B's operations: B must complete at least
 * MIN_OPS round trips, each begun and ended while one of A's calls ran,
 * in every round. A lock that A held through its call held B off until it
 * ended: B completed none. Prints TAP.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dmirror.h"
#include "rvram-bo.h"

#define MIN_OPS 3

struct shared {
	atomic_int a_running;	/* A's call is in progress (its round + 1) */
	atomic_int stop;
	atomic_long ops[64];	/* B's round trips within A's call, per round */
	atomic_long errors;	/* B's operations that failed */
	atomic_long total;	/* B's operations */
	atomic_int first_error;	/* the first failed operation's -errno, or its data */
};

static void user_b(const char *dev, struct shared *sh)
{
	int fd = open(dev, O_RDWR);
	unsigned char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	static unsigned char out[PAGE];

	if (fd < 0 || p == MAP_FAILED)
		_exit(2);
	memset(p, 0x6b, PAGE);
	while (!atomic_load(&sh->stop)) {
		int before = atomic_load(&sh->a_running), e;

		e = dmirror(fd, HMM_DMIRROR_MIGRATE_TO_DEV, p, out, 1);
		e = e ?: dmirror(fd, HMM_DMIRROR_MIGRATE_TO_SYS, p, out, 1);
		atomic_fetch_add(&sh->total, 1);
		if (e || p[PAGE - 1] != 0x6b) {
			int zero = 0;

			atomic_compare_exchange_strong(&sh->first_error, &zero, e ?: p[PAGE - 1]);
			atomic_fetch_add(&sh->errors, 1);
			continue;
		}
		/* Begun and ended in the same call of A's. */
		if (before && atomic_load(&sh->a_running) == before)
			atomic_fetch_add(&sh->ops[before - 1], 1);
	}
	_exit(0);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct shared *sh;
	unsigned long long vram;
	int rounds, fd, status, r;
	pid_t b;

	if (argc != 4) {
		fprintf(stderr, "usage: %s /dev/rvramN VRAM_BYTES ROUNDS\n", argv[0]);
		return 2;
	}
	vram = strtoull(argv[2], NULL, 0);
	rounds = atoi(argv[3]);
	if (vram <= (4ULL << 20) || rounds < 1 || rounds > 64)
		return 2;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	fd = open(argv[1], O_RDWR);
	if (sh == MAP_FAILED || fd < 0) {
		perror("setup");
		return 2;
	}
	b = fork();
	if (b == 0)
		user_b(argv[1], sh);
	/* B under way before A asks. */
	while (atomic_load(&sh->total) - atomic_load(&sh->errors) < 2 &&
	       atomic_load(&sh->errors) < 1000)
		usleep(1000);
	for (r = 0; r < rounds; r++) {
		double t0 = now(), t;
		int bo;

		atomic_store(&sh->a_running, r + 1);
		bo = rvram_alloc_bo(fd, vram - (4ULL << 20), 0);
		atomic_store(&sh->a_running, 0);
		t = now() - t0;
		fflush(stdout);
		tap(bo >= 0, "round %d: A's buffer of %llu MiB (%d), cleared in %.2f s", r + 1,
		    (vram >> 20) - 4, bo < 0 ? bo : 0, t);
		tap(atomic_load(&sh->ops[r]) >= MIN_OPS,
		    "round %d: B completed %ld page round trips meanwhile (at least %d)", r + 1,
		    atomic_load(&sh->ops[r]), MIN_OPS);
		if (bo >= 0)
			close(bo);
	}
	atomic_store(&sh->stop, 1);
	waitpid(b, &status, 0);
	tap(WIFEXITED(status) && WEXITSTATUS(status) == 0, "B exited cleanly");
	tap(atomic_load(&sh->errors) == 0,
	    "B's %ld round trips kept the page's data, no errors (%ld, the first %d)",
	    atomic_load(&sh->total), atomic_load(&sh->errors), atomic_load(&sh->first_error));
	fflush(stdout);
	return tap_end();
}
