// SPDX-License-Identifier: GPL-2.0

#include <linux/huge_mm.h>
#include <linux/ioport.h>
#include <linux/memremap.h>
#include <linux/mm.h>

__rust_helper bool rust_helper_thp_migration_supported(void)
{
	return thp_migration_supported();
}

__rust_helper bool rust_helper_is_zone_device_page(const struct page *page)
{
	return is_zone_device_page(page);
}

#ifdef CONFIG_ZONE_DEVICE
__rust_helper struct dev_pagemap *rust_helper_page_pgmap(const struct page *page)
{
	return page_pgmap(page);
}

__rust_helper void rust_helper_zone_device_folio_init(struct folio *folio,
						      struct dev_pagemap *pgmap,
						      unsigned int order)
{
	zone_device_folio_init(folio, pgmap, order);
}

#endif
