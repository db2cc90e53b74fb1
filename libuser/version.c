// SPDX-License-Identifier: BSD-3-Clause
/*
 * mw_version(): the run-time version of the loaded library, so that a
 * program can tell which libmmuwatch it got (the soname only says the ABI).
 * The Makefile passes the one version of the project (kmod/VERSION) as
 * MWU_VERSION_STR/_MAJOR/_MINOR/_PATCH; the header's compile-time macros
 * must agree with it, or this file does not build.
 */
#include "mmuwatch/mmuwatch.h"

#if !defined(MWU_VERSION_STR) || !defined(MWU_VERSION_MAJOR) ||                \
	!defined(MWU_VERSION_MINOR) || !defined(MWU_VERSION_PATCH)
#error "build with the version from kmod/VERSION (libuser/Makefile)"
#endif
_Static_assert(
	MW_VERSION == MW_VERSION_CODE(MWU_VERSION_MAJOR, MWU_VERSION_MINOR,
				      MWU_VERSION_PATCH),
	"include/mmuwatch/mmuwatch.h MW_VERSION_* differ from kmod/VERSION");

MW_API unsigned mw_version(const char **str)
{
	if (str)
		*str = MWU_VERSION_STR;
	return MW_VERSION_CODE(MWU_VERSION_MAJOR, MWU_VERSION_MINOR,
			       MWU_VERSION_PATCH);
}
