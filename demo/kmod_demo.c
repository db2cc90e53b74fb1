// SPDX-License-Identifier: BSD-3-Clause
/*
 * kmod_demo: watches a few buffers through /dev/mmuwatch, changes them in
 * the ways that make a cached RDMA registration stale (and one way that
 * does not), and prints what the kernel reported for each: the validity
 * word right after the syscall and the event from the ring.
 */
#include <errno.h>
#include <liburing.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uapi/mmuwatch.h>

static size_t page;
static int fd;
static struct mmuwatch_info info;
static struct mmuwatch_ring *ring;
static struct mmuwatch_event *events;
static const volatile uint64_t *words;
static int failures;

struct buf {
	const char *name;
	char *addr;
	size_t len;
	struct mmuwatch_range r;
};

static const char *reason_name(uint32_t r)
{
	static const char *const names[] = {
		[MMUWATCH_REASON_UNMAP] = "UNMAP",
		[MMUWATCH_REASON_CLEAR] = "CLEAR",
		[MMUWATCH_REASON_RELEASE] = "RELEASE",
		[MMUWATCH_REASON_MIGRATE] = "MIGRATE",
		[MMUWATCH_REASON_EXCLUSIVE] = "EXCLUSIVE",
	};

	return r < MMUWATCH_REASON_MAX && names[r] ? names[r] : "?";
}

static void die(const char *what)
{
	fprintf(stderr, "kmod_demo: %s: %s\n", what, strerror(errno));
	exit(1);
}

static char *map_pages(size_t n, int flags)
{
	char *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
		       flags | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	memset(p, 0xab, n * page);
	return p;
}

static void watch(struct buf *b, const char *name, char *addr, size_t pages)
{
	static uint64_t next_cookie = 0x1000;

	b->name = name;
	b->addr = addr;
	b->len = pages * page;
	b->r = (struct mmuwatch_range){ .start = (uintptr_t)addr,
					.len = b->len, .cookie = next_cookie++ };
	if (ioctl(fd, MMUWATCH_IOC_WATCH, &b->r))
		die("MMUWATCH_IOC_WATCH");
}

static const char *word_state(const struct buf *b)
{
	uint64_t w = words[b->r.slot];

	if (w == b->r.token)
		return "valid";
	if (w == (b->r.token | MMUWATCH_WORD_INVALID))
		return "INVALID";
	return "reused";
}

/* Print the word and every event queued since the last call. */
static int report(const struct buf *b, int expect_events)
{
	uint32_t tail = ring->tail, head = __atomic_load_n(&ring->head,
							    __ATOMIC_ACQUIRE);
	int n = 0;

	printf("    validity word of '%s' right after the syscall: %s\n",
	       b->name, word_state(b));
	for (; tail != head; tail++, n++) {
		const struct mmuwatch_event *e =
			&events[tail & (info.ring_entries - 1)];
		uint64_t off = e->start - b->r.start;

		printf("    event: cookie=%#llx reason=%s range=[%#llx, %#llx) = "
		       "'%s' pages %llu..%llu of %zu\n",
		       (unsigned long long)e->cookie, reason_name(e->reason),
		       (unsigned long long)e->start, (unsigned long long)e->end,
		       e->cookie == b->r.cookie ? b->name : "another buffer",
		       (unsigned long long)(off / page),
		       (unsigned long long)((e->end - b->r.start) / page - 1),
		       b->len / page);
	}
	__atomic_store_n(&ring->tail, tail, __ATOMIC_RELEASE);
	if (!n)
		printf("    no event\n");
	if (n != expect_events) {
		printf("    UNEXPECTED: %d events, expected %d\n", n, expect_events);
		failures++;
	}
	return n;
}

int main(void)
{
	struct mmuwatch_setup setup = { .ring_entries = 64, .nr_words = 64 };
	struct buf b[8];
	char *p, *dst;
	uint64_t filtered_before = 0;

	page = (size_t)sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	fd = open(MMUWATCH_DEVICE, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open " MMUWATCH_DEVICE " (is mmuwatch.ko loaded?)");
	if (ioctl(fd, MMUWATCH_IOC_SETUP, &setup) ||
	    ioctl(fd, MMUWATCH_IOC_INFO, &info))
		die("SETUP/INFO");
	ring = mmap(NULL, info.ring_mmap_size, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, MMUWATCH_MMAP_RING);
	words = mmap(NULL, info.words_mmap_size, PROT_READ, MAP_SHARED, fd,
		     MMUWATCH_MMAP_WORDS);
	if (ring == MAP_FAILED || words == MAP_FAILED)
		die("mmap ring/words");
	events = (struct mmuwatch_event *)((char *)ring + info.ring_events_offset);
	printf("mmuwatch demo: abi %u, ring of %u events, %u validity words\n\n",
	       info.abi_version, info.ring_entries, info.nr_words);

	printf("1. munmap() of a whole watched buffer\n");
	watch(&b[0], "send buffer", map_pages(4, MAP_PRIVATE), 4);
	munmap(b[0].addr, b[0].len);
	report(&b[0], 1);

	printf("2. munmap() of one page in the middle of a watched buffer\n");
	watch(&b[1], "recv buffer", map_pages(8, MAP_PRIVATE), 8);
	munmap(b[1].addr + 3 * page, page);
	report(&b[1], 1);

	printf("3. mremap() moving a watched buffer elsewhere\n");
	p = map_pages(4, MAP_PRIVATE);
	watch(&b[2], "growing array", p, 4);
	dst = mmap(NULL, 64 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mremap(p, 4 * page, 4 * page, MREMAP_MAYMOVE | MREMAP_FIXED, dst) == MAP_FAILED)
		die("mremap");
	report(&b[2], 1);

	printf("4. madvise(MADV_DONTNEED) on part of a watched buffer (what free() does)\n");
	watch(&b[3], "malloc arena", map_pages(16, MAP_PRIVATE), 16);
	madvise(b[3].addr + 4 * page, 4 * page, MADV_DONTNEED);
	report(&b[3], 1);

	printf("5. mmap(MAP_FIXED) of new memory over a watched buffer\n");
	watch(&b[4], "window", map_pages(4, MAP_PRIVATE), 4);
	if (mmap(b[4].addr + page, 2 * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		die("mmap MAP_FIXED");
	report(&b[4], 1);

	printf("6. raw syscall(SYS_munmap), as Go or a JIT would do it (no libc hook sees it)\n");
	watch(&b[5], "jit buffer", map_pages(2, MAP_PRIVATE), 2);
	syscall(SYS_munmap, b[5].addr, b[5].len);
	report(&b[5], 1);

	printf("7. madvise(MADV_REMOVE) on shared memory\n");
	watch(&b[6], "shared segment", map_pages(4, MAP_SHARED), 4);
	madvise(b[6].addr, 2 * page, MADV_REMOVE);
	report(&b[6], 1);

	printf("8. mprotect() changes permissions only: the pages stay, no event\n");
	watch(&b[7], "read-mostly table", map_pages(4, MAP_PRIVATE), 4);
	{
		FILE *f = fopen("/sys/kernel/mmuwatch/filtered_protection_vma", "r");

		if (f && fscanf(f, "%llu", (unsigned long long *)&filtered_before) != 1)
			filtered_before = 0;
		if (f)
			fclose(f);
	}
	mprotect(b[7].addr, b[7].len, PROT_READ);
	report(&b[7], 0);
	{
		unsigned long long after = 0;
		FILE *f = fopen("/sys/kernel/mmuwatch/filtered_protection_vma", "r");

		if (f && fscanf(f, "%llu", &after) == 1)
			printf("    sysfs filtered_protection_vma: %llu -> %llu (seen, filtered)\n",
			       (unsigned long long)filtered_before, after);
		if (f)
			fclose(f);
	}

	printf("9. another process truncates a file this one has mapped shared\n");
	{
		char path[] = "/tmp/kmod_demo-XXXXXX";
		int ffd = mkstemp(path), st;
		pid_t pid;

		if (ffd < 0 || ftruncate(ffd, 4 * page))
			die("temp file");
		p = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_SHARED, ffd, 0);
		if (p == MAP_FAILED)
			die("mmap file");
		memset(p, 1, 4 * page);
		watch(&b[0], "file mapping", p, 4);
		pid = fork();
		if (pid == 0) {
			int cfd = open(path, O_RDWR);

			_exit(cfd < 0 || ftruncate(cfd, page) ? 1 : 0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || st)
			die("truncating child");
		report(&b[0], 1);
		unlink(path);
	}

	printf("10. madvise(MADV_DONTNEED) submitted through io_uring (runs in a kernel worker)\n");
	{
		struct io_uring uring;
		struct io_uring_cqe *cqe;

		watch(&b[1], "io_uring buffer", map_pages(4, MAP_PRIVATE), 4);
		if (io_uring_queue_init(2, &uring, 0))
			die("io_uring_queue_init");
		io_uring_prep_madvise(io_uring_get_sqe(&uring), b[1].addr, 4 * page,
				      MADV_DONTNEED);
		if (io_uring_submit(&uring) != 1 || io_uring_wait_cqe(&uring, &cqe))
			die("io_uring submit");
		io_uring_cqe_seen(&uring, cqe);
		io_uring_queue_exit(&uring);
		report(&b[1], 1);
	}

	printf("\n%s: %d of 10 cases as expected\n",
	       failures ? "kmod_demo: FAIL" : "kmod_demo: OK", 10 - failures);
	return failures ? 1 : 0;
}
