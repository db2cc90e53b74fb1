// SPDX-License-Identifier: BSD-3-Clause
/*
 * Treap of cached regions keyed by (start, end, address). Writers hold the
 * cache lock and make seq odd while they change links; readers walk without
 * a lock and retry when seq moved. Nodes are pool memory, so a reader that
 * follows a stale link still reads valid memory; the walk is bounded.
 */
#include "rcache/internal.h"

#define LD(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELAXED)

static int less(const struct mwr_region *a, const struct mwr_region *b)
{
	if (a->start != b->start)
		return a->start < b->start;
	if (a->end != b->end)
		return a->end < b->end;
	return a < b;
}

static struct mwr_region *insert(struct mwr_region *n, struct mwr_region *x)
{
	struct mwr_region *c;

	if (!n)
		return x;
	if (less(x, n)) {
		ST(n->left, insert(n->left, x));
		if (n->left->prio > n->prio) {	/* rotate right */
			c = n->left;
			ST(n->left, c->right);
			ST(c->right, n);
			return c;
		}
	} else {
		ST(n->right, insert(n->right, x));
		if (n->right->prio > n->prio) {	/* rotate left */
			c = n->right;
			ST(n->right, c->left);
			ST(c->left, n);
			return c;
		}
	}
	return n;
}

static struct mwr_region *merge(struct mwr_region *a, struct mwr_region *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		ST(a->right, merge(a->right, b));
		return a;
	}
	ST(b->left, merge(a, b->left));
	return b;
}

static struct mwr_region *erase(struct mwr_region *n, struct mwr_region *x)
{
	if (!n)
		return NULL;
	if (n == x)
		return merge(n->left, n->right);
	if (less(x, n))
		ST(n->left, erase(n->left, x));
	else
		ST(n->right, erase(n->right, x));
	return n;
}

static void write_begin(struct mwr_tree *t)
{
	__atomic_store_n(&t->seq, t->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void write_end(struct mwr_tree *t)
{
	__atomic_store_n(&t->seq, t->seq + 1, __ATOMIC_RELEASE);
}

void mwr_tree_insert(struct mwr_tree *t, struct mwr_region *r)
{
	/* Priority from the address: random enough, no shared RNG state. */
	uint64_t h = (uintptr_t)r * 0x9e3779b97f4a7c15ULL;

	r->prio = (uint32_t)(h >> 32);
	ST(r->left, NULL);
	ST(r->right, NULL);
	write_begin(t);
	ST(t->root, insert(t->root, r));
	write_end(t);
}

void mwr_tree_remove(struct mwr_tree *t, struct mwr_region *r)
{
	write_begin(t);
	ST(t->root, erase(t->root, r));
	write_end(t);
}

struct mwr_region *mwr_tree_find(const struct mwr_tree *t, uintptr_t s,
				 uintptr_t e, int *ok)
{
	uint64_t seq = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
	struct mwr_region *n, *found = NULL;
	unsigned steps = 0;

	if (seq & 1) {
		*ok = 0;
		return NULL;
	}
	n = LD(t->root);
	while (n && steps++ < 256) {
		uintptr_t ns = LD(n->start);

		if (ns <= s) {
			if (LD(n->end) >= e) {
				found = n;
				break;
			}
			n = LD(n->right);
		} else {
			n = LD(n->left);
		}
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	*ok = __atomic_load_n(&t->seq, __ATOMIC_RELAXED) == seq && steps < 256;
	return found;
}
