# mmuwatch: top-level build. `make` builds everything, `make check` runs
# every test (host tests, then the VM bench on each test kernel), `make demo`
# runs the main job, `make bench` the benchmarks.
TOP := $(CURDIR)
include mk/common.mk

# User-space parts in build order: libuser links the archives of hooks,
# rcache and smcuda into libmmuwatch; the rest link libmmuwatch. Built one
# after the other (each part's own make may still run in parallel), and
# never as make targets of their own: `bench` and `demo` are also targets.
PARTS := hooks rcache smcuda libuser tools selftests bench demo mpi
KDIR ?= /lib/modules/$(KVER_DEFAULT)/build

.PHONY: all modules user check check-host check-vm bench demo setup \
	install clean checkpatch

all: modules user

setup:
	@tools/setup.sh

# The module, built once per test kernel into build/kmod/<kver>/.
modules:
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) all

user:
	@set -e; for p in $(PARTS); do \
		if [ -f $$p/Makefile ]; then $(MAKE) -C $$p --no-print-directory TOP=$(TOP) all; fi; \
	done

check: setup
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory check-host
	@$(MAKE) --no-print-directory check-vm
	@echo "make check: all tests passed"

check-host:
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) check
	@set -e; for p in $(PARTS); do \
		if [ -f $$p/Makefile ]; then $(MAKE) -C $$p --no-print-directory TOP=$(TOP) check; fi; \
	done

check-vm:
	@vm/check.sh $(KVERS)
	@vm/check-numa.sh $(KVERS)

bench: setup
	@$(MAKE) --no-print-directory all
	@set -e; for p in $(PARTS); do \
		if [ -f $$p/Makefile ]; then $(MAKE) -C $$p --no-print-directory TOP=$(TOP) bench; fi; \
	done
	@vm/bench.sh $(KVER_DEFAULT)

demo: setup
	@$(MAKE) --no-print-directory all
	@vm/demo.sh $(KVER_DEFAULT)

checkpatch:
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) checkpatch

install:
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) install
	@set -e; for p in $(PARTS); do \
		if [ -f $$p/Makefile ]; then $(MAKE) -C $$p --no-print-directory TOP=$(TOP) install; fi; \
	done

clean:
	rm -rf build/obj build/bin build/lib build/tests build/kmod build/vm

# The debug kernel (KASAN, lockdep, kmemleak, ...; built once, cached in
# $(MW_CACHE) or ~/.cache/mmuwatch) running every VM test: vm/check-debug.sh.
.PHONY: check-debug soak
check-debug: setup
	@$(MAKE) --no-print-directory all
	@vm/check-debug.sh

# The long multi-process soak (MW_SOAK_SECS, default 600 s) on each kernel.
soak: setup
	@$(MAKE) --no-print-directory all
	@vm/runsuite.sh soak vm/soak.d $(KVERS)
