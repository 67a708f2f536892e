/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Tag matching rules (fi_tagged(3), fi_msg(3)): ignore bits, FI_ADDR_UNSPEC and directed
 * receives, FIFO order among candidates, tagged and untagged kept apart, and the
 * intrusive list underneath.
 */
#include "rdm/match.h"

#include <criterion/criterion.h>

#include <vector>

using namespace efa::rdm;

namespace {

struct Recv : IListNode<Recv> {
	fi_addr_t src = FI_ADDR_UNSPEC;
	uint64_t tag = 0;
	uint64_t ignore = 0;
	int id = 0;
};

struct Msg : IListNode<Msg> {
	fi_addr_t src = 0;
	uint64_t tag = 0;
	int id = 0;
};

using M = Matcher<Recv, Msg>;

} // namespace

Test(match, tag_rule)
{
	cr_assert(tag_matches(0x1234, 0, 0x1234));
	cr_assert_not(tag_matches(0x1234, 0, 0x1235));
	cr_assert(tag_matches(0x1234, 0xff, 0x12ff), "ignored bits may differ");
	cr_assert_not(tag_matches(0x1234, 0xff, 0x13ff), "the others may not");
	cr_assert(tag_matches(0, ~0ull, 0xdeadbeefcafef00dull), "ignore all: FI_TAG_GENERIC style wildcard");
	cr_assert(tag_matches(1ull << 63, 0, 1ull << 63), "the top bit is a tag bit like any other");
	cr_assert_not(tag_matches(1ull << 63, 0, 0));
}

Test(match, address_rule)
{
	cr_assert(addr_matches(FI_ADDR_UNSPEC, 5));
	cr_assert(addr_matches(FI_ADDR_UNSPEC, FI_ADDR_NOTAVAIL), "any source takes unknown senders");
	cr_assert(addr_matches(5, 5));
	cr_assert_not(addr_matches(5, 6));
	cr_assert_not(addr_matches(5, FI_ADDR_NOTAVAIL), "a directed receive never takes an unknown sender");
}

Test(match, posted_receives_match_in_posting_order)
{
	M m;
	Recv r[4];
	r[0].tag = 7;			   /* exact 7 */
	r[1].tag = 0, r[1].ignore = ~0ull; /* anything */
	r[2].tag = 7;			   /* exact 7, later */
	r[3].tag = 9, r[3].src = 2;	   /* 9 from 2 only */
	for (int i = 0; i < 4; i++) {
		r[i].id = i;
		m.post(true, &r[i]);
	}
	cr_assert_eq(m.find_posted(true, 1, 7), &r[0]);
	m.unpost(true, &r[0]);
	cr_assert_eq(m.find_posted(true, 1, 7), &r[1], "the wildcard was posted before the second 7");
	m.unpost(true, &r[1]);
	cr_assert_eq(m.find_posted(true, 1, 7), &r[2]);
	cr_assert_null(m.find_posted(true, 1, 9), "9 only from address 2");
	cr_assert_eq(m.find_posted(true, 2, 9), &r[3]);
	cr_assert_null(m.find_posted(false, 2, 9), "a tagged receive never takes an untagged message");
}

Test(match, untagged_ignores_tags_but_not_sources)
{
	M m;
	Recv any, from3;
	from3.src = 3;
	m.post(false, &from3);
	m.post(false, &any);
	cr_assert_eq(m.find_posted(false, 4, 0xffff), &any, "tags mean nothing to untagged receives");
	cr_assert_eq(m.find_posted(false, 3, 0), &from3);
	cr_assert_null(m.find_posted(true, 3, 0));
}

Test(match, without_directed_recv_sources_are_ignored)
{
	M m(false);
	Recv r;
	r.src = 3;
	r.tag = 1;
	m.post(true, &r);
	cr_assert_eq(m.find_posted(true, 4, 1), &r, "fi_recv(3): the address is ignored without FI_DIRECTED_RECV");
	m.set_directed(true);
	cr_assert_null(m.find_posted(true, 4, 1));
}

Test(match, unexpected_messages_are_found_in_arrival_order)
{
	M m;
	Msg u[5];
	const fi_addr_t src[5] = {1, 2, 1, FI_ADDR_NOTAVAIL, 2};
	const uint64_t tag[5] = {0x10, 0x11, 0x11, 0x11, 0x20};
	for (int i = 0; i < 5; i++) {
		u[i].id = i;
		u[i].src = src[i];
		u[i].tag = tag[i];
		m.add_unexpected(true, &u[i]);
	}
	cr_assert_eq(m.find_unexpected(true, FI_ADDR_UNSPEC, 0x11, 0), &u[1]);
	cr_assert_eq(m.find_unexpected(true, 1, 0x11, 0), &u[2], "directed to address 1");
	cr_assert_eq(m.find_unexpected(true, 1, 0x10, 0x01), &u[0], "ignore bit 0: the older one first");
	cr_assert_eq(m.find_unexpected(true, FI_ADDR_UNSPEC, 0x00, 0xff), &u[0]);
	cr_assert_null(m.find_unexpected(true, 3, 0x11, 0));
	/* Peek leaves it queued; a claim removes it. */
	Msg *peeked = m.find_unexpected(true, 2, 0x20, 0);
	cr_assert_eq(peeked, &u[4]);
	cr_assert_eq(m.find_unexpected(true, 2, 0x20, 0), &u[4]);
	m.remove_unexpected(true, peeked);
	cr_assert_null(m.find_unexpected(true, 2, 0x20, 0));
	cr_assert_eq(m.unexpected(true).size(), 4u);
	cr_assert_null(m.find_unexpected(false, FI_ADDR_UNSPEC, 0, ~0ull), "kinds are kept apart");
}

Test(match, intrusive_list_operations)
{
	IList<Msg> l;
	Msg a, b, c;
	cr_assert(l.empty());
	l.push_back(&b);
	l.push_front(&a);
	l.push_back(&c);
	cr_assert_eq(l.size(), 3u);
	cr_assert(b.on_list());
	l.unlink(&b);
	cr_assert_not(b.on_list());
	cr_assert_eq(l.front(), &a);
	cr_assert_eq(IList<Msg>::next(&a), &c);
	cr_assert_eq(l.back(), &c);
	cr_assert_eq(l.pop_front(), &a);
	cr_assert_eq(l.pop_front(), &c);
	cr_assert_null(l.pop_front());
	cr_assert(l.empty());
	cr_assert_eq(l.size(), 0u);
}
