/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Shared code of the RDM feature tests: tagged-format CQs, endpoints, control channel. */
#include "ft_rdm.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace ft::rdm {

bool ctl_progress = true;


bool take_flag(int &argc, char **argv, const char *flag)
{
	bool found = false;
	int out = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], flag)) {
			found = true;
			continue;
		}
		argv[out++] = argv[i];
	}
	argv[out] = nullptr;
	argc = out;
	return found;
}

long take_number(int &argc, char **argv, const char *flag, long def)
{
	long v = def;
	int out = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], flag)) {
			char *end = nullptr;
			if (i + 1 >= argc || (v = strtol(argv[i + 1], &end, 0), *end != '\0')) {
				fprintf(stderr, "%s: %s needs a number\n", argv[0], flag);
				exit(2);
			}
			i++;
			continue;
		}
		argv[out++] = argv[i];
	}
	argv[out] = nullptr;
	argc = out;
	return v;
}

void skip_part(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	note("SKIP part: %s", msg);
}

std::string size_str(size_t len)
{
	char s[64];
	if (len >= (1u << 20) && len % (1u << 20) == 0)
		snprintf(s, sizeof s, "%zu MiB", len >> 20);
	else if (len >= 1024 && len % 1024 == 0)
		snprintf(s, sizeof s, "%zu KiB", len >> 10);
	else
		snprintf(s, sizeof s, "%zu B", len);
	return s;
}

CqSpec cq_spec(const Fabric &fab)
{
	CqSpec spec;
	spec.format = FI_CQ_FORMAT_TAGGED;
	spec.readfrom = fab.has(FI_SOURCE);
	spec.size = 16384; /* room for the bursts of the many-message tests (only a hint) */
	return spec;
}

EpSpec ep_spec(const Fabric &fab)
{
	EpSpec spec;
	spec.tx = spec.rx = cq_spec(fab);
	return spec;
}

/* ------------------------------------------------------------------ control channel */

namespace {

/* While ctl_progress is off the channel only blocks (in slices, for the deadline). */
int ctl_idle()
{
	if (!ctl_progress)
		return 100;
	progress_all();
	return 0; /* a peer's operation may need our progress at any time */
}

} // namespace

Ctl::Ctl() : Oob(ctl_idle, 64u << 20) {}

/* ------------------------------------------------------------------ checks */

/* Checks fail at the test's line that called them. */
#define FAIL_AT_CALLER(...) fail_at(at.file_name(), int(at.line()), __VA_ARGS__)

void expect_flags(const Entry &e, uint64_t must, uint64_t must_not, const std::string &what,
		  Loc at)
{
	if ((e.flags & must) != must || (e.flags & must_not))
		FAIL_AT_CALLER("%s: completion flags %s (0x%llx): expected %s%s%s", what.c_str(),
			       flags_str(e.flags).c_str(), (unsigned long long)e.flags,
			       flags_str(must).c_str(), must_not ? " and none of " : "",
			       must_not ? flags_str(must_not).c_str() : "");
}

void deviation(const Fabric &fab, bool ok, Loc at, const char *fmt, ...)
{
	if (ok)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (fab.is_efa())
		FAIL_AT_CALLER("%s", msg);
	note("KNOWN DEVIATION (%s, tolerated on providers other than efa): %s", fab.prov_label(),
	     msg);
}

bool has_order(const Fabric &fab, uint64_t order)
{
	const fi_info *i = fab.info();
	return (i->tx_attr->msg_order & order) == order && (i->rx_attr->msg_order & order) == order;
}

bool request_order(Fabric &fab, uint64_t order)
{
	if (has_order(fab, order))
		return true;
	fi_info *hints = fi_dupinfo(fab.info());
	if (!hints)
		FT_FAIL("fi_dupinfo failed");
	hints->tx_attr->msg_order |= order;
	hints->rx_attr->msg_order |= order;
	fi_info *out = nullptr;
	int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0,
			    hints, &out);
	fi_freeinfo(hints);
	if (rc == 0) {
		const fi_info *mine = fab.info();
		for (fi_info *i = out; i; i = i->next) {
			if (strcmp(i->fabric_attr->prov_name, mine->fabric_attr->prov_name) ||
			    strcmp(i->fabric_attr->name, mine->fabric_attr->name) ||
			    strcmp(i->domain_attr->name, mine->domain_attr->name))
				continue;
			if ((i->tx_attr->msg_order & order) == order &&
			    (i->rx_attr->msg_order & order) == order) {
				fab.info()->tx_attr->msg_order |= order;
				fab.info()->rx_attr->msg_order |= order;
				debug("msg_order 0x%llx granted when asked for",
				      (unsigned long long)order);
			}
			break;
		}
		fi_freeinfo(out);
	} else if (rc != -FI_ENODATA) {
		note("fi_getinfo asking for msg_order 0x%llx returned %d (%s)",
		     (unsigned long long)order, rc, fi_strerror(-rc));
	}
	return has_order(fab, order);
}

Plain::Plain(size_t len) : len_(len)
{
	const size_t page = 4096;
	size_t alloc = (len + page - 1) / page * page;
	mem_.reset(static_cast<uint8_t *>(aligned_alloc(page, alloc ? alloc : page)));
	if (!mem_)
		FT_FAIL("cannot allocate %zu bytes", alloc);
	memset(mem_.get(), canary, alloc ? alloc : page);
}

} // namespace ft::rdm
