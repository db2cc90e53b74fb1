/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Medians and 95% intervals of the benchmark's interleaved rounds. The
 * interval is the order-statistics (distribution-free) interval of the
 * median: [x_(k), x_(n+1-k)] for the largest k with
 * P(Binomial(n, 1/2) < k) <= 2.5%; for n = 5 no such k exists and
 * [min, max] (93.75%) is reported, so the bench runs at least 6 rounds
 * ([min, max] is then a 96.9% interval).
 */
#ifndef MWB_STATS_H
#define MWB_STATS_H

#include <math.h>
#include <stdlib.h>

#define MWB_MAXR 32

struct mwb_series {
	double v[MWB_MAXR];
	int n;
};

static inline void mwb_add(struct mwb_series *s, double x)
{
	if (s->n < MWB_MAXR)
		s->v[s->n++] = x;
}

static inline int mwb_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median and interval; returns 1 when the interval is within +-tol of it. */
static inline int mwb_summary(const struct mwb_series *s, double *med,
			      double *lo, double *hi, double tol)
{
	double v[MWB_MAXR], cdf = 0, p;
	int n = s->n, k = 0;

	if (!n) {
		*med = *lo = *hi = 0;
		return 0;
	}
	for (int i = 0; i < n; i++)
		v[i] = s->v[i];
	qsort(v, (size_t)n, sizeof(double), mwb_cmp);
	*med = n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	/* k (1-based): the largest with P(X < k) <= 2.5%, X ~ Bin(n, 1/2). */
	p = pow(0.5, n);
	for (int j = 0; j < n; j++) {
		double c = p; /* C(n, j) / 2^n */

		for (int i = 0; i < j; i++)
			c = c * (n - i) / (i + 1);
		cdf += c;
		if (cdf > 0.025)
			break;
		k = j + 1;
	}
	*lo = v[k ? k - 1 : 0];
	*hi = v[k ? n - k : n - 1];
	return *lo >= *med * (1 - tol) && *hi <= *med * (1 + tol);
}

#endif /* MWB_STATS_H */
