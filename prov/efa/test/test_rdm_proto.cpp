/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Send protocol selection (protocol.md section 5) at and around every boundary, the
 * checks at the start of every call, and the data-path locks' threading rule. */
#include "common/lock.h"
#include "rdm/proto.h"

#include <criterion/criterion.h>
#include <rdma/fabric.h>

#include <thread>

using namespace efa::rdm;

namespace {

/* The default device (MTU 8928) and the default thresholds. */
SendLimits limits(size_t opt = 0, bool read_ok = true)
{
	return SendLimits{8928, opt, 65536, 1 << 20, read_ok};
}

} // namespace

Test(proto, eager_up_to_one_packet)
{
	const SendLimits l = limits();
	cr_assert_eq(eager_max(l), 8928u - 24);
	cr_assert_eq(select_send(0, l), Proto::Eager);
	cr_assert_eq(select_send(1, l), Proto::Eager);
	cr_assert_eq(select_send(eager_max(l), l), Proto::Eager);
	cr_assert_eq(select_send(eager_max(l) + 1, l), Proto::Medium);
	cr_assert_eq(first_burst(eager_max(l), l), 1u);
}

Test(proto, optional_headers_shrink_the_eager_packet)
{
	/* Before the peer's handshake a REQ carries the 32-byte address, with CQ data 8 more. */
	const SendLimits l = limits(32 + 8);
	cr_assert_eq(eager_max(l), 8928u - 24 - 40);
	cr_assert_eq(select_send(8928 - 24 - 40, l), Proto::Eager);
	cr_assert_eq(select_send(8928 - 24 - 39, l), Proto::Medium);
	cr_assert_eq(medium_segment(l), 8928u - 40 - 40);
}

Test(proto, medium_to_its_maximum)
{
	const SendLimits l = limits();
	cr_assert_eq(select_send(65536, l), Proto::Medium);
	cr_assert_eq(select_send(65537, l), Proto::LongCts);
	/* All segments in the first burst: ceil(65536 / 8888). */
	cr_assert_eq(first_burst(65536, l), 8u);
	cr_assert_eq(first_burst(8905, l), 2u);
	cr_assert_eq(first_burst(2 * 8888, l), 2u);
	cr_assert_eq(first_burst(2 * 8888 + 1, l), 3u);
}

Test(proto, read_based_from_its_threshold_when_both_can_read)
{
	cr_assert_eq(select_send((1 << 20) - 1, limits()), Proto::LongCts);
	cr_assert_eq(select_send(1 << 20, limits()), Proto::LongRead);
	cr_assert_eq(select_send(64u << 20, limits()), Proto::LongRead);
	cr_assert_eq(select_send(64u << 20, limits(0, false)), Proto::LongCts, "no RDMA read: clear-to-send");
	cr_assert_eq(first_burst(64u << 20, limits()), 1u);
	cr_assert_eq(first_burst(64u << 20, limits(0, false)), 1u);
}

Test(proto, a_small_mtu_profile)
{
	/* A device with a 256-byte MTU (EFASIM_MTU=256): more medium segments. */
	const SendLimits l{256, 32, 65536, 1 << 20, false};
	cr_assert_eq(eager_max(l), 256u - 24 - 32);
	cr_assert_eq(select_send(201, l), Proto::Medium);
	cr_assert_eq(first_burst(65536, l), (65536u + 183) / 184);
}

/* The first checks of a send, RMA or atomic call, in their order. */
Test(proto, call_checks_in_order)
{
	const uint64_t allowed = FI_INJECT | FI_COMPLETION;
	cr_assert_eq(check_call(true, true, FI_INJECT, allowed), CallCheck::Ok);
	cr_assert_eq(check_call(true, true, 0, allowed), CallCheck::Ok);
	cr_assert_eq(check_call(false, false, FI_MULTI_RECV, allowed), CallCheck::NotEnabled, "enabled first");
	cr_assert_eq(check_call(true, false, FI_MULTI_RECV, allowed), CallCheck::NoCq, "then a transmit CQ");
	cr_assert_eq(check_call(true, true, FI_MULTI_RECV | FI_INJECT, allowed), CallCheck::BadFlags);
}

/* FI_THREAD_DOMAIN and FI_THREAD_COMPLETION: the application serialises, the lock is off
 * (a second holder gets it); any other level: a real mutex another thread cannot take. */
Test(data_lock, follows_the_threading_level)
{
	for (fi_threading t : {FI_THREAD_DOMAIN, FI_THREAD_COMPLETION}) {
		efa::DataLock l;
		l.set_threading(t);
		cr_assert(!l.on(), "threading %d", int(t));
		l.lock();
		bool other = false;
		std::thread([&] { other = l.try_lock(); }).join();
		cr_assert(other, "threading %d: the lock is held although the application serialises", int(t));
		l.unlock();
	}
	for (fi_threading t : {FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_ENDPOINT, FI_THREAD_UNSPEC}) {
		efa::DataLock l;
		l.set_threading(t);
		cr_assert(l.on(), "threading %d", int(t));
		l.lock();
		bool other = true;
		std::thread([&] { other = l.try_lock(); }).join();
		cr_assert(!other, "threading %d: a second thread took a held lock", int(t));
		l.unlock();
		std::thread([&] {
			other = l.try_lock();
			if (other)
				l.unlock();
		}).join();
		cr_assert(other, "threading %d: the lock stayed held after unlock", int(t));
	}
}
