// SPDX-License-Identifier: GPL-2.0
/* Helpers shared by the mmuwatch selftests (see mwt.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mwt.h"

size_t mwt_page = 4096;

__attribute__((constructor)) static void mwt_init_page(void)
{
	mwt_page = (size_t)sysconf(_SC_PAGESIZE);
}

int mwt_open(struct mwt *m, uint32_t ring_entries, uint32_t nr_words)
{
	struct mmuwatch_setup s = { .ring_entries = ring_entries,
				    .nr_words = nr_words };
	int err;

	memset(m, 0, sizeof(*m));
	m->fd = open(MMUWATCH_DEVICE, O_RDWR | O_CLOEXEC);
	if (m->fd < 0)
		return -errno;
	/* 0, 0: the module's defaults. mmap needs a set-up context. */
	if (ioctl(m->fd, MMUWATCH_IOC_SETUP, &s) ||
	    ioctl(m->fd, MMUWATCH_IOC_INFO, &m->info))
		goto fail;
	m->ring_size = m->info.ring_mmap_size;
	m->words_size = m->info.words_mmap_size;
	m->ring = mmap(NULL, m->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       m->fd, MMUWATCH_MMAP_RING);
	if (m->ring == MAP_FAILED)
		goto fail;
	m->ev = (struct mmuwatch_event *)((char *)m->ring +
					  m->info.ring_events_offset);
	m->words = mmap(NULL, m->words_size, PROT_READ, MAP_SHARED, m->fd,
			MMUWATCH_MMAP_WORDS);
	if (m->words == MAP_FAILED) {
		m->words = NULL;
		goto fail;
	}
	return 0;
fail:
	err = -errno;
	mwt_close(m);
	return err;
}

void mwt_close(struct mwt *m)
{
	if (m->ring && m->ring != MAP_FAILED)
		munmap(m->ring, m->ring_size);
	if (m->words)
		munmap((void *)m->words, m->words_size);
	if (m->fd >= 0)
		close(m->fd);
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}

int mwt_watch(struct mwt *m, void *start, size_t len, uint64_t cookie,
	      struct mmuwatch_range *r)
{
	memset(r, 0, sizeof(*r));
	r->start = (uintptr_t)start;
	r->len = len;
	r->cookie = cookie;
	return ioctl(m->fd, MMUWATCH_IOC_WATCH, r) ? -errno : 0;
}

int mwt_unwatch(struct mwt *m, const struct mmuwatch_range *r)
{
	struct mmuwatch_unwatch u = { .slot = r->slot, .token = r->token };

	return ioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u) ? -errno : 0;
}

bool mwt_valid(const struct mwt *m, const struct mmuwatch_range *r)
{
	return r->slot < m->info.nr_words && m->words[r->slot] == r->token;
}

bool mwt_invalid(const struct mwt *m, const struct mmuwatch_range *r)
{
	return r->slot < m->info.nr_words &&
	       m->words[r->slot] == (r->token | MMUWATCH_WORD_INVALID);
}

uint32_t mwt_pending(const struct mwt *m)
{
	uint32_t head = __atomic_load_n(&m->ring->head, __ATOMIC_ACQUIRE);

	return head - m->ring->tail;
}

int mwt_pop(struct mwt *m, struct mmuwatch_event *e)
{
	uint32_t tail = m->ring->tail;

	if (!mwt_pending(m))
		return 0;
	*e = m->ev[tail & (m->info.ring_entries - 1)];
	/* Negative control of the suite (see vm/tests.d/10-selftests.sh):
	 * report every event one page off; event checks must then fail.
	 */
	if (getenv("MWT_MUTATE"))
		e->start += mwt_page;
	__atomic_store_n(&m->ring->tail, tail + 1, __ATOMIC_RELEASE);
	return 1;
}

void *mwt_map(size_t pages)
{
	char *p = mmap(NULL, pages * mwt_page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0x5a, pages * mwt_page);
	return p;
}

void *mwt_hole(size_t pages)
{
	char *p = mmap(NULL, (pages + 2) * mwt_page, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	munmap(p, (pages + 2) * mwt_page);
	return p + mwt_page;
}

long long mwt_read_ll(const char *path)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtoll(buf, NULL, 0);
}

long long mwt_counter(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), MWT_SYSFS "/%s", name);
	return mwt_read_ll(path);
}

long long mwt_param(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), MWT_PARAMS "/%s", name);
	return mwt_read_ll(path);
}

int mwt_write_str(const char *path, const char *s)
{
	ssize_t len = (ssize_t)strlen(s);
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

int mwt_set_param(const char *name, long long v)
{
	char path[256], buf[32];

	snprintf(path, sizeof(path), MWT_PARAMS "/%s", name);
	snprintf(buf, sizeof(buf), "%lld\n", v);
	return mwt_write_str(path, buf);
}

long long mwt_fdinfo(int pid, int fd, const char *key)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", pid, fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			v = strtoll(line + klen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

uint64_t mwt_pfn(const void *addr)
{
	uint64_t ent = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	off_t off = (off_t)((uintptr_t)addr / mwt_page) * 8;

	if (fd < 0)
		return 0;
	if (pread(fd, &ent, 8, off) != 8)
		ent = 0;
	close(fd);
	if (!(ent >> 63))
		return 0;
	return ent & ((1ULL << 55) - 1);
}

bool mwt_module_loaded(void)
{
	return access(MWT_SYSFS "/version", R_OK) == 0;
}

int mwt_timeout_scale(void)
{
	const char *s = getenv("MW_TIMEOUT_SCALE");
	char *end;
	long v;

	if (!s)
		return 1;
	v = strtol(s, &end, 10);
	return (end != s && !*end && v >= 1 && v <= 100) ? (int)v : 1;
}
