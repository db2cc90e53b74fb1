// SPDX-License-Identifier: GPL-2.0
/*
 * Shared memory changed from outside: shmdt, and truncate / punch-hole of a
 * shared file mapping done by another process (the invalidation then runs
 * in a task that does not own the watched mm). Exactly one event each.
 */
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

TEST(shmdt_segment)
{
	struct mmuwatch_range r;
	struct mwt m;
	int id;
	char *p;

	MWT_OPEN_OR_SKIP(&m, 0, 0);
	id = shmget(IPC_PRIVATE, 4 * P, IPC_CREAT | 0600);
	ASSERT_LE(0, id);
	p = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);
	ASSERT_NE((void *)-1, p);
	memset(p, 7, 4 * P);
	ASSERT_EQ(0, mwt_watch(&m, p, 4 * P, 0x5e9, &r));
	ASSERT_TRUE(mwt_valid(&m, &r));
	MWT_EXPECT_NO_EVENT(&m);
	ASSERT_EQ(0, shmdt(p));
	ASSERT_TRUE(mwt_invalid(&m, &r));
	MWT_EXPECT_ONE_EVENT(&m, 0x5e9, p, p + 4 * P, MMUWATCH_REASON_UNMAP);
	mwt_close(&m);
}

FIXTURE(file) {
	struct mwt m;
	char path[64];
	int fd;
	char *map;
	struct mmuwatch_range r;
};

FIXTURE_SETUP(file)
{
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	strcpy(self->path, "/tmp/mwt-shared-XXXXXX");
	self->fd = mkstemp(self->path);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, ftruncate(self->fd, 4 * P));
	self->map = mmap(NULL, 4 * P, PROT_READ | PROT_WRITE, MAP_SHARED,
			 self->fd, 0);
	ASSERT_NE(MAP_FAILED, self->map);
	memset(self->map, 0x11, 4 * P);
	ASSERT_EQ(0, mwt_watch(&self->m, self->map, 4 * P, 0xf11e, &self->r));
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
}

FIXTURE_TEARDOWN(file)
{
	unlink(self->path);
	mwt_close(&self->m);
}

/* Run op on the file in another process (by path, its own fd). */
static int in_child(const char *path, int op)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(path, O_RDWR);

		if (fd < 0)
			_exit(10);
		if (op == 0 && ftruncate(fd, P))
			_exit(11);
		if (op == 1 && fallocate(fd, FALLOC_FL_PUNCH_HOLE |
					 FALLOC_FL_KEEP_SIZE, 2 * P, P))
			_exit(12);
		if (op == 2 && pwrite(fd, "x", 1, 0) != 1)
			_exit(13);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST_F(file, truncate_by_other_process)
{
	ASSERT_EQ(0, in_child(self->path, 0));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xf11e, self->map + P,
			     self->map + 4 * P, MMUWATCH_REASON_CLEAR);
}

TEST_F(file, punch_hole_by_other_process)
{
	ASSERT_EQ(0, in_child(self->path, 1));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xf11e, self->map + 2 * P,
			     self->map + 3 * P, MMUWATCH_REASON_CLEAR);
}

TEST_F(file, control_write_by_other_process)
{
	/* Writing through the file keeps the same pages: no event. */
	ASSERT_EQ(0, in_child(self->path, 2));
	ASSERT_EQ('x', self->map[0]);
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
	MWT_EXPECT_NO_EVENT(&self->m);
}

TEST_HARNESS_MAIN
