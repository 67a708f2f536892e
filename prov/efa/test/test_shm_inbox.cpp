/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The inbox of same-host announcements (rdm/shm_inbox.h) on private memory: its slots are
 * reused, so an endpoint takes announcements from any number of senders in its life; it
 * refuses only while every slot holds one not taken yet; under concurrent senders
 * (threads, and processes on MAP_SHARED memory as in the key-table file) each
 * announcement is taken exactly once.
 */
#include "rdm/shm_inbox.h"

#include <criterion/criterion.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <vector>

namespace inbox = efa::rdm::inbox;
using efa::RawAddr;

namespace {

std::unique_ptr<inbox::Inbox> fresh()
{
	auto in = std::make_unique<inbox::Inbox>(); /* zeroed, as a new file's pages are */
	inbox::init(*in);
	return in;
}

RawAddr addr_of(uint32_t n)
{
	RawAddr a{};
	a.gid[0] = 0xfe;
	a.qpn = uint16_t(n);
	a.qkey = n;
	return a;
}

/* The owner in the concurrency tests: takes every written announcement, checking that
 * it is whole and new (the senders announce addr_of(0 .. n-1)). */
struct Owner {
	Owner(inbox::Inbox &i, size_t n) : in(i), seen(n, 0) {}
	void take()
	{
		inbox::take(in, [&](const RawAddr &a) {
			cr_assert_eq(a.gid[0], 0xfe);
			cr_assert_eq(uint32_t(a.qpn), a.qkey & 0xffff, "a torn address");
			cr_assert_lt(a.qkey, seen.size());
			cr_assert_eq(seen[a.qkey], 0, "announcement %u taken twice", a.qkey);
			seen[a.qkey] = 1;
			taken++;
		});
	}
	inbox::Inbox &in;
	std::vector<uint8_t> seen;
	size_t taken = 0;
};

} // namespace

/* Ten times the slots, taken every 1,000 announcements: every one is taken, in slots that
 * stay at the bottom of the inbox (what the owner scans). */
Test(shm_inbox, slots_are_reused)
{
	auto in = fresh();
	std::vector<uint32_t> got;
	uint32_t last = inbox::rung(*in);
	for (uint32_t n = 0; n < 10 * inbox::kSlots; n++) {
		cr_assert(inbox::announce(*in, addr_of(n)), "announcement %u refused", n);
		if (n % 1000 == 999) {
			cr_assert_neq(inbox::rung(*in), last, "the doorbell did not move");
			last = inbox::rung(*in);
			cr_assert(inbox::waiting(*in));
			inbox::take(*in, [&](const RawAddr &a) { got.push_back(a.qkey); });
			cr_assert_not(inbox::waiting(*in));
		}
	}
	inbox::take(*in, [&](const RawAddr &a) { got.push_back(a.qkey); });
	cr_assert_eq(got.size(), 10u * inbox::kSlots);
	std::vector<bool> seen(got.size());
	for (uint32_t q : got) {
		cr_assert_lt(q, seen.size());
		cr_assert_not(seen[q], "announcement %u taken twice", q);
		seen[q] = true;
	}
	cr_assert_leq(in->used, 1000u, "slots were not reused (high-water mark %u)", in->used);
}

/* Full while every slot waits to be taken; one take makes room for as many again. */
Test(shm_inbox, full_only_while_nothing_was_taken)
{
	auto in = fresh();
	for (uint32_t n = 0; n < inbox::kSlots; n++)
		cr_assert(inbox::announce(*in, addr_of(n)));
	cr_assert_not(inbox::announce(*in, addr_of(inbox::kSlots)), "a full inbox took another announcement");
	size_t taken = 0;
	inbox::take(*in, [&](const RawAddr &) { taken++; });
	cr_assert_eq(taken, inbox::kSlots);
	for (uint32_t n = 0; n < inbox::kSlots; n++)
		cr_assert(inbox::announce(*in, addr_of(n)), "no room after the take (%u)", n);
}

/* A slot claimed by a sender that died before writing it is skipped, not taken. */
Test(shm_inbox, a_claimed_slot_is_not_taken)
{
	auto in = fresh();
	std::atomic_ref<uint32_t>(in->slot[0].state).store(inbox::kClaimed);
	std::atomic_ref<uint32_t>(in->used).store(1);
	cr_assert(inbox::announce(*in, addr_of(7)));
	cr_assert_eq(in->slot[1].state, inbox::kWritten, "the claimed slot was reused");
	std::vector<uint32_t> got;
	inbox::take(*in, [&](const RawAddr &a) { got.push_back(a.qkey); });
	cr_assert_eq(got.size(), 1u);
	cr_assert_eq(got[0], 7u);
	cr_assert_eq(in->slot[0].state, inbox::kClaimed);
}

/* Four senders and the owner at once: each announcement is taken once, with its address
 * whole (the doorbell orders the slot's contents before it). */
Test(shm_inbox, concurrent_senders, .timeout = 60)
{
	auto in = fresh();
	constexpr uint32_t kSenders = 4, kEach = 20000;
	std::atomic<uint32_t> done{0};
	std::vector<std::thread> ts;
	for (uint32_t t = 0; t < kSenders; t++)
		ts.emplace_back([&, t] {
			for (uint32_t i = 0; i < kEach; i++) {
				const uint32_t n = t * kEach + i;
				while (!inbox::announce(*in, addr_of(n)))
					std::this_thread::yield();
			}
			done.fetch_add(1);
		});
	Owner owner(*in, kSenders * kEach);
	uint32_t last = 0;
	auto take = [&] { owner.take(); };
	while (done.load() < kSenders) {
		if (const uint32_t r = inbox::rung(*in); r != last) {
			last = r;
			take();
		} else {
			std::this_thread::yield();
		}
	}
	for (auto &t : ts)
		t.join();
	take();
	cr_assert_eq(owner.taken, size_t(kSenders) * kEach);
}

/* As in use: the inbox in shared memory, four sender processes and the owner at once.
 * Each announcement is taken once and whole, and every one is taken. */
Test(shm_inbox, sender_processes, .timeout = 60)
{
	void *mem = mmap(nullptr, sizeof(inbox::Inbox), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(mem, MAP_FAILED);
	auto *in = new (mem) inbox::Inbox(); /* zeroed, as a new file's pages are */
	inbox::init(*in);
	constexpr uint32_t kSenders = 4, kEach = 10000;
	std::vector<pid_t> kids;
	for (uint32_t t = 0; t < kSenders; t++) {
		const pid_t pid = fork();
		cr_assert_geq(pid, 0, "fork failed");
		if (pid == 0) {
			for (uint32_t i = 0; i < kEach; i++)
				while (!inbox::announce(*in, addr_of(t * kEach + i)))
					sched_yield();
			_exit(0);
		}
		kids.push_back(pid);
	}
	Owner owner(*in, kSenders * kEach);
	uint32_t last = 0;
	auto take = [&] { owner.take(); };
	size_t running = kids.size();
	while (running) {
		if (const uint32_t r = inbox::rung(*in); r != last) {
			last = r;
			take();
		} else {
			sched_yield();
		}
		int st = 0;
		const pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid > 0) {
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a sender process failed");
			running--;
		}
	}
	take();
	cr_assert_eq(owner.taken, size_t(kSenders) * kEach, "%zu of %u announcements taken", owner.taken,
		     kSenders * kEach);
	munmap(mem, sizeof(inbox::Inbox));
}
