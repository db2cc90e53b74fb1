// SPDX-License-Identifier: BSD-3-Clause
/*
 * Kernel-mode words: the releases no hook sees (a raw syscall, an io_uring
 * madvise, process_madvise) still reach the peers, through the module.
 *
 * Owner (mwp_kwatch_describe, from mw_peer_describe): in kernel mode every
 * span it describes has a kernel watch of its own, published in the span's
 * control word (context id, slot, token), with the device fd number and
 * the size of its words mapping in the control header. A watch found
 * invalid (something released part of the span), or one of an earlier
 * context (close/reopen, C/R, fork), is replaced, and the span's
 * generation moves first: every descriptor from before is refused, and a
 * peer that read the (kctx, kslot, ktoken) triple while it was rewritten
 * sees the new generation at its second check.
 *
 * Peer (mwp_kwords, under the cache lock): that context's words, mapped
 * read-only through the owner's device fd (pidfd_getfd, else the proxy),
 * after fdinfo said the fd is the owner's context with that id (fd numbers
 * are reused, the device inode is one for all). The copy then checks
 * words[kslot] == ktoken before and after, next to the generation: the
 * module flips the word before the owner's releasing call returns. Kept
 * per owner until the owner is dropped (copies read them without the
 * lock). Without them a span that has kernel words goes by CMA.
 *
 * libmmuwatch's core is reached through MWP_CORE_REF (internal.h): weak
 * only in peer/'s own host tests, which link the allocator without it.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libuser/internal.h"
#include "peer/internal.h"
#include "uapi/mmuwatch.h"

extern int mwu_kernel_share_info(struct mwu_kernel_share *ks) MWP_CORE_REF;
extern int mw_watch_add(struct mw_watch *w, const void *start, size_t len,
			mw_invalid_cb cb, void *arg) MWP_CORE_REF;
extern int mw_watch_remove(struct mw_watch *w) MWP_CORE_REF;
extern int mw_watch_valid(const struct mw_watch *w) MWP_CORE_REF;
extern long long mwu_fdinfo_ll(int fd, const char *key) MWP_CORE_REF;

/* ---- owner ---------------------------------------------------------------- */

struct kw {
	struct mw_watch w;
	uint64_t span, len, ctx;
	struct kw *next;
};

#define KW_BUCKETS 1024u
static struct kw *kw_tab[KW_BUCKETS];
static pthread_mutex_t kw_lock = PTHREAD_MUTEX_INITIALIZER;

/* A fork child never inherits the lock held by a parent thread; its
 * table's watches are of the parent's context (replaced on use). */
static void kw_atfork_child(void)
{
	pthread_mutex_init(&kw_lock, NULL);
}

static void kw_once_init(void)
{
	pthread_atfork(NULL, NULL, kw_atfork_child);
}

static pthread_once_t kw_once = PTHREAD_ONCE_INIT;

static int kernel_info(struct mwu_kernel_share *ks)
{
	if (!MWP_HAVE(mwu_kernel_share_info) || !MWP_HAVE(mw_watch_add) ||
	    !MWP_HAVE(mw_watch_remove) || !MWP_HAVE(mw_watch_valid))
		return -ENODEV;
	return mwu_kernel_share_info(ks);
}

int mwp_kwatch_describe(uint64_t span, uint64_t span_len, uint64_t *gen)
{
	struct mwh_share_hdr *h = mwh_share_header();
	struct mwh_share_word *sw = mwh_share_span_word(span);
	struct mwu_kernel_share a, b;
	struct kw *k;
	int r = 0;

	if (!h || !sw || kernel_info(&a))
		return 1; /* not kernel mode: the hooks' guarantees only */
	pthread_once(&kw_once, kw_once_init);
	pthread_mutex_lock(&kw_lock);
	for (k = kw_tab[span % KW_BUCKETS]; k; k = k->next)
		if (k->span == span)
			break;
	if (k && k->ctx == a.ctx_id && k->len == span_len &&
	    mw_watch_valid(&k->w) && atomic_load(&sw->kctx) == a.ctx_id) {
		*gen = atomic_load(&sw->gen);
		goto out;
	}
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k) {
			r = -ENOMEM;
			goto out;
		}
		k->span = span;
		k->next = kw_tab[span % KW_BUCKETS];
		kw_tab[span % KW_BUCKETS] = k;
	} else {
		/* fired, or of a context that is gone: never another's */
		mw_watch_remove(&k->w);
	}
	atomic_store(&sw->kctx, 0);
	*gen = atomic_fetch_add(&sw->gen, 1) + 1;
	k->ctx = 0;
	if (mw_watch_add(&k->w, (void *)(uintptr_t)(h->base + span * h->unit),
			 span_len, NULL, NULL)) {
		r = -ENOSPC;
		goto out;
	}
	/* the context may have changed under the add: then not published */
	if (kernel_info(&b) || b.ctx_id != a.ctx_id) {
		mw_watch_remove(&k->w);
		r = -EAGAIN;
		goto out;
	}
	k->ctx = a.ctx_id;
	k->len = span_len;
	atomic_store(&h->kdev_fd, b.fd);
	atomic_store(&h->kwords_size, b.words_size);
	atomic_store(&sw->ktoken, k->w.token);
	atomic_store(&sw->kslot, k->w.slot);
	atomic_store(&sw->kctx, a.ctx_id); /* last: the triple is complete */
out:
	pthread_mutex_unlock(&kw_lock);
	return r;
}

/* ---- peer ----------------------------------------------------------------- */

struct mwp_kwmap {
	uint64_t ctx;
	const volatile uint64_t *words;
	size_t size;
	struct mwp_kwmap *next;
};

/*
 * The mapping of context ctx's words, without a lock: entries are
 * complete before they are published at the head (release), never change
 * after, and go only with the owner, which no copy in flight outlives.
 */
const volatile uint64_t *mwp_kwords_find(struct mwp_owner *o, uint64_t ctx,
					 size_t *nwords)
{
	struct mwp_kwmap *km;

	for (km = __atomic_load_n(&o->kw, __ATOMIC_ACQUIRE); km; km = km->next)
		if (km->ctx == ctx) {
			*nwords = km->size / sizeof(uint64_t);
			return km->words;
		}
	return NULL;
}

const volatile uint64_t *mwp_kwords(struct mwp_owner *o, uint64_t ctx,
				    size_t *nwords)
{
	const volatile uint64_t *w = mwp_kwords_find(o, ctx, nwords);
	struct mwp_kwmap *km;
	int64_t num;
	uint64_t size;
	void *p;
	int fd, how;

	if (w)
		return w;
	if (o->kw_failed == ctx)
		return NULL;
	o->kw_failed = ctx; /* until it works: one try per context */
	num = atomic_load(&o->hdr->kdev_fd);
	size = atomic_load(&o->hdr->kwords_size);
	if (!MWP_HAVE(mwu_fdinfo_ll) || !size || size > ((uint64_t)1 << 32) ||
	    num < 0 || num > INT32_MAX ||
	    mwp_fdx_get_dev(o->pid, o->pidfd, (int)num, &fd, &how))
		return NULL;
	if (mwu_fdinfo_ll(fd, "mmuwatch-owner-tgid") != o->pid ||
	    mwu_fdinfo_ll(fd, "mmuwatch-ctx-id") != (long long)ctx) {
		close(fd); /* the owner moved to another context meanwhile */
		return NULL;
	}
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, MMUWATCH_MMAP_WORDS);
	close(fd); /* the mapping keeps the context */
	km = p == MAP_FAILED ? NULL : calloc(1, sizeof(*km));
	if (!km) {
		if (p != MAP_FAILED)
			munmap(p, size);
		return NULL;
	}
	km->ctx = ctx;
	km->words = p;
	km->size = size;
	km->next = o->kw;
	__atomic_store_n(&o->kw, km, __ATOMIC_RELEASE);
	o->kw_failed = 0;
	*nwords = size / sizeof(uint64_t);
	return km->words;
}

void mwp_kwords_drop(struct mwp_owner *o)
{
	struct mwp_kwmap *km, *next;

	for (km = o->kw; km; km = next) {
		next = km->next;
		munmap((void *)km->words, km->size);
		free(km);
	}
	o->kw = NULL;
	o->kw_failed = 0;
}
