// SPDX-License-Identifier: BSD-3-Clause
/*
 * A library whose constructor frees memory that libc allocated inside
 * itself (getline's buffer, strdup): the constructor runs before the
 * hooks redirect this object's GOT, so its free() is still glibc's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mwt_ctor_lines;

__attribute__((constructor)) static void ctor(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char *line = NULL;
	size_t n = 0;

	if (!f)
		return;
	while (getline(&line, &n, f) > 0) {
		char *copy = strdup(line);

		mwt_ctor_lines++;
		free(copy);
	}
	free(line);
	fclose(f);
}
