// SPDX-License-Identifier: GPL-2.0

#include <linux/cgroup_dmem.h>

/*
 * The "inline" implementations of below helpers are only available when
 * CONFIG_CGROUP_DMEM isn't set. dmem_cgroup_register_region() is variadic and
 * has no helper: kernel::cgroup::dmem does not call it then.
 */
#ifndef CONFIG_CGROUP_DMEM
__rust_helper void
rust_helper_dmem_cgroup_unregister_region(struct dmem_cgroup_region *region)
{
	dmem_cgroup_unregister_region(region);
}

__rust_helper int
rust_helper_dmem_cgroup_try_charge(struct dmem_cgroup_region *region, u64 size,
				   struct dmem_cgroup_pool_state **ret_pool,
				   struct dmem_cgroup_pool_state **ret_limit_pool)
{
	return dmem_cgroup_try_charge(region, size, ret_pool, ret_limit_pool);
}

__rust_helper void
rust_helper_dmem_cgroup_uncharge(struct dmem_cgroup_pool_state *pool, u64 size)
{
	dmem_cgroup_uncharge(pool, size);
}

__rust_helper void
rust_helper_dmem_cgroup_pool_state_put(struct dmem_cgroup_pool_state *pool)
{
	dmem_cgroup_pool_state_put(pool);
}
#endif
