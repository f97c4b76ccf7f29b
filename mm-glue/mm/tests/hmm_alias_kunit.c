// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for DMA-able aliases of device private pages in
 * hmm_range_fault(): the output encoding; a client that can reach the
 * alias gets the device private pages as aliases, and hmm_pfn_alias() says
 * where each one is, for an owner whose aliases are linear over its
 * pagemap and for one that answers per folio; and every way to the
 * fallback, which migrates the pages: no client, an owner that refuses,
 * revoked aliases, a client that copies with the CPU and an alias with no
 * kernel mapping.
 *
 * Each owner is a pagemap over a free physical range whose "device memory"
 * is system memory: the alias of a device private page is where its data
 * is, as for lib/test_hmm. Aliases in a PCI BAR need a P2P provider: the
 * rvram in-guest tests cover those. KUnit's test mm provides the process.
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
	/* The "device memory": NPAGES pages, contiguous for a linear alias */
	void *store;
	struct page *store_pages;
	int alias_ret;		/* what dma_alias() returns */
	atomic_t alias_calls;
	atomic_t to_ram;
};

/* An owner whose aliases are linear, and one with a dma_alias() op */
static struct alias_pagemap *linear, *per_folio;

static struct alias_pagemap *to_apm(struct page *page)
{
	return container_of(page_pgmap(page), struct alias_pagemap, pgmap);
}

static void *apm_data(struct alias_pagemap *p, struct page *page)
{
	return p->store + dev_pagemap_page_offset(page) * PAGE_SIZE;
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
	struct page *dpage;

	if (migrate_vma_setup(&args))
		return VM_FAULT_SIGBUS;
	if (src & MIGRATE_PFN_MIGRATE) {
		dpage = alloc_page_vma(GFP_HIGHUSER, vmf->vma, vmf->address);
		if (dpage) {
			lock_page(dpage);
			memcpy_to_page(dpage, 0,
				       apm_data(p, migrate_pfn_to_page(src)),
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

/* The folio's data in the vmalloc()ed store is its alias. */
static int apm_dma_alias(struct folio *folio, struct dev_pagemap_alias *alias)
{
	struct alias_pagemap *p = to_apm(&folio->page);

	atomic_inc(&p->alias_calls);
	if (p->alias_ret)
		return p->alias_ret;
	alias->provider = NULL;
	alias->vaddr = apm_data(p, &folio->page);
	alias->phys = page_to_phys(vmalloc_to_page(alias->vaddr));
	alias->ioaddr = NULL;
	return 0;
}

static const struct dev_pagemap_ops linear_ops = {
	.folio_free = apm_folio_free,
	.migrate_to_ram = apm_migrate_to_ram,
};

static const struct dev_pagemap_ops per_folio_ops = {
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

static u8 pattern(unsigned long i)
{
	return i * 7 + i / PAGE_SIZE;
}

/* NPAGES of anonymous memory with a pattern, moved into @p's pages. */
static unsigned long map_device_pages(struct kunit *test,
				      struct alias_pagemap *p)
{
	unsigned long src[NPAGES] = {}, dst[NPAGES] = {};
	struct mm_struct *mm;
	struct migrate_vma args = {
		.src = src,
		.dst = dst,
		.pgmap_owner = p,
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
		buf[i] = pattern(i);
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
		/* The owner's allocator: device page i for virtual page i */
		struct page *dpage = pfn_to_page(PHYS_PFN(p->res->start) + i);

		if (!(src[i] & MIGRATE_PFN_MIGRATE))
			continue;
		zone_device_page_init(dpage, &p->pgmap, 0);
		memcpy_from_page(apm_data(p, dpage),
				 migrate_pfn_to_page(src[i]), 0, PAGE_SIZE);
		dst[i] = migrate_pfn(page_to_pfn(dpage)) | MIGRATE_PFN_WRITE;
	}
	migrate_vma_pages(&args);
	for (i = 0; i < NPAGES; i++)
		KUNIT_EXPECT_TRUE(test, src[i] & MIGRATE_PFN_MIGRATE);
	migrate_vma_finalize(&args);
	mmap_read_unlock(mm);
	atomic_set(&p->alias_calls, 0);
	atomic_set(&p->to_ram, 0);
	atomic_long_set(&p->pgmap.alias_reported, 0);
	return addr;
}

/*
 * Faults the device pages at @addr with @flags for @client (which copies
 * with the CPU if @by_cpu); returns the error of
 * hmm_range_fault_unlocked_timeout() and the pfns in @pfns.
 */
static int fault(struct kunit *test, unsigned long addr, unsigned long flags,
		 struct device *client, bool by_cpu, unsigned long *pfns)
{
	struct mmu_interval_notifier notifier;
	struct hmm_range range = {
		.notifier = &notifier,
		.start = addr,
		.end = addr + NPAGES * PAGE_SIZE,
		.hmm_pfns = pfns,
		.default_flags = flags,
		.alias_client = client,
		.alias_by_cpu = by_cpu,
	};
	int ret;

	KUNIT_ASSERT_EQ(test, mmu_interval_notifier_insert(&notifier, current->mm,
							   addr, NPAGES * PAGE_SIZE,
							   &apm_notifier_ops), 0);
	ret = hmm_range_fault_unlocked_timeout(&range, 0);
	mmu_interval_notifier_remove(&notifier);
	return ret;
}

static struct device *alias_client_dev(struct kunit *test)
{
	struct device *dev = kunit_device_register(test, "hmm-alias-client");

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, dev);
	return dev;
}

static void hmm_alias_encoding(struct kunit *test)
{
	unsigned long max_pfn = (1UL << (MAX_PHYSMEM_BITS - PAGE_SHIFT)) - 1;
	unsigned long pfns[] = { 0, 1, 0x123456, max_pfn };
	unsigned long order, i;

	if (!HMM_PFN_ALIAS)
		kunit_skip(test, "no aliases on this configuration");

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

/* The pages were migrated to system memory, with their data. */
static void check_migrated(struct kunit *test, struct alias_pagemap *p,
			   unsigned long addr, unsigned long *pfns)
{
	u8 *buf = kunit_kmalloc(test, NPAGES * PAGE_SIZE, GFP_KERNEL);
	unsigned long i, bad = 0;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	KUNIT_EXPECT_EQ(test, atomic_read(&p->to_ram), NPAGES);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&p->pgmap.alias_reported), 0);
	for (i = 0; i < NPAGES; i++) {
		KUNIT_EXPECT_TRUE(test, pfns[i] & HMM_PFN_VALID);
		KUNIT_EXPECT_FALSE(test, pfns[i] & HMM_PFN_ALIAS);
		KUNIT_EXPECT_FALSE(test, is_zone_device_page(hmm_pfn_to_page(pfns[i])));
	}
	KUNIT_ASSERT_EQ(test, copy_from_user(buf, (void __user *)addr,
					     NPAGES * PAGE_SIZE), 0);
	for (i = 0; i < NPAGES * PAGE_SIZE; i++)
		bad += buf[i] != pattern(i);
	KUNIT_EXPECT_EQ(test, bad, 0);
}

/*
 * Every page is reported in place, as an alias, and hmm_pfn_alias() says
 * where its data is; nothing migrated.
 */
static void check_aliases(struct kunit *test, struct alias_pagemap *p,
			  unsigned long *pfns)
{
	unsigned long i, j, bad = 0;

	KUNIT_EXPECT_EQ(test, atomic_read(&p->to_ram), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&p->pgmap.alias_reported), NPAGES);
	for (i = 0; i < NPAGES; i++) {
		struct page *page = hmm_pfn_to_page(pfns[i]);
		struct dev_pagemap_alias alias = {};
		u8 *data;

		KUNIT_EXPECT_EQ(test, pfns[i] & (HMM_PFN_VALID | HMM_PFN_WRITE |
						 HMM_PFN_ALIAS),
				HMM_PFN_VALID | HMM_PFN_WRITE | HMM_PFN_ALIAS);
		KUNIT_ASSERT_TRUE(test, is_device_private_page(page));
		KUNIT_EXPECT_PTR_EQ(test, page_pgmap(page), &p->pgmap);
		KUNIT_ASSERT_EQ(test, hmm_pfn_alias(pfns[i], &alias), 0);
		data = apm_data(p, page);
		KUNIT_EXPECT_PTR_EQ(test, alias.vaddr, (void *)data);
		KUNIT_EXPECT_NULL(test, alias.ioaddr);
		KUNIT_EXPECT_NULL(test, alias.provider);
		KUNIT_EXPECT_EQ(test, alias.phys,
				page_to_phys(is_vmalloc_addr(data) ?
					     vmalloc_to_page(data) :
					     virt_to_page(data)));
		/* Virtual page i is in device page i (map_device_pages()) */
		for (j = 0; j < PAGE_SIZE; j++)
			bad += data[j] != pattern(i * PAGE_SIZE + j);
	}
	KUNIT_EXPECT_EQ(test, bad, 0);
}

/* Without a client nothing changes: the owner is never asked. */
static void hmm_alias_no_client(struct kunit *test)
{
	unsigned long pfns[NPAGES] = {};
	unsigned long addr = map_device_pages(test, per_folio);

	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, NULL,
				    false, pfns), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&per_folio->alias_calls), 0);
	check_migrated(test, per_folio, addr, pfns);
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

/* A linear owner: every page an alias, without a call to the owner. */
static void hmm_alias_linear(struct kunit *test)
{
	struct device *dev = alias_client_dev(test);
	unsigned long pfns[NPAGES] = {};
	unsigned long addr;
	int by_cpu;

	for (by_cpu = 0; by_cpu <= 1; by_cpu++) {
		addr = map_device_pages(test, linear);
		KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT |
					    HMM_PFN_REQ_WRITE, dev, by_cpu,
					    pfns), 0);
		check_aliases(test, linear, pfns);
		vm_munmap(addr, NPAGES * PAGE_SIZE);
	}
}

/* An owner that answers per folio: asked once for each. */
static void hmm_alias_per_folio(struct kunit *test)
{
	struct device *dev = alias_client_dev(test);
	unsigned long pfns[NPAGES] = {};
	unsigned long addr = map_device_pages(test, per_folio);

	per_folio->alias_ret = 0;
	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, dev, false,
				    pfns), 0);
	/* NPAGES in the walk, NPAGES in check_aliases()'s hmm_pfn_alias() */
	check_aliases(test, per_folio, pfns);
	KUNIT_EXPECT_EQ(test, atomic_read(&per_folio->alias_calls), 2 * NPAGES);
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

/* The owner has no alias now: the pages migrate, as without a client. */
static void hmm_alias_owner_refuses(struct kunit *test)
{
	struct device *dev = alias_client_dev(test);
	unsigned long pfns[NPAGES] = {};
	unsigned long addr = map_device_pages(test, per_folio);

	per_folio->alias_ret = -ENODEV;
	/*
	 * The first refusal faults the rest of the walk's range at once: the
	 * owner is asked at least once, every page migrates.
	 */
	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, dev, false,
				    pfns), 0);
	KUNIT_EXPECT_GE(test, atomic_read(&per_folio->alias_calls), 1);
	check_migrated(test, per_folio, addr, pfns);
	per_folio->alias_ret = 0;
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

/* Revoked aliases: the pages migrate; restored, they are aliases again. */
static void hmm_alias_revoked(struct kunit *test)
{
	struct device *dev = alias_client_dev(test);
	unsigned long pfns[NPAGES] = {};
	unsigned long addr = map_device_pages(test, linear);

	dev_pagemap_revoke_aliases(&linear->pgmap);
	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, dev, false,
				    pfns), 0);
	dev_pagemap_restore_aliases(&linear->pgmap);
	check_migrated(test, linear, addr, pfns);
	vm_munmap(addr, NPAGES * PAGE_SIZE);

	addr = map_device_pages(test, linear);
	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, dev, false,
				    pfns), 0);
	check_aliases(test, linear, pfns);
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

/*
 * A client that copies with the CPU needs a kernel mapping of the alias:
 * without one, the pages migrate; a DMA client still gets the aliases.
 */
static void hmm_alias_cpu_client_needs_mapping(struct kunit *test)
{
	struct device *dev = alias_client_dev(test);
	unsigned long pfns[NPAGES] = {};
	unsigned long addr = map_device_pages(test, linear);

	linear->pgmap.alias.vaddr = NULL;
	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, dev, true,
				    pfns), 0);
	check_migrated(test, linear, addr, pfns);
	vm_munmap(addr, NPAGES * PAGE_SIZE);

	addr = map_device_pages(test, linear);
	KUNIT_EXPECT_EQ(test, fault(test, addr, HMM_PFN_REQ_FAULT, dev, false,
				    pfns), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&linear->pgmap.alias_reported),
			NPAGES);
	linear->pgmap.alias.vaddr = linear->store;
	check_aliases(test, linear, pfns);
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

/* A snapshot does not fault: a refused alias leaves the entry empty. */
static void hmm_alias_snapshot(struct kunit *test)
{
	struct device *dev = alias_client_dev(test);
	unsigned long pfns[NPAGES] = {};
	unsigned long addr = map_device_pages(test, per_folio);
	unsigned long i;

	per_folio->alias_ret = -ENODEV;
	KUNIT_EXPECT_EQ(test, fault(test, addr, 0, dev, false, pfns), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&per_folio->alias_calls), NPAGES);
	KUNIT_EXPECT_EQ(test, atomic_read(&per_folio->to_ram), 0);
	for (i = 0; i < NPAGES; i++)
		KUNIT_EXPECT_EQ(test, pfns[i] & (HMM_PFN_VALID | HMM_PFN_ALIAS), 0);
	per_folio->alias_ret = 0;
	vm_munmap(addr, NPAGES * PAGE_SIZE);
}

static void apm_destroy(struct alias_pagemap *p)
{
	if (!p)
		return;
	if (p->pgmap.nr_range)
		memunmap_pages(&p->pgmap);
	if (!IS_ERR_OR_NULL(p->res))
		release_mem_region(p->res->start, resource_size(p->res));
	if (p->store_pages)
		__free_pages(p->store_pages, get_order(NPAGES * PAGE_SIZE));
	else
		vfree(p->store);
	kfree(p);
}

static struct alias_pagemap *apm_create(bool is_linear)
{
	struct alias_pagemap *p = kzalloc_obj(*p, GFP_KERNEL);
	void *ret;

	if (!p)
		return NULL;
	if (is_linear) {
		p->store_pages = alloc_pages(GFP_KERNEL | __GFP_ZERO,
					     get_order(NPAGES * PAGE_SIZE));
		p->store = p->store_pages ? page_address(p->store_pages) : NULL;
	} else {
		p->store = vzalloc(NPAGES * PAGE_SIZE);
	}
	p->res = request_free_mem_region(&iomem_resource, SZ_2M,
					 "hmm-alias-kunit");
	if (!p->store || IS_ERR(p->res))
		goto err;
	p->pgmap.type = MEMORY_DEVICE_PRIVATE;
	p->pgmap.range.start = p->res->start;
	p->pgmap.range.end = p->res->end;
	p->pgmap.owner = p;
	if (is_linear) {
		p->pgmap.ops = &linear_ops;
		p->pgmap.flags = PGMAP_ALIAS_LINEAR;
		p->pgmap.alias.phys = page_to_phys(p->store_pages);
		p->pgmap.alias.vaddr = p->store;
	} else {
		p->pgmap.ops = &per_folio_ops;
	}
	p->pgmap.nr_range = 1;
	ret = memremap_pages(&p->pgmap, NUMA_NO_NODE);
	if (IS_ERR(ret)) {
		p->pgmap.nr_range = 0;
		goto err;
	}
	return p;
err:
	apm_destroy(p);
	return NULL;
}

static int hmm_alias_suite_init(struct kunit_suite *suite)
{
	linear = apm_create(true);
	per_folio = apm_create(false);
	if (linear && per_folio)
		return 0;
	apm_destroy(linear);
	apm_destroy(per_folio);
	return -ENOMEM;
}

static void hmm_alias_suite_exit(struct kunit_suite *suite)
{
	apm_destroy(linear);
	apm_destroy(per_folio);
}

static struct kunit_case hmm_alias_cases[] = {
	KUNIT_CASE(hmm_alias_encoding),
	KUNIT_CASE(hmm_alias_no_client),
	KUNIT_CASE(hmm_alias_linear),
	KUNIT_CASE(hmm_alias_per_folio),
	KUNIT_CASE(hmm_alias_owner_refuses),
	KUNIT_CASE(hmm_alias_revoked),
	KUNIT_CASE(hmm_alias_cpu_client_needs_mapping),
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
