// SPDX-License-Identifier: GPL-2.0

#include <linux/hmm.h>
#include <linux/memremap.h>
#include <linux/mmu_notifier.h>

#ifdef CONFIG_MMU_NOTIFIER
__rust_helper bool
rust_helper_mmu_interval_read_retry(struct mmu_interval_notifier *interval_sub,
				    unsigned long seq)
{
	return mmu_interval_read_retry(interval_sub, seq);
}

__rust_helper void
rust_helper_mmu_interval_set_seq(struct mmu_interval_notifier *interval_sub,
				 unsigned long cur_seq)
{
	mmu_interval_set_seq(interval_sub, cur_seq);
}

__rust_helper bool
rust_helper_mmu_notifier_range_blockable(const struct mmu_notifier_range *range)
{
	return mmu_notifier_range_blockable(range);
}
#endif

__rust_helper bool rust_helper_is_device_coherent_page(const struct page *page)
{
	return is_device_coherent_page(page);
}

__rust_helper struct page *rust_helper_hmm_pfn_to_page(unsigned long hmm_pfn)
{
	return hmm_pfn_to_page(hmm_pfn);
}

__rust_helper unsigned int rust_helper_hmm_pfn_to_map_order(unsigned long hmm_pfn)
{
	return hmm_pfn_to_map_order(hmm_pfn);
}

__rust_helper bool rust_helper_is_zero_pfn(unsigned long pfn)
{
	return is_zero_pfn(pfn);
}
