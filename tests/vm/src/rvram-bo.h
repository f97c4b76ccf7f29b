/* SPDX-License-Identifier: GPL-2.0 */
/*
 * VRAM buffer objects of /dev/rvramN (RVRAM_IOCTL_ALLOC_DMABUF), for the
 * in-guest C tests.
 */
#ifndef RVRAM_TESTS_BO_H
#define RVRAM_TESTS_BO_H

#include <errno.h>
#include <stdint.h>
#include <sys/ioctl.h>

#include "../../../drivers/rvram/include/uapi/misc/rvram.h"

/* A dma-buf of SIZE bytes of the VRAM of the GPU open as GPU, or -errno. */
static inline int rvram_alloc_bo(int gpu, uint64_t size, uint32_t flags)
{
	struct rvram_alloc_dmabuf a = { .size = size, .flags = flags, .fd = -1 };

	if (ioctl(gpu, RVRAM_IOCTL_ALLOC_DMABUF, &a))
		return -errno;
	return a.fd;
}

#endif
