/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mmuwatch: tracepoints, for perf/bpftrace/tracefs on a production node
 * (events/mmuwatch/ in tracefs). Watch and unwatch with their result, every
 * notification that reached a watch (fired, or filtered/ignored) with the
 * kernel's notifier event and the reason queued, and the moment a ring
 * overflows. They cost nothing while disabled.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM mmuwatch

#if !defined(_MMUWATCH_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _MMUWATCH_TRACE_H

#include <linux/tracepoint.h>

/*
 * WATCH and UNWATCH: one shape. The watch's cookie, slot, token, page
 * range and kind, and the ioctl's result. A failed WATCH has slot
 * 4294967295 and token 0; an UNWATCH that found no watch (ENOENT) has the
 * slot and token it was given, cookie 0 and an empty range.
 */
DECLARE_EVENT_CLASS(mmuwatch_watch_op,
		    TP_PROTO(u64 cookie, u32 slot, u64 token, unsigned long start,
			     unsigned long end, bool persistent, int ret),
		    TP_ARGS(cookie, slot, token, start, end, persistent, ret),
		    TP_STRUCT__entry(__field(u64, cookie)
				     __field(u32, slot)
				     __field(u64, token)
				     __field(unsigned long, start)
				     __field(unsigned long, end)
				     __field(bool, persistent)
				     __field(int, ret)),
		    TP_fast_assign(__entry->cookie = cookie;
				   __entry->slot = slot;
				   __entry->token = token;
				   __entry->start = start;
				   __entry->end = end;
				   __entry->persistent = persistent;
				   __entry->ret = ret;),
		    TP_printk("cookie=%llu slot=%u token=%llu range=%lx-%lx persistent=%d ret=%d",
			      __entry->cookie, __entry->slot, __entry->token,
			      __entry->start, __entry->end, __entry->persistent,
			      __entry->ret)
);

DEFINE_EVENT(mmuwatch_watch_op, mmuwatch_watch,
	     TP_PROTO(u64 cookie, u32 slot, u64 token, unsigned long start,
		      unsigned long end, bool persistent, int ret),
	     TP_ARGS(cookie, slot, token, start, end, persistent, ret)
);

DEFINE_EVENT(mmuwatch_watch_op, mmuwatch_unwatch,
	     TP_PROTO(u64 cookie, u32 slot, u64 token, unsigned long start,
		      unsigned long end, bool persistent, int ret),
	     TP_ARGS(cookie, slot, token, start, end, persistent, ret)
);

/*
 * event: the kernel's enum mmu_notifier_event; reason: the mmuwatch reason
 * queued (0: filtered); fired: an event was queued. A filtered
 * notification of the persistent notifier carries slot 4294967295.
 */
TRACE_EVENT(mmuwatch_invalidate,
	    TP_PROTO(u64 cookie, u32 slot, unsigned long start, unsigned long end,
		     u32 event, u32 reason, bool fired),
	    TP_ARGS(cookie, slot, start, end, event, reason, fired),
	    TP_STRUCT__entry(__field(u64, cookie)
			     __field(u32, slot)
			     __field(unsigned long, start)
			     __field(unsigned long, end)
			     __field(u32, event)
			     __field(u32, reason)
			     __field(bool, fired)),
	    TP_fast_assign(__entry->cookie = cookie;
			   __entry->slot = slot;
			   __entry->start = start;
			   __entry->end = end;
			   __entry->event = event;
			   __entry->reason = reason;
			   __entry->fired = fired;),
	    TP_printk("cookie=%llu slot=%u range=%lx-%lx event=%u reason=%s fired=%d",
		      __entry->cookie, __entry->slot, __entry->start, __entry->end,
		      __entry->event,
		      __print_symbolic(__entry->reason,
				       { 0, "filtered" },
				       { MMUWATCH_REASON_UNMAP, "unmap" },
				       { MMUWATCH_REASON_CLEAR, "clear" },
				       { MMUWATCH_REASON_RELEASE, "release" },
				       { MMUWATCH_REASON_MIGRATE, "migrate" },
				       { MMUWATCH_REASON_EXCLUSIVE, "exclusive" }),
		      __entry->fired)
);

TRACE_EVENT(mmuwatch_ring_overflow,
	    TP_PROTO(u32 entries, u32 prod, u32 cons),
	    TP_ARGS(entries, prod, cons),
	    TP_STRUCT__entry(__field(u32, entries)
			     __field(u32, head)
			     __field(u32, tail)),
	    TP_fast_assign(__entry->entries = entries;
			   __entry->head = prod;
			   __entry->tail = cons;),
	    TP_printk("entries=%u head=%u tail=%u", __entry->entries,
		      __entry->head, __entry->tail)
);

#endif /* _MMUWATCH_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
