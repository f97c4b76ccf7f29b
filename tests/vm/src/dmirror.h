/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The lib/test_hmm ioctl ABI (lib/test_hmm_uapi.h) as rvram speaks it, a
 * seeded random number generator, TAP output, and rvram's sysfs and debugfs
 * files (unbind and bind, counters), for the in-guest C tests.
 */
#ifndef RVRAM_TESTS_DMIRROR_H
#define RVRAM_TESTS_DMIRROR_H

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

struct hmm_dmirror_cmd {
	uint64_t addr, ptr, npages, cpages, faults;
};

#define DMIRROR_CMD(nr) _IOWR('H', (nr), struct hmm_dmirror_cmd)
#define HMM_DMIRROR_READ DMIRROR_CMD(0x00)
#define HMM_DMIRROR_WRITE DMIRROR_CMD(0x01)
#define HMM_DMIRROR_MIGRATE_TO_DEV DMIRROR_CMD(0x02)
#define HMM_DMIRROR_MIGRATE_TO_SYS DMIRROR_CMD(0x03)
#define HMM_DMIRROR_SNAPSHOT DMIRROR_CMD(0x04)
#define HMM_DMIRROR_EXCLUSIVE DMIRROR_CMD(0x05)
#define HMM_DMIRROR_CHECK_EXCLUSIVE DMIRROR_CMD(0x06)
#define HMM_DMIRROR_RELEASE DMIRROR_CMD(0x07)
#define HMM_DMIRROR_FLAGS DMIRROR_CMD(0x08)
#define HMM_DMIRROR_READ_UNLOCKED DMIRROR_CMD(0x09)

/* SNAPSHOT's per-page bytes. */
#define HMM_DMIRROR_PROT_WRITE 0x02
#define HMM_DMIRROR_PROT_PMD 0x04
#define HMM_DMIRROR_PROT_DEV_PRIVATE_LOCAL 0x20
#define HMM_DMIRROR_PROT_DEV_COHERENT_LOCAL 0x40

/* lib/test_hmm's HMM_DMIRROR_FLAGS bits (test_hmm_uapi.h, with the alias series). */
#define HMM_DMIRROR_FLAG_FAIL_ALLOC (1ULL << 0)
#define HMM_DMIRROR_FLAG_ALIAS (1ULL << 1)
#define HMM_DMIRROR_FLAG_NO_ALIAS (1ULL << 2)

/* rvram's own HMM_DMIRROR_FLAGS bits (drivers/rvram/dmirror.rs). */
#define RVRAM_FLAG_ALIAS_DMA (1ULL << 16)
#define RVRAM_FLAG_ALIAS_CPU (1ULL << 17)

#define PAGE 4096UL
#define PMD_SIZE (2UL << 20)

/*
 * The errnos a dmirror command may return: the table in
 * Documentation/misc-devices/rvram.rst ("Errors").
 */
static const int dmirror_errnos[] = {
	EFAULT, EINVAL, ENOMEM, EPERM, ENOENT, EBUSY, EOPNOTSUPP, EINTR, ENODEV, EBADF,
};

static inline int dmirror_errno_ok(int e)
{
	for (size_t i = 0; i < sizeof(dmirror_errnos) / sizeof(dmirror_errnos[0]); i++)
		if (dmirror_errnos[i] == e)
			return 1;
	return 0;
}

static inline int dmirror(int fd, unsigned long nr, void *addr, void *ptr, uint64_t npages)
{
	struct hmm_dmirror_cmd c = {
		.addr = (uintptr_t)addr, .ptr = (uintptr_t)ptr, .npages = npages,
	};

	return ioctl(fd, nr, &c) ? -errno : 0;
}

/* xorshift64*: every random choice of a test is a function of its seed. */
static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static inline uint64_t rnd_below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

/* A seed for stream `k` of a test seeded with `seed`; never 0. */
static inline uint64_t rnd_stream(uint64_t seed, uint64_t k)
{
	uint64_t s = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ (k + 1) * 0xbf58476d1ce4e5b9ULL;

	return s ? s : 1;
}

static int tap_n, tap_failed;

static inline void __attribute__((format(printf, 2, 3))) tap(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d ", ok ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!ok)
		tap_failed++;
}

static inline int tap_end(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

/* Writes `val` to the sysfs file `path`: 0 or -errno. */
static inline int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	int ret;

	if (fd < 0)
		return -errno;
	ret = write(fd, val, strlen(val)) < 0 ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * rvram registers two PCI drivers, rvram (device-private VRAM) and
 * rvram-coherent (device-coherent VRAM), and each binds only the devices
 * assigned to it through driver_override (tests/vm/rvram.sh). An
 * assignment outlives unbind, rmmod and insmod, not the removal of the
 * device from the bus.
 */

/* Unbinds the GPU at PCI address PCI from its driver: 0 or -errno. */
static inline int rvram_unbind(const char *pci)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver/unbind", pci);
	return sysfs_write(path, pci);
}

/*
 * The name of the driver the device at PCI is assigned to (its
 * driver_override) into DRV: 0, -ENOENT if it is assigned to none, or
 * -errno.
 */
static inline int rvram_assigned(const char *pci, char *drv, size_t size)
{
	char path[128];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override", pci);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	if (!fgets(drv, (int)size, f))
		drv[0] = '\0';
	fclose(f);
	drv[strcspn(drv, "\n")] = '\0';
	/* An unset override reads "(null)". */
	if (!drv[0] || !strcmp(drv, "(null)"))
		ret = -ENOENT;
	return ret;
}

/*
 * Binds the GPU at PCI to the driver it is assigned to, through that
 * driver's bind file: 0, or the probe's -errno (-EBUSY, -ENODEV), or
 * -ENOENT if it is assigned to no driver.
 */
static inline int rvram_bind(const char *pci)
{
	char drv[64], path[160];
	int ret = rvram_assigned(pci, drv, sizeof(drv));

	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/sys/bus/pci/drivers/%s/bind", drv);
	return sysfs_write(path, pci);
}

/*
 * Assigns the device at PCI to driver DRV (driver_override) and probes it
 * (drivers_probe): 0 or -errno. A probe that fails is not reported here:
 * look at the device's driver link.
 */
static inline int rvram_assign(const char *pci, const char *drv)
{
	char path[128];
	int ret;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override", pci);
	ret = sysfs_write(path, drv);
	return ret ? ret : sysfs_write("/sys/bus/pci/drivers_probe", pci);
}

/* A counter from rvram's debugfs stats (`NAME VALUE` lines); -1 if absent. */
static inline long rvram_stat(const char *dev, const char *name)
{
	char path[128], line[128];
	const char *base = strrchr(dev, '/');
	size_t len = strlen(name);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/rvram/%s/stats", base ? base + 1 : dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, len) && line[len] == ' ')
			v = strtol(line + len + 1, NULL, 10);
	fclose(f);
	return v;
}

/* The number in the file at PATH (debugfs, cgroup or sysfs), or -1. */
static inline long long read_number(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* A private anonymous read-write mapping of LEN bytes; exits 2 without one. */
static inline void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "mmap of %zu bytes: %s\n", len, strerror(errno));
		exit(2);
	}
	return p;
}

/* The VRAM size in bytes of /dev/rvramN from its debugfs, or -1. */
static inline long long rvram_vram_size(int n)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/kernel/debug/rvram/rvram%d/vram_size", n);
	return read_number(path);
}

#endif
