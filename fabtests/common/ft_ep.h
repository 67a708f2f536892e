/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * An RDM endpoint with its transmit and receive CQs (its own, or CQs shared with other
 * endpoints), bound to the fabric's AV. A hook runs between binding and fi_enable, for
 * what must happen there (binding counters, fi_setopt). Operations are posted through FT_POST, which retries -FI_EAGAIN (queue
 * full: the provider needs progress) within the wait bound and fails on anything else.
 */
#pragma once

#include "ft_cq.h"

#include <functional>
#include <memory>
#include <vector>

namespace ft {

struct EpSpec {
	CqSpec tx, rx;		  /* the CQs it opens; bind_flags also apply to shared ones */
	Cq *shared_tx = nullptr;  /* bound instead of a CQ of its own */
	Cq *shared_rx = nullptr;
	std::function<void(fid_ep *)> before_enable;
};

class Endpoint {
public:
	Endpoint(const Fabric &fab, const CqSpec &tx = {}, const CqSpec &rx = {},
		 const std::function<void(fid_ep *)> &before_enable = {});
	Endpoint(const Fabric &fab, const EpSpec &spec);
	~Endpoint();
	Endpoint(const Endpoint &) = delete;
	Endpoint &operator=(const Endpoint &) = delete;

	fid_ep *ep() const { return ep_; }
	operator fid_ep *() const { return ep_; }
	Cq &tx() { return *tx_; }
	Cq &rx() { return *rx_; }

	/* fi_getname, with a buffer of the size the provider asks for. */
	std::vector<uint8_t> name() const;

private:
	std::unique_ptr<Cq> own_tx_, own_rx_;
	Cq *tx_ = nullptr, *rx_ = nullptr;
	Fid<fid_ep> ep_{"endpoint"}; /* declared last: closed before its CQs */
};

void post_retry(const char *what, const char *file, int line,
		const std::function<ssize_t()> &op);

/*
 * Waits, progressing, until buf holds the pattern (an RMA write's data is visible at the
 * target some time after the initiator's transmit completion), then checks it.
 */
void await_pattern_at(const char *file, int line, const void *buf, size_t len, uint32_t seed,
		      size_t first_index, const char *what);
#define FT_AWAIT_PATTERN(buf, len, seed, first, what) \
	::ft::await_pattern_at(__FILE__, __LINE__, (buf), (len), (seed), (first), (what))

/* Posts one operation: FT_POST(fi_send(ep, ...)). */
#define FT_POST(call) \
	::ft::post_retry(#call, __FILE__, __LINE__, [&]() -> ssize_t { return (call); })

} // namespace ft
