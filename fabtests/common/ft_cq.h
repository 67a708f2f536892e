/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Completion queues. Entries are read into a queue in the test process and matched by
 * operation context, never by order: an RDM provider may complete operations (and
 * deliver messages) in any order. Error entries are kept with their fi_cq_readerr
 * details and fi_cq_strerror text.
 *
 * Progress: with FI_PROGRESS_MANUAL the provider moves data only inside fi_* calls, so
 * while a process waits on the control channel it keeps reading its CQs (progress_all)
 * into those queues; nothing read is lost.
 */
#pragma once

#include "ft_fabric.h"

#include <deque>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

namespace ft {

struct Completion {
	void *ctx = nullptr;
	uint64_t flags = 0;
	size_t len = 0;
	void *buf = nullptr; /* FI_CQ_FORMAT_DATA and TAGGED: FI_MULTI_RECV placement, FI_PEEK */
	uint64_t data = 0;
	uint64_t tag = 0;
	fi_addr_t src = FI_ADDR_NOTAVAIL; /* fi_cq_readfrom's, when the CQ reads from */
	bool error = false;
	int err = 0;	    /* positive fabric errno of an error entry */
	int prov_errno = 0;
	size_t olen = 0;    /* error entries: bytes that did not fit (FI_ETRUNC) */
	std::string errstr; /* fi_cq_strerror */
	std::string describe() const;
};

struct CqSpec {
	fi_cq_format format = FI_CQ_FORMAT_DATA;
	fi_wait_obj wait = FI_WAIT_NONE;
	uint64_t bind_flags = 0; /* added to FI_TRANSMIT / FI_RECV, e.g. FI_SELECTIVE_COMPLETION */
	bool readfrom = false;	 /* read with fi_cq_readfrom (FI_SOURCE) */
	bool progress = true;	 /* read by progress_all; off for CQs a test reads itself */
	size_t size = 0;	 /* fi_cq_attr.size; 0: the provider's default */
};

class Cq {
public:
	Cq(const Fabric &fab, const CqSpec &spec, const char *name);
	~Cq();
	Cq(const Cq &) = delete;
	Cq &operator=(const Cq &) = delete;

	fid_cq *get() const { return cq_; }
	const CqSpec &spec() const { return spec_; }
	const char *name() const { return name_; }

	/* Reads everything available into the queue. */
	void progress();
	/* Failures name the caller's file and line (`at`). */
	using Loc = std::source_location;
	/* The successful completion of `ctx`; any error entry fails the test. */
	Completion wait(const void *ctx, const std::string &what, Loc at = Loc::current());
	/* The error completion of `ctx`; its success or another error fails the test. */
	Completion wait_error(const void *ctx, const std::string &what, Loc at = Loc::current());
	/* The completion of `ctx`, successful or not (another error entry fails). */
	Completion wait_any(const void *ctx, const std::string &what, Loc at = Loc::current());
	/* The oldest queued completion, waiting for one if none (errors fail). */
	Completion wait_next(const std::string &what, Loc at = Loc::current());
	/* The oldest queued entry, successful or not, waiting for one (ordering checks). */
	Completion next(const std::string &what, Loc at = Loc::current());
	/* The oldest queued entry if there is one (reads the CQs first); never waits. */
	std::optional<Completion> poll();
	/* Fails unless nothing is queued or readable (e.g. after an inject). */
	void expect_empty(const std::string &what, Loc at = Loc::current());
	size_t queued() const { return queue_.size(); }
	/* Converts one entry read in this CQ's format (for tests that call fi_cq_sread). */
	Completion convert(const void *entry, fi_addr_t src) const;
	/* Reads the error entry after -FI_EAVAIL. */
	Completion read_error();

private:
	/* want: 0 success, 1 error, 2 either */
	Completion wait_for(const void *ctx, const std::string &what, int want, const Loc &at);

	CqSpec spec_;
	const char *name_;
	Fid<fid_cq> cq_{"cq"};
	std::deque<Completion> queue_;
};

/* Reads every CQ that allows it (drives manual progress); used by the control channel. */
void progress_all();

} // namespace ft
