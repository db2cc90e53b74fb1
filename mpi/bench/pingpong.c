// SPDX-License-Identifier: BSD-3-Clause
/*
 * Latency and bandwidth sweep between ranks 0 and 1: ping-pong (half round
 * trip) and streaming (a window of back-to-back messages, then an ack) for
 * sizes 8 B .. 4 MB, either reusing one buffer (-m reuse: the registration
 * cache hits) or mapping a fresh buffer per message (-m fresh: munmap +
 * mmap every time, so the cache must drop and re-register). Rank 0 prints
 *   RESULT mpi_<label>_<pp|bw>_<reuse|fresh>_<size> <value> <us|MB/s>
 * Exit 0, or 1 on error.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define WINDOW 8
static const size_t sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1048576,
				4194304 };
static int rank, fresh;
static size_t budget = 32u << 20;	/* bytes moved per size and test */

static unsigned char *get(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	memset(p, rank + 1, len);
	return p;
}

static void put(unsigned char *p, size_t len)
{
	munmap(p, len);
}

static int iters_for(size_t len)
{
	size_t n = budget / len;

	return n < 2 ? 2 : n > 12 ? 12 : (int)n;
}

static double pingpong(size_t len)
{
	int n = iters_for(len), peer = !rank;
	unsigned char *b = get(len);
	double t0 = 0;

	for (int i = -1; i < n; i++) {	/* i == -1: warm-up */
		if (i == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (fresh && i > 0) {
			put(b, len);
			b = get(len);
		}
		if (!rank) {
			MPI_Send(b, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
			MPI_Recv(b, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(b, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			MPI_Send(b, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
		}
	}
	put(b, len);
	return (MPI_Wtime() - t0) / n / 2 * 1e6;
}

static double stream(size_t len)
{
	int n = iters_for(len * WINDOW), peer = !rank;
	unsigned char *b[WINDOW];
	MPI_Request rq[WINDOW];
	MPI_Status st[WINDOW];
	char ack;
	double t0 = 0;

	for (int w = 0; w < WINDOW; w++)
		b[w] = get(len);
	for (int i = -1; i < n; i++) {
		if (i == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		for (int w = 0; w < WINDOW; w++) {
			if (fresh && i > 0) {
				put(b[w], len);
				b[w] = get(len);
			}
			if (!rank)
				MPI_Isend(b[w], (int)len, MPI_BYTE, peer, 2,
					  MPI_COMM_WORLD, &rq[w]);
			else
				MPI_Irecv(b[w], (int)len, MPI_BYTE, peer, 2,
					  MPI_COMM_WORLD, &rq[w]);
		}
		MPI_Waitall(WINDOW, rq, st);
		if (!rank)
			MPI_Recv(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		else
			MPI_Send(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD);
	}
	for (int w = 0; w < WINDOW; w++)
		put(b[w], len);
	return (double)len * WINDOW * n / (MPI_Wtime() - t0) / 1e6;
}

int main(int argc, char **argv)
{
	const char *label = "run";
	size_t maxsz = 4194304;
	int opt, nranks;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	while ((opt = getopt(argc, argv, "l:m:b:x:")) != -1) {
		switch (opt) {
		case 'l':
			label = optarg;
			break;
		case 'm':
			fresh = !strcmp(optarg, "fresh");
			if (!fresh && strcmp(optarg, "reuse"))
				goto usage;
			break;
		case 'b':
			budget = strtoull(optarg, NULL, 0);
			break;
		case 'x':
			maxsz = strtoull(optarg, NULL, 0);
			break;
		default:
			goto usage;
		}
	}
	if (nranks != 2 || !budget)
		goto usage;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double lat, bw;

		if (sizes[i] > maxsz)
			break;
		lat = pingpong(sizes[i]);
		bw = stream(sizes[i]);
		if (!rank) {
			printf("RESULT mpi_%s_pp_%s_%zu %.2f us\n", label,
			       fresh ? "fresh" : "reuse", sizes[i], lat);
			printf("RESULT mpi_%s_bw_%s_%zu %.2f MB/s\n", label,
			       fresh ? "fresh" : "reuse", sizes[i], bw);
			fflush(stdout);
		}
	}
	MPI_Finalize();
	return 0;
usage:
	if (!rank)
		fprintf(stderr, "usage: pingpong -l LABEL [-m reuse|fresh] "
			"[-b budget_bytes] [-x max_size] (2 ranks)\n");
	MPI_Finalize();
	return 1;
}
