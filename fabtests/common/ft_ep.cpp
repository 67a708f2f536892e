/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* RDM endpoints with their CQs; posting with -FI_EAGAIN retry. */
#include "ft_ep.h"

namespace ft {

Endpoint::Endpoint(const Fabric &fab, const CqSpec &tx, const CqSpec &rx,
		   const std::function<void(fid_ep *)> &before_enable)
	: Endpoint(fab, EpSpec{tx, rx, nullptr, nullptr, before_enable})
{
}

Endpoint::Endpoint(const Fabric &fab, const EpSpec &spec)
{
	if (spec.shared_tx) {
		tx_ = spec.shared_tx;
	} else {
		own_tx_ = std::make_unique<Cq>(fab, spec.tx, "tx cq");
		tx_ = own_tx_.get();
	}
	if (spec.shared_rx) {
		rx_ = spec.shared_rx;
	} else {
		own_rx_ = std::make_unique<Cq>(fab, spec.rx, "rx cq");
		rx_ = own_rx_.get();
	}
	FT_CALL(fi_endpoint(fab.domain(), fab.info(), ep_.out(), nullptr));
	FT_CALL(fi_ep_bind(ep_, &fab.av()->fid, 0));
	FT_CALL(fi_ep_bind(ep_, &tx_->get()->fid, FI_TRANSMIT | spec.tx.bind_flags));
	FT_CALL(fi_ep_bind(ep_, &rx_->get()->fid, FI_RECV | spec.rx.bind_flags));
	if (spec.before_enable)
		spec.before_enable(ep_);
	FT_CALL(fi_enable(ep_));
}

Endpoint::~Endpoint()
{
	ep_.close();
}

std::vector<uint8_t> Endpoint::name() const
{
	uint8_t none[1];
	size_t len = 0;
	int rc = fi_getname(&ep_->fid, none, &len);
	FT_CHECK(rc == -FI_ETOOSMALL && len > 0,
		 "fi_getname(len 0) returned %d (%s) with len %zu, expected -FI_ETOOSMALL", rc,
		 fi_strerror(-rc), len);
	std::vector<uint8_t> name(len);
	FT_CALL(fi_getname(&ep_->fid, name.data(), &len));
	FT_CHECK(len == name.size(), "fi_getname wrote %zu bytes after asking for %zu", len,
		 name.size());
	return name;
}

void post_retry(const char *what, const char *file, int line,
		const std::function<ssize_t()> &op)
{
	Deadline deadline;
	for (;;) {
		ssize_t rc = op();
		if (rc == 0)
			return;
		if (rc != -FI_EAGAIN)
			fail_at(file, line, "%s returned %zd (%s)", what, rc,
				fi_strerror(int(-rc)));
		if (deadline.expired())
			fail_at(file, line, "%s still returns -FI_EAGAIN after %d s", what,
				opts.timeout_s);
		progress_all();
	}
}

void await_pattern_at(const char *file, int line, const void *buf, size_t len, uint32_t seed,
		      size_t first_index, const char *what)
{
	Deadline deadline;
	while (!has_pattern(buf, len, seed, first_index) && !deadline.expired())
		progress_all();
	expect_pattern_at(file, line, buf, len, seed, first_index, what);
}

} // namespace ft
