/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The good-neighbour cell (neighbour_run.c) and the neighbour it runs next
 * to libmmuwatch: one small file per neighbour library (neighbour_ucx.c:
 * UCX's UCM events; neighbour_ompi.c: Open MPI's opal memory hooks)
 * installs that library's release handler and reports what it saw through
 * nb_saw(); the releases and our side's checks are the same for all.
 */
#ifndef MW_HOOKS_TESTS_NEIGHBOUR_H
#define MW_HOOKS_TESTS_NEIGHBOUR_H

#include <stddef.h>
#include <stdint.h>

/* The neighbour's name in failure messages ("UCX", "Open MPI"). */
extern const char nb_name[];
/* Load (if the driver asks), install the release handler; NULL when it is
 * installed, else what failed (written to msg). */
const char *nb_install(char *msg, size_t len);
/* Called by the neighbour's handler for each release it reports. */
void nb_saw(uintptr_t addr, size_t len);
/* Before exit (MPI_Finalize); may be empty. */
void nb_finish(void);

#endif
