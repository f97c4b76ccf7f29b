/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel coverage of a test program, for `make coverage` (not make check).
 *
 * With RVRAM_KCOV_DIR set, the program's main thread and every thread it
 * creates trace the kernel's basic blocks they run through KCOV
 * (Documentation/dev-tools/kcov.rst, KCOV_TRACE_PC), a collector thread
 * drains the traces into one set of unique PCs, and at exit the set goes to
 * $RVRAM_KCOV_DIR/<program>.<pid>.pcs with what `rvram-report coverage` needs to
 * place them: the kernel's _stext (KCOV subtracts the KASLR offset) and the
 * sections of the rvram and test_hmm modules. Without the variable,
 * nothing happens; with it, a kernel without KCOV fails the program.
 *
 * The collector reads a trace while the kernel appends to it: it may read
 * a slot the kernel has claimed but not yet written, which holds an older
 * PC of the same thread (or zero, skipped). Either was a real hit, so the
 * set can miss a PC, never gain one. A trace that filled up between two
 * drains lost PCs: the file counts such drains ("full"), and a run that has
 * any is a lower bound. Children of fork() are not traced.
 *
 * Include after <pthread.h>: pthread_create() becomes kcov_pthread_create().
 */
#ifndef RVRAM_TESTS_KCOV_H
#define RVRAM_TESTS_KCOV_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define KCOV_H_INIT_TRACE _IOR('c', 1, unsigned long)
#define KCOV_H_ENABLE _IO('c', 100)
#define KCOV_H_TRACE_PC 0
/* Words per thread's trace (16 MiB). */
#define KCOV_H_WORDS (1UL << 21)
#define KCOV_H_THREADS 64

extern char *program_invocation_short_name;

static struct {
	pthread_mutex_t lock;
	int on;
	pid_t pid;
	int nr;
	volatile unsigned long *area[KCOV_H_THREADS];
	/* Open-addressing set of PCs (0 marks a free slot). */
	unsigned long *set;
	size_t cap, used;
	unsigned long full, untraced;
	volatile int stop;
	pthread_t collector;
} kcov_h = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void kcov_h_die(const char *what)
{
	fprintf(stderr, "kcov: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void kcov_h_add(unsigned long pc)
{
	size_t i;

	if (2 * (kcov_h.used + 1) > kcov_h.cap) {
		unsigned long *old = kcov_h.set;
		size_t n = kcov_h.cap, j;

		kcov_h.cap = n ? 2 * n : 1 << 16;
		kcov_h.set = calloc(kcov_h.cap, sizeof(*kcov_h.set));
		if (!kcov_h.set)
			kcov_h_die("calloc");
		kcov_h.used = 0;
		for (j = 0; j < n; j++)
			if (old[j])
				kcov_h_add(old[j]);
		free(old);
	}
	i = (pc * 0x9e3779b97f4a7c15UL) & (kcov_h.cap - 1);
	while (kcov_h.set[i] && kcov_h.set[i] != pc)
		i = (i + 1) & (kcov_h.cap - 1);
	if (!kcov_h.set[i]) {
		kcov_h.set[i] = pc;
		kcov_h.used++;
	}
}

/* Called with the lock held. */
static void kcov_h_drain(void)
{
	int t;

	for (t = 0; t < kcov_h.nr; t++) {
		volatile unsigned long *a = kcov_h.area[t];
		unsigned long n = __atomic_load_n(&a[0], __ATOMIC_ACQUIRE), i;

		if (!n)
			continue;
		if (n >= KCOV_H_WORDS - 1)
			kcov_h.full++;
		for (i = 1; i <= n && i < KCOV_H_WORDS; i++)
			if (a[i])
				kcov_h_add(a[i]);
		__atomic_store_n(&a[0], 0, __ATOMIC_RELEASE);
	}
}

static void *kcov_h_collect(void *arg)
{
	(void)arg;
	while (!kcov_h.stop) {
		struct timespec ts = { 0, 2000000 };

		pthread_mutex_lock(&kcov_h.lock);
		kcov_h_drain();
		pthread_mutex_unlock(&kcov_h.lock);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Traces the calling thread. */
static void kcov_h_trace_self(void)
{
	volatile unsigned long *a;
	int fd;

	if (!kcov_h.on)
		return;
	fd = open("/sys/kernel/debug/kcov", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		kcov_h_die("/sys/kernel/debug/kcov");
	if (ioctl(fd, KCOV_H_INIT_TRACE, KCOV_H_WORDS))
		kcov_h_die("KCOV_INIT_TRACE");
	a = mmap(NULL, KCOV_H_WORDS * sizeof(unsigned long), PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	if (a == MAP_FAILED)
		kcov_h_die("mmap kcov");
	pthread_mutex_lock(&kcov_h.lock);
	if (kcov_h.nr == KCOV_H_THREADS) {
		kcov_h.untraced++;
		pthread_mutex_unlock(&kcov_h.lock);
		munmap((void *)a, KCOV_H_WORDS * sizeof(unsigned long));
		close(fd);
		return;
	}
	kcov_h.area[kcov_h.nr++] = a;
	pthread_mutex_unlock(&kcov_h.lock);
	if (ioctl(fd, KCOV_H_ENABLE, KCOV_H_TRACE_PC))
		kcov_h_die("KCOV_ENABLE");
	__atomic_store_n(&a[0], 0, __ATOMIC_RELEASE);
	/*
	 * The thread and the mapping keep the trace: the fd can go, and must,
	 * for the tests that count their open files.
	 */
	close(fd);
}

struct kcov_h_start {
	void *(*fn)(void *);
	void *arg;
};

static void *kcov_h_thread(void *p)
{
	struct kcov_h_start s = *(struct kcov_h_start *)p;

	free(p);
	kcov_h_trace_self();
	return s.fn(s.arg);
}

static inline int kcov_pthread_create(pthread_t *th, const pthread_attr_t *attr,
				      void *(*fn)(void *), void *arg)
{
	struct kcov_h_start *s;

	if (!kcov_h.on)
		return pthread_create(th, attr, fn, arg);
	s = malloc(sizeof(*s));
	if (!s)
		return ENOMEM;
	s->fn = fn;
	s->arg = arg;
	return pthread_create(th, attr, kcov_h_thread, s);
}

/* "section MODULE NAME ADDRESS" for each section of a loaded module. */
static void kcov_h_sections(FILE *f, const char *mod)
{
	char path[512], line[64];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/module/%s/sections", mod);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		FILE *s;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "/sys/module/%s/sections/%s", mod, e->d_name);
		s = fopen(path, "r");
		if (s && fgets(line, sizeof(line), s))
			fprintf(f, "section %s %s %s", mod, e->d_name, line);
		if (s)
			fclose(s);
	}
	closedir(d);
}

static void kcov_h_exit(void)
{
	char path[512], line[256];
	const char *dir = getenv("RVRAM_KCOV_DIR");
	FILE *f, *k;
	size_t i;

	if (!kcov_h.on || getpid() != kcov_h.pid)
		return;
	kcov_h.stop = 1;
	pthread_join(kcov_h.collector, NULL);
	pthread_mutex_lock(&kcov_h.lock);
	kcov_h_drain();
	snprintf(path, sizeof(path), "%s/%s.%d.pcs", dir, program_invocation_short_name,
		 (int)getpid());
	f = fopen(path, "w");
	if (!f)
		kcov_h_die(path);
	fprintf(f, "kcov 1\nthreads %d\nuntraced %lu\nfull %lu\n", kcov_h.nr, kcov_h.untraced,
		kcov_h.full);
	k = fopen("/proc/kallsyms", "r");
	while (k && fgets(line, sizeof(line), k))
		if (strstr(line, " _stext\n")) {
			fprintf(f, "stext %.*s\n", (int)strcspn(line, " "), line);
			break;
		}
	if (k)
		fclose(k);
	kcov_h_sections(f, "rvram");
	kcov_h_sections(f, "test_hmm");
	for (i = 0; i < kcov_h.cap; i++)
		if (kcov_h.set[i] > 1)
			fprintf(f, "%lx\n", kcov_h.set[i]);
	if (fclose(f))
		kcov_h_die(path);
	pthread_mutex_unlock(&kcov_h.lock);
}

__attribute__((constructor)) static void kcov_h_init(void)
{
	if (!getenv("RVRAM_KCOV_DIR"))
		return;
	kcov_h.on = 1;
	kcov_h.pid = getpid();
	pthread_mutex_lock(&kcov_h.lock);
	kcov_h_add(1);	/* Allocates the set; 1 is no kernel PC. */
	pthread_mutex_unlock(&kcov_h.lock);
	errno = pthread_create(&kcov_h.collector, NULL, kcov_h_collect, NULL);
	if (errno)
		kcov_h_die("pthread_create");
	atexit(kcov_h_exit);
	kcov_h_trace_self();
}

#define pthread_create kcov_pthread_create

#endif /* RVRAM_TESTS_KCOV_H */
