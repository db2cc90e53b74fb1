// SPDX-License-Identifier: BSD-3-Clause
/*
 * Every cell of the leave-pinned decision matrix, with every spelling, both
 * variable names, and the OS-bypass network present / absent (fake sysfs
 * under MMUWATCH_SYSFS_ROOT); the disable variables; and the same cells end
 * to end (a fresh process per cell, hooks installed or not). The expected
 * table is the one in hooks/README.md. --mutate flips one expected cell: the
 * test must then fail (negative control).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks/internal.h"

enum { Y, N, R, U };		/* yes, no, runtime, unset */
static const char *const spell[3][3] = {
	{ "1", "yes", "TRUE" }, { "0", "no", "false" },
	{ "-1", "runtime", "Auto" },
};
/* rows: leave_pinned, columns: leave_pinned_pipeline; 'r' = network */
static char expect[4][4] = {
	/*        Y    N    R    U */
	/* Y */ { 'y', 'y', 'y', 'y' },
	/* N */ { 'y', 'n', 'n', 'n' },
	/* R */ { 'y', 'n', 'r', 'r' },
	/* U */ { 'y', 'n', 'r', 'r' },
};
static const char *const vname[4] = { "yes", "no", "runtime", "unset" };
static int failures;
static char sys_ib[256], sys_empty[256];

static void set_lp(const char *name, int v, int variant)
{
	if (v == U)
		unsetenv(name);
	else
		setenv(name, spell[v][variant % 3], 1);
}

static void clear_env(void)
{
	unsetenv("MMUWATCH_LEAVE_PINNED");
	unsetenv("MMUWATCH_LEAVE_PINNED_PIPELINE");
	unsetenv("OMPI_MCA_mpi_leave_pinned");
	unsetenv("OMPI_MCA_mpi_leave_pinned_pipeline");
	unsetenv("MMUWATCH_HOOKS_DISABLE");
	unsetenv("FAKEROOTKEY");
}

static int want(int lp, int lpp, int net)
{
	char e = expect[lp][lpp];

	return e == 'y' || (e == 'r' && net);
}

static void check(const char *what, int got, int exp)
{
	if (got != exp) {
		printf("not ok: %s: hooks %s, want %s\n", what,
		       got ? "on" : "off", exp ? "on" : "off");
		failures++;
	}
}

/* in process, through mw_decide() */
static void unit_cells(void)
{
	int lp, lpp, net, alias, variant = 0, cells = 0;
	const char *why;
	int asked;
	char what[160];

	for (net = 0; net < 3; net++) {
		/* 0: no dir, 1: empty class/infiniband, 2: a device in it */
		setenv("MMUWATCH_SYSFS_ROOT", net == 2 ? sys_ib : net == 1 ?
		       sys_empty : "/nonexistent", 1);
		for (alias = 0; alias < 2; alias++)
			for (lp = 0; lp < 4; lp++)
				for (lpp = 0; lpp < 4; lpp++) {
					clear_env();
					set_lp(alias ? "OMPI_MCA_mpi_leave_pinned"
						     : "MMUWATCH_LEAVE_PINNED", lp,
					       variant++);
					set_lp(alias ? "OMPI_MCA_mpi_leave_pinned_pipeline"
						     : "MMUWATCH_LEAVE_PINNED_PIPELINE",
					       lpp, variant++);
					snprintf(what, sizeof(what),
						 "lp=%s lpp=%s net=%d %s", vname[lp],
						 vname[lpp], net, alias ? "(OMPI names)" : "");
					check(what, mw_decide(&why, &asked),
					      want(lp, lpp, net == 2));
					cells++;
				}
	}
	/* disabling wins over everything */
	clear_env();
	setenv("MMUWATCH_SYSFS_ROOT", sys_ib, 1);
	setenv("MMUWATCH_LEAVE_PINNED", "1", 1);
	setenv("MMUWATCH_HOOKS_DISABLE", "1", 1);
	check("MMUWATCH_HOOKS_DISABLE with lp=yes", mw_decide(&why, &asked), 0);
	/* any value disables, even one that reads as "no" */
	{
		static const char *const dv[] = { "0", "no", "false", "", "yes" };
		unsigned i;
		char what[96];

		for (i = 0; i < sizeof(dv) / sizeof(dv[0]); i++) {
			setenv("MMUWATCH_HOOKS_DISABLE", dv[i], 1);
			snprintf(what, sizeof(what),
				 "MMUWATCH_HOOKS_DISABLE='%s' with lp=yes", dv[i]);
			check(what, mw_decide(&why, &asked), 0);
		}
	}
	unsetenv("MMUWATCH_HOOKS_DISABLE");
	check("MMUWATCH_HOOKS_DISABLE unset with lp=yes",
	      mw_decide(&why, &asked), 1);
	setenv("FAKEROOTKEY", "1234", 1);
	check("FAKEROOTKEY with lp=yes", mw_decide(&why, &asked), 0);
	unsetenv("FAKEROOTKEY");
	/* our name wins over the Open MPI alias */
	setenv("MMUWATCH_LEAVE_PINNED", "0", 1);
	setenv("OMPI_MCA_mpi_leave_pinned", "1", 1);
	check("MMUWATCH_LEAVE_PINNED=0 over OMPI alias=1",
	      mw_decide(&why, &asked), 0);
	clear_env();
	printf("%s: %d matrix cells (x spellings, names, sysfs states) in "
	       "process\n", failures ? "not ok" : "ok", cells);
}

/* a fresh process with the current environment: 1 when hooks are active */
static int probe(const char *self)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		execl(self, self, "--probe", (char *)NULL);
		_exit(99);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 1;
}

/* end to end: a fresh process per cell reports mw_hooks_active() */
static void process_cells(const char *self)
{
	int lp, lpp, net, n = 0;

	for (net = 0; net < 2; net++)
		for (lp = 0; lp < 4; lp++)
			for (lpp = 0; lpp < 4; lpp++) {
				char what[128];

				clear_env();
				setenv("MMUWATCH_SYSFS_ROOT", net ? sys_ib : sys_empty, 1);
				set_lp("MMUWATCH_LEAVE_PINNED", lp, lp + lpp);
				set_lp("OMPI_MCA_mpi_leave_pinned_pipeline", lpp, lp);
				snprintf(what, sizeof(what), "process lp=%s lpp=%s net=%d",
					 vname[lp], vname[lpp], net);
				check(what, probe(self), want(lp, lpp, net));
				n++;
			}
	/* the disable switch end to end: its presence is what counts */
	clear_env();
	setenv("MMUWATCH_SYSFS_ROOT", sys_ib, 1);
	setenv("MMUWATCH_LEAVE_PINNED", "1", 1);
	setenv("MMUWATCH_HOOKS_DISABLE", "0", 1);
	check("process MMUWATCH_HOOKS_DISABLE=0 lp=yes", probe(self), 0);
	setenv("MMUWATCH_HOOKS_DISABLE", "", 1);
	check("process MMUWATCH_HOOKS_DISABLE= lp=yes", probe(self), 0);
	n += 2;
	clear_env();
	printf("%s: %d cells end to end (fresh process each)\n",
	       failures ? "not ok" : "ok", n);
}

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/mwmatrixXXXXXX", *d;

	if (argc > 1 && !strcmp(argv[1], "--probe"))
		return mw_hooks_init();	/* 1 = active */
	if (argc > 1 && !strcmp(argv[1], "--mutate"))
		expect[3][3] = 'n';
	d = mkdtemp(tmpl);
	if (!d)
		return 2;
	snprintf(sys_ib, sizeof(sys_ib), "%s/ib", d);
	snprintf(sys_empty, sizeof(sys_empty), "%s/empty", d);
	mkdir(sys_ib, 0755);
	mkdir(sys_empty, 0755);
	{
		char p[300];

		snprintf(p, sizeof(p), "%s/class", sys_ib);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/class/infiniband", sys_ib);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/class/infiniband/rxe0", sys_ib);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/class", sys_empty);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/class/infiniband", sys_empty);
		mkdir(p, 0755);
	}
	unit_cells();
	process_cells(argv[0]);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", d);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", d);
	}
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
