// SPDX-License-Identifier: GPL-2.0
/*
 * Tracepoints (kmod/trace.h) read back through tracefs: mmuwatch_watch,
 * mmuwatch_unwatch, mmuwatch_invalidate (fired with its reason, filtered
 * with reason "filtered") and mmuwatch_ring_overflow each show up with the
 * values of the operation that caused them. Control: with the events
 * disabled, the same operations leave nothing in the trace. The buffer is
 * never cleared: lines are told apart by cookies unique to the process.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

static const char *tracefs(void)
{
	static const char *const dirs[] = {"/sys/kernel/tracing",
					   "/sys/kernel/debug/tracing"};
	char path[128];
	unsigned int i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/events/mmuwatch", dirs[i]);
		if (!access(path, F_OK))
			return dirs[i];
	}
	return NULL;
}

static int put(const char *dir, const char *file, const char *val)
{
	char path[256];
	int fd, ok;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return -1;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok ? 0 : -1;
}

/* The whole trace buffer, NUL-terminated (caller frees). */
static char *slurp(const char *dir)
{
	size_t cap = 1 << 20, len = 0;
	char path[256], *buf = malloc(cap);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/trace", dir);
	fd = open(path, O_RDONLY);
	if (fd < 0 || !buf)
		return NULL;
	while ((n = read(fd, buf + len, cap - 1 - len)) > 0) {
		len += n;
		if (len == cap - 1) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	close(fd);
	buf[len] = 0;
	return buf;
}

/*
 * Lines of the trace buffer naming this run's cookie (the buffer is not
 * cleared: that waits for an RCU grace period, and older lines carry
 * other cookies). Cookies are unique per process.
 */
static bool has_line(const char *t, const char *a, const char *b)
{
	const char *l = t, *e;
	char line[512];

	for (; *l; l = e + 1) {
		e = strchr(l, '\n');
		if (!e)
			e = l + strlen(l);
		snprintf(line, sizeof(line), "%.*s", (int)(e - l), l);
		if (strstr(line, a) && (!b || strstr(line, b)))
			return true;
		if (!*e)
			break;
	}
	return false;
}

/* One watch, mprotect (filtered), munmap (fired), a stale unwatch, an
 * overflow of a 1-entry ring, and a watch unwatched while valid; cookies
 * base..base+3.
 */
static void exercise(struct mwt *m, uint64_t base, struct mmuwatch_range *r)
{
	char *buf = mwt_map(5);

	if (!buf)
		return;
	madvise(buf, 5 * P, MADV_NOHUGEPAGE);
	mwt_watch(m, buf + 4 * P, P, base + 3, &r[3]);
	mwt_unwatch(m, &r[3]); /* valid: ret 0 */
	mwt_watch(m, buf, P, base, &r[0]);
	mprotect(buf, P, PROT_READ);
	munmap(buf, P);
	mwt_unwatch(m, &r[0]); /* already dead: ENOENT */
	mwt_watch(m, buf + P, P, base + 1, &r[1]);
	mwt_watch(m, buf + 2 * P, P, base + 2, &r[2]);
	munmap(buf + P, 4 * P); /* 2 events into 1 entry: overflow */
}

FIXTURE(tr)
{
	const char *dir;
	struct mwt m;
};

FIXTURE_SETUP(tr)
{
	/* A bare guest may not have tracefs mounted yet (root only). */
	if (!tracefs() && !access("/sys/kernel/tracing", F_OK))
		mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
	self->dir = tracefs();
	if (!self->dir) {
		if (getenv("MWT_REQUIRE_DEVICE"))
			ASSERT_NE(NULL, self->dir);
		SKIP(_exit(255), "no tracefs with events/mmuwatch");
	}
	MWT_OPEN_OR_SKIP(&self->m, 1, 16);
}

FIXTURE_TEARDOWN(tr)
{
	put(self->dir, "events/mmuwatch/enable", "0");
	mwt_close(&self->m);
}

TEST_F(tr, events_in_tracefs)
{
	uint64_t base = (uint64_t)getpid() << 8;
	struct mmuwatch_range r[4];
	char *t, ck[64], tok[160];

	ASSERT_EQ(0, put(self->dir, "events/mmuwatch/enable", "1"));
	exercise(&self->m, base, r);
	ASSERT_EQ(0, put(self->dir, "events/mmuwatch/enable", "0"));
	t = slurp(self->dir);
	ASSERT_NE(NULL, t);
	snprintf(ck, sizeof(ck), "cookie=%llu ", (unsigned long long)base);
	EXPECT_TRUE(has_line(t, ck, "mmuwatch_watch:"));
	/* The mprotect: filtered, not fired. */
	EXPECT_TRUE(has_line(t, ck, "reason=filtered fired=0"));
	/* The munmap of the first watch: fired with reason unmap. */
	EXPECT_TRUE(has_line(t, ck, "reason=unmap fired=1"));
	snprintf(tok, sizeof(tok),
		 "mmuwatch_unwatch: cookie=0 slot=%u token=%llu range=0-0 "
		 "persistent=0 ret=-2", r[0].slot,
		 (unsigned long long)r[0].token);
	EXPECT_TRUE(has_line(t, tok, NULL));
	/* WATCH and UNWATCH of the fourth watch: the same fields. */
	snprintf(ck, sizeof(ck), "cookie=%llu ", (unsigned long long)base + 3);
	snprintf(tok, sizeof(tok), "slot=%u token=%llu range=", r[3].slot,
		 (unsigned long long)r[3].token);
	EXPECT_TRUE(has_line(t, "mmuwatch_watch: ", ck) &&
		    has_line(t, ck, tok));
	EXPECT_TRUE(has_line(t, "mmuwatch_unwatch: ", ck));
	snprintf(tok, sizeof(tok), "mmuwatch_unwatch: cookie=%llu slot=%u "
		 "token=%llu range=", (unsigned long long)base + 3, r[3].slot,
		 (unsigned long long)r[3].token);
	EXPECT_TRUE(has_line(t, tok, "persistent=0 ret=0"));
	EXPECT_TRUE(has_line(t, "mmuwatch_ring_overflow: entries=1 ", NULL));
	free(t);
}

TEST_F(tr, control_disabled_leaves_nothing)
{
	uint64_t base = ((uint64_t)getpid() << 8) | 0x80;
	struct mmuwatch_range r[4];
	char *t, ck[64];

	ASSERT_EQ(0, put(self->dir, "events/mmuwatch/enable", "0"));
	exercise(&self->m, base, r);
	t = slurp(self->dir);
	ASSERT_NE(NULL, t);
	snprintf(ck, sizeof(ck), "cookie=%llu ", (unsigned long long)base);
	EXPECT_FALSE(has_line(t, ck, NULL));
	free(t);
}

TEST_HARNESS_MAIN
