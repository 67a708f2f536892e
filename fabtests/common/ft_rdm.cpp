/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Shared code of the RDM feature tests: tagged-format CQs, endpoints, control channel. */
#include "ft_rdm.h"

#include "ft_cq.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace ft::rdm {

bool ctl_progress = true;


namespace {

std::vector<Cq *> &registry()
{
	static std::vector<Cq *> cqs;
	return cqs;
}

} // namespace

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

std::string Entry::describe() const
{
	char s[640];
	char src_s[32] = "n/a";
	if (src != FI_ADDR_NOTAVAIL)
		snprintf(src_s, sizeof src_s, "%llu", (unsigned long long)src);
	if (error)
		snprintf(s, sizeof s,
			 "error entry: err %d (%s), prov_errno %d (%s), ctx %p, flags 0x%llx (%s), "
			 "len %zu, olen %zu, tag 0x%llx, buf %p",
			 err, fi_strerror(err), prov_errno, errstr.c_str(), ctx,
			 (unsigned long long)flags, flags_str(flags).c_str(), len, olen,
			 (unsigned long long)tag, buf);
	else
		snprintf(s, sizeof s,
			 "ctx %p, flags 0x%llx (%s), len %zu, buf %p, data 0x%llx, tag 0x%llx, src %s",
			 ctx, (unsigned long long)flags, flags_str(flags).c_str(), len, buf,
			 (unsigned long long)data, (unsigned long long)tag, src_s);
	return s;
}

Cq::Cq(const Fabric &fab, const char *name, bool readfrom) : name_(name), readfrom_(readfrom)
{
	fi_cq_attr attr{};
	attr.format = FI_CQ_FORMAT_TAGGED;
	attr.wait_obj = FI_WAIT_NONE;
	attr.wait_cond = FI_CQ_COND_NONE;
	/* Room for the bursts of the many-message tests (a size is only a hint). */
	attr.size = 16384;
	FT_CALL(fi_cq_open(fab.domain(), &attr, cq_.out(), this));
	registry().push_back(this);
}

Cq::~Cq()
{
	auto &r = registry();
	r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

Entry Cq::read_error()
{
	fi_cq_err_entry e{};
	uint8_t err_data[256];
	e.err_data = err_data; /* API >= 1.5: the provider copies into this buffer */
	e.err_data_size = sizeof err_data;
	ssize_t rc = fi_cq_readerr(cq_, &e, 0);
	FT_CHECK(rc == 1, "fi_cq_readerr(%s) after -FI_EAVAIL returned %zd (%s)", name_, rc,
		 rc < 0 ? fi_strerror(int(-rc)) : "");
	Entry c;
	c.error = true;
	c.ctx = e.op_context;
	c.flags = e.flags;
	c.len = e.len;
	c.buf = e.buf;
	c.data = e.data;
	c.tag = e.tag;
	c.olen = e.olen;
	c.err = e.err;
	c.prov_errno = e.prov_errno;
	char buf[256] = "";
	const char *s = fi_cq_strerror(cq_, e.prov_errno, e.err_data_size ? e.err_data : nullptr,
				       buf, sizeof buf);
	c.errstr = s ? s : "(null)";
	return c;
}

void Cq::progress()
{
	fi_cq_tagged_entry buf[32];
	fi_addr_t src[32];
	for (;;) {
		ssize_t n = readfrom_ ? fi_cq_readfrom(cq_, buf, 32, src) : fi_cq_read(cq_, buf, 32);
		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			queue_.push_back(read_error());
			continue;
		}
		if (n < 0)
			FT_FAIL("fi_cq_read(%s) returned %zd (%s)", name_, n, fi_strerror(int(-n)));
		for (ssize_t i = 0; i < n; i++) {
			Entry c;
			c.ctx = buf[i].op_context;
			c.flags = buf[i].flags;
			c.len = buf[i].len;
			c.buf = buf[i].buf;
			c.data = buf[i].data;
			c.tag = buf[i].tag;
			c.src = readfrom_ ? src[i] : FI_ADDR_NOTAVAIL;
			queue_.push_back(c);
		}
	}
}

#define FAIL_AT_CALLER(...) fail_at(at.file_name(), int(at.line()), __VA_ARGS__)

Entry Cq::wait_for(const void *ctx, const std::string &what, int want, const Loc &at)
{
	Deadline deadline;
	for (;;) {
		progress_all();
		for (auto it = queue_.begin(); it != queue_.end(); ++it) {
			if (it->ctx != ctx) {
				if (it->error)
					FAIL_AT_CALLER("%s: while waiting for %s: unexpected %s", name_,
						       what.c_str(), it->describe().c_str());
				continue;
			}
			Entry c = *it;
			queue_.erase(it);
			if (want == 0 && c.error)
				FAIL_AT_CALLER("%s: %s completed with an %s", name_, what.c_str(),
					       c.describe().c_str());
			if (want == 1 && !c.error)
				FAIL_AT_CALLER("%s: %s succeeded (%s), expected an error completion",
					       name_, what.c_str(), c.describe().c_str());
			debug("%s: %s: %s", name_, what.c_str(), c.describe().c_str());
			return c;
		}
		if (deadline.expired())
			FAIL_AT_CALLER("%s: no completion of %s after %d s (%zu other entries queued%s%s)",
				       name_, what.c_str(), opts.timeout_s, queue_.size(),
				       queue_.empty() ? "" : ", the oldest: ",
				       queue_.empty() ? "" : queue_.front().describe().c_str());
	}
}

Entry Cq::wait(const void *ctx, const std::string &what, Loc at)
{
	return wait_for(ctx, what, 0, at);
}

Entry Cq::wait_error(const void *ctx, const std::string &what, Loc at)
{
	return wait_for(ctx, what, 1, at);
}

Entry Cq::wait_any(const void *ctx, const std::string &what, Loc at)
{
	return wait_for(ctx, what, 2, at);
}

Entry Cq::next(const std::string &what, Loc at)
{
	Deadline deadline;
	while (queue_.empty()) {
		progress_all();
		if (deadline.expired())
			FAIL_AT_CALLER("%s: no completion (%s) after %d s", name_, what.c_str(),
				       opts.timeout_s);
	}
	Entry c = queue_.front();
	queue_.pop_front();
	debug("%s: %s: %s", name_, what.c_str(), c.describe().c_str());
	return c;
}

std::optional<Entry> Cq::poll()
{
	progress_all();
	if (queue_.empty())
		return std::nullopt;
	Entry c = queue_.front();
	queue_.pop_front();
	return c;
}

void Cq::expect_empty(const std::string &what, Loc at)
{
	progress();
	if (!queue_.empty())
		FAIL_AT_CALLER("%s: %s, but there is a completion: %s (%zu queued)", name_,
			       what.c_str(), queue_.front().describe().c_str(), queue_.size());
}

void progress_all()
{
	ft::progress_all();
	for (Cq *cq : registry())
		cq->progress();
}

Endpoint::Endpoint(const Fabric &fab, const EpSpec &spec)
{
	bool readfrom = fab.has(FI_SOURCE);
	if (spec.shared_tx) {
		tx_ = spec.shared_tx;
	} else {
		own_tx_ = std::make_unique<Cq>(fab, "tx cq", readfrom);
		tx_ = own_tx_.get();
	}
	if (spec.shared_rx) {
		rx_ = spec.shared_rx;
	} else {
		own_rx_ = std::make_unique<Cq>(fab, "rx cq", readfrom);
		rx_ = own_rx_.get();
	}
	FT_CALL(fi_endpoint(fab.domain(), fab.info(), ep_.out(), nullptr));
	FT_CALL(fi_ep_bind(ep_, &fab.av()->fid, 0));
	FT_CALL(fi_ep_bind(ep_, &tx_->get()->fid, FI_TRANSMIT | spec.tx_bind));
	FT_CALL(fi_ep_bind(ep_, &rx_->get()->fid, FI_RECV | spec.rx_bind));
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

/* ------------------------------------------------------------------ posting, checks */

void post_retry(const char *what, const char *file, int line, const std::function<ssize_t()> &op)
{
	Deadline deadline;
	for (;;) {
		ssize_t rc = op();
		if (rc == 0)
			return;
		if (rc != -FI_EAGAIN)
			fail_at(file, line, "%s returned %zd (%s)", what, rc, fi_strerror(int(-rc)));
		if (deadline.expired())
			fail_at(file, line, "%s still returns -FI_EAGAIN after %d s", what,
				opts.timeout_s);
		progress_all();
	}
}

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
