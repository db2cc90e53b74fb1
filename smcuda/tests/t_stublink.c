// SPDX-License-Identifier: BSD-3-Clause
/*
 * Link proof of the real driver path: smcuda built with
 * MW_SMC_CUDA_DIRECT takes the driver's entry points as linked symbols
 * (cuda.h's versioned names, type-checked against the cudaTypedefs.h PFN
 * types of the versions the lazy loader asks for) and this binary links
 * against the toolkit's stub libcuda.so. It is built by `make check` and
 * inspected, not run: the stub has no driver behind it.
 */
#include <stdio.h>
#include "mmuwatch/smcuda.h"

int main(int argc, char **argv)
{
	struct mw_smc_config cfg = { .size = sizeof(cfg), .job = "stub",
				     .nranks = 1, .rank = 0 };
	struct mw_smc *c;

	(void)argv;
	if (argc < 2)
		return 0;	/* never reaches the driver by default */
	if (mw_smc_open(&cfg, &c) == 0)
		mw_smc_close(c);
	puts("linked");
	return 0;
}
