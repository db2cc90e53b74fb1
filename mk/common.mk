# SPDX-License-Identifier: BSD-3-Clause
# Shared settings for every user-space part. Included by each part's Makefile
# with TOP set to the repository root.
TOP ?= $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
BUILD ?= $(TOP)/build
OBJ := $(BUILD)/obj
BIN := $(BUILD)/bin
LIB := $(BUILD)/lib
TESTBIN := $(BUILD)/tests

CC ?= cc
CSTD := -std=c11
WARN := -Wall -Wextra -Werror
OPT ?= -O2 -g
CPPFLAGS_COMMON := -D_GNU_SOURCE -I$(TOP)/include -I$(TOP)
CFLAGS_COMMON := $(CSTD) $(WARN) $(OPT) -fPIC -fvisibility=hidden -pthread
# Sanitizer build of the host tests: make SAN=asan check
ifeq ($(SAN),asan)
CFLAGS_COMMON += -fsanitize=address,undefined -fno-omit-frame-pointer
LDFLAGS_SAN := -fsanitize=address,undefined
endif

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
DESTDIR ?=

# Kernels the VM bench tests; the setup script installs exactly these.
KVERS := $(shell cat $(BUILD)/kernels 2>/dev/null || cat $(TOP)/vm/kernels)
KVER_DEFAULT := $(firstword $(KVERS))
# ThreadSanitizer build of the library tests (clang: GCC's TSan refuses
# atomic_thread_fence; hooks/ is built without it anyway, with the default
# compiler): tools/check-san.sh (make check-san) builds the tree and runs
# make CC=clang SAN=tsan BUILD=<dir> -C libuser check (and rcache). The
# TSan runtime lives in the executable: the library leaves it undefined.
# With gcc, -Wno-tsan: gcc's TSan does not model fences, so reports on
# fence-ordered code need a look.
ifeq ($(SAN),tsan)
CFLAGS_COMMON += -fsanitize=thread -fno-omit-frame-pointer
CFLAGS_COMMON += $(if $(findstring clang,$(CC)),,-Wno-tsan)
LDFLAGS_SAN := -fsanitize=thread -Wl,-z,undefs
endif
# The test variant of the library: the same sources built with -DMW_TESTING
# (the knobs of include/testing/mmuwatch_test.h) into build/obj/test/ and
# build/lib/test/ (libmmuwatch-test.so, soname libmmuwatch.so.1, and
# libmmuwatch-test.a). Never installed, packaged or named in mmuwatch.pc.
OBJT := $(OBJ)/test
LIBT := $(LIB)/test
TESTING := -DMW_TESTING

# A bench's first line names the processor: its ratios against other
# libraries move with it (tools/perf-table.sh puts it in the table).
BENCH_CPU_LINE = printf '\# cpu: %s, %s cpus, %s\n' \
	"$$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" "$$(nproc)" \
	"$$(sed -n 's/^cpu MHz[[:space:]]*: \([0-9]*\).*/\1 MHz/p' /proc/cpuinfo | head -1)"
