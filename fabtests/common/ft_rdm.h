/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared code of the RDM feature tests (ft_tagged, ft_unexpected, ft_peek,
 * ft_multi_recv, ft_rdm_rma, ft_atomic, ft_many_peers, ft_zero_len_ssend): the tests of
 * what the `efa` fabric adds over efa-direct (tagged messages of any size, ordering,
 * directed receives, peek/claim, multi-receive buffers, RMA of any size, atomics).
 *
 * It sits next to the common library (ft.h, ft_fabric.h, ft_mr.h, ft_cq.h, ft_ep.h) and
 * reuses its options, checks, patterns, ft::Fabric, ft::Buffer, ft::Cq, ft::Endpoint and
 * FT_POST. What it adds:
 *
 *   cq_spec/ep_spec the CQs these tests read: FI_CQ_FORMAT_TAGGED (every field they check:
 *                 buf for FI_MULTI_RECV placement and FI_PEEK data, olen and the tag of
 *                 error entries), read with fi_cq_readfrom when the fabric has FI_SOURCE,
 *                 sized for the bursts of the many-message tests.
 *   rdm::Ctl      the out-of-band control channel (same protocol and runner contract as
 *                 ft::Oob: the server prints "PORT <n>"), whose waits keep reading the
 *                 CQs unless ctl_progress is off, so a peer's operation that needs this
 *                 process's progress (FI_PROGRESS_MANUAL) completes while this process
 *                 waits.
 *
 * Options beyond the common ones (-L) are taken out of argv before ft::parse_options.
 * A part of a test that needs a capability the provider does not advertise is left out
 * with a line "SKIP part: ..." (rdm::skip_part), so nothing is skipped silently.
 */
#pragma once

#include "ft_fabric.h"
#include "ft_ep.h"
#include "ft_mr.h"
#include "ft_channel.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_tagged.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

namespace ft::rdm {

using Loc = std::source_location;

/* Removes `flag` (e.g. "-L") from argv, wherever it is; true when it was there. */
bool take_flag(int &argc, char **argv, const char *flag);

/* Removes "flag N" from argv; N, or def when absent (exits 2 when N is not a number). */
long take_number(int &argc, char **argv, const char *flag, long def);

/* "SKIP part: <why>": a part of the test left out because the provider lacks something. */
void skip_part(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

using Entry = ft::Completion;

/* The tests' CQ: see the top of this file. */
CqSpec cq_spec(const Fabric &fab);
/* An endpoint with two such CQs (their bind_flags and before_enable to be added). */
EpSpec ep_spec(const Fabric &fab);

/* Whether the control channel's waits read the CQs (default true). ft_rdm_rnr turns it
 * off to play a receiver that does not progress. */
extern bool ctl_progress;

/* The control channel (ft::Oob; see the top of this file): its waits read every CQ
 * unless ctl_progress is off. */
class Ctl : public ft::Oob {
public:
	Ctl();

	/* Both sides reach `step`; a peer at another step fails the test. */
	void sync(const std::string &step) { Oob::sync(step.c_str()); }
	/* Tell the peer this side reached `step`, without waiting. */
	void notify(const std::string &step) { Oob::notify(step.c_str()); }
	/* Wait until the peer notifies `step`. */
	void await(const std::string &step) { Oob::await(step.c_str()); }
};

/* Fails unless (e.flags & must) == must and (e.flags & must_not) == 0. */
void expect_flags(const Entry &e, uint64_t must, uint64_t must_not, const std::string &what,
		  Loc at = Loc::current());

/* True when both tx and rx msg_order include `order` (e.g. FI_ORDER_SAS). */
bool has_order(const Fabric &fab, uint64_t order);

/*
 * Asks for msg_order `order` explicitly (ft::Fabric's hints ask for none; a provider may
 * enable an ordering only when asked): fi_getinfo with fab's info as hints plus the
 * order; when the provider grants it, fab's info, which the endpoints are opened with,
 * carries it from then on. Call before opening endpoints. Returns has_order().
 */
bool request_order(Fabric &fab, uint64_t order);

/* Page-aligned memory that is not registered (for NULL descriptors). */
class Plain {
public:
	explicit Plain(size_t len);
	uint8_t *data() const { return mem_.get(); }
	size_t size() const { return len_; }

private:
	struct Free {
		void operator()(uint8_t *p) const { free(p); }
	};
	std::unique_ptr<uint8_t, Free> mem_;
	size_t len_;
};

/*
 * A check that a stock provider is known to fail although fi_*(3) requires it: fails the
 * test (at the caller's line, with `fmt`) on our efa provider, and on any other provider
 * (upstream's efa included) prints "KNOWN DEVIATION (<provider>): ..." and returns, so
 * the rest of the test still runs there. Used only where a provider was seen to deviate
 * (see README.md). known_broken() (ft_fabric.h) is for checks a test cannot survive.
 */
void deviation(const Fabric &fab, bool ok, Loc at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* "1 MiB", "4095 B" */
std::string size_str(size_t len);

} // namespace ft::rdm
