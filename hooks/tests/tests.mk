# SPDX-License-Identifier: BSD-3-Clause
# Host tests and benchmarks of hooks/ (included by hooks/Makefile). They
# link the test variant of the archive ($(TARCHIVE), -DMW_TESTING: the
# MMUWATCH_SYSFS_ROOT switch); the programs linking libmmuwatch.so run the
# shipped library, and the negative controls swap in the test variant
# with LD_LIBRARY_PATH=$(LIBT) (same soname).
TCFLAGS := $(CPPFLAGS_COMMON) $(CSTD) $(WARN) -O2 -g -pthread
ASANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer
PRELOAD := $(TESTBIN)/libmw_hooks_preload.so
TESTS := $(T)/test_matrix $(T)/test_alloc $(T)/test_alloc_asan \
	$(T)/test_alloc_mem $(T)/test_alloc_mem_asan \
	$(T)/test_intercept $(T)/test_intercept_linked $(T)/test_static \
	$(T)/libmwt_dl.so $(T)/release_count $(PRELOAD) $(T)/test_conflict \
	$(T)/libmwt_relro.so $(T)/libmwt_relro_cut.so $(T)/test_late \
	$(T)/test_dlctor $(T)/libmwt_ctor.so

# The preload library: the whole archive plus a recording callback.
$(PRELOAD): tests/preload_cb.c tests/mwtest.h $(TARCHIVE) | $(T)
	$(CC) $(TCFLAGS) -fPIC -fvisibility=hidden -shared -o $@ $< \
		-Wl,--whole-archive $(TARCHIVE) -Wl,--no-whole-archive

$(T)/test_matrix: tests/test_matrix.c $(TARCHIVE) | $(T)
	$(CC) $(TCFLAGS) -o $@ $< $(TARCHIVE)

# The allocator's internals linked directly (no interposition): ASan-able.
ALLOC_SRC := alloc.c alloc_free.c alloc_posix.c alloc_page.c alloc_span.c alloc_heap.c alloc_share.c alloc_outside.c release.c \
	decide.c
$(T)/test_alloc $(T)/test_alloc_mem: $(T)/%: tests/%.c $(ALLOC_SRC) $(wildcard *.h) \
		tests/check.h | $(T)
	$(CC) $(TCFLAGS) -fno-builtin-malloc -fno-builtin-free -o $@ $< $(ALLOC_SRC)
# control: no lending across classes, no growing into a retained span
TESTS += $(T)/test_alloc_mem_plain
$(T)/test_alloc_mem_plain: tests/test_alloc_mem.c $(ALLOC_SRC) $(wildcard *.h) \
		tests/check.h | $(T)
	$(CC) $(TCFLAGS) -DMW_LEND_PCT=0 -DMW_ROOM=1 -fno-builtin-malloc \
		-fno-builtin-free -o $@ $< $(ALLOC_SRC)
# control (in the VM, kernels before 6.17): no repair of a failed move
TESTS += $(T)/test_alloc_mem_norepair
$(T)/test_alloc_mem_norepair: tests/test_alloc_mem.c $(ALLOC_SRC) $(wildcard *.h) \
		tests/check.h | $(T)
	$(CC) $(TCFLAGS) -DMW_NO_MOVE_REPAIR -fno-builtin-malloc \
		-fno-builtin-free -o $@ $< $(ALLOC_SRC)
# the real-program runner of bench/alloc.sh, also used by vm/tests.d
TESTS += $(T)/mwrun
$(T)/test_alloc_asan $(T)/test_alloc_mem_asan: $(T)/%_asan: tests/%.c $(ALLOC_SRC) \
		$(wildcard *.h) tests/check.h | $(T)
	$(CC) $(TCFLAGS) $(ASANFLAGS) -fno-builtin-malloc -fno-builtin-free \
		-o $@ $< $(ALLOC_SRC)

$(T)/test_intercept: tests/test_intercept.c tests/mwtest.h tests/check.h | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -ldl
# "Linked" install mode: libc comes before the hooks in symbol order.
$(T)/test_intercept_linked: tests/test_intercept.c tests/check.h $(PRELOAD) | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -Wl,--no-as-needed -lc -L$(TESTBIN) \
		-l:libmw_hooks_preload.so -Wl,-rpath,$(TESTBIN) -ldl
$(T)/test_dlctor: tests/test_dlctor.c $(PRELOAD) | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -Wl,--no-as-needed -lc -L$(TESTBIN) \
		-l:libmw_hooks_preload.so -Wl,-rpath,$(TESTBIN) -ldl
$(T)/libmwt_ctor.so: tests/ctor_lib.c | $(T)
	$(CC) $(TCFLAGS) -fPIC -shared -o $@ $<
$(T)/test_static: tests/test_static.c $(TARCHIVE) | $(T)
	$(CC) $(TCFLAGS) -static -o $@ $< $(TARCHIVE)
$(T)/libmwt_dl.so: tests/dl_lib.c | $(T)
	$(CC) $(TCFLAGS) -fPIC -shared -Wl,-Bsymbolic -o $@ $<
# GOT inside RELRO; the _cut copy's RELRO ends mid-page (see relro_cut.c)
$(T)/libmwt_relro.so: tests/relro_lib.c | $(T)
	$(CC) $(TCFLAGS) -fPIC -shared -fuse-ld=bfd -Wl,-z,relro,-z,now -o $@ $<
$(T)/relro_cut: tests/relro_cut.c | $(T)
	$(CC) $(TCFLAGS) -o $@ $<
$(T)/libmwt_relro_cut.so: $(T)/libmwt_relro.so $(T)/relro_cut
	$(T)/relro_cut $< $@
$(T)/test_late: tests/test_late.c tests/mwtest.h tests/check.h | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -ldl
TESTS += $(T)/test_foreign $(T)/libmwt_wrapfree.so
$(T)/test_foreign: tests/test_foreign.c tests/mwtest.h tests/check.h | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -ldl
$(T)/libmwt_wrapfree.so: tests/wrapfree_lib.c | $(T)
	$(CC) $(TCFLAGS) -fPIC -shared -o $@ $< -ldl
$(T)/release_count: tests/release_count.c tests/mwtest.h | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -ldl
$(T)/bench_alloc: tests/bench_alloc.c $(TARCHIVE) | $(T)
	$(CC) $(TCFLAGS) -o $@ $< $(TARCHIVE)

# The scalable allocator's promises (test_alloc_scale.c); the _locked build
# releases under the allocator lock: the negative control of "nolock".
TESTS += $(T)/test_alloc_scale $(T)/test_alloc_scale_locked
$(T)/test_alloc_scale: tests/test_alloc_scale.c tests/check.h $(ALLOC_SRC) $(wildcard *.h) | $(T)
	$(CC) $(TCFLAGS) -fno-builtin-malloc -fno-builtin-free -o $@ $< $(ALLOC_SRC)
$(T)/test_alloc_scale_locked: tests/test_alloc_scale.c tests/check.h $(ALLOC_SRC) $(wildcard *.h) | $(T)
	$(CC) $(TCFLAGS) -DMWH_TEST_RELEASE_LOCKED -fno-builtin-malloc -fno-builtin-free \
		-o $@ $< $(ALLOC_SRC)
TESTS += $(T)/test_alloc_scale_asan
$(T)/test_alloc_scale_asan: tests/test_alloc_scale.c tests/check.h $(ALLOC_SRC) $(wildcard *.h) | $(T)
	$(CC) $(TCFLAGS) $(ASANFLAGS) -fno-builtin-malloc -fno-builtin-free \
		-o $@ $< $(ALLOC_SRC)

check: all $(TESTS)
	@T=$(T) PRELOAD=$(PRELOAD) LIBMMUWATCH=$(LIB)/libmmuwatch.so \
		sh tests/run.sh
	@bash tests/alloc_stats.sh
	@if [ -e /usr/include/ucm/api/ucm.h ] && [ -e $(LIB)/libmmuwatch.so ]; then \
		$(MAKE) --no-print-directory check-neighbour; \
	else echo "ok - # SKIP neighbour matrix: no libucx-dev or libmmuwatch.so"; fi

# The allocator against glibc, jemalloc and mimalloc (Debian's and the
# newest release), microbenchmarks and real programs (hooks/bench/alloc.sh).
$(T)/larson: bench/larson.c | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -ldl
$(T)/mwrun: bench/mwrun.c | $(T)
	$(CC) $(TCFLAGS) -o $@ $<

bench: all $(T)/bench_alloc $(T)/release_count $(PRELOAD) $(T)/larson $(T)/mwrun
	@$(BENCH_CPU_LINE)
	@MMUWATCH_HOOKS_DISABLE=1 $(T)/bench_alloc
	@T=$(T) TOP=$(TOP) LIBMMUWATCH=$(LIB)/libmmuwatch.so \
		MW_BENCH_ALLOC_EXTRA=ours_hooks_only=$(PRELOAD)$${MW_BENCH_ALLOC_EXTRA:+,$$MW_BENCH_ALLOC_EXTRA} \
		bash bench/alloc.sh
	@o=$$(MMUWATCH_LEAVE_PINNED=1 LD_PRELOAD=$(PRELOAD) $(T)/release_count) && \
	g=$$(MMUWATCH_LEAVE_PINNED=1 MMUWATCH_HOOKS_ALLOCATOR=0 \
		LD_PRELOAD=$(PRELOAD) $(T)/release_count) && \
	echo "RESULT releases_workload_ours $${o#releases } count" && \
	echo "RESULT releases_workload_glibc $${g#releases } count"

$(T)/libmwt_patcher.so: tests/patcher_lib.c | $(T)
	$(CC) $(TCFLAGS) -fPIC -shared -o $@ $< -ldl
$(T)/test_conflict: tests/test_conflict.c $(T)/libmwt_patcher.so $(TARCHIVE) | $(T)
	$(CC) $(TCFLAGS) -o $@ $< $(TARCHIVE) -L$(T) -l:libmwt_patcher.so \
		-Wl,-rpath,$(T) -ldl

# The libfabric column (verbs provider: run in the VM over Soft-RoCE,
# vm/tests.d/41-neighbour-fi.sh); built with the host checks.
NBFSRC := tests/neighbour_fi.c
NBF := $(T)/nbf_plain $(T)/nbf_linked $(T)/nbf_alone
$(T)/nbf_plain: $(NBFSRC) $(LIB)/libmmuwatch.so | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -L$(LIB) -Wl,-rpath,$(LIB) -lmmuwatch -ldl
$(T)/nbf_linked: $(NBFSRC) $(LIB)/libmmuwatch.so | $(T)
	$(CC) $(TCFLAGS) -o $@ $< -Wl,--no-as-needed -lfabric -L$(LIB) -Wl,-rpath,$(LIB) -lmmuwatch -ldl
$(T)/nbf_alone: $(NBFSRC) | $(T)
	$(CC) $(TCFLAGS) -DMW_ALONE -o $@ $< -ldl

# The good-neighbour matrix (tests/neighbour.sh): UCX and libmmuwatch in
# one process, every order and mode; then its two negative controls, which
# must fail: the interposers forced back to raw system calls (UCX's bistro
# self-test fails) and bypass detection off (stale hits appear).
NBSRC := tests/neighbour_run.c tests/neighbour_ucx.c
NBDEP := $(NBSRC) tests/neighbour.h
NBLIB := -L$(LIB) -Wl,-rpath,$(LIB) -lmmuwatch -ldl
NB := $(T)/nb_plain $(T)/nb_linked113 $(T)/nb_alone $(NBF) $(T)/shmdt_whole
$(T)/shmdt_whole: tests/shmdt_whole.c $(LIB)/libmmuwatch.so | $(T)
	$(CC) $(TCFLAGS) -o $@ $< $(NBLIB)
$(T)/nb_plain: $(NBDEP) $(LIB)/libmmuwatch.so | $(T)
	$(CC) $(TCFLAGS) -o $@ $(NBSRC) $(NBLIB)
$(T)/nb_linked113: $(NBDEP) $(LIB)/libmmuwatch.so | $(T)
	$(CC) $(TCFLAGS) -o $@ $(NBSRC) -Wl,--no-as-needed -lucs -lucm $(NBLIB)
$(T)/nb_alone: $(NBDEP) | $(T)
	$(CC) $(TCFLAGS) -DMW_ALONE -o $@ $(NBSRC) -ldl

# The Open MPI column (tests/neighbour_ompi.sh): the same cell next to Open
# MPI 4.1's own memory hooks; built where Debian's libmpi.so.40 is.
OMPILIB := $(wildcard /usr/lib/x86_64-linux-gnu/libmpi.so.40)
NBOSRC := tests/neighbour_run.c tests/neighbour_ompi.c
NBODEP := $(NBOSRC) tests/neighbour.h
ifneq ($(OMPILIB),)
NB += $(T)/nbo_plain $(T)/nbo_linked $(T)/nbo_alone
endif
$(T)/nbo_plain: $(NBODEP) $(LIB)/libmmuwatch.so | $(T)
	$(CC) $(TCFLAGS) -o $@ $(NBOSRC) $(NBLIB)
$(T)/nbo_linked: $(NBODEP) $(LIB)/libmmuwatch.so | $(T)
	$(CC) $(TCFLAGS) -o $@ $(NBOSRC) -Wl,--no-as-needed -l:libmpi.so.40 \
		-l:libopen-pal.so.40 $(NBLIB)
$(T)/nbo_alone: $(NBODEP) | $(T)
	$(CC) $(TCFLAGS) -DMW_ALONE -o $@ $(NBOSRC) -ldl

check-neighbour: $(NB)
	@u=$$($(TOP)/tools/anchors.sh ucx 2>/dev/null) && \
	$(CC) $(TCFLAGS) -o $(T)/nb_linked122 $(NBSRC) -Wl,--no-as-needed \
		-L$$u/lib -Wl,-rpath,$$u/lib -lucs -lucm $(NBLIB) || \
		{ echo "# UCX 1.22 anchor not available: its column skipped"; u=; }; \
	export T=$(T) U122=$${u:+$$u/lib}; \
	MMUWATCH_SOURCE=hooks MMUWATCH_LEAVE_PINNED=1 $(T)/shmdt_whole || exit 1; \
	sh tests/neighbour.sh || exit 1; \
	echo "# hooks column again, glibc's allocator (its free's munmap passes our libc jump)"; \
	MMUWATCH_HOOKS_ALLOCATOR=0 sh tests/neighbour.sh hooks || exit 1; \
	n=$$(NB_EXTRA="LD_LIBRARY_PATH=$(LIBT) MMUWATCH_HOOKS_TEST_NO_VERIFY=1 MMUWATCH_HOOKS_ALLOCATOR=0" \
		sh tests/neighbour.sh hooks | grep -c '^not ok.*stale free hit'); \
	if [ "$$n" -gt 0 ]; then echo "ok - negative control: the free check sees stale free hits without bypass detection ($$n cells)"; \
	else echo "not ok - negative control: no stale free hit without bypass detection"; exit 1; fi; \
	n=$$(NB_EXTRA="LD_LIBRARY_PATH=$(LIBT) MMUWATCH_HOOKS_TEST_RAW=1" sh tests/neighbour.sh hooks | \
		grep -c '^not ok.*bistro.*= -22'); \
	if [ "$$n" -gt 0 ]; then echo "ok - negative control: raw interposers break UCX bistro in $$n cells"; \
	else echo "not ok - negative control: raw interposers did not break UCX bistro"; exit 1; fi; \
	if [ -x $(T)/nbo_plain ]; then \
	n=$$(NB_EXTRA="LD_LIBRARY_PATH=$(LIBT) MMUWATCH_HOOKS_TEST_RAW=1" sh tests/neighbour.sh hooks | \
		grep -c '^not ok ompi.*Open MPI missed munmap'); \
	if [ "$$n" = 3 ]; then echo "ok - negative control: raw interposers hide munmap from Open MPI's patcher in 3/3 cells"; \
	else echo "not ok - negative control: raw interposers hid munmap from Open MPI in $$n/3 cells"; exit 1; fi; fi; \
	n=$$(NB_EXTRA="LD_LIBRARY_PATH=$(LIBT) MMUWATCH_HOOKS_TEST_NO_VERIFY=1" sh tests/neighbour.sh hooks | \
		grep -c '^not ok.*stale'); \
	if [ "$$n" -gt 0 ]; then echo "ok - negative control: without bypass detection $$n cells serve stale hits"; \
	else echo "not ok - negative control: no stale hit without bypass detection"; exit 1; fi

