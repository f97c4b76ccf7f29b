/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmm-tests is built unmodified, with this directory first on the include
 * path. The kselftest harness kills a case after TEST_TIMEOUT_DEFAULT
 * (30 s), a bound meant to catch hangs on real hardware. Under QEMU TCG
 * with KASAN, some cases take 12-16 s on an idle host (test_hmm's
 * migrate_remap_fault) and twice that on a busy one, so the bound turns
 * into a timing test. Raise it for cases that use the default; it still
 * catches hangs. Cases with their own bound keep it.
 */
#include_next "kselftest_harness.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 180
