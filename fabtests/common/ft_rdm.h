/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared code of the RDM feature tests (ft_tagged, ft_unexpected, ft_peek,
 * ft_multi_recv, ft_rdm_rma, ft_atomic, ft_many_peers, ft_zero_len_ssend): the tests of
 * what the `efa` fabric adds over efa-direct (tagged messages of any size, ordering,
 * directed receives, peek/claim, multi-receive buffers, RMA of any size, atomics).
 *
 * It sits next to the common library (ft.h, ft_fabric.h, ft_mr.h) and reuses its options,
 * checks, patterns, ft::Fabric and ft::Buffer. What it adds:
 *
 *   rdm::Cq       a completion queue read in FI_CQ_FORMAT_TAGGED with every field the
 *                 tests check: buf (FI_MULTI_RECV placement, FI_PEEK data), and for error
 *                 entries olen (FI_ETRUNC) and the tag; with FI_SOURCE, read with
 *                 fi_cq_readfrom. Entries are queued in the order the CQ returned them,
 *                 and found by context or taken oldest first (ordering checks).
 *   rdm::Endpoint an RDM endpoint on ft::Fabric's AV with two rdm::Cq (or CQs shared
 *                 with other endpoints), bind flags and a hook before fi_enable.
 *   rdm::Ctl      the out-of-band control channel (same protocol and runner contract as
 *                 ft::Oob: the server prints "PORT <n>"), whose waits keep reading the
 *                 rdm::Cq queues too, so a peer's operation that needs this process's
 *                 progress (FI_PROGRESS_MANUAL) completes while this process waits.
 *   RDM_POST      posts one operation, retrying -FI_EAGAIN within the bound while
 *                 progressing every CQ (ft::post_retry progresses only ft::Cq).
 *
 * Options beyond the common ones (-L) are taken out of argv before ft::parse_options.
 * A part of a test that needs a capability the provider does not advertise is left out
 * with a line "SKIP part: ..." (rdm::skip_part), so nothing is skipped silently.
 */
#pragma once

#include "ft_fabric.h"
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

/* One CQ entry, successful or not, with every field of fi_cq_tagged_entry / err entry. */
struct Entry {
	void *ctx = nullptr;
	uint64_t flags = 0;
	size_t len = 0;
	void *buf = nullptr;
	uint64_t data = 0;
	uint64_t tag = 0;
	fi_addr_t src = FI_ADDR_NOTAVAIL; /* fi_cq_readfrom's (FI_SOURCE) */
	bool error = false;
	int err = 0;	  /* positive fabric errno of an error entry */
	int prov_errno = 0;
	size_t olen = 0;  /* error entries: bytes that did not fit (FI_ETRUNC) */
	std::string errstr;
	std::string describe() const;
};

class Cq {
public:
	/* readfrom: read with fi_cq_readfrom (the fabric has FI_SOURCE). */
	Cq(const Fabric &fab, const char *name, bool readfrom);
	~Cq();
	Cq(const Cq &) = delete;
	Cq &operator=(const Cq &) = delete;

	fid_cq *get() const { return cq_; }
	const char *name() const { return name_; }

	/* Reads everything available into the queue. */
	void progress();
	/* The successful completion of ctx (any error entry, of ctx or another, fails). */
	Entry wait(const void *ctx, const std::string &what, Loc at = Loc::current());
	/* The error completion of ctx (its success, or another error entry, fails). */
	Entry wait_error(const void *ctx, const std::string &what, Loc at = Loc::current());
	/* The completion of ctx, successful or not (another error entry fails). */
	Entry wait_any(const void *ctx, const std::string &what, Loc at = Loc::current());
	/* The oldest queued entry, successful or not, waiting for one. */
	Entry next(const std::string &what, Loc at = Loc::current());
	/* The oldest queued entry if there is one (reads the CQ first); never waits. */
	std::optional<Entry> poll();
	/* Fails unless nothing is queued or readable. */
	void expect_empty(const std::string &what, Loc at = Loc::current());
	size_t queued() const { return queue_.size(); }

private:
	Entry wait_for(const void *ctx, const std::string &what, int want, const Loc &at);
	Entry read_error();

	const char *name_;
	bool readfrom_;
	Fid<fid_cq> cq_{"cq"};
	std::deque<Entry> queue_;
};

/* Whether the control channel's waits read the CQs (default true). ft_rdm_rnr turns it
 * off to play a receiver that does not progress. */
extern bool ctl_progress;

/* Reads every rdm::Cq and every ft::Cq (drives FI_PROGRESS_MANUAL providers). */
void progress_all();

struct EpSpec {
	uint64_t tx_bind = 0; /* added to FI_TRANSMIT, e.g. FI_SELECTIVE_COMPLETION */
	uint64_t rx_bind = 0; /* added to FI_RECV */
	Cq *shared_tx = nullptr; /* bind these instead of opening CQs of its own */
	Cq *shared_rx = nullptr;
	std::function<void(fid_ep *)> before_enable;
};

class Endpoint {
public:
	Endpoint(const Fabric &fab, const EpSpec &spec = {});
	~Endpoint();
	Endpoint(const Endpoint &) = delete;
	Endpoint &operator=(const Endpoint &) = delete;

	fid_ep *ep() const { return ep_; }
	operator fid_ep *() const { return ep_; }
	Cq &tx() { return *tx_; }
	Cq &rx() { return *rx_; }
	std::vector<uint8_t> name() const;

private:
	std::unique_ptr<Cq> own_tx_, own_rx_;
	Cq *tx_ = nullptr, *rx_ = nullptr;
	Fid<fid_ep> ep_{"endpoint"}; /* declared last: closed before its CQs */
};

/* The control channel (ft::Oob; see the top of this file): its waits read every rdm::Cq
 * and ft::Cq unless ctl_progress is off. */
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

void post_retry(const char *what, const char *file, int line, const std::function<ssize_t()> &op);
#define RDM_POST(call) \
	::ft::rdm::post_retry(#call, __FILE__, __LINE__, [&]() -> ssize_t { return (call); })

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
