// SPDX-License-Identifier: BSD-3-Clause
/*
 * The error convention and the version query, against libmmuwatch.so:
 * every MW_E* is a negative errno value in [MW_ERR_MIN, -1], each has its
 * own text, an errno the library passes through is named by mw_strerror()
 * (not "unknown"), a forced kernel source without /dev/mmuwatch fails with
 * the open's own errno (ENOENT here, EACCES in the VM test with a 0600
 * device), and mw_version() agrees with the header. The negative control:
 * a value outside the errno range is "unknown error code".
 * Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mmuwatch/mmuwatch.h"

static int fails;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	fails += !ok;
}

int main(void)
{
	static const int codes[] = {
		MW_EINVAL,   MW_ERANGE,	    MW_EFLAGS, MW_ENOMEM,
		MW_EFOREIGN, MW_EFINALIZED, MW_ENOSYS, MW_EREG,
		MW_ELIMIT,   MW_EFORKED,    MW_EBUSY,  MW_EDEVICE,
		MW_ENOSPC,   MW_ECALLBACKS, MW_ESTATE, MW_EQUIESCED,
	};
	const unsigned n = sizeof(codes) / sizeof(codes[0]);
	const char *vs = NULL;
	int in_range = 1, distinct = 1, ret;
	char want[32];

	for (unsigned i = 0; i < n; i++) {
		in_range &= codes[i] < 0 && codes[i] >= MW_ERR_MIN;
		for (unsigned j = i + 1; j < n; j++)
			distinct &= codes[i] != codes[j] &&
				    strcmp(mw_strerror(codes[i]),
					   mw_strerror(codes[j])) != 0;
	}
	check(in_range, "every MW_E* is a negative errno value");
	check(distinct, "every MW_E* has its own value and text");
	check(!strcmp(mw_strerror(-EACCES), strerrordesc_np(EACCES)),
	      "a passed-through errno (-EACCES) is named by mw_strerror");
	check(!strcmp(mw_strerror(-5000), "unknown error code") &&
		      !strcmp(mw_strerror(7), "unknown error code"),
	      "negative control: outside the errno range is unknown");

	check(mw_version(&vs) == MW_VERSION && vs,
	      "mw_version() == MW_VERSION of the header");
	snprintf(want, sizeof(want), "%d.%d", MW_VERSION_MAJOR,
		 MW_VERSION_MINOR);
	check(vs && !strncmp(vs, want, strlen(want)),
	      "mw_version() string starts with MAJOR.MINOR");

	if (access("/dev/mmuwatch", F_OK) == 0) {
		printf("ok - # SKIP /dev/mmuwatch exists (the VM test checks "
		       "EACCES)\n");
	} else {
		setenv("MMUWATCH_SOURCE", "kernel", 1);
		ret = mw_init();
		printf("# forced kernel source: %d (%s)\n", ret,
		       mw_strerror(ret));
		check(ret == -ENOENT, "forced kernel source without the "
				      "device: -ENOENT, the open's errno");
	}
	return fails ? 1 : 0;
}
