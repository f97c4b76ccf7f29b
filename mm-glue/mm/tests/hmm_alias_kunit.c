// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for DMA-able aliases of device private pages in
 * hmm_range_fault(): the output encoding, and the fallback to migration
 * when the owner of a device private page has no alias for the client.
 * Aliases that a client can use need a PCI P2PDMA provider: the rvram
 * in-guest tests cover those.
 *
 * The device private pages belong to a pagemap over a free physical range,
 * backed by a kernel buffer; KUnit's test mm provides the process.
 */
#include <kunit/device.h>
#include <kunit/test.h>
#include <linux/highmem.h>
#include <linux/hmm.h>
#include <linux/ioport.h>
#include <linux/memremap.h>
#include <linux/migrate.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#define NPAGES 4

struct alias_pagemap {
	struct dev_pagemap pgmap;
	struct resource *res;
	void *store;		/* the "device memory": NPAGES pages */
	int alias_ret;		/* what dma_alias() returns */
	atomic_t alias_calls;
	atomic_t to_ram;
};

static struct alias_pagemap *apm;

static struct alias_pagemap *to_apm(struct page *page)
{
	return container_of(page_pgmap(page), struct alias_pagemap, pgmap);
}

static unsigned long apm_index(struct page *page)
{
	return page_to_pfn(page) - PHYS_PFN(apm->res->start);
}

static void apm_folio_free(struct folio *folio)
{
}

static vm_fault_t apm_migrate_to_ram(struct vm_fault *vmf)
{
	struct alias_pagemap *p = to_apm(vmf->page);
	unsigned long src = 0, dst = 0;
	struct migrate_vma args = {
		.vma = vmf->vma,
		.start = vmf->address & PAGE_MASK,
		.end = (vmf->address & PAGE_MASK) + PAGE_SIZE,
		.src = &src,
		.dst = &dst,
		.pgmap_owner = p,
		.flags = MIGRATE_VMA_SELECT_DEVICE_PRIVATE,
		.fault_page = vmf->page,
	};
	struct page *spage, *dpage;

	if (migrate_vma_setup(&args))
		return VM_FAULT_SIGBUS;
	if (src & MIGRATE_PFN_MIGRATE) {
		spage = migrate_pfn_to_page(src);
		dpage = alloc_page_vma(GFP_HIGHUSER, vmf->vma, vmf->address);
		if (dpage) {
			lock_page(dpage);
			memcpy_to_page(dpage, 0,
				       p->store + apm_index(spage) * PAGE_SIZE,
				       PAGE_SIZE);
			dst = migrate_pfn(page_to_pfn(dpage));
			if (src & MIGRATE_PFN_WRITE)
				dst |= MIGRATE_PFN_WRITE;
			atomic_inc(&p->to_ram);
		}
	}
	migrate_vma_pages(&args);
	migrate_vma_finalize(&args);
	return dst ? 0 : VM_FAULT_OOM;
}

static int apm_dma_alias(struct folio *folio, unsigned long *pfn,
			 unsigned long *nr)
{
	struct alias_pagemap *p = to_apm(&folio->page);

	atomic_inc(&p->alias_calls);
	*nr = folio_nr_pages(folio);
	return p->alias_ret;
}

static const struct dev_pagemap_ops apm_ops = {
	.folio_free = apm_folio_free,
	.migrate_to_ram = apm_migrate_to_ram,
	.dma_alias = apm_dma_alias,
};

static bool apm_invalidate(struct mmu_interval_notifier *mni,
			   const struct mmu_notifier_range *range,
			   unsigned long cur_seq)
{
	mmu_interval_set_seq(mni, cur_seq);
	return true;
}

static const struct mmu_interval_notifier_ops apm_notifier_ops = {
	.invalidate = apm_invalidate,
};

/* NPAGES of anonymous memory with a pattern, moved into device pages. */
static unsigned long map_device_pages(struct kunit *test)
{
	unsigned long src[NPAGES] = {}, dst[NPAGES] = {};
	struct mm_struct *mm;
	struct migrate_vma args = {
		.src = src,
		.dst = dst,
		.pgmap_owner = apm,
		.flags = MIGRATE_VMA_SELECT_SYSTEM,
	};
	unsigned long addr, i;
	u8 *buf;

	addr = kunit_vm_mmap(test, NULL, 0, NPAGES * PAGE_SIZE,
			     PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, 0);
	KUNIT_ASSERT_NE(test, addr, 0);
	buf = kunit_kmalloc(test, NPAGES * PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	for (i = 0; i < NPAGES * PAGE_SIZE; i++)
		buf[i] = i * 7 + i / PAGE_SIZE;
	KUNIT_ASSERT_EQ(test, copy_to_user((void __user *)addr, buf,
					   NPAGES * PAGE_SIZE), 0);

	mm = current->mm;
	mmap_read_lock(mm);
	args.vma = vma_lookup(mm, addr);
	args.start = addr;
	args.end = addr + NPAGES * PAGE_SIZE;
	if (!args.vma || migrate_vma_setup(&args)) {
		mmap_read_unlock(mm);
		KUNIT_FAIL_AND_ABORT(test, "migrate_vma_setup() failed");
	}
	for (i = 0; i < NPAGES; i++) {
		struct page *dpage = pfn_to_page(PHYS_PFN(apm->res->start) + i);

		if (!(src[i] & MIGRATE_PFN_MIGRATE))
			continue;
		memcpy_from_page(apm->store + i * PAGE_SIZE,
				 migrate_pfn_to_page(src[i]), 0, PAGE_SIZE);
		zone_device_page_init(dpage, &apm->pgmap, 0);
		dst[i] = migrate_pfn(page_to_pfn(dpage)) | MIGRATE_PFN_WRITE;
	}
	migrate_vma_pages(&args);
	for (i = 0; i < NPAGES; i++)
		KUNIT_EXPECT_TRUE(test, src[i] & MIGRATE_PFN_MIGRATE);
	migrate_vma_finalize(&args);
	mmap_read_unlock(mm);
	return addr;
}

/*
 * Faults the device pages at @addr with @flags for @client; returns the
 * error of hmm_range_fault_unlocked_timeout() and the pfns in @pfns.
 */
static int fault(struct kunit *test, unsigned long addr, unsigned long flags,
		 struct device *client, unsigned long *pfns)
{
	struct mmu_interval_notifier notifier;
	struct hmm_range range = {
		.notifier = &notifier,
		.start = addr,
		.end = addr + NPAGES * PAGE_SIZE,
		.hmm_pfns = pfns,
		.default_flags = flags,
		.alias_client = client,
	};
	int ret;

	KUNIT_ASSERT_EQ(test, mmu_interval_notifier_insert(&notifier, current->mm,
							   addr, NPAGES * PAGE_SIZE,
							   &apm_notifier_ops), 0);
	ret = hmm_range_fault_unlocked_timeout(&range, 0);
	mmu_interval_notifier_remove(&notifier);
	return ret;
}

static void hmm_alias_encoding(struct kunit *test)
{
	unsigned long max_pfn = (1UL << (MAX_PHYSMEM_BITS - PAGE_SHIFT)) - 1;
	unsigned long pfns[] = { 0, 1, 0x123456, max_pfn };
	unsigned long order, i;

	if (!HMM_PFN_ALIAS)
		kunit_skip(test, "no aliases without CONFIG_PCI_P2PDMA");

	/* A flag of its own: no other flag, no order bit, no pfn bit. */
	KUNIT_EXPECT_EQ(test, hweight_long(HMM_PFN_ALIAS), 1);
	KUNIT_EXPECT_EQ(test, HMM_PFN_ALIAS & (HMM_PFN_VALID | HMM_PFN_WRITE |
		HMM_PFN_ERROR | HMM_PFN_DMA_MAPPED | HMM_PFN_P2PDMA |
		HMM_PFN_P2PDMA_BUS), 0);
	KUNIT_EXPECT_EQ(test, HMM_PFN_ALIAS & (0x1FUL << HMM_PFN_ORDER_SHIFT), 0);
	KUNIT_EXPECT_NE(test, HMM_PFN_ALIAS & HMM_PFN_FLAGS, 0);

	for (i = 0; i < ARRAY_SIZE(pfns); i++) {
		for (order = 0; order <= 0x1F; order++) {
			unsigned long e = pfns[i] | HMM_PFN_VALID | HMM_PFN_ALIAS |
					  (order << HMM_PFN_ORDER_SHIFT);

			KUNIT_EXPECT_EQ(test, hmm_pfn_to_map_order(e), order);
			KUNIT_EXPECT_EQ(test, hmm_pfn_to_phys(e), PFN_PHYS(pfns[i]));
			KUNIT_EXPECT_NE(test, e & HMM_PFN_ALIAS, 0);
		}
	}
}

static void check_migrated(struct kunit *test, unsigned long addr,
			   unsigned long *pfns)
{
	u8 *buf = kunit_kmalloc(test, NPAGES * PAGE_SIZE, GFP_KERNEL);
	unsigned long i, bad = 0;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	for (i = 0; i < NPAGES; i++) {
		KUNIT_EXPECT_TRUE(test, pfns[i] & HMM_PFN_VALID);
		KUNIT_EXPECT_FALSE(test, pfns[i] & HMM_PFN_ALIAS);
		KUNIT_EXPECT_FALSE(test, is_zone_device_page(hmm_pfn_to_page(pfns[i])));
	}
	KUNIT_ASSERT_EQ(test, copy_from_user(buf, (void __user *)addr,
					     NPAGES * PAGE_SIZE), 0);
	for (i = 0; i < NPAGES * PAGE_SIZE; i++)
		bad += buf[i] != (u8)(i * 7 + i / PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, bad, 0);
}

/* The owner has no alias now: the pages migrate, as without a client. */
static void hmm_alias_owner_refuses(struct kunit *test)
{
	struct device *client = kunit_device_register(test, "hmm-alias-client");
	unsigned long pfns[NPAGES] = {};
	unsigned long addr;

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, client);
	addr = map_device_pages(test);
	apm->alias_ret = -ENODEV;
	atomic_set(&apm->alias_calls, 0);
	atomic_set(&apm->to_ram, 0);

	/*
	 * The first refusal faults the rest of the walk's range at once: the
	 * owner is asked at least once, every page migrates.
	 */
	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, client, pfns), 0);
	KUNIT_EXPECT_GE(test, atomic_read(&apm->alias_calls), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&apm->to_ram), NPAGES);
	check_migrated(test, addr, pfns);
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

/* A snapshot does not fault: a refused alias leaves the entry empty. */
static void hmm_alias_snapshot(struct kunit *test)
{
	struct device *client = kunit_device_register(test, "hmm-alias-client");
	unsigned long pfns[NPAGES] = {};
	unsigned long addr, i;

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, client);
	addr = map_device_pages(test);
	apm->alias_ret = -ENODEV;
	atomic_set(&apm->alias_calls, 0);
	atomic_set(&apm->to_ram, 0);

	KUNIT_EXPECT_EQ(test, fault(test, addr, 0, client, pfns), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&apm->alias_calls), NPAGES);
	KUNIT_EXPECT_EQ(test, atomic_read(&apm->to_ram), 0);
	for (i = 0; i < NPAGES; i++)
		KUNIT_EXPECT_EQ(test, pfns[i] & (HMM_PFN_VALID | HMM_PFN_ALIAS), 0);
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

/* Without a client the owner is never asked. */
static void hmm_alias_no_client(struct kunit *test)
{
	unsigned long pfns[NPAGES] = {};
	unsigned long addr;

	addr = map_device_pages(test);
	atomic_set(&apm->alias_calls, 0);
	atomic_set(&apm->to_ram, 0);

	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, NULL, pfns), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&apm->alias_calls), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&apm->to_ram), NPAGES);
	check_migrated(test, addr, pfns);
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

static int hmm_alias_suite_init(struct kunit_suite *suite)
{
	void *ret;

	apm = kzalloc_obj(*apm, GFP_KERNEL);
	if (!apm)
		return -ENOMEM;
	apm->store = vzalloc(NPAGES * PAGE_SIZE);
	apm->res = request_free_mem_region(&iomem_resource, SZ_2M,
					   "hmm-alias-kunit");
	if (!apm->store || IS_ERR(apm->res))
		goto err;
	apm->pgmap.type = MEMORY_DEVICE_PRIVATE;
	apm->pgmap.range.start = apm->res->start;
	apm->pgmap.range.end = apm->res->end;
	apm->pgmap.nr_range = 1;
	apm->pgmap.ops = &apm_ops;
	apm->pgmap.owner = apm;
	ret = memremap_pages(&apm->pgmap, NUMA_NO_NODE);
	if (IS_ERR(ret)) {
		release_mem_region(apm->res->start, resource_size(apm->res));
		goto err;
	}
	return 0;
err:
	vfree(apm->store);
	kfree(apm);
	return -ENOMEM;
}

static void hmm_alias_suite_exit(struct kunit_suite *suite)
{
	memunmap_pages(&apm->pgmap);
	release_mem_region(apm->res->start, resource_size(apm->res));
	vfree(apm->store);
	kfree(apm);
}

static struct kunit_case hmm_alias_cases[] = {
	KUNIT_CASE(hmm_alias_encoding),
	KUNIT_CASE(hmm_alias_no_client),
	KUNIT_CASE(hmm_alias_owner_refuses),
	KUNIT_CASE(hmm_alias_snapshot),
	{}
};

static struct kunit_suite hmm_alias_suite = {
	.name = "hmm_alias",
	.suite_init = hmm_alias_suite_init,
	.suite_exit = hmm_alias_suite_exit,
	.test_cases = hmm_alias_cases,
};

kunit_test_suite(hmm_alias_suite);

MODULE_DESCRIPTION("KUnit tests for DMA-able aliases in hmm_range_fault()");
MODULE_LICENSE("GPL");
