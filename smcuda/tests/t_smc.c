// SPDX-License-Identifier: BSD-3-Clause
/*
 * smcuda end to end: 2 to 4 real processes (fork+exec of this binary) on
 * the CUDA driver test double. Scenarios: churn (free/reallocate at the
 * same base, larger at the same base, interior pointers) with zero wrong
 * bytes and one cuIpcOpenMemHandle per distinct remote allocation; its
 * negative control (buffer-id check off: wrong bytes must appear); every
 * IPC state machine path; fallback paths; injected driver errors; the
 * ALREADY_MAPPED recovery; the bounded event ring with copies in flight
 * (and a head that will not complete when the ring is full); a peer dying
 * mid-transfer on the staged and on the IPC path; inconsistent global
 * ranks; IPC truncation seen by both sides; bad input, rank claiming,
 * latecomers and requests outliving mw_smc_close.
 *
 * This file is the runner: the scenario table, the parent that forks the
 * ranks and judges their exit, and the child dispatch. The scenarios live
 * by group in smc_*.c (smc_scen.h lists them).
 *
 * usage: t_smc [--valgrind] [scenario...]
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "smc_scen.h"

/* ---------------- child dispatch ---------------- */

static int child(const char *scen, const char *job)
{
	int rc;

	t_name = scen;
	if (!strcmp(scen, "asym") || !strncmp(scen, "cr_restart", 10))
		setenv("MWTD_DEVICE", R ? "1" : "0", 1);
	if (!strcmp(scen, "overlap_noscan"))
		setenv("MWTD_REOPEN", "already_mapped", 1);
	if (open_ch(job, !strncmp(scen, "ring", 4) ? 2 : 0,
		    !strncmp(scen, "ring", 4) ? 1 : 0,
		    !strcmp(scen, "lru") ? MB : 0))
		return 2;
	if (!strcmp(scen, "churn"))
		rc = smc_churn(false);
	else if (!strcmp(scen, "churn_nobufid"))
		rc = smc_churn(true);
	else if (!strcmp(scen, "notready"))
		rc = smc_notready(5, 7);
	else if (!strcmp(scen, "retry"))
		rc = smc_notready(2, 6);
	else if (!strcmp(scen, "simul") || !strcmp(scen, "simul_gr"))
		rc = smc_simul();
	else if (!strcmp(scen, "asym"))
		rc = smc_asym();
	else if (!strcmp(scen, "fallback"))
		rc = smc_fallback();
	else if (!strcmp(scen, "inject"))
		rc = smc_inject();
	else if (!strcmp(scen, "overlap"))
		rc = smc_overlap(false);
	else if (!strcmp(scen, "overlap_noscan"))
		rc = smc_overlap(true);
	else if (!strcmp(scen, "ring"))
		rc = smc_ring(RING_NORMAL);
	else if (!strcmp(scen, "ring_nopin"))
		rc = smc_ring(RING_NOPIN);
	else if (!strcmp(scen, "ring_stall"))
		rc = smc_ring(RING_STALL);
	else if (!strcmp(scen, "death"))
		rc = smc_death();
	else if (!strcmp(scen, "death_ipc"))
		rc = smc_death_ipc();
	else if (!strcmp(scen, "left_after_fin"))
		rc = smc_left_after_fin();
	else if (!strcmp(scen, "lru"))
		rc = smc_lru();
	else if (!strcmp(scen, "cr"))
		rc = smc_cr();
	else if (!strcmp(scen, "cr_restart"))
		rc = smc_cr_restart(false);
	else if (!strcmp(scen, "cr_restart_noepoch"))
		rc = smc_cr_restart(true);
	else
		rc = 2;
	CHECK(mw_smc_close(C) == 0, "close");
	if (rc)
		return rc;
	return t_fail ? 1 : 0;
}

/* ---------------- parent ---------------- */

struct scen {
	const char *name;
	int n;
	bool rank0_killed;
};

static const struct scen scens[] = {
	{ "churn", 2, false }, { "churn", 3, false }, { "churn", 4, false },
	{ "churn_nobufid", 2, false }, { "notready", 2, false },
	{ "retry", 2, false }, { "simul", 2, false }, { "asym", 2, false },
	{ "fallback", 2, false }, { "inject", 2, false },
	{ "overlap", 2, false }, { "overlap_noscan", 2, false },
	{ "ring", 2, false }, { "ring_nopin", 2, false },
	{ "ring_stall", 2, false }, { "lru", 2, false },
	{ "death", 2, true }, { "death_ipc", 2, true },
	{ "left_after_fin", 2, false },
	{ "simul_gr", 2, false }, { "cr", 2, false },
	{ "cr_restart", 2, false }, { "cr_restart_noepoch", 2, false },
};

static int run(const struct scen *s, bool vg)
{
	char job[80], shm[128], seg[160], rk[16], nk[16], self[4096];
	pid_t pid[8];
	int fails = 0, left;
	uint64_t deadline = now_ms() + (vg ? 300000 : 60000);
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (sl <= 0)
		return 1;
	self[sl] = 0;
	snprintf(job, sizeof(job), "t-%d-%s-%d", (int)getpid(), s->name, s->n);
	snprintf(shm, sizeof(shm), "/dev/shm/mwtd-%s", job);
	snprintf(seg, sizeof(seg), "/dev/shm/mw-smc-%s", job);
	setenv("MWTD_SHM", shm, 1);
	setenv("MWTD_HEAP_MB", "512", 1);
	if (!strcmp(s->name, "asym"))
		setenv("MWTD_DENY", "0>1", 1);
	else
		unsetenv("MWTD_DENY");
	snprintf(nk, sizeof(nk), "%d", s->n);
	for (int r = 0; r < s->n; r++) {
		snprintf(rk, sizeof(rk), "%d", r);
		pid[r] = fork();
		if (pid[r] == 0) {
			if (vg)
				execlp("valgrind", "valgrind", "-q",
				       "--error-exitcode=97", "--leak-check=full",
				       "--errors-for-leak-kinds=definite",
				       self, "child", s->name, rk, nk, job,
				       (char *)NULL);
			else
				execl(self, self, "child", s->name, rk, nk, job,
				      (char *)NULL);
			_exit(127);
		}
	}
	for (left = s->n; left > 0;) {
		int st;
		pid_t w = waitpid(-1, &st, WNOHANG);

		if (w == 0) {
			if (now_ms() > deadline) {
				fprintf(stderr, "%s/%d: HANG, killing\n",
					s->name, s->n);
				for (int r = 0; r < s->n; r++)
					kill(pid[r], SIGKILL);
				fails++;
				deadline = UINT64_MAX;
			}
			usleep(2000);
			continue;
		}
		if (w < 0)
			break;
		left--;
		for (int r = 0; r < s->n; r++) {
			bool ok;

			if (pid[r] != w)
				continue;
			ok = (r == 0 && s->rank0_killed) ?
				WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL :
				WIFEXITED(st) && WEXITSTATUS(st) == 0;
			if (!ok) {
				fprintf(stderr, "%s/%d rank %d: status 0x%x\n",
					s->name, s->n, r, st);
				fails++;
			}
		}
	}
	if (access(seg, F_OK) == 0) {
		fprintf(stderr, "%s/%d: segment not removed at teardown\n",
			s->name, s->n);
		fails++;
		unlink(seg);
	}
	unlink(shm);
	printf("%s %s (%d processes%s)\n", fails ? "FAIL" : "ok", s->name,
	       s->n, vg ? ", valgrind" : "");
	fflush(stdout);
	return fails;
}

int main(int argc, char **argv)
{
	bool vg = false;
	int fails = 0, ran = 0;

	if (argc == 6 && !strcmp(argv[1], "child")) {
		R = atoi(argv[3]);
		N = atoi(argv[4]);
		return child(argv[2], argv[5]);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--valgrind")) {
		vg = true;
		argc--;
		argv++;
	}
	for (size_t i = 0; i < sizeof(scens) / sizeof(scens[0]); i++) {
		bool want = argc == 1;

		for (int a = 1; a < argc; a++)
			want |= !strcmp(argv[a], scens[i].name);
		if (!want || (vg && scens[i].n != 2))
			continue;
		fails += run(&scens[i], vg);
		ran++;
	}
	if (argc == 1 || (argc > 1 && !strcmp(argv[1], "badinput"))) {
		smc_badinput();
		fails += t_fail;
		ran++;
	}
	printf("%s t_smc: %d scenario runs, %d failures\n",
	       fails ? "FAIL" : "ok", ran, fails);
	return fails ? 1 : 0;
}
