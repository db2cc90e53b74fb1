// SPDX-License-Identifier: BSD-3-Clause
/*
 * SPSC FIFO: capacity limits, and 2 threads streaming 2e6 sequenced,
 * checksummed messages. Negative control: the same checker run on a
 * stream with one corrupted message must report it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "fifo.h"
#include "tdapi.h"

#define N 2000000u

struct m {
	uint64_t seq, sum;
	unsigned char pad[40];
};

static struct mw_fifo f;
static int corrupt_at = -1;

static void *producer(void *a)
{
	(void)a;
	for (uint64_t i = 0; i < N; i++) {
		struct m x = { .seq = i, .sum = i * 2654435761u };

		memset(x.pad, (int)(i & 0xff), sizeof(x.pad));
		if ((int64_t)i == corrupt_at)
			x.pad[7] ^= 1;
		while (!mw_fifo_push(&f, &x, sizeof(x)))
			;
	}
	return NULL;
}

static uint64_t consume(void)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < N; i++) {
		const struct m *p;
		struct m x;

		while (!(p = mw_fifo_peek(&f)))
			;
		x = *p;
		mw_fifo_pop(&f);
		if (x.seq != i || x.sum != i * 2654435761u)
			bad++;
		for (size_t k = 0; k < sizeof(x.pad); k++)
			if (x.pad[k] != (unsigned char)(i & 0xff)) {
				bad++;
				break;
			}
	}
	return bad;
}

static uint64_t run(void)
{
	pthread_t t;
	uint64_t bad;

	memset(&f, 0, sizeof(f));
	pthread_create(&t, NULL, producer, NULL);
	bad = consume();
	pthread_join(t, NULL);
	return bad;
}

int main(void)
{
	unsigned char big[MW_FIFO_CELL + 1] = { 0 };
	uint64_t bad;
	unsigned int k;

	t_name = "fifo";
	CHECK(!mw_fifo_push(&f, big, sizeof(big)), "oversized accepted");
	for (k = 0; mw_fifo_push(&f, big, 8); k++)
		;
	CHECK(k == MW_FIFO_CELLS, "capacity %u", k);
	for (k = 0; mw_fifo_peek(&f); k++)
		mw_fifo_pop(&f);
	CHECK(k == MW_FIFO_CELLS, "drained %u", k);
	bad = run();
	CHECK(bad == 0, "%llu bad messages", (unsigned long long)bad);
	corrupt_at = N / 2;
	bad = run();
	CHECK(bad == 1, "negative control saw %llu bad", (unsigned long long)bad);
	printf("%s t_fifo: %u messages x2, negative control detected %llu\n",
	       t_fail ? "FAIL" : "ok", N, (unsigned long long)bad);
	return t_fail ? 1 : 0;
}
