/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "addr.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace efa {

namespace {

bool parse_u32(const char *s, const char *end, uint32_t max, uint32_t &out)
{
	if (s == end)
		return false;
	uint64_t v = 0;
	for (const char *p = s; p != end; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + uint64_t(*p - '0');
		if (v > max)
			return false;
	}
	out = uint32_t(v);
	return true;
}

/* "<qpn>" or "<qpn>:<qkey>" */
bool parse_service(const char *s, RawAddr &a)
{
	const char *colon = std::strchr(s, ':');
	const char *end = s + std::strlen(s);
	uint32_t qpn, qkey = 0;
	if (!parse_u32(s, colon ? colon : end, 0xffff, qpn))
		return false;
	if (colon && !parse_u32(colon + 1, end, 0xffffffffu, qkey))
		return false;
	a.qpn = uint16_t(qpn);
	a.qkey = qkey;
	return true;
}

} // namespace

std::string gid_to_string(const uint8_t gid[16])
{
	char buf[INET6_ADDRSTRLEN];
	if (!inet_ntop(AF_INET6, gid, buf, sizeof buf))
		return "?";
	return buf;
}

std::string addr_to_string(const RawAddr &a)
{
	char buf[128];
	snprintf(buf, sizeof buf, "fi_addr_efa://[%s]:%u:%u", gid_to_string(a.gid).c_str(), unsigned(a.qpn),
		 unsigned(a.qkey));
	return buf;
}

bool addr_from_string(const char *s, RawAddr &out)
{
	static const char prefix[] = "fi_addr_efa://[";
	if (!s || std::strncmp(s, prefix, sizeof prefix - 1))
		return false;
	s += sizeof prefix - 1;
	const char *close = std::strchr(s, ']');
	if (!close || close[1] != ':' || close - s >= INET6_ADDRSTRLEN)
		return false;
	char gid[INET6_ADDRSTRLEN];
	std::memcpy(gid, s, size_t(close - s));
	gid[close - s] = 0;
	return addr_from_node_service(gid, close + 2, out);
}

bool addr_from_node_service(const char *node, const char *service, RawAddr &out)
{
	RawAddr a{};
	if (node && inet_pton(AF_INET6, node, a.gid) != 1)
		return false;
	if (service && !parse_service(service, a))
		return false;
	out = a;
	return true;
}

} // namespace efa
