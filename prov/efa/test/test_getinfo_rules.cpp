/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fi_getinfo against libfabric's own rules, not against our table: the public
 * fi_getinfo (libfabric loads the provider from the build tree, on the software device)
 * is called with walks of hints (every combination of the mr_mode bits, of the primary
 * capabilities, of tx_attr/rx_attr capabilities, at API versions whose mr_mode rules
 * differ, on every device profile), and every info returned is checked against
 * fi_getinfo(3) "CAPABILITIES" and "MODE", fi_endpoint(3) "caps" of the transmit and
 * receive attributes, and fi_mr(3) / fi_domain(3) "mr_mode". Whether a combination is
 * refused or granted is the provider's choice; what is returned must follow the rules.
 * A few combinations must be granted (so that refusing everything cannot pass).
 *
 * The traffic classes are here too: which ones fi_getinfo grants, that fi_domain and
 * fi_endpoint refuse a class the provider does not serve, and that the endpoint's class
 * overrides the domain's (seen on the device as the QP's service level).
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <infiniband/verbs.h>
#include <dlfcn.h>

#include "loaded_sim.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

/* ------------------------------------------------------------------ the rules */

/* fi_getinfo(3): primary capabilities, primary modifiers. */
constexpr uint64_t kPrimary = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | FI_NAMED_RX_CTX | FI_HMEM |
			      FI_COLLECTIVE | FI_DIRECTED_RECV | FI_VARIABLE_MSG;
constexpr uint64_t kMsgMods = FI_SEND | FI_RECV;
constexpr uint64_t kRmaMods = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
/* fi_endpoint(3): the capabilities that apply to the transmit and to the receive
 * attributes (FI_XPU is absent from 1.17's headers). */
constexpr uint64_t kTxApplicable = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_HMEM |
				   FI_TRIGGER | FI_FENCE | FI_MULTICAST | FI_RMA_PMEM | FI_NAMED_RX_CTX |
				   FI_COLLECTIVE;
constexpr uint64_t kRxApplicable = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE |
				   FI_RECV | FI_HMEM | FI_TRIGGER | FI_RMA_PMEM | FI_DIRECTED_RECV | FI_VARIABLE_MSG |
				   FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR | FI_COLLECTIVE;
constexpr int kMrBits[] = {FI_MR_LOCAL,	    FI_MR_RAW,	     FI_MR_VIRT_ADDR,  FI_MR_ALLOCATED,
			   FI_MR_PROV_KEY,  FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT, FI_MR_ENDPOINT};
constexpr uint64_t kPrimaryList[] = {FI_MSG,	     FI_RMA,	    FI_TAGGED,	      FI_ATOMIC,	FI_MULTICAST,
				     FI_NAMED_RX_CTX, FI_HMEM,	    FI_COLLECTIVE,    FI_DIRECTED_RECV, FI_VARIABLE_MSG};
#ifdef FI_BUFFERED_RECV /* 1.x; libfabric 2.x removed it and made NOTIFY_FLAGS_ONLY / RESTRICTED_COMP 0 */
constexpr uint64_t kAllModes = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX | FI_ASYNC_IOV | FI_RX_CQ_DATA | FI_LOCAL_MR |
			       FI_NOTIFY_FLAGS_ONLY | FI_RESTRICTED_COMP | FI_BUFFERED_RECV;
#else
constexpr uint64_t kAllModes = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX | FI_ASYNC_IOV | FI_RX_CQ_DATA | FI_LOCAL_MR;
#endif
constexpr const char *kFabrics[] = {"efa", "efa-direct"};

void setup_env()
{
	setenv("FI_PROVIDER_PATH", EFA_TEST_PROV_DIR, 1);
	setenv("FI_PROVIDER", "efa", 1);
	setenv("FI_EFA_SIM", "1", 1);
	setenv("FI_EFA_SIM_PATH", EFA_TEST_SIM_PATH, 1);
}

/* The violations of one walk; the first few are printed, the count is asserted. */
struct Report {
	size_t checked = 0;   /* infos checked */
	size_t violations = 0;
	size_t granted[2] = {}; /* per fabric of kFabrics */

	void fail(const std::string &hints, const fi_info *i, const char *fmt, ...) __attribute__((format(printf, 4, 5)))
	{
		if (violations++ >= 25)
			return;
		char buf[512];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(buf, sizeof buf, fmt, ap);
		va_end(ap);
		cr_log_error("%s -> %s: %s", hints.c_str(), i->fabric_attr->name, buf);
	}
};

std::string describe(uint32_t version, const fi_info *h)
{
	char buf[512];
	if (!h) {
		snprintf(buf, sizeof buf, "API %u.%u, no hints", FI_MAJOR(version), FI_MINOR(version));
		return buf;
	}
	snprintf(buf, sizeof buf, "API %u.%u, fabric %s, caps %#lx, mode %#lx, mr_mode %#x, tx caps %#lx, rx caps %#lx",
		 FI_MAJOR(version), FI_MINOR(version),
		 h->fabric_attr && h->fabric_attr->name ? h->fabric_attr->name : "any", (unsigned long)h->caps,
		 (unsigned long)h->mode, h->domain_attr ? h->domain_attr->mr_mode : 0,
		 (unsigned long)(h->tx_attr ? h->tx_attr->caps : 0), (unsigned long)(h->rx_attr ? h->rx_attr->caps : 0));
	return buf;
}

/* Dependencies between capability bits stated in fi_getinfo(3). */
void check_dependencies(Report &r, const std::string &hs, const fi_info *i, const char *what, uint64_t c)
{
	if ((c & kRmaMods) && !(c & (FI_RMA | FI_ATOMIC)))
		r.fail(hs, i, "%s %#lx: FI_READ/WRITE/REMOTE_READ/REMOTE_WRITE without FI_RMA or FI_ATOMIC", what,
		       (unsigned long)c);
	if ((c & FI_VARIABLE_MSG) && !(c & (FI_MSG | FI_TAGGED)))
		r.fail(hs, i, "%s %#lx: FI_VARIABLE_MSG without FI_MSG or FI_TAGGED", what, (unsigned long)c);
	if ((c & FI_MULTICAST) && !(c & FI_MSG))
		r.fail(hs, i, "%s %#lx: FI_MULTICAST without FI_MSG", what, (unsigned long)c);
	if ((c & FI_SOURCE_ERR) && !(c & FI_SOURCE))
		r.fail(hs, i, "%s %#lx: FI_SOURCE_ERR without FI_SOURCE", what, (unsigned long)c);
	if ((c & FI_RMA_EVENT) && !(c & (FI_REMOTE_READ | FI_REMOTE_WRITE)))
		r.fail(hs, i, "%s %#lx: FI_RMA_EVENT without FI_REMOTE_READ or FI_REMOTE_WRITE", what, (unsigned long)c);
}

/* What was asked for a group of primary caps and its modifiers: with no modifier of the
 * group, all are assumed; with some, only those. */
void check_modifiers(Report &r, const std::string &hs, const fi_info *i, const char *what, uint64_t asked,
		     uint64_t got, uint64_t group, uint64_t mods)
{
	if (!(asked & group))
		return;
	const uint64_t asked_mods = asked & mods;
	if (!asked_mods && (got & mods) != mods)
		r.fail(hs, i, "%s %#lx: %#lx asked without modifiers, so all of %#lx are implied", what,
		       (unsigned long)got, (unsigned long)(asked & group), (unsigned long)mods);
	if (asked_mods && (got & mods & ~asked_mods))
		r.fail(hs, i, "%s %#lx: modifiers %#lx beyond the %#lx asked", what, (unsigned long)got,
		       (unsigned long)(got & mods & ~asked_mods), (unsigned long)asked_mods);
}

void check_caps(Report &r, const std::string &hs, const fi_info *h, const fi_info *i)
{
	const fi_tx_attr *tx = i->tx_attr;
	const fi_rx_attr *rx = i->rx_attr;
	/* fi_endpoint(3): the attributes' caps are a subset of the endpoint's, and only
	 * those that apply to the direction. */
	if (tx->caps & ~i->caps)
		r.fail(hs, i, "tx_attr->caps %#lx not a subset of caps %#lx", (unsigned long)tx->caps,
		       (unsigned long)i->caps);
	if (rx->caps & ~i->caps)
		r.fail(hs, i, "rx_attr->caps %#lx not a subset of caps %#lx", (unsigned long)rx->caps,
		       (unsigned long)i->caps);
	if (tx->caps & ~kTxApplicable)
		r.fail(hs, i, "tx_attr->caps has %#lx, which does not apply to transmit attributes",
		       (unsigned long)(tx->caps & ~kTxApplicable));
	if (rx->caps & ~kRxApplicable)
		r.fail(hs, i, "rx_attr->caps has %#lx, which does not apply to receive attributes",
		       (unsigned long)(rx->caps & ~kRxApplicable));
	check_dependencies(r, hs, i, "caps", i->caps);
	check_dependencies(r, hs, i, "tx_attr->caps", tx->caps);
	if (!h || !h->caps)
		return; /* the provider returns what it supports */
	/* Primary capabilities only when asked; everything asked is granted. */
	if (i->caps & kPrimary & ~h->caps)
		r.fail(hs, i, "caps %#lx carry primary caps %#lx that were not asked for", (unsigned long)i->caps,
		       (unsigned long)(i->caps & kPrimary & ~h->caps));
	if (h->caps & ~i->caps)
		r.fail(hs, i, "caps %#lx lack the requested %#lx", (unsigned long)i->caps,
		       (unsigned long)(h->caps & ~i->caps));
	check_modifiers(r, hs, i, "caps", h->caps, i->caps, FI_MSG | FI_TAGGED, kMsgMods);
	check_modifiers(r, hs, i, "caps", h->caps, i->caps, FI_RMA | FI_ATOMIC, kRmaMods);
	const uint64_t htx = h->tx_attr ? h->tx_attr->caps : 0, hrx = h->rx_attr ? h->rx_attr->caps : 0;
	if (htx && (tx->caps & kPrimary & ~htx))
		r.fail(hs, i, "tx_attr->caps %#lx carry primary caps not in the requested tx_attr->caps",
		       (unsigned long)tx->caps);
	if (hrx && (rx->caps & kPrimary & ~hrx))
		r.fail(hs, i, "rx_attr->caps %#lx carry primary caps not in the requested rx_attr->caps",
		       (unsigned long)rx->caps);
	if (htx & ~tx->caps)
		r.fail(hs, i, "tx_attr->caps %#lx lack the requested %#lx", (unsigned long)tx->caps,
		       (unsigned long)(htx & ~tx->caps));
	if (hrx & ~rx->caps)
		r.fail(hs, i, "rx_attr->caps %#lx lack the requested %#lx", (unsigned long)rx->caps,
		       (unsigned long)(hrx & ~rx->caps));
}

void check_modes(Report &r, const std::string &hs, const fi_info *h, const fi_info *i)
{
	if (!h)
		return;
	/* fi_getinfo(3) MODE: the application sets the modes it supports; the provider
	 * may only leave those set. */
	if (i->mode & ~h->mode)
		r.fail(hs, i, "mode %#lx has %#lx, which the application did not offer", (unsigned long)i->mode,
		       (unsigned long)(i->mode & ~h->mode));
	const uint64_t htx = h->tx_attr && h->tx_attr->mode ? h->tx_attr->mode : h->mode;
	const uint64_t hrx = h->rx_attr && h->rx_attr->mode ? h->rx_attr->mode : h->mode;
	if (i->tx_attr->mode & ~htx)
		r.fail(hs, i, "tx_attr->mode %#lx not offered", (unsigned long)i->tx_attr->mode);
	if (i->rx_attr->mode & ~hrx)
		r.fail(hs, i, "rx_attr->mode %#lx not offered", (unsigned long)i->rx_attr->mode);
}

void check_mr_mode(Report &r, const std::string &hs, uint32_t version, const fi_info *h, const fi_info *i)
{
	const int got = i->domain_attr->mr_mode;
	const int asked = h && h->domain_attr ? h->domain_attr->mr_mode : 0;
	if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
		/* fi_mr(3) compatibility: FI_MR_BASIC or FI_MR_SCALABLE, local registration as
		 * the FI_LOCAL_MR mode bit. */
		if (got != FI_MR_BASIC && got != FI_MR_SCALABLE)
			r.fail(hs, i, "mr_mode %#x at API < 1.5: only FI_MR_BASIC or FI_MR_SCALABLE", got);
		if ((asked == FI_MR_BASIC || asked == FI_MR_SCALABLE) && got != asked)
			r.fail(hs, i, "mr_mode %#x: the application asked %#x", got, asked);
		return;
	}
	if (h && asked == FI_MR_BASIC) {
		/* fi_mr(3): "if FI_MR_BASIC is set on input to fi_getinfo(), it will not be
		 * cleared by the provider". */
		if (got != FI_MR_BASIC)
			r.fail(hs, i, "mr_mode %#x: FI_MR_BASIC asked, FI_MR_BASIC must come back", got);
		return;
	}
	if (got & (FI_MR_BASIC | FI_MR_SCALABLE))
		r.fail(hs, i, "mr_mode %#x: FI_MR_BASIC/SCALABLE at API >= 1.5 when not asked alone", got);
	if (h && (got & ~asked))
		r.fail(hs, i, "mr_mode %#x requires %#x, which the application did not offer (%#x)", got, got & ~asked,
		       asked);
	/* fi_getinfo(3): FI_LOCAL_MR is ignored at 1.5 and later unless mr_mode is
	 * FI_MR_BASIC or FI_MR_SCALABLE, so it cannot carry a requirement. */
	if (i->mode & FI_LOCAL_MR)
		r.fail(hs, i, "mode FI_LOCAL_MR with mr_mode %#x at API >= 1.5 (use FI_MR_LOCAL)", got);
}

void check_info(Report &r, uint32_t version, const fi_info *h, const fi_info *i)
{
	const std::string hs = describe(version, h);
	r.checked++;
	for (size_t f = 0; f < 2; f++)
		if (!strcmp(i->fabric_attr->name, kFabrics[f]))
			r.granted[f]++;
	if (h && h->fabric_attr && h->fabric_attr->name && strcmp(h->fabric_attr->name, i->fabric_attr->name))
		r.fail(hs, i, "fabric %s asked", h->fabric_attr->name);
	if (h && h->ep_attr && h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != i->ep_attr->type)
		r.fail(hs, i, "ep type %d asked, %d returned", int(h->ep_attr->type), int(i->ep_attr->type));
	check_caps(r, hs, h, i);
	check_modes(r, hs, h, i);
	check_mr_mode(r, hs, version, h, i);
}

/* One fi_getinfo call; every info returned is checked. Returns fi_getinfo's result. */
int walk_one(Report &r, uint32_t version, const fi_info *h)
{
	fi_info *out = nullptr;
	const int ret = fi_getinfo(version, nullptr, nullptr, 0, h, &out);
	if (ret && ret != -FI_ENODATA) {
		r.violations++;
		cr_log_error("%s: fi_getinfo %d (%s): only 0 or -FI_ENODATA", describe(version, h).c_str(), ret,
			     fi_strerror(-ret));
	}
	for (const fi_info *i = out; i; i = i->next)
		check_info(r, version, h, i);
	fi_freeinfo(out);
	return ret;
}

fi_info *hints(const char *fabric, uint64_t caps, uint64_t mode, int mr_mode)
{
	fi_info *h = fi_allocinfo();
	cr_assert_not_null(h);
	h->caps = caps;
	h->mode = mode;
	h->domain_attr->mr_mode = mr_mode;
	if (fabric)
		h->fabric_attr->name = strdup(fabric);
	return h;
}

void assert_clean(const Report &r, const char *walk)
{
	cr_log_info("%s: %zu infos checked, %zu violations (granted: efa %zu, efa-direct %zu)", walk, r.checked,
		    r.violations, r.granted[0], r.granted[1]);
	cr_assert_eq(r.violations, 0u, "%s: %zu violations of fi_getinfo's rules in %zu infos (see the log)", walk,
		     r.violations, r.checked);
}

const uint64_t kModes[] = {0, FI_CONTEXT | FI_CONTEXT2, FI_CONTEXT2 | FI_LOCAL_MR, kAllModes};
constexpr int kDirectMr = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

/* Every combination of the 8 mr_mode bits, with capabilities that need and do not need
 * registration, each mode set, both fabrics, API 1.5 and 1.17. */
void walk_mr_bits(Report &r)
{
	const uint64_t caps_list[] = {0, FI_MSG, FI_RMA, FI_MSG | FI_RMA, FI_TAGGED | FI_ATOMIC};
	for (uint32_t version : {FI_VERSION(1, 5), FI_VERSION(1, 17)})
		for (const char *fabric : kFabrics)
			for (uint64_t caps : caps_list)
				for (uint64_t mode : kModes)
					for (int m = 0; m < 256; m++) {
						int mr = 0;
						for (int b = 0; b < 8; b++)
							if (m & (1 << b))
								mr |= kMrBits[b];
						fi_info *h = hints(fabric, caps, mode, mr);
						walk_one(r, version, h);
						fi_freeinfo(h);
					}
}

/* The deprecated forms: FI_MR_UNSPEC/BASIC/SCALABLE before 1.5 (with the FI_LOCAL_MR mode
 * bit), and FI_MR_BASIC/SCALABLE alone or with bits after. */
void walk_mr_legacy(Report &r)
{
	const int mrs[] = {FI_MR_UNSPEC, FI_MR_BASIC, FI_MR_SCALABLE, FI_MR_BASIC | FI_MR_LOCAL,
			   FI_MR_BASIC | kDirectMr, FI_MR_SCALABLE | FI_MR_LOCAL};
	const uint64_t caps_list[] = {0, FI_MSG, FI_RMA, FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC};
	for (uint32_t version : {FI_VERSION(1, 0), FI_VERSION(1, 4), FI_VERSION(1, 5), FI_VERSION(1, 17)})
		for (const char *fabric : kFabrics)
			for (uint64_t caps : caps_list)
				for (uint64_t mode : kModes)
					for (int mr : mrs) {
						fi_info *h = hints(fabric, caps, mode, mr);
						walk_one(r, version, h);
						fi_freeinfo(h);
					}
	for (uint32_t version : {FI_VERSION(1, 0), FI_VERSION(1, 4), FI_VERSION(1, 5), FI_VERSION(1, 17)})
		walk_one(r, version, nullptr);
}

/* Every combination of the 10 primary capabilities, alone and with one modifier of each
 * family, on both fabrics. */
void walk_primary_caps(Report &r)
{
	const uint64_t extra[] = {0, FI_SEND, FI_READ | FI_REMOTE_WRITE, FI_SOURCE | FI_MULTI_RECV};
	const int mrs[] = {0, kDirectMr};
	for (const char *fabric : kFabrics)
		for (uint64_t x : extra)
			for (int mr : mrs)
				for (uint64_t mode : {uint64_t(FI_CONTEXT | FI_CONTEXT2), kAllModes})
					for (int m = 0; m < 1024; m++) {
						uint64_t caps = x;
						for (int b = 0; b < 10; b++)
							if (m & (1 << b))
								caps |= kPrimaryList[b];
						if (!(caps & kPrimary) && caps)
							continue; /* modifiers need a primary capability */
						fi_info *h = hints(fabric, caps, mode, mr);
						walk_one(r, FI_VERSION(1, 17), h);
						fi_freeinfo(h);
					}
}

/* tx_attr and rx_attr capabilities asked on their own (every combination of the bits
 * that apply to each), with the endpoint's caps unset, narrow, or wide. */
void walk_attr_caps(Report &r)
{
	const uint64_t tx_bits[] = {FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC, FI_SEND, FI_READ, FI_WRITE};
	const uint64_t rx_bits[] = {FI_MSG,	    FI_RMA,	     FI_TAGGED,	       FI_ATOMIC,    FI_RECV,
				    FI_REMOTE_READ, FI_REMOTE_WRITE, FI_DIRECTED_RECV, FI_MULTI_RECV, FI_SOURCE};
	const uint64_t ep_caps[] = {0, FI_MSG, FI_MSG | FI_RMA, FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC};
	for (const char *fabric : kFabrics)
		for (uint64_t caps : ep_caps) {
			for (int m = 1; m < 128; m++) {
				uint64_t c = 0;
				for (int b = 0; b < 7; b++)
					if (m & (1 << b))
						c |= tx_bits[b];
				fi_info *h = hints(fabric, caps, kAllModes, kDirectMr);
				h->tx_attr->caps = c;
				walk_one(r, FI_VERSION(1, 17), h);
				fi_freeinfo(h);
			}
			for (int m = 1; m < 1024; m++) {
				uint64_t c = 0;
				for (int b = 0; b < 10; b++)
					if (m & (1 << b))
						c |= rx_bits[b];
				fi_info *h = hints(fabric, caps, kAllModes, kDirectMr);
				h->rx_attr->caps = c;
				walk_one(r, FI_VERSION(1, 17), h);
				fi_freeinfo(h);
			}
		}
}

/* Combinations that must be granted, so that a provider refusing everything fails. */
void assert_granted(const char *fabric, uint32_t version, uint64_t caps, uint64_t mode, int mr, int want_mr,
		    uint64_t want_mode_bit = 0)
{
	fi_info *h = hints(fabric, caps, mode, mr);
	fi_info *out = nullptr;
	const int ret = fi_getinfo(version, nullptr, nullptr, 0, h, &out);
	const std::string hs = describe(version, h);
	fi_freeinfo(h);
	cr_assert_eq(ret, 0, "%s: fi_getinfo %d (%s), must be granted", hs.c_str(), ret, fi_strerror(-ret));
	cr_assert_str_eq(out->fabric_attr->name, fabric);
	cr_assert_eq(out->domain_attr->mr_mode, want_mr, "%s: mr_mode %#x, want %#x", hs.c_str(),
		     out->domain_attr->mr_mode, want_mr);
	cr_assert_eq(out->caps & caps, caps, "%s: caps %#lx", hs.c_str(), (unsigned long)out->caps);
	if (want_mode_bit)
		cr_assert(out->mode & want_mode_bit, "%s: mode %#lx", hs.c_str(), (unsigned long)out->mode);
	fi_freeinfo(out);
}

/* Criterion copies parameters into a re-executed worker: names by value, not pointers. */
struct Profile {
	char name[32];
};
Profile kProfiles[] = {{"default"}, {"no-unsolicited"}, {"inline32"}, {"no-rdma-write"}, {"no-rdma"}};

} // namespace

TestSuite(getinfo_rules, .init = setup_env, .timeout = 300);

Test(getinfo_rules, mr_mode_bits_are_never_required_beyond_the_offer)
{
	Report r;
	walk_mr_bits(r);
	assert_clean(r, "mr_mode bits");
	cr_assert_gt(r.granted[0], 0u);
	cr_assert_gt(r.granted[1], 0u);
}

Test(getinfo_rules, legacy_mr_modes_and_api_versions)
{
	Report r;
	walk_mr_legacy(r);
	assert_clean(r, "legacy mr_mode");
}

Test(getinfo_rules, primary_caps_only_when_asked)
{
	Report r;
	walk_primary_caps(r);
	assert_clean(r, "primary caps");
	cr_assert_gt(r.granted[0], 0u);
	cr_assert_gt(r.granted[1], 0u);
}

Test(getinfo_rules, tx_and_rx_attr_caps)
{
	Report r;
	walk_attr_caps(r);
	assert_clean(r, "tx/rx attr caps");
	cr_assert_gt(r.granted[0], 0u);
	cr_assert_gt(r.granted[1], 0u);
}

Test(getinfo_rules, no_hints_are_consistent)
{
	Report r;
	for (uint32_t version : {FI_VERSION(1, 0), FI_VERSION(1, 4), FI_VERSION(1, 5), FI_VERSION(1, 17)})
		cr_assert_eq(walk_one(r, version, nullptr), 0);
	assert_clean(r, "no hints");
	/* The efa fabric: one RDM and one DGRAM info per call. */
	cr_assert_eq(r.granted[0], 8u, "two efa infos (RDM, DGRAM) per call");
	cr_assert_eq(r.granted[1], 4u, "one efa-direct info per call");
}

Test(getinfo_rules, required_grants)
{
	/* Open MPI's mtl: messages with no registration mode on the efa fabric. */
	assert_granted("efa", FI_VERSION(1, 17), FI_MSG | FI_TAGGED, 0, 0, 0);
	/* FI_MR_BASIC at 1.17 stands for VIRT_ADDR | ALLOCATED | PROV_KEY and comes back as
	 * it was asked. */
	assert_granted("efa", FI_VERSION(1, 17), FI_RMA, 0, FI_MR_BASIC, FI_MR_BASIC);
	assert_granted("efa", FI_VERSION(1, 17), FI_MSG, 0, FI_MR_BASIC, FI_MR_BASIC);
	/* efa-direct also needs local registration: FI_LOCAL_MR is honoured with BASIC. */
	assert_granted("efa-direct", FI_VERSION(1, 17), FI_RMA, FI_CONTEXT2 | FI_LOCAL_MR, FI_MR_BASIC, FI_MR_BASIC,
		       FI_LOCAL_MR);
	assert_granted("efa-direct", FI_VERSION(1, 17), FI_MSG | FI_RMA, FI_CONTEXT2, kDirectMr, kDirectMr);
	/* Before 1.5: UNSPEC and BASIC give BASIC (with FI_LOCAL_MR where needed). */
	assert_granted("efa", FI_VERSION(1, 0), FI_RMA, 0, FI_MR_UNSPEC, FI_MR_BASIC);
	assert_granted("efa", FI_VERSION(1, 4), FI_RMA, 0, FI_MR_BASIC, FI_MR_BASIC);
	assert_granted("efa-direct", FI_VERSION(1, 4), FI_RMA, FI_CONTEXT2 | FI_LOCAL_MR, FI_MR_BASIC, FI_MR_BASIC,
		       FI_LOCAL_MR);
}

/* The same rules on every device generation the software device emulates (fallbacks:
 * FI_RX_CQ_DATA without unsolicited write receive, no RMA without RDMA). */
ParameterizedTestParameters(getinfo_rules, every_profile)
{
	return cr_make_param_array(Profile, kProfiles, sizeof kProfiles / sizeof kProfiles[0]);
}

ParameterizedTest(Profile *p, getinfo_rules, every_profile)
{
	const char *profile = p->name;
	setenv("EFASIM_PROFILE", profile, 1);
	Report r;
	for (uint32_t version : {FI_VERSION(1, 4), FI_VERSION(1, 17)})
		walk_one(r, version, nullptr);
	const uint64_t caps_list[] = {0, FI_MSG, FI_RMA, FI_MSG | FI_RMA, FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC};
	const int mrs[] = {0, kDirectMr, FI_MR_BASIC, FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY};
	for (const char *fabric : kFabrics)
		for (uint64_t caps : caps_list)
			for (uint64_t mode : kModes)
				for (int mr : mrs) {
					fi_info *h = hints(fabric, caps, mode, mr);
					walk_one(r, FI_VERSION(1, 17), h);
					fi_freeinfo(h);
				}
	assert_clean(r, profile);
	cr_assert_gt(r.granted[0], 0u, "%s: the efa fabric is offered", profile);
	cr_assert_gt(r.granted[1], 0u, "%s: efa-direct is offered", profile);
}

/* ------------------------------------------------------------------ traffic classes */

namespace {

struct Tc {
	uint32_t tc;
	bool served;
};
const Tc kClasses[] = {
	{FI_TC_UNSPEC, true},		 {FI_TC_BEST_EFFORT, true},	  {FI_TC_LOW_LATENCY, true},
	{FI_TC_DEDICATED_ACCESS, false}, {FI_TC_BULK_DATA, false},	  {FI_TC_SCAVENGER, false},
	{FI_TC_NETWORK_CTRL, false},	 {FI_TC_DSCP | 46, false},	  {FI_TC_LABEL | 0x40, false},
};

fi_info *tc_hints(const char *fabric)
{
	return hints(fabric, FI_MSG, FI_CONTEXT | FI_CONTEXT2, kDirectMr);
}

/* The device's count of work requests posted on QPs with a service level. */
uint64_t sl_wrs() { return loaded_sim_stats().sl_nonzero_wrs; }

/* Opens fabric, domain (domain_attr->tclass = dom_tc) and an endpoint (tx_attr->tclass =
 * ep_tc) of `fabric`, sends one message to itself and waits for both completions.
 * Returns how many work requests the device saw posted with a service level. */
uint64_t wrs_with_sl(const char *fabric, uint32_t dom_tc, uint32_t ep_tc)
{
	fi_info *h = tc_hints(fabric);
	h->ep_attr->type = FI_EP_RDM;
	fi_info *info = nullptr;
	cr_assert_eq(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
	fi_freeinfo(h);
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
	fid_ep *ep = nullptr;
	fid_cq *cq = nullptr;
	fid_av *av = nullptr;
	fid_mr *mr = nullptr;
	cr_assert_eq(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
	info->domain_attr->tclass = dom_tc;
	cr_assert_eq(fi_domain(fab, info, &dom, nullptr), 0);
	info->tx_attr->tclass = ep_tc;
	cr_assert_eq(fi_endpoint(dom, info, &ep, nullptr), 0);
	fi_cq_attr cq_attr{};
	cq_attr.format = FI_CQ_FORMAT_CONTEXT;
	cq_attr.size = 64;
	cr_assert_eq(fi_cq_open(dom, &cq_attr, &cq, nullptr), 0);
	fi_av_attr av_attr{};
	av_attr.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(dom, &av_attr, &av, nullptr), 0);
	cr_assert_eq(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(ep, &av->fid, 0), 0);
	cr_assert_eq(fi_enable(ep), 0);
	uint8_t addr[64];
	size_t len = sizeof addr;
	cr_assert_eq(fi_getname(&ep->fid, addr, &len), 0);
	fi_addr_t self = FI_ADDR_UNSPEC;
	cr_assert_eq(fi_av_insert(av, addr, 1, &self, 0, nullptr), 1);

	const uint64_t before = sl_wrs();
	char out[16] = "tclass", in[16] = {};
	cr_assert_eq(fi_mr_reg(dom, in, sizeof in, FI_RECV, 0, 1, 0, &mr, nullptr), 0);
	fi_context2 rctx{}, sctx{};
	cr_assert_eq(fi_recv(ep, in, sizeof in, fi_mr_desc(mr), FI_ADDR_UNSPEC, &rctx), 0);
	fid_mr *smr = nullptr;
	cr_assert_eq(fi_mr_reg(dom, out, sizeof out, FI_SEND, 0, 2, 0, &smr, nullptr), 0);
	ssize_t ret;
	while ((ret = fi_send(ep, out, sizeof out, fi_mr_desc(smr), self, &sctx)) == -FI_EAGAIN)
		fi_cq_read(cq, nullptr, 0);
	cr_assert_eq(ret, 0, "fi_send: %s", fi_strerror(int(-ret)));
	int done = 0;
	for (int spins = 0; done < 2 && spins < 10000000; spins++) {
		fi_cq_entry e[2];
		ssize_t n = fi_cq_read(cq, e, 2);
		if (n > 0)
			done += int(n);
		else
			cr_assert(n == -FI_EAGAIN, "fi_cq_read: %s", fi_strerror(int(-n)));
	}
	cr_assert_eq(done, 2, "the send and the receive complete");
	cr_assert_str_eq(in, "tclass");
	const uint64_t after = sl_wrs();

	cr_assert_eq(fi_close(&ep->fid), 0);
	cr_assert_eq(fi_close(&mr->fid), 0);
	cr_assert_eq(fi_close(&smr->fid), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
	cr_assert_eq(fi_close(&dom->fid), 0);
	cr_assert_eq(fi_close(&fab->fid), 0);
	fi_freeinfo(info);
	return after - before;
}

} // namespace

Test(getinfo_rules, traffic_classes_offered)
{
	for (const char *fabric : kFabrics)
		for (const Tc &c : kClasses)
			for (int where = 0; where < 2; where++) {
				fi_info *h = tc_hints(fabric);
				(where ? h->tx_attr->tclass : h->domain_attr->tclass) = c.tc;
				fi_info *out = nullptr;
				const int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &out);
				fi_freeinfo(h);
				const char *field = where ? "tx_attr->tclass" : "domain_attr->tclass";
				if (!c.served) {
					cr_assert_eq(ret, -FI_ENODATA, "%s: %s %#x is not served", fabric, field, c.tc);
					continue;
				}
				cr_assert_eq(ret, 0, "%s: %s %#x is served", fabric, field, c.tc);
				for (const fi_info *i = out; i; i = i->next)
					cr_assert_eq(where ? i->tx_attr->tclass : i->domain_attr->tclass, c.tc,
						     "%s: %s as asked", fabric, field);
				fi_freeinfo(out);
			}
}

Test(getinfo_rules, domain_and_endpoint_refuse_a_class_not_served)
{
	const struct {
		const char *fabric;
		fi_ep_type type;
	} endpoints[] = {{"efa", FI_EP_RDM}, {"efa-direct", FI_EP_RDM}, {"efa", FI_EP_DGRAM}};
	for (const auto &e : endpoints) {
		const char *fabric = e.fabric;
		fi_info *h = tc_hints(fabric);
		h->ep_attr->type = e.type;
		if (e.type == FI_EP_DGRAM)
			h->mode |= FI_MSG_PREFIX; /* a DGRAM endpoint's buffers start with its prefix */
		fi_info *info = nullptr;
		cr_assert_eq(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
		fi_freeinfo(h);
		fid_fabric *fab = nullptr;
		fid_domain *dom = nullptr;
		fid_ep *ep = nullptr;
		cr_assert_eq(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
		for (const Tc &c : kClasses) {
			if (c.served)
				continue;
			info->domain_attr->tclass = c.tc;
			cr_assert_eq(fi_domain(fab, info, &dom, nullptr), -FI_EOPNOTSUPP, "%s: fi_domain with tclass %#x",
				     fabric, c.tc);
		}
		info->domain_attr->tclass = FI_TC_LOW_LATENCY;
		cr_assert_eq(fi_domain(fab, info, &dom, nullptr), 0);
		for (const Tc &c : kClasses) {
			if (c.served)
				continue;
			info->tx_attr->tclass = c.tc;
			cr_assert_eq(fi_endpoint(dom, info, &ep, nullptr), -FI_EOPNOTSUPP,
				     "%s: fi_endpoint with tclass %#x", fabric, c.tc);
		}
		info->tx_attr->tclass = FI_TC_BEST_EFFORT;
		cr_assert_eq(fi_endpoint(dom, info, &ep, nullptr), 0);
		cr_assert_eq(fi_close(&ep->fid), 0);
		cr_assert_eq(fi_close(&dom->fid), 0);
		cr_assert_eq(fi_close(&fab->fid), 0);
		fi_freeinfo(info);
	}
}

/* fi_endpoint(3): the endpoint's class overrides the domain's; unset, the domain's is
 * used. FI_TC_LOW_LATENCY is the only class with a service level. */
Test(getinfo_rules, endpoint_class_overrides_the_domain_class)
{
	struct Case {
		uint32_t dom, ep;
		bool sl;
	};
	const Case cases[] = {
		{FI_TC_UNSPEC, FI_TC_UNSPEC, false},	    {FI_TC_LOW_LATENCY, FI_TC_UNSPEC, true},
		{FI_TC_LOW_LATENCY, FI_TC_BEST_EFFORT, false}, {FI_TC_UNSPEC, FI_TC_LOW_LATENCY, true},
		{FI_TC_BEST_EFFORT, FI_TC_LOW_LATENCY, true},   {FI_TC_BEST_EFFORT, FI_TC_UNSPEC, false},
	};
	for (const char *fabric : kFabrics)
		for (const Case &c : cases) {
			const uint64_t n = wrs_with_sl(fabric, c.dom, c.ep);
			if (c.sl)
				cr_assert_gt(n, 0u, "%s: domain %#x, endpoint %#x: the QP has the low-latency service level",
					     fabric, c.dom, c.ep);
			else
				cr_assert_eq(n, 0u, "%s: domain %#x, endpoint %#x: %lu work requests with a service level",
					     fabric, c.dom, c.ep, (unsigned long)n);
		}
}
