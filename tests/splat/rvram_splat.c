// SPDX-License-Identifier: GPL-2.0
/*
 * rvram_splat: makes the debug kernel print each kind of report that
 * tools/report/src/report.rs must find, so that the harness is tested
 * against the kernel's own output rather than against lines typed into a
 * unit test. Test-only: never load it on a machine anyone uses.
 *
 * Writing a kind's name to /sys/kernel/debug/rvram_splat/trigger prints
 * "rvram_splat: trigger KIND" to the kernel log and then makes the kernel
 * report it. Every kind returns to the caller: none oopses, none leaves a
 * lock held or memory freed twice. tests/vm/splat.sh lowers the detectors'
 * thresholds before the kinds that need them.
 */

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/preempt.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/mmdebug.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <linux/string.h>
#include <linux/uaccess.h>

static struct dentry *dir;
static DEFINE_MUTEX(lock_a);
static DEFINE_MUTEX(lock_b);

/* Longer than each detector's threshold as tests/vm/splat.sh sets it. */
#define BUSY_MS 6000
#define STALL_MS 12000
static struct rcu_head stall_head;
static bool stall_queued;

struct bounded {
	int arr[4];
	int pad[4];
};

static noinline void splat_warn(void)
{
	WARN(1, "rvram_splat: a WARN() as drivers print them\n");
}

static noinline void splat_refcount(void)
{
	refcount_t r = REFCOUNT_INIT(0);

	/* lib/refcount.c: "refcount_t: addition on 0; use-after-free." */
	refcount_inc(&r);
}

static noinline void splat_ubsan_bounds(void)
{
	struct bounded b = { };
	int i = ARRAY_SIZE(b.arr) + 1;

	/* Inside the struct (no KASAN report), past the array (UBSAN). */
	OPTIMIZER_HIDE_VAR(i);
	pr_info("rvram_splat: read %d\n", b.arr[i]);
}

static noinline void splat_ubsan_shift(void)
{
	int shift = 40;

	OPTIMIZER_HIDE_VAR(shift);
	pr_info("rvram_splat: shifted %u\n", 1U << shift);
}

static noinline void splat_kasan(void)
{
	char *p = kmalloc(64, GFP_KERNEL);

	if (!p)
		return;
	kfree(p);
	/* mm/kasan/report.c: "BUG: KASAN: slab-use-after-free in ..." */
	pr_info("rvram_splat: read %d\n", READ_ONCE(p[8]));
}

static noinline void splat_lockdep(void)
{
	/*
	 * A then B, later B then A: lockdep reports the inversion the first
	 * time it sees it, though this one thread cannot deadlock. Lockdep
	 * reports once a boot: this kind is triggered once.
	 */
	mutex_lock(&lock_a);
	mutex_lock(&lock_b);
	mutex_unlock(&lock_b);
	mutex_unlock(&lock_a);
	mutex_lock(&lock_b);
	mutex_lock(&lock_a);
	mutex_unlock(&lock_a);
	mutex_unlock(&lock_b);
}

static noinline void splat_hung(void)
{
	/* In D state longer than kernel.hung_task_timeout_secs. */
	schedule_timeout_uninterruptible(msecs_to_jiffies(BUSY_MS));
}

static noinline void splat_softlockup(void)
{
	/* No scheduling on this CPU for longer than 2 * watchdog_thresh. */
	preempt_disable();
	mdelay(BUSY_MS);
	preempt_enable();
}

static noinline void splat_hardlockup(void)
{
	unsigned long flags;

	/* No timer interrupt on this CPU: its buddy CPU notices. */
	local_irq_save(flags);
	mdelay(BUSY_MS);
	local_irq_restore(flags);
}

static void stall_done(struct rcu_head *head)
{
}

static noinline void splat_rcu_stall(void)
{
	/*
	 * A grace period waits for this CPU (the callback starts one), and a
	 * reader on it does not end within rcupdate.rcu_cpu_stall_timeout.
	 */
	if (!stall_queued) {
		stall_queued = true;
		call_rcu(&stall_head, stall_done);
	}
	rcu_read_lock();
	preempt_disable();
	mdelay(STALL_MS);
	preempt_enable();
	rcu_read_unlock();
}

static noinline void splat_alloc_fail(void)
{
	/* mm/vmalloc.c: warn_alloc(), as a failed page allocation prints it. */
	void *p = vmalloc((totalram_pages() + 1) << PAGE_SHIFT);

	vfree(p);
}

static noinline void splat_dump_page(void)
{
	struct page *page = alloc_page(GFP_KERNEL);

	/* mm/debug.c: "page dumped because: ...", as VM_WARN_ON_PAGE prints. */
	if (page)
		dump_page(page, "rvram_splat: a page dumped as VM_WARN_ON_PAGE does");
	if (page)
		__free_page(page);
}

/*
 * A work item that keeps its worker busy (it reschedules, so no soft
 * lockup) while another one waits behind it on the same CPU's pool:
 * the workqueue watchdog (workqueue.watchdog_thresh, lowered to 1 s by
 * splat.sh) reports the pool as stuck.
 */
static void busy_work_fn(struct work_struct *work)
{
	unsigned long end = jiffies + msecs_to_jiffies(BUSY_MS);

	while (time_before(jiffies, end))
		cond_resched();
}

static void waiting_work_fn(struct work_struct *work)
{
}

static DECLARE_WORK(busy_work, busy_work_fn);
static DECLARE_WORK(waiting_work, waiting_work_fn);

static noinline void splat_wq_lockup(void)
{
	int cpu = cpumask_first(cpu_online_mask);

	schedule_work_on(cpu, &busy_work);
	schedule_work_on(cpu, &waiting_work);
	/*
	 * Not flush_work(): its wait in D state would be reported as a hung
	 * task, whose printing touches the workqueue watchdog.
	 */
	while (work_busy(&busy_work) || work_busy(&waiting_work))
		msleep_interruptible(100);
}

/*
 * Ends the boot (the guest runs with oops=panic): VM_BUG_ON_PAGE() dumps
 * the page, BUG()s, and the oops panics. splat.sh triggers it last.
 */
static noinline void splat_vm_bug(void)
{
	struct page *page = alloc_page(GFP_KERNEL);

	VM_BUG_ON_PAGE(page, page);
	if (page)
		__free_page(page);
}

static const struct {
	const char *name;
	void (*fn)(void);
} kinds[] = {
	{ "warn", splat_warn },
	{ "refcount", splat_refcount },
	{ "ubsan-bounds", splat_ubsan_bounds },
	{ "ubsan-shift", splat_ubsan_shift },
	{ "lockdep", splat_lockdep },
	{ "kasan", splat_kasan },
	{ "hung-task", splat_hung },
	{ "soft-lockup", splat_softlockup },
	{ "hard-lockup", splat_hardlockup },
	{ "rcu-stall", splat_rcu_stall },
	{ "alloc-fail", splat_alloc_fail },
	{ "dump-page", splat_dump_page },
	{ "wq-lockup", splat_wq_lockup },
	{ "vm-bug", splat_vm_bug },
};

static ssize_t trigger_write(struct file *file, const char __user *ubuf, size_t len,
			     loff_t *ppos)
{
	char name[32];
	size_t i;

	if (len == 0 || len >= sizeof(name))
		return -EINVAL;
	if (copy_from_user(name, ubuf, len))
		return -EFAULT;
	name[len] = '\0';
	strim(name);
	for (i = 0; i < ARRAY_SIZE(kinds); i++) {
		if (strcmp(name, kinds[i].name))
			continue;
		pr_info("rvram_splat: trigger %s\n", kinds[i].name);
		kinds[i].fn();
		pr_info("rvram_splat: done %s\n", kinds[i].name);
		return len;
	}
	return -EINVAL;
}

static const struct file_operations trigger_fops = {
	.owner = THIS_MODULE,
	.write = trigger_write,
	.llseek = noop_llseek,
};

static int __init rvram_splat_init(void)
{
	dir = debugfs_create_dir("rvram_splat", NULL);
	debugfs_create_file("trigger", 0200, dir, NULL, &trigger_fops);
	return 0;
}

static void __exit rvram_splat_exit(void)
{
	debugfs_remove(dir);
	/* stall_done() is ours: no callback may run after the module. */
	rcu_barrier();
}

module_init(rvram_splat_init);
module_exit(rvram_splat_exit);
MODULE_DESCRIPTION("Kernel reports on demand, for rvram's test harness");
MODULE_LICENSE("GPL");
