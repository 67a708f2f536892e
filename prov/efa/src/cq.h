/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Completion queue (fi_cq(3)): formats CONTEXT, MSG, DATA and TAGGED; read, readfrom,
 * readerr (prov_errno = EFA status, err_data = a message), sread/sreadfrom with a
 * timeout, signal, strerror; wait objects FI_WAIT_UNSPEC and FI_WAIT_FD.
 *
 * One device CQ (L1) per libfabric CQ. Reading polls it and hands each device completion
 * to the endpoint that owns its QP (CqUser::on_wc), which stages a libfabric completion
 * (or an error) here, updates counters and frees its operation entry. Operations that
 * want no completion still complete on the device and are consumed silently.
 *
 * Back-pressure: `slots` counts device CQ entries not claimed by posted work; a post
 * that cannot claim one returns -FI_EAGAIN, so the device CQ never overflows with
 * completions of posted work.
 */
#ifndef EFA_CQ_H
#define EFA_CQ_H

#include "common/lock.h"
#include "common/pass_clock.h"
#include "domain.h"
#include "verbs/cq.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace efa {

struct Cq;

/* An owner of QPs whose completions land in a Cq (an endpoint). */
class CqUser {
public:
	virtual ~CqUser() = default;
	/* Its QP number, fixed while it is attached (read once, at attach). */
	virtual uint32_t qpn() const = 0;
	/* Called with the Cq's lock held, for each device completion of this QP. */
	virtual void on_wc(const verbs::Wc &wc, Cq &cq) = 0;
	/* Called with the Cq's lock held after each poll of the device CQ: work that is
	 * not driven by a device completion (timers, queued packets). */
	virtual void on_progress(Cq &) {}
};

struct Cq {
	fid_cq cq; /* first */
	ObjHeader hdr;
	static constexpr Magic kMagic = Magic::Cq;

	Domain *dom;
	fi_cq_format format;
	size_t entry_size;
	fi_wait_obj wait_obj;
	verbs::CompChannel channel;
	verbs::Cq vcq;
	int signal_fd = -1; /* fi_cq_signal */
	int epfd = -1;      /* FI_GETWAIT: readable on a completion event or a signal */

	/* `lock` serialises polling the device CQ and reading; `stage_lock` (innermost)
	 * guards `staged` and `errors`, so that an endpoint can complete an operation on a
	 * CQ other than the one it is progressing. */
	DataLock lock;
	DataLock stage_lock;
	struct Entry {
		fi_cq_tagged_entry e;
		fi_addr_t src;
	};
	struct Error {
		fi_cq_err_entry e;
		std::string text;
	};
	/* Completions not read yet, oldest first: a ring that doubles when full (a deque
	 * costs more per entry on the data path). */
	class Staged {
	public:
		size_t size() const { return tail_ - head_; }
		bool empty() const { return head_ == tail_; }
		const Entry &front() const { return ring_[head_ & mask_]; }
		void pop_front() { head_++; }
		void clear() { head_ = tail_ = 0; }
		/* The slot of a new last entry, for the caller to fill. */
		Entry &push_back()
		{
			if (size() == ring_.size()) [[unlikely]]
				grow();
			return ring_[tail_++ & mask_];
		}

	private:
		void grow()
		{
			std::vector<Entry> r(ring_.empty() ? 64 : ring_.size() * 2);
			for (size_t i = 0; i < size(); i++)
				r[i] = ring_[(head_ + i) & mask_];
			tail_ = size();
			head_ = 0;
			ring_.swap(r);
			mask_ = ring_.size() - 1;
		}
		std::vector<Entry> ring_;
		size_t mask_ = 0, head_ = 0, tail_ = 0;
	};
	Staged staged;
	std::deque<Error> errors;
	std::string last_err; /* err_data of the last readerr stays valid until the next */
	struct User {
		CqUser *user;
		uint32_t qpn; /* read at attach: a user's QP outlives its attachment */
	};
	std::vector<User> users;
	bool armed = false;
	std::atomic<int64_t> slots{0};
	/* Endpoints on this CQ with a path that raises no event (same-host peers through
	 * shm): blocking reads poll every millisecond, and fi_trywait says read again. */
	std::atomic<int> polled{0};
	/* On such a CQ, where an empty device poll costs more than kCostlyPollNs (on the
	 * software device it is a system call; on a NIC a memory read), a device that
	 * answered nothing kQuiet polls in a row while the other path completed something
	 * in the last kBusyNs is polled at most every kQuietPollNs, or every kQuietPolls
	 * empty polls' worth of time where polls cost more (so that such polls take at most
	 * about 1/kQuietPolls of a waiting thread's time), until it answers again: the shm
	 * path's progress passes then do not pay a device poll each, and a device
	 * completion after a quiet spell waits at most that long. */
	static constexpr uint32_t kQuiet = 16, kQuietPolls = 16;
	static constexpr uint64_t kCostlyPollNs = 200, kQuietPollNs = 5000, kBusyNs = 20000;
	struct DevicePolls {
		uint32_t quiet = 0;	 /* empty polls in a row (at most kQuiet) */
		uint32_t n = 0;		 /* polls, to time one in 64 */
		uint64_t empty_ns = 0;	 /* an empty poll's cost, averaged */
		uint64_t last_ns = 0;	 /* the last poll */
		uint64_t busy_ns = 0;	 /* the last pass whose completions were not the device's */
		PassClock clock;	 /* read on every pass (common/pass_clock.h) */
	} device_polls;			 /* under lock, used only with such endpoints */
	std::atomic<uint64_t> pushed{0}; /* completions staged, ever */

	/* Back-pressure accounting (any thread). */
	bool reserve()
	{
		if (slots.fetch_sub(1, std::memory_order_acq_rel) <= 0) {
			slots.fetch_add(1, std::memory_order_relaxed);
			return false;
		}
		return true;
	}
	void release(int64_t n = 1) { slots.fetch_add(n, std::memory_order_relaxed); }

	/* Any thread, any lock held but stage_lock: */
	void push(const fi_cq_tagged_entry &e, fi_addr_t src)
	{
		std::lock_guard g(stage_lock);
		/* Into the ring's slot: with the caller's entry inlined, no copy of it on the
		 * stack (performance.md, "Instructions per small message"). */
		Entry &s = staged.push_back();
		s.e = e;
		s.src = src;
		pushed.fetch_add(1, std::memory_order_relaxed);
	}
	void push_error(const fi_cq_err_entry &e, std::string text)
	{
		std::lock_guard g(stage_lock);
		errors.push_back(Error{e, std::move(text)});
	}
	size_t staged_count()
	{
		std::lock_guard g(stage_lock);
		return staged.size();
	}
	bool has_anything()
	{
		std::lock_guard g(stage_lock);
		return !staged.empty() || !errors.empty();
	}
	/* With `lock` held: polls the device CQ, then lets every user progress. */
	int progress(size_t max)
	{
		if (polled.load(std::memory_order_relaxed) != 0)
			return progress_mixed(max);
		const int n = poll_device(max);
		for (const User &u : users)
			u.user->on_progress(*this);
		return n;
	}
	/* progress() where same-host endpoints are (the device's quiet policy). */
	int progress_mixed(size_t max);
	/* With `lock` held: polls the device CQ only (a user progressing a second CQ). */
	int poll_device(size_t max);
	/* Without `lock`: polls the device CQ if no other thread is doing so (one user
	 * progressing its second CQ from the first one's progress); false when busy. */
	bool try_poll_device(size_t max)
	{
		std::unique_lock g(lock, std::try_to_lock);
		if (!g.owns_lock())
			return false;
		poll_device(max);
		return true;
	}

	void attach(CqUser *u);
	void detach(CqUser *u);
	/* fi_trywait: 0 when armed and empty, -FI_EAGAIN when there is something to read. */
	int trywait();
	/* Drives progress without reading (counters use it). */
	void poke();
};

int cq_open(fid_domain *domain, fi_cq_attr *attr, fid_cq **cq, void *context);

} // namespace efa

#endif
