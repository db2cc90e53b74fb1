// SPDX-License-Identifier: BSD-3-Clause
/*
 * mmuwatch-status: what the mmuwatch module is doing, for administrators
 * and monitoring. Reads sysfs generically: every file of
 * /sys/kernel/mmuwatch/ (global counters; one level of subdirectories as
 * "dir/name") and of /sys/module/mmuwatch/parameters/, so a counter or a
 * parameter added to the module later shows up without a change here.
 * Outputs: a table (default), JSON (--json), or the node_exporter textfile
 * format (--prometheus); --processes adds one row per open /dev/mmuwatch
 * from /proc/<pid>/fdinfo; --watch SECONDS repeats (with per-second rates
 * in the table). Exit 0 ok, 1 unreadable or malformed sysfs, 2 module not
 * loaded (--prometheus then prints mmuwatch_up 0 and exits 0), 64 usage.
 *
 * The counter "filtered" is the sum of the filtered_* reasons
 * (notifications that did not invalidate); repeat_ignored counts
 * invalidations of watches already dead or going away (one-shot).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MWS_VERSION
#define MWS_VERSION "unknown"
#endif

#define EXIT_MALFORMED	1
#define EXIT_NOT_LOADED 2
#define EXIT_USAGE	64
#define MAX_ITEMS	512
#define NAME_LEN	128
#define VALUE_LEN	128

/* One sysfs value: a u64 when numeric, else its text (parameters only). */
struct item {
	char name[NAME_LEN];
	char text[VALUE_LEN];
	uint64_t v;
	int numeric;
};

struct snapshot {
	unsigned int abi;
	char module[64];
	struct item ctr[MAX_ITEMS], par[MAX_ITEMS];
	int nctr, npar;
};

struct opts {
	const char *sys, *proc;
	int json, prom, procs;
	double watch;
	long count;
};

/* dst = a sep b, cut to sz (sysfs names are short; a cut name is harmless). */
static void join(char *dst, size_t sz, const char *a, const char *sep,
		 const char *b)
{
	size_t k = 0;

	for (const char *const *p = (const char *const[]){a, sep, b, NULL}; *p;
	     p++)
		for (const char *c = *p; *c && k + 1 < sz; c++)
			dst[k++] = *c;
	dst[k] = '\0';
}

static void trim(char *buf)
{
	size_t n = strlen(buf);

	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
}

/* Read a small sysfs file without the trailing newline. */
static int read_text(const char *path, char *buf, size_t sz)
{
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "mmuwatch-status: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (!fgets(buf, (int)sz, f))
		buf[0] = '\0';
	fclose(f);
	trim(buf);
	return 0;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return *end || errno ? -1 : 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct item *)a)->name,
		      ((const struct item *)b)->name);
}

/*
 * Every regular file of dir (and of its subdirectories when depth > 0)
 * into items[], sorted. strict: each must be a u64 (counters).
 */
static int read_dir(const char *dir, const char *prefix, int depth, int strict,
		    struct item *items, int *n)
{
	char path[PATH_MAX], sub[NAME_LEN];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(dir);
	int ret = 0;

	if (!d) {
		fprintf(stderr, "mmuwatch-status: %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	while (!ret && (de = readdir(d))) {
		struct item *it;

		if (de->d_name[0] == '.' ||
		    (!prefix[0] && !strcmp(de->d_name, "version")))
			continue;
		join(path, sizeof(path), dir, "/", de->d_name);
		join(sub, sizeof(sub), prefix, "", de->d_name);
		if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
			char pfx[NAME_LEN];

			if (depth <= 0)
				continue;
			join(pfx, sizeof(pfx), sub, "/", "");
			ret = read_dir(path, pfx, depth - 1, strict, items, n);
			continue;
		}
		if (*n >= MAX_ITEMS) {
			fprintf(stderr, "mmuwatch-status: %s: too many files\n",
				dir);
			ret = -1;
			break;
		}
		it = &items[*n];
		join(it->name, sizeof(it->name), sub, "", "");
		if (read_text(path, it->text, sizeof(it->text))) {
			ret = -1;
			break;
		}
		it->numeric = !parse_u64(it->text, &it->v);
		if (strict && !it->numeric) {
			fprintf(stderr,
				"mmuwatch-status: %s: not a number: '%s'\n",
				path, it->text);
			ret = -1;
			break;
		}
		(*n)++;
	}
	closedir(d);
	if (!ret && !prefix[0])
		qsort(items, (size_t)*n, sizeof(*items), by_name);
	return ret;
}

/* version is "abi=<n> module=<string>". */
static int read_version(const char *kdir, struct snapshot *s)
{
	char path[PATH_MAX], buf[VALUE_LEN], m[64];

	join(path, sizeof(path), kdir, "/", "version");
	if (read_text(path, buf, sizeof(buf)))
		return -1;
	if (sscanf(buf, "abi=%u module=%63s", &s->abi, m) != 2 ||
	    strspn(m, "0123456789abcdefghijklmnopqrstuvwxyz"
		      "ABCDEFGHIJKLMNOPQRSTUVWXYZ.+-_~") != strlen(m)) {
		fprintf(stderr, "mmuwatch-status: %s: malformed: '%s'\n", path,
			buf);
		return -1;
	}
	snprintf(s->module, sizeof(s->module), "%s", m);
	return 0;
}

/* 0, EXIT_NOT_LOADED or EXIT_MALFORMED. */
static int take(const struct opts *o, struct snapshot *s)
{
	char kdir[PATH_MAX], pdir[PATH_MAX];
	struct stat st;

	snprintf(kdir, sizeof(kdir), "%s/kernel/mmuwatch", o->sys);
	snprintf(pdir, sizeof(pdir), "%s/module/mmuwatch/parameters", o->sys);
	if (stat(kdir, &st) || !S_ISDIR(st.st_mode))
		return EXIT_NOT_LOADED;
	s->nctr = s->npar = 0;
	if (read_version(kdir, s) || read_dir(kdir, "", 1, 1, s->ctr, &s->nctr))
		return EXIT_MALFORMED;
	if (!stat(pdir, &st) && read_dir(pdir, "", 0, 0, s->par, &s->npar))
		return EXIT_MALFORMED;
	return 0;
}

/* ---- per-process view: /proc/<pid>/fdinfo of each /dev/mmuwatch fd ---- */
struct fdrow {
	int pid, fd;
	char comm[32];
	struct item f[24]; /* the fdinfo "mmuwatch-*" lines */
	int nf;
};

static void fd_fields(const char *path, struct fdrow *r)
{
	char line[256];
	FILE *f = fopen(path, "r");

	r->nf = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) &&
	       r->nf < (int)(sizeof(r->f) / sizeof(r->f[0]))) {
		char *colon = strchr(line, ':');
		struct item *it = &r->f[r->nf];

		if (strncmp(line, "mmuwatch-", 9) || !colon)
			continue;
		*colon = '\0';
		join(it->name, sizeof(it->name), line + 9, "", "");
		snprintf(it->text, sizeof(it->text), "%s",
			 colon + 1 + strspn(colon + 1, " \t"));
		trim(it->text);
		it->numeric = !parse_u64(it->text, &it->v);
		r->nf++;
	}
	fclose(f);
}

/* Calls fn for every open /dev/mmuwatch fd visible to this user. */
static int for_each_fd(const struct opts *o,
		       void (*fn)(const struct fdrow *r, int first, void *arg),
		       void *arg)
{
	DIR *pd = opendir(o->proc), *fdd;
	struct dirent *p, *e;
	char path[PATH_MAX], link[PATH_MAX];
	struct fdrow r;
	int n = 0;

	if (!pd)
		return 0;
	while ((p = readdir(pd))) {
		if (!isdigit((unsigned char)p->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "%s/%s/fd", o->proc, p->d_name);
		fdd = opendir(path);
		if (!fdd)
			continue; /* another user's process */
		while ((e = readdir(fdd))) {
			ssize_t len;

			snprintf(path, sizeof(path), "%s/%s/fd/%s", o->proc,
				 p->d_name, e->d_name);
			len = readlink(path, link, sizeof(link) - 1);
			if (len <= 0)
				continue;
			link[len] = '\0';
			if (strcmp(link, "/dev/mmuwatch"))
				continue;
			memset(&r, 0, sizeof(r));
			r.pid = atoi(p->d_name);
			r.fd = atoi(e->d_name);
			snprintf(path, sizeof(path), "%s/%s/comm", o->proc,
				 p->d_name);
			{
				FILE *c = fopen(path, "r");

				if (c) {
					if (!fgets(r.comm, sizeof(r.comm), c))
						r.comm[0] = '\0';
					fclose(c);
					trim(r.comm);
				}
			}
			snprintf(path, sizeof(path), "%s/%s/fdinfo/%s", o->proc,
				 p->d_name, e->d_name);
			fd_fields(path, &r);
			fn(&r, n == 0, arg);
			n++;
		}
		closedir(fdd);
	}
	closedir(pd);
	return n;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void json_value(const struct item *it)
{
	if (it->numeric)
		printf("%" PRIu64, it->v);
	else
		json_str(it->text);
}

static void proc_json(const struct fdrow *r, int first, void *arg)
{
	(void)arg;
	printf("%s\n  {\"pid\": %d, \"fd\": %d, \"comm\": ", first ? "" : ",",
	       r->pid, r->fd);
	json_str(r->comm);
	for (int i = 0; i < r->nf; i++) {
		printf(", ");
		json_str(r->f[i].name);
		printf(": ");
		json_value(&r->f[i]);
	}
	printf("}");
}

static void proc_table(const struct fdrow *r, int first, void *arg)
{
	(void)arg;
	if (first) {
		printf("\n%-8s %-4s %-16s", "pid", "fd", "comm");
		for (int i = 0; i < r->nf; i++)
			printf(" %s", r->f[i].name);
		printf("\n");
	}
	printf("%-8d %-4d %-16s", r->pid, r->fd, r->comm);
	for (int i = 0; i < r->nf; i++)
		printf(" %s", r->f[i].text);
	printf("\n");
}

static void print_json(const struct opts *o, const struct snapshot *s)
{
	printf("{\"loaded\": true, \"abi\": %u, \"module\": ", s->abi);
	json_str(s->module);
	printf(",\n \"counters\": {");
	for (int i = 0; i < s->nctr; i++) {
		printf("%s", i ? ", " : "");
		json_str(s->ctr[i].name);
		printf(": ");
		json_value(&s->ctr[i]);
	}
	printf("},\n \"parameters\": {");
	for (int i = 0; i < s->npar; i++) {
		printf("%s", i ? ", " : "");
		json_str(s->par[i].name);
		printf(": ");
		json_value(&s->par[i]);
	}
	printf("}");
	if (o->procs) {
		printf(",\n \"processes\": [");
		for_each_fd(o, proc_json, NULL);
		printf("]");
	}
	printf("}\n");
}

/* Prometheus metric name: [a-zA-Z0-9_] only. */
static void prom_name(char *out, size_t sz, const char *pfx, const char *n,
		      const char *sfx)
{
	size_t k = (size_t)snprintf(out, sz, "%s", pfx);

	for (; *n && k + 1 < sz; n++)
		out[k++] = isalnum((unsigned char)*n) ? *n : '_';
	out[k] = '\0';
	snprintf(out + k, sz - k, "%s", sfx);
}

/* Monotonic counters vs. current levels, by the module's naming. */
static int is_gauge(const char *n)
{
	return !strcmp(n, "contexts") || strstr(n, "_active") ||
	       strstr(n, "current") || strstr(n, "_used");
}

static void print_prom(const struct snapshot *s, int loaded)
{
	char name[2 * NAME_LEN];

	printf("# HELP mmuwatch_up 1 when the mmuwatch module is loaded.\n");
	printf("# TYPE mmuwatch_up gauge\nmmuwatch_up %d\n", loaded);
	if (!loaded)
		return;
	printf("# HELP mmuwatch_info Module version and ioctl ABI.\n");
	printf("# TYPE mmuwatch_info gauge\n");
	printf("mmuwatch_info{module=\"%s\",abi=\"%u\"} 1\n", s->module,
	       s->abi);
	for (int i = 0; i < s->nctr; i++) {
		const struct item *it = &s->ctr[i];
		int gauge = is_gauge(it->name);
		size_t l = strlen(it->name);

		prom_name(
			name, sizeof(name), "mmuwatch_", it->name,
			gauge || (l > 6 && !strcmp(it->name + l - 6, "_total"))
				? ""
				: "_total");
		printf("# HELP %s /sys/kernel/mmuwatch/%s\n", name, it->name);
		printf("# TYPE %s %s\n%s %" PRIu64 "\n", name,
		       gauge ? "gauge" : "counter", name, it->v);
	}
	for (int i = 0; i < s->npar; i++) {
		const struct item *it = &s->par[i];

		if (!it->numeric)
			continue; /* text parameters: see --json */
		prom_name(name, sizeof(name), "mmuwatch_param_", it->name, "");
		printf("# HELP %s /sys/module/mmuwatch/parameters/%s\n", name,
		       it->name);
		printf("# TYPE %s gauge\n%s %" PRIu64 "\n", name, name, it->v);
	}
}

static const struct item *find(const struct item *v, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

static void print_table(const struct opts *o, const struct snapshot *s,
			const struct snapshot *prev, double dt)
{
	printf("mmuwatch module %s, ABI %u\n\n", s->module, s->abi);
	if (prev)
		printf("%-28s %20s %14s\n", "counter", "value", "per second");
	else
		printf("%-28s %20s\n", "counter", "value");
	for (int i = 0; i < s->nctr; i++) {
		const struct item *p =
			prev ? find(prev->ctr, prev->nctr, s->ctr[i].name)
			     : NULL;

		printf("%-28s %20" PRIu64, s->ctr[i].name, s->ctr[i].v);
		if (prev && p && dt > 0 && !is_gauge(s->ctr[i].name))
			printf(" %14.1f", (double)(s->ctr[i].v - p->v) / dt);
		printf("\n");
	}
	printf("\n%-28s %20s\n", "parameter", "value");
	for (int i = 0; i < s->npar; i++)
		printf("%-28s %20s\n", s->par[i].name, s->par[i].text);
	if (o->procs && !for_each_fd(o, proc_table, NULL))
		printf("\nno process visible to this user has /dev/mmuwatch "
		       "open\n");
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: mmuwatch-status [--json | --prometheus] [--processes]\n"
		"                       [--watch SECONDS [--count N]] [--sysfs "
		"DIR]\n"
		"  --json          machine-readable output\n"
		"  --prometheus    node_exporter textfile-collector format\n"
		"  --processes     also one row per open /dev/mmuwatch "
		"(fdinfo)\n"
		"  --watch SECONDS repeat every SECONDS (table: per-second "
		"rates)\n"
		"  --count N       with --watch: stop after N reports\n"
		"  --sysfs DIR     sysfs root (default $MMUWATCH_SYSFS or "
		"/sys)\n"
		"  --proc DIR      procfs root (default $MMUWATCH_PROC or "
		"/proc)\n"
		"  --version, --help\n"
		"Exit: 0 ok, 1 malformed sysfs, 2 module not loaded, 64 "
		"usage.\n");
}

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);

	return v && *v ? v : dflt;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	char *end;

	o->sys = env_or("MMUWATCH_SYSFS", "/sys");
	o->proc = env_or("MMUWATCH_PROC", "/proc");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i],
			   *next = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--json")) {
			o->json = 1;
		} else if (!strcmp(a, "--prometheus")) {
			o->prom = 1;
		} else if (!strcmp(a, "--processes") || !strcmp(a, "-p")) {
			o->procs = 1;
		} else if (!strcmp(a, "--sysfs") && next) {
			o->sys = argv[++i];
		} else if (!strcmp(a, "--proc") && next) {
			o->proc = argv[++i];
		} else if (!strcmp(a, "--watch") && next) {
			o->watch = strtod(argv[++i], &end);
			if (*end || !(o->watch > 0 && o->watch <= 86400))
				return -1;
		} else if (!strcmp(a, "--count") && next) {
			o->count = strtol(argv[++i], &end, 10);
			if (*end || o->count <= 0)
				return -1;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("mmuwatch-status %s\n", MWS_VERSION);
			exit(0);
		} else {
			return -1;
		}
	}
	if ((o->json && o->prom) || (o->count && !o->watch))
		return -1;
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static struct snapshot snap[2];
	struct opts o = {0};
	double t_prev = 0;
	int ret, cur = 0;

	if (parse_args(argc, argv, &o)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (long n = 0;; n++) {
		struct snapshot *s = &snap[cur], *prev = n ? &snap[!cur] : NULL;
		double t = now();

		ret = take(&o, s);
		if (ret == EXIT_NOT_LOADED) {
			fprintf(stderr,
				"mmuwatch-status: the mmuwatch kernel module "
				"is not loaded (no %s/kernel/mmuwatch); try: "
				"modprobe mmuwatch\n",
				o.sys);
			if (o.prom) {
				print_prom(s, 0);
				ret = 0;
			} else if (o.json) {
				printf("{\"loaded\": false}\n");
			}
		} else if (!ret) {
			if (o.json)
				print_json(&o, s);
			else if (o.prom)
				print_prom(s, 1);
			else
				print_table(&o, s, prev, t - t_prev);
		}
		fflush(stdout);
		if (ret || !o.watch || (o.count && n + 1 >= o.count))
			return ret;
		if (!o.json && !o.prom)
			printf("\n");
		t_prev = t;
		cur = !cur;
		usleep((useconds_t)(o.watch * 1e6));
	}
}
