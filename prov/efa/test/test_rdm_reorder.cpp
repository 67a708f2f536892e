/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The reorder buffer: whatever the arrival order, items come out in id order, exactly
 * once; in order, reversed, random permutations, duplicates, chained segments, window
 * overflow, and ids that wrap around 2^32.
 */
#include "rdm/reorder.h"

#include <criterion/criterion.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

using namespace efa::rdm;

namespace {

struct Item : ReorderLink<Item> {
	uint32_t id = 0;
	int seg = 0;
	bool released = false;
};

using Rb = ReorderBuffer<Item>;

/* Feeds items in the given order and returns the ids in the order they came out.
 * `classified`: as the endpoint does (arrival.cpp), classify first, and deliver_expected
 * instead of accept for the expected id. */
std::vector<uint32_t> run(Rb &rb, std::vector<Item> &items, const std::vector<size_t> &order, bool classified = false)
{
	std::vector<uint32_t> out;
	for (size_t i : order) {
		Item &it = items[i];
		Rb::Verdict v;
		if (classified) {
			v = rb.classify(it.id);
			if (v == Rb::Verdict::Deliver)
				rb.deliver_expected();
			else if (v == Rb::Verdict::Queued)
				cr_assert_eq(rb.accept(it.id, &it), Rb::Verdict::Queued);
		} else {
			v = rb.accept(it.id, &it);
		}
		cr_assert_neq(v, Rb::Verdict::Past, "id %u refused as past", it.id);
		if (v != Rb::Verdict::Deliver)
			continue;
		out.push_back(it.id);
		while (Item *c = rb.pop())
			for (; c; c = c->rb_next)
				out.push_back(c->id);
	}
	return out;
}

std::vector<Item> make(uint32_t first, size_t n)
{
	std::vector<Item> v(n);
	for (size_t i = 0; i < n; i++)
		v[i].id = first + uint32_t(i);
	return v;
}

void assert_in_order(const std::vector<uint32_t> &out, uint32_t first, size_t n)
{
	cr_assert_eq(out.size(), n, "%zu of %zu delivered", out.size(), n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(out[i], first + uint32_t(i), "position %zu: %u", i, out[i]);
}

std::vector<size_t> iota(size_t n)
{
	std::vector<size_t> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = i;
	return v;
}

} // namespace

Test(reorder, in_order_needs_no_ring)
{
	Rb rb(64);
	auto items = make(0, 1000);
	assert_in_order(run(rb, items, iota(1000)), 0, 1000);
	cr_assert_eq(rb.capacity(), 0u, "no memory for a peer whose packets come in order");
	cr_assert_eq(rb.queued(), 0u);
	cr_assert_eq(rb.expected(), 1000u);
}

Test(reorder, reversed_within_the_window)
{
	Rb rb(1024);
	auto items = make(0, 1000);
	auto order = iota(1000);
	std::reverse(order.begin(), order.end());
	assert_in_order(run(rb, items, order), 0, 1000);
	cr_assert_eq(rb.peak_capacity(), 1024u, "grew to the depth needed");
	cr_assert_eq(rb.queued(), 0u);
	cr_assert_eq(rb.capacity(), 0u, "an empty buffer gives its ring back");
}

Test(reorder, ring_grows_only_as_deep_as_the_reordering)
{
	Rb rb(16384);
	auto items = make(0, 20);
	std::vector<size_t> order = {1, 2, 3, 0, 5, 4, 19, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
	assert_in_order(run(rb, items, order), 0, 20);
	cr_assert_eq(rb.peak_capacity(), 16u);
	cr_assert_eq(rb.queued(), 0u);
	cr_assert_eq(rb.capacity(), 0u, "an empty buffer gives its ring back");
}

Test(reorder, random_permutations)
{
	std::mt19937 rng(12345);
	for (int round = 0; round < 50; round++) {
		const size_t n = 1 + rng() % 3000;
		Rb rb(round % 2 ? 64 : 4096);
		auto items = make(0, n);
		auto order = iota(n);
		std::shuffle(order.begin(), order.end(), rng);
		assert_in_order(run(rb, items, order), 0, n);
		cr_assert_eq(rb.queued(), 0u);
		Rb rb2(round % 2 ? 64 : 4096);
		assert_in_order(run(rb2, items, order, true), 0, n);
		cr_assert_eq(rb2.queued(), 0u);
	}
}

Test(reorder, local_jitter_like_multipath)
{
	/* Each packet displaced by at most 8 places, as several paths of different delay do. */
	std::mt19937 rng(7);
	const size_t n = 100000;
	auto items = make(0, n);
	auto order = iota(n);
	for (size_t i = 0; i + 8 < n; i += 8)
		std::shuffle(order.begin() + i, order.begin() + i + 8, rng);
	Rb rb(16384);
	assert_in_order(run(rb, items, order), 0, n);
	cr_assert_leq(rb.peak_capacity(), 16u);
}

Test(reorder, overflow_beyond_the_window)
{
	/* Window of 16: ids 16 and more ahead go to the overflow list and come back. */
	Rb rb(16);
	auto items = make(0, 200);
	auto order = iota(200);
	std::reverse(order.begin(), order.end());
	assert_in_order(run(rb, items, order), 0, 200);
	cr_assert_eq(rb.peak_capacity(), 16u, "never beyond max_window");
	cr_assert_eq(rb.queued(), 0u);
}

Test(reorder, overflow_random)
{
	std::mt19937 rng(99);
	for (int round = 0; round < 20; round++) {
		Rb rb(16);
		const size_t n = 500;
		auto items = make(0, n);
		auto order = iota(n);
		std::shuffle(order.begin(), order.end(), rng);
		assert_in_order(run(rb, items, order), 0, n);
		cr_assert_eq(rb.peak_capacity(), 16u);
		Rb rb2(16);
		assert_in_order(run(rb2, items, order, true), 0, n);
		cr_assert_eq(rb2.queued(), 0u);
	}
}

Test(reorder, ids_wrap_around)
{
	const uint32_t first = 0xffffffffu - 100;
	std::mt19937 rng(3);
	auto items = make(first, 300);
	auto order = iota(300);
	std::shuffle(order.begin(), order.end(), rng);
	Rb rb(512, first);
	auto out = run(rb, items, order);
	assert_in_order(out, first, 300);
	cr_assert_eq(rb.expected(), first + 300u);
	cr_assert_lt(rb.expected(), 1000u, "expected wrapped past 2^32");
}

Test(reorder, wrap_around_through_the_overflow_list)
{
	const uint32_t first = 0xfffffff0u;
	auto items = make(first, 100);
	auto order = iota(100);
	std::reverse(order.begin(), order.end());
	Rb rb(16, first);
	assert_in_order(run(rb, items, order), first, 100);
}

Test(reorder, duplicates_and_stale_ids_are_past)
{
	Rb rb(64);
	auto items = make(0, 10);
	assert_in_order(run(rb, items, iota(10)), 0, 10);
	Item dup;
	for (uint32_t id : {0u, 5u, 9u}) {
		dup.id = id;
		cr_assert_eq(rb.accept(id, &dup), Rb::Verdict::Past, "id %u", id);
	}
	/* Half the id space behind counts as past, not as far ahead. */
	cr_assert_eq(rb.accept(10u - 0x80000000u, &dup), Rb::Verdict::Past);
	cr_assert_eq(rb.queued(), 0u);
}

Test(reorder, segments_of_one_id_are_chained_in_arrival_order)
{
	Rb rb(64);
	Item a[3], b, c;
	for (int i = 0; i < 3; i++) {
		a[i].id = 2;
		a[i].seg = i;
	}
	b.id = 1;
	c.id = 0;
	cr_assert_eq(rb.accept(2, &a[1]), Rb::Verdict::Queued);
	cr_assert_eq(rb.accept(1, &b), Rb::Verdict::Queued);
	cr_assert_eq(rb.accept(2, &a[0]), Rb::Verdict::Queued);
	cr_assert_eq(rb.accept(2, &a[2]), Rb::Verdict::Queued);
	cr_assert_eq(rb.queued(), 4u);
	cr_assert_eq(rb.accept(0, &c), Rb::Verdict::Deliver);
	Item *x = rb.pop();
	cr_assert_eq(x, &b);
	cr_assert_null(x->rb_next);
	Item *chain = rb.pop();
	cr_assert_eq(chain, &a[1]);
	cr_assert_eq(chain->rb_next, &a[0]);
	cr_assert_eq(chain->rb_next->rb_next, &a[2]);
	cr_assert_null(chain->rb_next->rb_next->rb_next);
	cr_assert_null(rb.pop());
	cr_assert_eq(rb.queued(), 0u);
	cr_assert_eq(rb.expected(), 3u);
	/* A later segment of the delivered id 2 is past: the caller routes it by id. */
	Item late;
	cr_assert_eq(rb.accept(2, &late), Rb::Verdict::Past);
}

Test(reorder, segments_chained_on_the_overflow_list)
{
	Rb rb(16);
	Item far[2], rest[40];
	far[0].id = far[1].id = 40;
	cr_assert_eq(rb.accept(40, &far[0]), Rb::Verdict::Queued);
	cr_assert_eq(rb.accept(40, &far[1]), Rb::Verdict::Queued);
	std::vector<uint32_t> out;
	for (uint32_t i = 0; i < 40; i++) {
		rest[i].id = i;
		cr_assert_eq(rb.accept(i, &rest[i]), Rb::Verdict::Deliver);
		while (Item *c = rb.pop())
			for (; c; c = c->rb_next)
				out.push_back(c->id);
	}
	cr_assert_eq(out.size(), 2u, "both segments of id 40, once each");
	cr_assert_eq(out[0], 40u);
	cr_assert_eq(out[1], 40u);
	cr_assert_eq(rb.queued(), 0u);
}

Test(reorder, clear_releases_everything_queued)
{
	Rb rb(16);
	auto items = make(1, 100); /* id 0 never arrives */
	for (auto &it : items)
		cr_assert_eq(rb.accept(it.id, &it), Rb::Verdict::Queued);
	cr_assert_eq(rb.queued(), 100u);
	size_t n = 0;
	rb.clear([&](Item *it) {
		cr_assert_not(it->released, "released twice");
		it->released = true;
		n++;
	});
	cr_assert_eq(n, 100u);
	cr_assert_eq(rb.queued(), 0u);
	for (auto &it : items)
		cr_assert(it.released);
}

Test(reorder, idle_state_is_small)
{
	cr_assert_leq(sizeof(Rb), 48u, "per-peer reorder state of an idle peer (protocol.md section 6)");
}

/* A VOID run: the id delivered, then skip(k) consumes the next k ids; what was queued
 * for them (a faulty peer's) is released, what is queued beyond comes out next, in
 * order, also across the wrap of 2^32 and from the overflow list. */
Test(reorder, void_run_skips_ids)
{
	for (uint32_t first : {0u, 0xfffffff0u}) {
		Rb rb(16, first);
		std::vector<Item> items = make(first, 64);
		/* Queued before the VOID arrives: two ids inside the run, three beyond it, one
		 * of them far enough for the overflow list. */
		for (size_t i : {3, 5, 20, 21, 40})
			cr_assert_eq(rb.accept(items[i].id, &items[i]), Rb::Verdict::Queued);
		cr_assert_eq(rb.accept(items[0].id, &items[0]), Rb::Verdict::Deliver);
		std::vector<uint32_t> released;
		rb.skip(19, [&](Item *it) { released.push_back(it->id); }); /* ids first+1 .. first+19 */
		cr_assert_eq(released.size(), 2u);
		cr_assert_eq(released[0], first + 3);
		cr_assert_eq(released[1], first + 5);
		cr_assert_eq(rb.expected(), first + 20);
		std::vector<uint32_t> out;
		while (Item *c = rb.pop())
			for (; c; c = c->rb_next)
				out.push_back(c->id);
		cr_assert_eq(out.size(), 2u);
		cr_assert_eq(out[0], first + 20);
		cr_assert_eq(out[1], first + 21);
		cr_assert_eq(rb.expected(), first + 22);
		cr_assert_eq(rb.queued(), 1u, "id %u still waits", first + 40);
		cr_assert_eq(rb.classify(first + 10), Rb::Verdict::Past, "a voided id is past");
	}
}

/* Ids reach() = max(window, 16384) or more ahead are refused and not taken; the ring
 * holds the window, the overflow list up to the reach; find() sees both. */
Test(reorder, ids_beyond_the_reach_are_refused)
{
	for (uint32_t window : {16u, 16384u, 65536u}) {
		Rb rb(window, 100);
		const uint32_t reach = window > 16384 ? window : 16384;
		cr_assert_eq(rb.reach(), reach);
		Item near, far, beyond, way;
		near.id = 101;
		far.id = 100 + reach - 1;
		beyond.id = 100 + reach;
		way.id = 100 + 0x7fffffffu;
		cr_assert_eq(rb.classify(beyond.id), Rb::Verdict::Refused);
		cr_assert_eq(rb.accept(beyond.id, &beyond), Rb::Verdict::Refused);
		cr_assert_eq(rb.accept(way.id, &way), Rb::Verdict::Refused);
		cr_assert_eq(rb.accept(near.id, &near), Rb::Verdict::Queued);
		cr_assert_eq(rb.accept(far.id, &far), Rb::Verdict::Queued);
		cr_assert_eq(rb.queued(), 2u);
		cr_assert_eq(rb.find(101), &near);
		cr_assert_eq(rb.find(far.id), &far);
		cr_assert_null(rb.find(102));
		cr_assert_null(rb.find(beyond.id));
		rb.clear([](Item *) {});
	}
}
