# SPDX-License-Identifier: BSD-3-Clause
# mmuwatch: top-level build. `make` builds everything, `make check` runs
# every test (host tests, then the VM bench on each test kernel), `make demo`
# runs the main job, `make bench` the benchmarks.
TOP := $(CURDIR)
include mk/common.mk

# User-space parts in build order: libuser links the archives of hooks,
# rcache, smcuda and peer into libmmuwatch; the rest link libmmuwatch. Built one
# after the other (each part's own make may still run in parallel), and
# never as make targets of their own: `bench` and `demo` are also targets.
PARTS := hooks rcache smcuda peer libuser tools selftests bench demo mpi man
KDIR ?= /lib/modules/$(KVER_DEFAULT)/build

.PHONY: all modules user check check-host check-san check-vm bench demo setup \
	install uninstall live-refresh deb clean checkpatch

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

# check, bench and demo print one line per stage (result, time, counts,
# log file) and end with a table stage x kernel (tools/stage.sh,
# tools/summary.sh); full outputs go to build/logs/<target>/. A failed
# build stops there; other failing stages do not stop the rest.
LOGS := $(BUILD)/logs
RUNSTAGE = tools/stage.sh $$d/summary.tsv
START = d=$(LOGS)/$(1); rm -rf $$d; mkdir -p $$d; \
	echo "make $(1): one line per stage, full logs in $$d/"; \
	$(RUNSTAGE) build host $$d/build.log -- $(MAKE) --no-print-directory all || \
		{ tools/summary.sh $$d/summary.tsv "make $(1)"; exit 1; }
# Per-script results of a VM stage, one line each.
VMLINES = sed 's/^/           /' $(BUILD)/vm/$(1)-$(2)/suite.txt 2>/dev/null

# The two-node churn runs with 1, 2 and 4 ranks per node on the default
# kernel and with 1 on the others (CI time; MW_2N_PPNS in vm/check-2node.sh).
check: setup
	@$(call START,check); \
	for p in kmod $(PARTS); do [ -f $$p/Makefile ] || continue; \
		$(RUNSTAGE) host-$$p host $$d/host-$$p.log -- \
			$(MAKE) -C $$p --no-print-directory TOP=$(TOP) check; done; \
	$(RUNSTAGE) host-san host $$d/host-san.log -- tools/check-san.sh; \
	$(RUNSTAGE) install host $$d/install.log -- tools/install-check.sh $(KVER_DEFAULT); \
	$(RUNSTAGE) deb host $$d/deb.log -- $(MAKE) --no-print-directory deb; \
	for k in $(KVERS); do \
		$(RUNSTAGE) vm-check $$k $$d/vm-$$k.log -- vm/check.sh $$k; \
		$(call VMLINES,check,$$k); \
		$(RUNSTAGE) vm-numa $$k $$d/vm-numa-$$k.log -- vm/check-numa.sh $$k; \
		$(call VMLINES,check-numa,$$k); \
		p=1; [ $$k != $(KVER_DEFAULT) ] || p="1 2 4"; \
		MW_2N_PPNS="$$p" $(RUNSTAGE) vm-2node $$k $$d/vm-2node-$$k.log -- \
			vm/check-2node.sh $$k; \
		$(call VMLINES,check-2node,$$k); done; \
	tools/summary.sh $$d/summary.tsv "make check"

check-host:
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) check
	@set -e; for p in $(PARTS); do \
		if [ -f $$p/Makefile ]; then $(MAKE) -C $$p --no-print-directory TOP=$(TOP) check; fi; \
	done

# The library's tests under ASan+UBSan+LSan and ThreadSanitizer, each in a
# fresh tree of its own (build/san-*); make check runs it too.
check-san:
	@tools/check-san.sh

check-vm:
	@vm/check.sh $(KVERS)
	@vm/check-numa.sh $(KVERS)
	@vm/check-2node.sh $(KVERS)

bench: setup
	@$(call START,bench); \
	for p in $(PARTS); do [ -f $$p/Makefile ] || continue; \
		$(RUNSTAGE) bench-$$p host $$d/bench-$$p.log -- \
			$(MAKE) -C $$p --no-print-directory TOP=$(TOP) bench; done; \
	$(RUNSTAGE) vm-bench $(KVER_DEFAULT) $$d/vm-$(KVER_DEFAULT).log -- \
		vm/bench.sh $(KVER_DEFAULT); \
	$(call VMLINES,bench,$(KVER_DEFAULT)); \
	$(RUNSTAGE) vm-2node-bench $(KVER_DEFAULT) $$d/vm-2node-$(KVER_DEFAULT).log -- \
		vm/bench-2node.sh $(KVER_DEFAULT); \
	$(call VMLINES,bench-2node,$(KVER_DEFAULT)); \
	grep -h '^ *RESULT ' $$d/*.log $(BUILD)/vm/bench-$(KVER_DEFAULT)/*.out \
		2>/dev/null | sed 's/^ *//' > $$d/results.txt; \
	echo "  $$(wc -l < $$d/results.txt) RESULT lines: $$d/results.txt"; \
	$(RUNSTAGE) plots host $$d/plots.log -- tools/bench-plots.sh $$d/results.txt \
		$(BUILD)/bench; sed -n 's/^PLOT /  figure: /p' $$d/plots.log; \
	tools/perf-table.sh $$d > $(BUILD)/bench/perf-table.md 2>/dev/null && \
		echo "  table: $(BUILD)/bench/perf-table.md (README: tools/perf-table.sh --update README.md $$d)"; \
	tools/summary.sh $$d/summary.tsv "make bench"

# The demo: the build out of sight (its log), then the demo itself on
# screen (and in its log).
demo: setup
	@$(call START,demo); \
	MW_STAGE_SHOW=1 $(RUNSTAGE) demo $(KVER_DEFAULT) $$d/demo.log -- \
		vm/demo.sh $(KVER_DEFAULT); \
	tools/summary.sh $$d/summary.tsv "make demo"

checkpatch:
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) checkpatch

# Administrators: `make && sudo make install` (PREFIX=/usr/local, KVER =
# the running kernel). install builds first, so a failed build installs
# nothing; every part installs into a staging tree, whose file list becomes
# the manifest `make uninstall` removes. Only without DESTDIR does it run
# depmod, udevadm and ldconfig on the live system.
STAGE := $(BUILD)/stage
MANIFEST = $(PREFIX)/share/mmuwatch/install-manifest
# What is installed, built first in this order (not the VM tests,
# benchmarks or demo: a node needs only these); any build failure stops
# before anything is installed.
INSTALL_PARTS := hooks rcache smcuda libuser tools mpi man
install:
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) install-check-headers
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) \
		$(BUILD)/kmod/$(or $(KVER),$(shell uname -r))/mmuwatch.ko
	@set -e; for p in $(INSTALL_PARTS); do t=all; [ $$p != mpi ] || t=lib; \
		$(MAKE) -C $$p --no-print-directory TOP=$(TOP) $$t; done
	@rm -rf $(STAGE)
	@set -e; for p in kmod $(INSTALL_PARTS); do \
		$(MAKE) -C $$p --no-print-directory TOP=$(TOP) DESTDIR=$(STAGE) \
			install >/dev/null; done
	@mkdir -p $(STAGE)$(dir $(MANIFEST))
	@(cd $(STAGE) && find . ! -type d | sed 's|^\.||' | sort; \
		find . -mindepth 1 -type d | sed 's|^\.||' | sort -r | \
		while read -r d; do [ -e "$(DESTDIR)$$d" ] || echo "d $$d"; done \
		) > $(STAGE)$(MANIFEST)
	@mkdir -p $(DESTDIR)/
	@cp -dR --preserve=mode,links $(STAGE)/. $(DESTDIR)/
	@grep -v '^d ' $(STAGE)$(MANIFEST) | sed 's|^|  INSTALL $(DESTDIR)|' 
	@rm -rf $(STAGE)
	@$(MAKE) --no-print-directory live-refresh

uninstall:
	@test -f $(DESTDIR)$(MANIFEST) || \
		{ echo "uninstall: no $(DESTDIR)$(MANIFEST) (not installed with this PREFIX?)" >&2; exit 1; }
	@cp $(DESTDIR)$(MANIFEST) $(BUILD)/uninstall-manifest
	@while read -r f; do case "$$f" in \
		"d "*) rmdir "$(DESTDIR)$${f#d }" 2>/dev/null || true ;; \
		*) echo "  RM      $(DESTDIR)$$f"; rm -f "$(DESTDIR)$$f" ;; \
		esac; done < $(BUILD)/uninstall-manifest
	@$(MAKE) --no-print-directory live-refresh

live-refresh:
	@$(MAKE) -C kmod --no-print-directory TOP=$(TOP) live-refresh
	@if [ -z "$(DESTDIR)" ]; then echo "ldconfig"; ldconfig; fi

# Debian packages (debian/): dpkg-buildpackage -us -uc -b on a copy of the
# tree (the files git knows, committed or not), so the .debs land in
# build/deb/ and not next to the repository; then lintian.
VERSION := $(strip $(shell cat kmod/VERSION))
DEBSRC := $(BUILD)/deb/src/mmuwatch-$(VERSION)
deb:
	@rm -rf $(BUILD)/deb && mkdir -p $(DEBSRC)
	@if git rev-parse >/dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
		xargs -0 -I{} sh -c '[ ! -e "{}" ] || echo "{}"' | \
		tar -c -T - | tar -x -C $(DEBSRC); \
	else tar -c --exclude=./build . | tar -x -C $(DEBSRC); fi
	@echo "  DEB     dpkg-buildpackage -us -uc -b (log: $(BUILD)/deb/build.log)"
	@cd $(DEBSRC) && dpkg-buildpackage -us -uc -b > $(BUILD)/deb/build.log 2>&1 || \
		{ tail -30 $(BUILD)/deb/build.log >&2; exit 1; }
	@mv $(BUILD)/deb/src/*.deb $(BUILD)/deb/src/*.changes \
		$(BUILD)/deb/src/*.buildinfo $(BUILD)/deb/
	@rm -rf $(BUILD)/deb/src
	@for d in $(BUILD)/deb/*.deb; do echo "  DEB     $$d"; done
	@echo "  LINTIAN (log: $(BUILD)/deb/lintian.log)"
	@lintian --info --display-info --pedantic $(BUILD)/deb/*.changes \
		> $(BUILD)/deb/lintian.log 2>&1; \
	if grep -q '^[EW]:' $(BUILD)/deb/lintian.log; then \
		grep '^[EW]:' $(BUILD)/deb/lintian.log >&2; \
		echo "deb: lintian errors or warnings" >&2; exit 1; fi; \
	echo "  LINTIAN no errors or warnings ($$(grep -c '^[IPX]:' $(BUILD)/deb/lintian.log) info/pedantic tags: $(BUILD)/deb/lintian.log)"

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
