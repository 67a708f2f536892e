/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_cq_formats: each CQ format, with a fresh pair of endpoints whose CQs use it.
 * The client sends a message with remote CQ data (fi_senddata) and one without
 * (fi_send); the entries must carry what the format holds:
 *   FI_CQ_FORMAT_CONTEXT  op_context
 *   FI_CQ_FORMAT_MSG      + flags (FI_SEND|FI_MSG, FI_RECV|FI_MSG) and len
 *   FI_CQ_FORMAT_DATA     + data, with FI_REMOTE_CQ_DATA only on the first message
 *   FI_CQ_FORMAT_TAGGED   + tag, 0 for untagged messages
 * With FI_SOURCE in the caps the server reads its receive CQ with fi_cq_readfrom, and
 * the source must be the client's fi_addr_t in the server's AV.
 */
#include "common/ft_oob.h"

#include <string>

using namespace ft;

namespace {

struct Format {
	fi_cq_format format;
	const char *name;
};
const Format formats[] = {{FI_CQ_FORMAT_CONTEXT, "FI_CQ_FORMAT_CONTEXT"},
			  {FI_CQ_FORMAT_MSG, "FI_CQ_FORMAT_MSG"},
			  {FI_CQ_FORMAT_DATA, "FI_CQ_FORMAT_DATA"},
			  {FI_CQ_FORMAT_TAGGED, "FI_CQ_FORMAT_TAGGED"}};

constexpr size_t len0 = 100, len1 = 37;

void check_rx(const Fabric &fab, const Format &f, const Completion &c, size_t len,
	      bool with_data, uint64_t data, fi_addr_t client)
{
	std::string what =
		std::string(f.name) + " receive entry (" + std::to_string(len) + " bytes)";
	const char *w = what.c_str();
	if (f.format != FI_CQ_FORMAT_CONTEXT) {
		FT_CHECK(c.len == len, "%s: len %zu", w, c.len);
		FT_CHECK((c.flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG), "%s: flags %s", w,
			 flags_str(c.flags).c_str());
	}
	if (f.format == FI_CQ_FORMAT_DATA || f.format == FI_CQ_FORMAT_TAGGED) {
		FT_CHECK(bool(c.flags & FI_REMOTE_CQ_DATA) == with_data, "%s: flags %s", w,
			 flags_str(c.flags).c_str());
		if (with_data)
			FT_CHECK(c.data == data, "%s: data 0x%llx, expected 0x%llx", w,
				 (unsigned long long)c.data, (unsigned long long)data);
	}
	if (f.format == FI_CQ_FORMAT_TAGGED)
		FT_CHECK(c.tag == 0, "%s: tag 0x%llx for an untagged message", w,
			 (unsigned long long)c.tag);
	if (fab.has(FI_SOURCE))
		FT_CHECK(c.src == client, "%s: fi_cq_readfrom source 0x%llx, expected 0x%llx", w,
			 (unsigned long long)c.src, (unsigned long long)client);
}

void round(const Fabric &fab, Oob &oob, const Format &f)
{
	CqSpec spec;
	spec.format = f.format;
	CqSpec rx = spec;
	rx.readfrom = fab.has(FI_SOURCE);
	Endpoint ep(fab, spec, rx);
	fi_addr_t peer = oob.exchange_names(fab, ep);
	Buffer buf(fab, 256);
	fi_context2 ctx[2]{};
	const bool data = fab.cq_data_size() > 0;
	const uint64_t value = fab.cq_data(0xfeed0000u + uint64_t(f.format));
	std::string step = f.name;

	if (opts.server) {
		FT_POST(fi_recv(ep, buf.data(), 128, buf.desc(), FI_ADDR_UNSPEC, &ctx[0]));
		FT_POST(fi_recv(ep, buf.data() + 128, 128, buf.desc(), FI_ADDR_UNSPEC, &ctx[1]));
		oob.sync((step + " posted").c_str());
		/* Either message may fill either receive: tell them apart by content. */
		for (int i = 0; i < 2; i++) {
			Completion c = ep.rx().wait(&ctx[i], (step + " receive").c_str());
			uint8_t *p = buf.data() + 128 * i;
			bool first = has_pattern(p, len0, 700);
			size_t len = first ? len0 : len1;
			FT_EXPECT_PATTERN(p, len, first ? 700 : 701, 0,
					  (step + " message").c_str());
			check_rx(fab, f, c, len, first && data, value, peer);
		}
		oob.sync((step + " done").c_str());
		return;
	}
	fill_pattern(buf.data(), len0, 700);
	fill_pattern(buf.data() + 128, len1, 701);
	oob.sync((step + " posted").c_str());
	if (data)
		FT_POST(fi_senddata(ep, buf.data(), len0, buf.desc(), value, peer, &ctx[0]));
	else
		FT_POST(fi_send(ep, buf.data(), len0, buf.desc(), peer, &ctx[0]));
	FT_POST(fi_send(ep, buf.data() + 128, len1, buf.desc(), peer, &ctx[1]));
	for (int i = 0; i < 2; i++) {
		Completion c = ep.tx().wait(&ctx[i], (step + " send").c_str());
		if (f.format != FI_CQ_FORMAT_CONTEXT)
			FT_CHECK((c.flags & (FI_SEND | FI_MSG)) == (FI_SEND | FI_MSG),
				 "%s send entry: flags %s", f.name, flags_str(c.flags).c_str());
		if (f.format == FI_CQ_FORMAT_TAGGED)
			FT_CHECK(c.tag == 0, "%s send entry: tag 0x%llx", f.name,
				 (unsigned long long)c.tag);
	}
	oob.sync((step + " done").c_str());
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "every CQ format, and fi_cq_readfrom with FI_SOURCE");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV, FI_SOURCE);
	if (fab.cq_data_size() == 0)
		note("cq_data_size is 0: remote CQ data is not tested");
	Oob oob;
	int verified = 0;
	for (const Format &f : formats) {
		/* A provider other than ours may refuse the tagged format where the endpoint
		 * has no FI_TAGGED (fi_cq(3) does not require it): both sides see the same
		 * answer, so both leave the round out. */
		if (f.format == FI_CQ_FORMAT_TAGGED && !fab.has(FI_TAGGED) && !fab.is_efa()) {
			fi_cq_attr attr{};
			attr.format = f.format;
			attr.size = 16;
			fid_cq *probe = nullptr;
			int rc = fi_cq_open(fab.domain(), &attr, &probe, nullptr);
			if (rc == 0)
				fi_close(&probe->fid);
			if (rc == -FI_ENOSYS) {
				note("SKIP part: FI_CQ_FORMAT_TAGGED: fi_cq_open returned -FI_ENOSYS (the endpoint "
				     "has no FI_TAGGED)");
				continue;
			}
		}
		round(fab, oob, f);
		verified++;
	}
	note("%d CQ formats verified%s", verified, fab.has(FI_SOURCE) ? ", with fi_cq_readfrom sources" : "");
	oob.sync("end");
	return 0;
}
