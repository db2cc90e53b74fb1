// SPDX-License-Identifier: MIT
/*
 * mmuwatch-status: print the module's global counters and parameters from
 * sysfs as a table, or as JSON with --json. Exit 0 ok, 1 unreadable or
 * malformed sysfs, 2 module not loaded, 64 usage.
 *
 * filtered is the sum of the filtered_* reasons (notifications that did not
 * invalidate); repeat_ignored counts invalidations of watches that were
 * already dead or going away (one-shot), which are not "filtered".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EXIT_NOT_LOADED 2
#define EXIT_USAGE 64

static const char *const counters[] = {
	"contexts", "watches_active", "watches_total", "unwatches",
	"events_unmap", "events_clear", "events_release", "events_migrate",
	"events_exclusive", "events_other",
	"filtered", "filtered_protection_vma", "filtered_protection_page",
	"filtered_soft_dirty", "repeat_ignored",
	"overflows", "lost_events",
};

static const char *const params[] = {
	"max_watches", "default_watches", "max_ring_entries",
	"default_ring_entries", "max_batch",
};

#define N_COUNTERS (sizeof(counters) / sizeof(counters[0]))
#define N_PARAMS (sizeof(params) / sizeof(params[0]))

/* Read a one-line sysfs file into buf without the newline. */
static int read_line(const char *dir, const char *name, char *buf, size_t sz)
{
	char path[4096];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "mmuwatch-status: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (!fgets(buf, (int)sz, f))
		buf[0] = '\0';
	fclose(f);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

static int read_u64(const char *dir, const char *name, uint64_t *v)
{
	char buf[64], *end;

	if (read_line(dir, name, buf, sizeof(buf)))
		return -1;
	errno = 0;
	*v = strtoull(buf, &end, 10);
	if (!buf[0] || *end || errno || buf[0] == '-') {
		fprintf(stderr, "mmuwatch-status: %s/%s: not a number: '%s'\n",
			dir, name, buf);
		return -1;
	}
	return 0;
}

/* version is "abi=<n> module=<string>". */
static int read_version(const char *dir, unsigned int *abi, char *mod,
			size_t sz)
{
	char buf[128], m[64];

	if (read_line(dir, "version", buf, sizeof(buf)))
		return -1;
	if (sscanf(buf, "abi=%u module=%63s", abi, m) != 2) {
		fprintf(stderr, "mmuwatch-status: %s/version: malformed: '%s'\n",
			dir, buf);
		return -1;
	}
	if (strspn(m, "0123456789abcdefghijklmnopqrstuvwxyz"
		   "ABCDEFGHIJKLMNOPQRSTUVWXYZ.+-_~") != strlen(m)) {
		fprintf(stderr, "mmuwatch-status: %s/version: bad module version\n",
			dir);
		return -1;
	}
	snprintf(mod, sz, "%s", m);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: mmuwatch-status [--json] [--sysfs DIR]\n"
		"  --json       machine-readable output\n"
		"  --sysfs DIR  sysfs root (default $MMUWATCH_SYSFS or /sys)\n");
}

int main(int argc, char **argv)
{
	const char *root = getenv("MMUWATCH_SYSFS");
	uint64_t cval[N_COUNTERS], pval[N_PARAMS];
	char kdir[4096], pdir[4096], mod[64];
	unsigned int abi;
	struct stat st;
	int json = 0, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--sysfs") && i + 1 < argc) {
			root = argv[++i];
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (!root || !root[0])
		root = "/sys";
	snprintf(kdir, sizeof(kdir), "%s/kernel/mmuwatch", root);
	snprintf(pdir, sizeof(pdir), "%s/module/mmuwatch/parameters", root);

	if (stat(kdir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr,
			"mmuwatch-status: the mmuwatch kernel module is not loaded (no %s); try: modprobe mmuwatch\n",
			kdir);
		if (json)
			printf("{\"loaded\": false}\n");
		return EXIT_NOT_LOADED;
	}
	if (read_version(kdir, &abi, mod, sizeof(mod)))
		return 1;
	for (i = 0; i < (int)N_COUNTERS; i++)
		if (read_u64(kdir, counters[i], &cval[i]))
			return 1;
	for (i = 0; i < (int)N_PARAMS; i++)
		if (read_u64(pdir, params[i], &pval[i]))
			return 1;

	if (json) {
		printf("{\"loaded\": true, \"abi\": %u, \"module\": \"%s\",\n",
		       abi, mod);
		printf(" \"counters\": {");
		for (i = 0; i < (int)N_COUNTERS; i++)
			printf("%s\"%s\": %" PRIu64, i ? ", " : "", counters[i],
			       cval[i]);
		printf("},\n \"parameters\": {");
		for (i = 0; i < (int)N_PARAMS; i++)
			printf("%s\"%s\": %" PRIu64, i ? ", " : "", params[i],
			       pval[i]);
		printf("}}\n");
		return 0;
	}
	printf("mmuwatch module %s, ABI %u\n\n", mod, abi);
	printf("%-28s %20s\n", "counter", "value");
	for (i = 0; i < (int)N_COUNTERS; i++)
		printf("%-28s %20" PRIu64 "\n", counters[i], cval[i]);
	printf("\n%-28s %20s\n", "parameter", "value");
	for (i = 0; i < (int)N_PARAMS; i++)
		printf("%-28s %20" PRIu64 "\n", params[i], pval[i]);
	return 0;
}
