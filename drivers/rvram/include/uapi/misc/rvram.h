/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rvram: ioctls of /dev/rvramN beyond the lib/test_hmm (dmirror) ABI,
 * which the same files also speak (see Documentation/misc-devices/rvram.rst).
 */
#ifndef _UAPI_MISC_RVRAM_H
#define _UAPI_MISC_RVRAM_H

#include <linux/ioctl.h>
#include <linux/types.h>

/**
 * struct rvram_alloc_dmabuf - RVRAM_IOCTL_ALLOC_DMABUF argument
 * @size: bytes of VRAM, a non-zero multiple of the page size, at most the
 *	VRAM size
 * @flags: must be 0
 * @fd: out: a dma-buf file descriptor (O_CLOEXEC) for @size bytes of
 *	cleared, contiguous VRAM
 */
struct rvram_alloc_dmabuf {
	__u64 size;
	__u32 flags;
	__s32 fd;
};

#define RVRAM_IOCTL_ALLOC_DMABUF	_IOWR('R', 0x30, struct rvram_alloc_dmabuf)

#endif /* _UAPI_MISC_RVRAM_H */
