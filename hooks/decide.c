// SPDX-License-Identifier: BSD-3-Clause
/*
 * The install decision (leave-pinned matrix). Runs before any allocator is
 * chosen, possibly inside the very first malloc: it reads the environment
 * array directly and looks at /sys/class/infiniband with raw open and
 * getdents64 (opendir would allocate).
 */
#include <fcntl.h>
#include <string.h>

#include "hooks/internal.h"
#include "hooks/raw.h"

extern char **environ;

const char *mw_env(const char *name)
{
	size_t n = strlen(name);
	char **e = environ;

	if (!e)
		return NULL;
	for (; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

static int mw_ieq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a, y = *b;

		if (x >= 'A' && x <= 'Z')
			x += 'a' - 'A';
		if (x != y)
			return 0;
	}
	return *a == *b;
}

/* Unrecognised values count as "runtime", the same cell as unset. */
enum mw_lp mw_lp_parse(const char *v)
{
	if (!v)
		return MW_LP_UNSET;
	if (mw_ieq(v, "1") || mw_ieq(v, "yes") || mw_ieq(v, "true"))
		return MW_LP_YES;
	if (mw_ieq(v, "0") || mw_ieq(v, "no") || mw_ieq(v, "false"))
		return MW_LP_NO;
	return MW_LP_RUNTIME;
}

/* Either yes enables; otherwise either no disables; otherwise hardware. */
int mw_matrix(enum mw_lp lp, enum mw_lp lpp, int bypass_net)
{
	if (lp == MW_LP_YES || lpp == MW_LP_YES)
		return 1;
	if (lp == MW_LP_NO || lpp == MW_LP_NO)
		return 0;
	return bypass_net;
}

/* An OS-bypass network: <sysfs>/class/infiniband has an entry. The test
 * variant only lets MMUWATCH_SYSFS_ROOT move the sysfs root. */
int mw_bypass_net_present(void)
{
#ifdef MW_TESTING
	const char *root = mw_env("MMUWATCH_SYSFS_ROOT");
#else
	const char *root = NULL;
#endif
	const char *tail = "/class/infiniband";
	char path[512];
	char buf[1024];
	size_t rl, tl = strlen(tail);
	long fd, n;
	int found = 0;

	if (!root || !*root)
		root = "/sys";
	rl = strlen(root);
	if (rl + tl + 1 > sizeof(path))
		return 0;
	memcpy(path, root, rl);
	memcpy(path + rl, tail, tl + 1);
	fd = mw_raw6(SYS_openat, AT_FDCWD, (long)path,
		     O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0);
	if (mw_raw_failed(fd))
		return 0;
	while (!found && (n = mw_raw(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		long off = 0;

		while (off < n) {
			/* struct linux_dirent64: ino 8, off 8, reclen 2, type 1 */
			unsigned short reclen;
			const char *nm = buf + off + 19;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			if (strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0) {
				found = 1;
				break;
			}
			off += reclen;
		}
	}
	mw_raw(SYS_close, fd, 0, 0);
	return found;
}

static enum mw_lp mw_lp_env(const char *name, const char *alias)
{
	const char *v = mw_env(name);

	return mw_lp_parse(v ? v : mw_env(alias));
}

int mw_decide(const char **why, int *asked)
{
	enum mw_lp lp, lpp;
	int on;

	*asked = 0;
	/* in the environment at all, whatever its value (even 0 or empty),
	 * like FAKEROOTKEY: a switch that cannot be misread as "keep on" */
	if (mw_env("MMUWATCH_HOOKS_DISABLE")) {
		*why = "disabled: MMUWATCH_HOOKS_DISABLE is set";
		return 0;
	}
	if (mw_env("FAKEROOTKEY")) {
		*why = "disabled: running under fakeroot (FAKEROOTKEY is set)";
		return 0;
	}
	lp = mw_lp_env("MMUWATCH_LEAVE_PINNED", "OMPI_MCA_mpi_leave_pinned");
	lpp = mw_lp_env("MMUWATCH_LEAVE_PINNED_PIPELINE",
			"OMPI_MCA_mpi_leave_pinned_pipeline");
	*asked = lp == MW_LP_YES || lpp == MW_LP_YES;
	if (*asked) {
		*why = "enabled: leave-pinned (or its pipeline) set to yes";
		return 1;
	}
	if (lp == MW_LP_NO || lpp == MW_LP_NO) {
		*why = "disabled: leave-pinned (or its pipeline) set to no";
		return 0;
	}
	on = mw_matrix(lp, lpp, mw_bypass_net_present());
	*why = on ? "enabled: run-time decision, OS-bypass network present"
		  : "disabled: run-time decision, no OS-bypass network";
	return on;
}
