/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The out-of-band control channel: one TCP connection on 127.0.0.1 between server and
 * client, for endpoint names, registered regions and step synchronisation. The server
 * listens (port 0: any free port), prints "PORT <n>" on stdout once it listens, and
 * accepts; the runner starts the client with -P <n>, so no one waits by sleeping.
 *
 * Every wait on the channel is bounded and keeps the provider progressing (its idle hook,
 * progress_all by default), so a peer's RMA to this process completes while it waits for
 * the next step.
 */
#pragma once

#include "ft_ep.h"
#include "ft_mr.h"

#include <cstdint>
#include <vector>

namespace ft {

/* What a wait on the channel does between looks at the socket: keep the provider going,
 * and say how long (ms) the next look may block. The default reads every ft::Cq
 * (progress_all) and returns 1. */
using OobIdle = int (*)();
int oob_idle_default();

class Oob {
public:
	/* Server: listen, print PORT, accept. Client: connect to opts.host:opts.port.
	 * max_blob bounds what recv_blob accepts. */
	explicit Oob(OobIdle idle = oob_idle_default, size_t max_blob = 1u << 20);
	~Oob();
	Oob(const Oob &) = delete;
	Oob &operator=(const Oob &) = delete;

	void send(const void *buf, size_t len);
	void recv(void *buf, size_t len);

	void send_blob(const std::vector<uint8_t> &blob);
	std::vector<uint8_t> recv_blob();

	template <typename T> void put(const T &v) { send(&v, sizeof v); }
	template <typename T> T get()
	{
		T v;
		recv(&v, sizeof v);
		return v;
	}

	/* Both sides reach step `step` (a name both use); a peer at another step fails. */
	void sync(const char *step);
	/* One way: tell the peer this side reached `step`, without waiting for it. */
	void notify(const char *step);
	/* The other end: wait until the peer notifies `step`. */
	void await(const char *step);
	/* Waits until the peer's end closes (it exited or was killed); fails if it sends
	 * anything instead. Bounded like every wait. */
	void await_close();

	/* Sends this endpoint's name, inserts the peer's; returns the peer's fi_addr_t. */
	fi_addr_t exchange_names(const Fabric &fab, const Endpoint &ep)
	{
		send_blob(ep.name());
		peer_name_ = recv_blob();
		FT_CHECK(!peer_name_.empty(), "the peer sent an empty endpoint name");
		return fab.insert(peer_name_);
	}
	/* The peer's name as received by the last exchange_names. */
	const std::vector<uint8_t> &peer_name() const { return peer_name_; }

	void send_mr(const Buffer &buf) { put(buf.remote()); }
	RemoteMr recv_mr() { return get<RemoteMr>(); }

private:
	void wait_readable(int fd, const char *what) const;

	OobIdle idle_;
	size_t max_blob_;
	int fd_ = -1;
	std::vector<uint8_t> peer_name_;
};

} // namespace ft
