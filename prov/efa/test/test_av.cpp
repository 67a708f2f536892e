/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Address vectors through the public API (objtest.h): FI_AV_TABLE insert, lookup,
 * straddr, insertsvc and remove; FI_AV_MAP and FI_SYNC_ERR; asynchronous inserts
 * reported on the EQ.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>

#include <criterion/criterion.h>

#include "objtest.h"

#include <vector>

using namespace objtest;

TestSuite(objects, .init = setup, .fini = teardown, .timeout = 60);

/* ------------------------------------------------------------------ AV */

Test(objects, av_table_insert_lookup_straddr_remove)
{
	fid_av *av = open_av(FI_AV_TABLE);
	Ep a = open_ep(av), b = open_ep(av);
	uint8_t both[64];
	std::memcpy(both, a.addr, 32);
	std::memcpy(both + 32, b.addr, 32);
	fi_addr_t fa[2] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
	cr_assert_eq(fi_av_insert(av, both, 2, fa, 0, nullptr), 2);
	cr_assert_eq(fa[0], 0u, "FI_AV_TABLE numbers from 0");
	cr_assert_eq(fa[1], 1u);

	uint8_t back[32];
	size_t len = sizeof back;
	cr_assert_eq(fi_av_lookup(av, fa[1], back, &len), 0);
	cr_assert_eq(len, 32u);
	cr_assert_eq(std::memcmp(back, b.addr, 32), 0);

	char text[128];
	size_t tlen = sizeof text;
	cr_assert_not_null(fi_av_straddr(av, a.addr, text, &tlen));
	cr_assert_eq(tlen, strlen(text) + 1);
	tlen = 4;
	fi_av_straddr(av, a.addr, text, &tlen);
	cr_assert_gt(tlen, 4u, "the length needed comes back");

	/* The same endpoint by node and service. */
	std::string node, service;
	node_service(b.addr, node, service);
	fi_addr_t fs = FI_ADDR_NOTAVAIL;
	cr_assert_eq(fi_av_insertsvc(av, node.c_str(), service.c_str(), &fs, 0, nullptr), 1);
	len = sizeof back;
	cr_assert_eq(fi_av_lookup(av, fs, back, &len), 0);
	cr_assert_eq(std::memcmp(back, b.addr, 24), 0, "GID, QP number and QKEY");
	cr_assert_eq(fi_av_insertsvc(av, "not-a-gid", "1:2", &fs, 0, nullptr), -FI_EINVAL);

	cr_assert_eq(fi_av_remove(av, &fa[1], 1, 0), 0);
	len = sizeof back;
	cr_assert_eq(fi_av_lookup(av, fa[1], back, &len), -FI_ENOENT);
	cr_assert_eq(fi_av_remove(av, &fa[1], 1, 0), -FI_EINVAL, "removed twice");
	char c = 1;
	/* The user learns why, once: libfabric's log goes to stderr. */
	fflush(stderr);
	FILE *log = tmpfile();
	cr_assert_not_null(log);
	const int saved = dup(2);
	dup2(fileno(log), 2);
	cr_assert_eq(fi_inject(a.ep, &c, 1, fa[1]), -FI_EINVAL, "a send to a removed address");
	cr_assert_eq(fi_inject(a.ep, &c, 1, fa[1]), -FI_EINVAL, "again");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	std::string logged;
	rewind(log);
	for (int ch; (ch = fgetc(log)) != EOF;)
		logged += char(ch);
	fclose(log);
	cr_assert(logged.find("not in the endpoint's address vector") != std::string::npos &&
			  logged.find("fi_av_insert") != std::string::npos,
		  "no log line naming the cause and the fix: '%s'", logged.c_str());
	cr_assert_eq(logged.find("not in the endpoint's address vector"),
		     logged.rfind("not in the endpoint's address vector"), "logged more than once");
	close_ep(a);
	close_ep(b);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(objects, av_map_and_sync_errors)
{
	fid_av *av = open_av(FI_AV_MAP);
	Ep a = open_ep(av);
	uint8_t two[64];
	std::memcpy(two, a.addr, 32);
	std::memcpy(two + 32, a.addr, 32);
	std::memset(two + 32 + 16, 0, 2); /* QP number 0: never an endpoint */
	fi_addr_t fa[2];
	int errs[2] = {-1, -1};
	cr_assert_eq(fi_av_insert(av, two, 2, fa, FI_SYNC_ERR, errs), 1);
	cr_assert_eq(errs[0], 0);
	cr_assert_eq(errs[1], FI_EINVAL);
	cr_assert_neq(fa[0], FI_ADDR_NOTAVAIL);
	cr_assert_eq(fa[1], FI_ADDR_NOTAVAIL);
	uint8_t back[32];
	size_t len = sizeof back;
	cr_assert_eq(fi_av_lookup(av, fa[0], back, &len), 0);
	cr_assert_eq(std::memcmp(back, a.addr, 32), 0);
	close_ep(a);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(objects, av_asynchronous_insert_reports_on_the_eq)
{
	fid_eq *eq = open_eq();
	fid_av *av = open_av(FI_AV_TABLE, FI_EVENT);
	cr_assert_eq(fi_av_bind(av, &eq->fid, 0), 0);
	Ep a = open_ep(av);
	uint8_t two[64];
	std::memcpy(two, a.addr, 32);
	std::memcpy(two + 32, a.addr, 32);
	std::memset(two + 32 + 16, 0, 2);
	fi_addr_t fa[2];
	int ctx = 0;
	cr_assert_eq(fi_av_insert(av, two, 2, fa, 0, &ctx), 0, "asynchronous: 0 at return");

	/* The failed address first, as an error entry naming its index. */
	uint32_t event = 0;
	fi_eq_entry e;
	cr_assert_eq(fi_eq_read(eq, &event, &e, sizeof e, 0), -FI_EAVAIL);
	fi_eq_err_entry err{};
	cr_assert_eq(fi_eq_readerr(eq, &err, 0), ssize_t(sizeof err));
	cr_assert_eq(err.fid, &av->fid);
	cr_assert_eq(err.context, &ctx);
	cr_assert_eq(err.data, 1u, "index of the failed address");
	cr_assert_eq(err.err, FI_EINVAL);
	char buf[128];
	cr_assert_not_null(fi_eq_strerror(eq, err.prov_errno, err.err_data, buf, sizeof buf));
	cr_assert_gt(strlen(buf), 0u);

	cr_assert_eq(fi_eq_sread(eq, &event, &e, sizeof e, 1000, 0), ssize_t(sizeof e));
	cr_assert_eq(event, uint32_t(FI_AV_COMPLETE));
	cr_assert_eq(e.fid, &av->fid);
	cr_assert_eq(e.context, &ctx);
	cr_assert_eq(e.data, 1u, "one address inserted");
	cr_assert_eq(fa[0], 0u);
	cr_assert_eq(fa[1], FI_ADDR_NOTAVAIL);

	cr_assert_eq(fi_close(&eq->fid), -FI_EBUSY, "bound to the AV");
	close_ep(a);
	cr_assert_eq(fi_close(&av->fid), 0);
	cr_assert_eq(fi_close(&eq->fid), 0);
}

