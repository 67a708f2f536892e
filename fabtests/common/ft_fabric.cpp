/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* fi_getinfo with the tests' hints; the fabric, domain and AV. */
#include "ft_fabric.h"
#include "ft_channel.h"

#include <cstdlib>
#include <cstring>

namespace ft {

namespace {

InfoPtr make_hints(uint64_t caps)
{
	InfoPtr hints(fi_allocinfo());
	if (!hints)
		FT_FAIL("fi_allocinfo failed");
	hints->caps = caps;
	hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
	hints->ep_attr->type = opts.ep_type;
	if (opts.ep_type == FI_EP_DGRAM)
		hints->mode |= FI_MSG_PREFIX; /* the test leaves msg_prefix_size bytes in front */
	hints->domain_attr->mr_mode =
		FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	/* threading and progress stay unspecified: the provider chooses. */
	if (!opts.prov.empty())
		hints->fabric_attr->prov_name = strdup(opts.prov.c_str());
	if (!opts.fabric.empty())
		hints->fabric_attr->name = strdup(opts.fabric.c_str());
	if (!opts.domain.empty())
		hints->domain_attr->name = strdup(opts.domain.c_str());
	return hints;
}

/* The infos for `caps`, or nullptr when the provider has none (any other error fails). */
InfoPtr getinfo(uint64_t caps)
{
	InfoPtr hints = make_hints(caps);
	fi_info *info = nullptr;
	int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0,
			    hints.get(), &info);
	if (rc == -FI_ENODATA)
		return nullptr;
	if (rc)
		FT_FAIL("fi_getinfo(caps %s) returned %d (%s)", caps_str(caps).c_str(), rc,
			fi_strerror(-rc));
	InfoPtr list(info);
	/* Some providers (tcp;ofi_rxm in 1.17) ignore the fabric and domain name hints. */
	for (fi_info *i = info; i; i = i->next) {
		if (!opts.fabric.empty() &&
		    (!i->fabric_attr->name || opts.fabric != i->fabric_attr->name))
			continue;
		if (!opts.domain.empty() &&
		    (!i->domain_attr->name || opts.domain != i->domain_attr->name))
			continue;
		InfoPtr one(fi_dupinfo(i));
		if (!one)
			FT_FAIL("fi_dupinfo failed");
		return one;
	}
	return nullptr;
}

std::string selection()
{
	return "provider '" + (opts.prov.empty() ? std::string("any") : opts.prov) + "', fabric '" +
	       (opts.fabric.empty() ? std::string("any") : opts.fabric) + "', domain '" +
	       (opts.domain.empty() ? std::string("any") : opts.domain) + "'";
}

} // namespace

Fabric::Fabric(uint64_t caps, uint64_t optional)
{
	uint64_t want = caps;
	if (!getinfo(want)) {
		/* Is it the caps, or is there no such provider at all? */
		if (getinfo(0))
			skip("%s does not advertise %s with %s", selection().c_str(),
			     caps_str(caps).c_str(), fi_tostr(&opts.ep_type, FI_TYPE_EP_TYPE));
		FT_FAIL("fi_getinfo found no %s endpoint for %s with the tests' modes "
			"(FI_CONTEXT2, mr_mode LOCAL|ALLOCATED|PROV_KEY|VIRT_ADDR)",
			fi_tostr(&opts.ep_type, FI_TYPE_EP_TYPE), selection().c_str());
	}
	for (uint64_t bit = 1; bit; bit <<= 1)
		if ((optional & bit) && getinfo(want | bit))
			want |= bit;
	info_ = getinfo(want);
	if (!info_)
		FT_FAIL("fi_getinfo(caps %s) succeeded, then found nothing",
			caps_str(want).c_str());
	if (optional & ~want)
		note("provider does not advertise %s: the checks that need it are skipped",
		     caps_str(optional & ~want).c_str());

	fi_info *i = info_.get();
	debug("using provider %s, fabric %s, domain %s, caps %s, mode 0x%llx, mr_mode 0x%x, "
	      "inject %zu, max_msg %zu, cq_data %zu, iov %zu/%zu",
	      i->fabric_attr->prov_name, i->fabric_attr->name, i->domain_attr->name,
	      caps_str(i->caps).c_str(), (unsigned long long)i->mode, i->domain_attr->mr_mode,
	      i->tx_attr->inject_size, i->ep_attr->max_msg_size, i->domain_attr->cq_data_size,
	      i->tx_attr->iov_limit, i->rx_attr->iov_limit);
	if (!has(caps))
		FT_FAIL("fi_getinfo returned caps %s, lacking the requested %s",
			caps_str(i->caps).c_str(), caps_str(caps).c_str());
	if (i->domain_attr->mr_mode & FI_MR_ENDPOINT)
		FT_FAIL("mr_mode has FI_MR_ENDPOINT, which the hints did not offer");

	FT_CALL(fi_fabric(i->fabric_attr, fabric_.out(), nullptr));
	FT_CALL(fi_domain(fabric_, i, domain_.out(), nullptr));

	fi_av_attr av_attr{};
	av_attr.type = opts.av_type;
	av_attr.count = 16;
	FT_CALL(fi_av_open(domain_, &av_attr, av_.out(), nullptr));
}

bool Fabric::is_upstream_efa() const
{
	const char *u = getenv("EFA_FT_UPSTREAM");
	return !strcmp(prov_name(), "efa") && u && !strcmp(u, "1");
}

bool Fabric::is_efa() const
{
	return !strcmp(prov_name(), "efa") && !is_upstream_efa();
}

bool known_broken(const Fabric &fab, const char *check)
{
	/* provider (as prov_label() names it), check, what was seen */
	static const struct {
		const char *prov, *check, *seen;
	} table[] = {
		/* libfabric 1.17 */
		{"tcp;ofi_rxm", "a second truncated message",
		 "after a truncated receive the connection is torn down: the next sends complete "
		 "with FI_ENOTCONN and their receives never complete; a 10000 B message into a "
		 "4 KiB receive may not complete at all"},
		{"tcp;ofi_rxm", "FI_PEEK|FI_DISCARD of a 1 MiB message",
		 "the peek completes, but the sender's send never does (rendezvous not answered)"},
		/* upstream's efa provider 2.6 on the software device (contrib/libfabric2.sh) */
		{"efa (upstream)", "FI_PEEK|FI_DISCARD of a 1 MiB message",
		 "the peek completes, but the sender's send never completes"},
		{"efa (upstream)", "FI_ATOMIC_READ with no source buffer",
		 "fi_fetch_atomic(FI_ATOMIC_READ) with buf NULL, which fi_atomic(3) allows, crashes "
		 "(efa_rdm_pke_init_rta_common copies from it)"},
		{"efa (upstream)", "a truncated 1 MiB message",
		 "the receive completes with FI_ETRUNC, but the sender's send never completes"},
		{"efa (upstream)", "fi_cntr_wait that has to wait",
		 "it deadlocks: efa_cntr_wait holds the domain's srx_lock while ofi_wait polls the "
		 "counter through efa_cntr_read, which takes the same lock"},
		{"efa (upstream)", "fi_inject_write up to inject_size",
		 "efa-direct's fi_inject_write and fi_inject_writedata take 0 bytes only (-FI_ENOSYS "
		 "above), although tx_attr->inject_size is larger"},
	};
	for (auto &t : table) {
		/* A pair on two providers skips what either side's provider is known to break:
		 * both sides take the same steps. */
		const bool peer = fab.peer_upstream_efa() && !strcmp(t.prov, "efa (upstream)");
		if ((peer || !strcmp(fab.prov_label(), t.prov)) && !strcmp(check, t.check)) {
			note("KNOWN DEVIATION (%s): %s not run (%s)", t.prov, check, t.seen);
			return true;
		}
	}
	return false;
}

void Fabric::agree(Oob &ctl)
{
	const uint64_t own[4] = {inject_size(), cq_data_size(), is_upstream_efa(), is_efa()};
	ctl.send(own, sizeof own);
	uint64_t theirs[4];
	ctl.recv(theirs, sizeof theirs);
	inject_cap_ = size_t(std::min(own[0], theirs[0]));
	cq_data_cap_ = size_t(std::min(own[1], theirs[1]));
	peer_upstream_ = theirs[2] != 0;
	peer_ours_ = theirs[3] != 0;
}

uint64_t Fabric::cq_data(uint64_t v) const
{
	size_t n = cq_data_size();
	return n >= 8 ? v : v & ((uint64_t(1) << (8 * n)) - 1);
}

uint64_t Fabric::local_access() const
{
	uint64_t a = 0;
	if (info_->caps & FI_MSG)
		a |= FI_SEND | FI_RECV;
	if (info_->caps & FI_RMA)
		a |= FI_READ | FI_WRITE;
	return a;
}

fi_addr_t Fabric::insert(const std::vector<uint8_t> &name) const
{
	fi_addr_t addr = FI_ADDR_NOTAVAIL;
	int n = int(FT_CALL(fi_av_insert(av_, name.data(), 1, &addr, 0, nullptr)));
	FT_CHECK(n == 1, "fi_av_insert inserted %d addresses, expected 1", n);
	FT_CHECK(addr != FI_ADDR_NOTAVAIL, "fi_av_insert gave FI_ADDR_NOTAVAIL");
	return addr;
}

void Fabric::remove(fi_addr_t addr) const
{
	FT_CALL(fi_av_remove(av_, &addr, 1, 0));
}

} // namespace ft
