// SPDX-License-Identifier: MIT
/*
 * Tracepoints (kmod/trace.h) read back through tracefs: mmuwatch_watch,
 * mmuwatch_unwatch, mmuwatch_invalidate (fired with its reason, filtered
 * with reason "filtered") and mmuwatch_ring_overflow each show up with the
 * values of the operation that caused them. Control: with the events
 * disabled, the same operations leave nothing in the trace.
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
	static const char * const dirs[] = { "/sys/kernel/tracing",
					     "/sys/kernel/debug/tracing" };
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

/* One watch, mprotect (filtered), munmap (fired), a stale unwatch, and
 * an overflow of a 1-entry ring; cookies 0x7ace0..3.
 */
static void exercise(struct mwt *m)
{
	struct mmuwatch_range r[3];
	char *buf = mwt_map(4);

	if (!buf)
		return;
	madvise(buf, 4 * P, MADV_NOHUGEPAGE);
	mwt_watch(m, buf, P, 0x7ace0, &r[0]);
	mprotect(buf, P, PROT_READ);
	munmap(buf, P);
	mwt_unwatch(m, &r[0]);		/* already dead: ENOENT */
	mwt_watch(m, buf + P, P, 0x7ace1, &r[1]);
	mwt_watch(m, buf + 2 * P, P, 0x7ace2, &r[2]);
	munmap(buf + P, 3 * P);		/* 2 events into 1 entry: overflow */
}

FIXTURE(tr) {
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
	ASSERT_EQ(0, put(self->dir, "trace", ""));
	MWT_OPEN_OR_SKIP(&self->m, 1, 16);
}

FIXTURE_TEARDOWN(tr)
{
	put(self->dir, "events/mmuwatch/enable", "0");
	mwt_close(&self->m);
}

TEST_F(tr, events_in_tracefs)
{
	char *t, want[128];

	ASSERT_EQ(0, put(self->dir, "events/mmuwatch/enable", "1"));
	exercise(&self->m);
	ASSERT_EQ(0, put(self->dir, "events/mmuwatch/enable", "0"));
	t = slurp(self->dir);
	ASSERT_NE(NULL, t);
	snprintf(want, sizeof(want), "mmuwatch_watch: cookie=%llu ",
		 0x7ace0ULL);
	EXPECT_NE(NULL, strstr(t, want));
	/* The mprotect: filtered, not fired. */
	EXPECT_NE(NULL, strstr(t, "reason=filtered fired=0"));
	/* The munmap of the first watch: fired with reason unmap. */
	EXPECT_NE(NULL, strstr(t, "reason=unmap fired=1"));
	EXPECT_NE(NULL, strstr(t, "mmuwatch_unwatch: slot="));
	EXPECT_NE(NULL, strstr(t, "ret=-2"));
	EXPECT_NE(NULL, strstr(t, "mmuwatch_ring_overflow: entries=1"));
	free(t);
}

TEST_F(tr, control_disabled_leaves_nothing)
{
	char *t;

	ASSERT_EQ(0, put(self->dir, "events/mmuwatch/enable", "0"));
	exercise(&self->m);
	t = slurp(self->dir);
	ASSERT_NE(NULL, t);
	EXPECT_EQ(NULL, strstr(t, "mmuwatch_"));
	free(t);
}

TEST_HARNESS_MAIN
