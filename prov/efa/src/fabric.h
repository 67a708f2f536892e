/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Fabric and event queue. A fabric is "efa-direct" (one libfabric operation = one SRD
 * work request) or "efa" (the RDM protocol); its domains follow its kind.
 */
#ifndef EFA_FABRIC_H
#define EFA_FABRIC_H

#include "fid.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace efa {

struct Fabric {
	fid_fabric fab; /* first */
	ObjHeader hdr;
	static constexpr Magic kMagic = Magic::Fabric;
	std::string name;
	bool direct; /* efa-direct, else the efa (RDM) fabric */
};

int fabric_open(fi_fabric_attr *attr, fid_fabric **fabric, void *context);

/*
 * Event queue: a FIFO of events and one of errors (an error is reported by read as
 * -FI_EAVAIL until fi_eq_readerr takes it). FI_WAIT_UNSPEC / FI_WAIT_FD waits block on
 * an eventfd that is readable while events are queued.
 */
struct Eq {
	fid_eq eq; /* first */
	ObjHeader hdr;
	static constexpr Magic kMagic = Magic::Eq;
	Fabric *fabric;
	fi_wait_obj wait_obj;
	int fd; /* eventfd, -1 without a wait object */
	std::mutex lock;
	struct Event {
		uint32_t event;
		std::vector<uint8_t> data;
	};
	struct Error {
		fi_eq_err_entry entry;
		std::string text;
	};
	std::deque<Event> events;
	std::deque<Error> errors;
	std::string last_err_text; /* err_data stays valid until the next read */

	/* Queues an event (async AV inserts). */
	void push(uint32_t event, const void *buf, size_t len);
	void push_error(fid_t fid, void *context, uint64_t data, int err, int prov_errno, const std::string &text);
};

int eq_open(fid_fabric *fabric, fi_eq_attr *attr, fid_eq **eq, void *context);

} // namespace efa

#endif
