/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Completion queues: reading every format, waiting for a context with a bound. */
#include "ft_cq.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ft {

namespace {

std::vector<Cq *> &registry()
{
	static std::vector<Cq *> cqs;
	return cqs;
}

size_t entry_size(fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
	case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED: return sizeof(fi_cq_tagged_entry);
	default: FT_FAIL("unsupported CQ format %d", int(f));
	}
}

} // namespace

std::string Completion::describe() const
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

Cq::Cq(const Fabric &fab, const CqSpec &spec, const char *name) : spec_(spec), name_(name)
{
	fi_cq_attr attr{};
	attr.format = spec.format;
	attr.wait_obj = spec.wait;
	attr.wait_cond = FI_CQ_COND_NONE;
	attr.size = spec.size;
	FT_CALL(fi_cq_open(fab.domain(), &attr, cq_.out(), this));
	registry().push_back(this);
}

Cq::~Cq()
{
	auto &r = registry();
	r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

Completion Cq::convert(const void *e, fi_addr_t src) const
{
	Completion c;
	c.src = src;
	/* Each format's struct begins with the previous one's fields. */
	c.ctx = static_cast<const fi_cq_entry *>(e)->op_context;
	if (spec_.format == FI_CQ_FORMAT_CONTEXT)
		return c;
	auto *m = static_cast<const fi_cq_msg_entry *>(e);
	c.flags = m->flags;
	c.len = m->len;
	if (spec_.format == FI_CQ_FORMAT_MSG)
		return c;
	c.buf = static_cast<const fi_cq_data_entry *>(e)->buf;
	c.data = static_cast<const fi_cq_data_entry *>(e)->data;
	if (spec_.format == FI_CQ_FORMAT_TAGGED)
		c.tag = static_cast<const fi_cq_tagged_entry *>(e)->tag;
	return c;
}

Completion Cq::read_error()
{
	fi_cq_err_entry e{};
	uint8_t err_data[256];
	e.err_data = err_data; /* API >= 1.5: the provider copies into our buffer */
	e.err_data_size = sizeof err_data;
	ssize_t rc = fi_cq_readerr(cq_, &e, 0);
	FT_CHECK(rc == 1, "fi_cq_readerr(%s) after -FI_EAVAIL returned %zd (%s)", name_, rc,
		 rc < 0 ? fi_strerror(int(-rc)) : "");
	Completion c;
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
	alignas(fi_cq_tagged_entry) uint8_t buf[16 * sizeof(fi_cq_tagged_entry)];
	fi_addr_t src[16];
	const size_t size = entry_size(spec_.format);
	for (;;) {
		ssize_t n = spec_.readfrom ? fi_cq_readfrom(cq_, buf, 16, src)
					   : fi_cq_read(cq_, buf, 16);
		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			queue_.push_back(read_error());
			continue;
		}
		if (n < 0)
			FT_FAIL("fi_cq_read(%s) returned %zd (%s)", name_, n, fi_strerror(int(-n)));
		for (ssize_t i = 0; i < n; i++)
			queue_.push_back(convert(buf + size_t(i) * size,
						 spec_.readfrom ? src[i] : FI_ADDR_NOTAVAIL));
	}
}

/* Waits fail at the test's line that called them. */
#define FAIL_AT_CALLER(...) fail_at(at.file_name(), int(at.line()), __VA_ARGS__)

Completion Cq::wait_for(const void *ctx, const std::string &what, int want, const Loc &at)
{
	Deadline deadline;
	for (;;) {
		progress_all();
		if (!spec_.progress)
			progress();
		for (auto it = queue_.begin(); it != queue_.end(); ++it) {
			if (it->ctx != ctx) {
				if (it->error)
					FAIL_AT_CALLER("%s: while waiting for %s: unexpected %s",
						       name_, what.c_str(), it->describe().c_str());
				continue;
			}
			Completion c = *it;
			queue_.erase(it);
			if (want == 0 && c.error)
				FAIL_AT_CALLER("%s: %s completed with an %s", name_, what.c_str(),
					       c.describe().c_str());
			if (want == 1 && !c.error)
				FAIL_AT_CALLER(
					"%s: %s succeeded (%s), expected an error completion",
					name_, what.c_str(), c.describe().c_str());
			debug("%s: %s: %s", name_, what.c_str(), c.describe().c_str());
			return c;
		}
		if (deadline.expired())
			FAIL_AT_CALLER(
				"%s: no completion of %s after %d s (%zu other entries queued%s%s)",
				name_, what.c_str(), opts.timeout_s, queue_.size(),
				queue_.empty() ? "" : ", the oldest: ",
				queue_.empty() ? "" : queue_.front().describe().c_str());
	}
}

Completion Cq::wait(const void *ctx, const std::string &what, Loc at)
{
	return wait_for(ctx, what, 0, at);
}

Completion Cq::wait_error(const void *ctx, const std::string &what, Loc at)
{
	return wait_for(ctx, what, 1, at);
}

Completion Cq::wait_any(const void *ctx, const std::string &what, Loc at)
{
	return wait_for(ctx, what, 2, at);
}

Completion Cq::wait_next(const std::string &what, Loc at)
{
	Completion c = next(what, at);
	if (c.error)
		FAIL_AT_CALLER("%s: %s: %s", name_, what.c_str(), c.describe().c_str());
	return c;
}

Completion Cq::next(const std::string &what, Loc at)
{
	Deadline deadline;
	while (queue_.empty()) {
		progress_all();
		if (!spec_.progress)
			progress();
		if (deadline.expired())
			FAIL_AT_CALLER("%s: no completion (%s) after %d s", name_, what.c_str(),
				       opts.timeout_s);
	}
	Completion c = queue_.front();
	queue_.pop_front();
	debug("%s: %s: %s", name_, what.c_str(), c.describe().c_str());
	return c;
}

std::optional<Completion> Cq::poll()
{
	progress_all();
	if (!spec_.progress)
		progress();
	if (queue_.empty())
		return std::nullopt;
	Completion c = queue_.front();
	queue_.pop_front();
	return c;
}

void Cq::expect_empty(const std::string &what, Loc at)
{
	progress();
	if (!queue_.empty())
		FAIL_AT_CALLER("%s: %s, but there is a completion: %s (%zu queued)", name_,
			what.c_str(),
			queue_.front().describe().c_str(), queue_.size());
}

void progress_all()
{
	for (Cq *cq : registry())
		if (cq->spec().progress)
			cq->progress();
}

} // namespace ft
