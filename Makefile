# SPDX-License-Identifier: GPL-2.0
#
# rvram front door.
#
#   make              build the rvram module out of tree against the test
#                     kernel (KDIR=... to use another kernel build)
#   make check        everything: host unit tests, series checks, kernel and
#                     module build, VM suites (installs what it needs)
#   make check-full   the same with every suite at full length: the 16 GiB
#                     plan, the failed-probe sweep at every allocation, five
#                     times the stress suite's kills and fuzzing, longer races
#   make demo         boot a guest with emulated GPUs and show rvram at work
#   make bench        migration throughput, rvram vs test_hmm (non-debug kernel)
#   make soak         the stress suite for an hour (debug kernel; not in check)
#   make coverage     kernel coverage (KCOV) of the stress, race and fuzz
#                     suites: results/coverage/coverage.md (not in check)
#   make pyverbs-baseline
#                     record rdma-core's ODP tests on the stock kernel
#   make series       regenerate patches/<series>/ from series/
#                     (SIGNOFF="Name <email>": from and signed off by the
#                     submitter, to send; never commit those)
#   make series-cc    print the To: and Cc: of each series
#   make check-bisect build the series patch by patch (slow)
#   make check-fixes  each fix of tests/fixes/fixes.txt fails without it
#                     (slow; results/fixes/summary.md)
#   make checkpatch   scripts/checkpatch.pl --strict on patches/
#   make kernel       fetch the base and build the debug test kernel
#   make deps         install the toolchain
#   make clippy       build the module with CLIPPY=1
#   make fmt          rustfmt the driver and the tools

RVRAM_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rvram
export RVRAM_CACHE
KDIR ?= $(RVRAM_CACHE)/build/debug
KMAKE := $(CURDIR)/tools/kmake.sh

.PHONY: all modules clean check check-full demo bench soak coverage pyverbs-baseline series series-cc check-series \
	check-bisect check-fixes \
	checkpatch kernel deps clippy fmt tool

all: modules

modules:
	@test -f $(KDIR)/Module.symvers || { \
		echo "rvram: no kernel build at $(KDIR); run 'make kernel' (or set KDIR)" >&2; exit 1; }
	$(KMAKE) -C $(KDIR) M=$(CURDIR) CONFIG_RVRAM=m modules

clippy:
	$(KMAKE) -C $(KDIR) M=$(CURDIR) CONFIG_RVRAM=m CLIPPY=1 modules

clean:
	-$(KMAKE) -C $(KDIR) M=$(CURDIR) clean
	cargo clean

tool:
	cargo build --release --locked -q -p rvram-series -p rvram-report

deps:
	tools/install-deps.sh

kernel: deps tool
	tools/fetch-kernel.sh
	tools/kernel.sh debug $$(target/release/rvram-series apply)

series: tool
	target/release/rvram-series export $(if $(SIGNOFF),"$(SIGNOFF)")

series-cc: tool
	target/release/rvram-series cc

check-series: tool
	target/release/rvram-series check

check-bisect: deps tool
	tools/check-bisect.sh

check-fixes: deps tool
	tools/check-fixes.sh

checkpatch: tool
	tools/checkpatch.sh

check:
	tools/check.sh

check-full:
	RVRAM_FULL=1 tools/check.sh

demo:
	tools/demo.sh

bench:
	tools/bench.sh

soak:
	tools/soak.sh

coverage:
	tools/coverage.sh

pyverbs-baseline:
	tools/pyverbs-baseline.sh

fmt:
	rustfmt --edition 2021 --config-path $(RVRAM_CACHE)/base/linux/.rustfmt.toml \
		drivers/rvram/rvram.rs
	cargo fmt
