// SPDX-License-Identifier: BSD-3-Clause
/* Diagnostics to stderr, level from MMUWATCH_LOG (0=errors .. 3=debug, or
 * error/warn/info/debug). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "libuser/internal.h"

int mwu_log_level_from_env(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *v = getenv("MMUWATCH_LOG");
	unsigned i;

	if (!v || !*v)
		return MWU_LOG_WARN;
	for (i = 0; i < 4; i++)
		if (!strcmp(v, names[i]))
			return (int)i;
	if (v[0] >= '0' && v[0] <= '9')
		return atoi(v) > MWU_LOG_DEBUG ? MWU_LOG_DEBUG : atoi(v);
	return MWU_LOG_WARN;
}

void mwu_log(int level, const char *fmt, ...)
{
	static const char *const tag[] = { "error", "warning", "info", "debug" };
	char buf[512];
	va_list ap;
	int n;

	if (level > mwu_core.log_level)
		return;
	n = snprintf(buf, sizeof(buf), "mmuwatch: %s: ", tag[level]);
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(buf, "\n");
	fputs(buf, stderr);
}
