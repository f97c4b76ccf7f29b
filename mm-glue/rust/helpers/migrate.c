// SPDX-License-Identifier: GPL-2.0

#include <linux/gfp.h>
#include <linux/migrate.h>
#include <linux/mm.h>
#include <linux/pagemap.h>

#ifdef CONFIG_MIGRATION
__rust_helper unsigned long rust_helper_migrate_pfn(unsigned long pfn)
{
	return migrate_pfn(pfn);
}

__rust_helper struct page *rust_helper_migrate_pfn_to_page(unsigned long mpfn)
{
	return migrate_pfn_to_page(mpfn);
}
#endif

__rust_helper struct folio *rust_helper_folio_alloc(gfp_t gfp, unsigned int order)
{
	return folio_alloc(gfp, order);
}

__rust_helper void rust_helper_folio_lock(struct folio *folio)
{
	folio_lock(folio);
}

__rust_helper struct page *rust_helper_folio_page(struct folio *folio,
						  unsigned long n)
{
	return folio_page(folio, n);
}

__rust_helper void rust_helper_folio_get(struct folio *folio)
{
	folio_get(folio);
}
