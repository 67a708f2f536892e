/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* fi_rma(3) and fi_atomic(3) of the RDM endpoint. */
#include "rdm/ep.h"

namespace efa::rdm {

namespace {

template <typename R, typename... A> R enosys(A...) { return R(-FI_ENOSYS); }

} // namespace

fi_ops_rma g_rma_ops = {
	.size = sizeof(fi_ops_rma),
	.read = enosys<ssize_t, fid_ep *, void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *>,
	.readv = enosys<ssize_t, fid_ep *, const iovec *, void **, size_t, fi_addr_t, uint64_t, uint64_t, void *>,
	.readmsg = enosys<ssize_t, fid_ep *, const fi_msg_rma *, uint64_t>,
	.write = enosys<ssize_t, fid_ep *, const void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *>,
	.writev = enosys<ssize_t, fid_ep *, const iovec *, void **, size_t, fi_addr_t, uint64_t, uint64_t, void *>,
	.writemsg = enosys<ssize_t, fid_ep *, const fi_msg_rma *, uint64_t>,
	.inject = enosys<ssize_t, fid_ep *, const void *, size_t, fi_addr_t, uint64_t, uint64_t>,
	.writedata = enosys<ssize_t, fid_ep *, const void *, size_t, void *, uint64_t, fi_addr_t, uint64_t, uint64_t,
			    void *>,
	.injectdata = enosys<ssize_t, fid_ep *, const void *, size_t, uint64_t, fi_addr_t, uint64_t, uint64_t>,
};

fi_ops_atomic g_atomic_ops = {
	.size = sizeof(fi_ops_atomic),
	.write = enosys<ssize_t, fid_ep *, const void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, fi_datatype,
			fi_op, void *>,
	.writev = enosys<ssize_t, fid_ep *, const fi_ioc *, void **, size_t, fi_addr_t, uint64_t, uint64_t, fi_datatype,
			 fi_op, void *>,
	.writemsg = enosys<ssize_t, fid_ep *, const fi_msg_atomic *, uint64_t>,
	.inject = enosys<ssize_t, fid_ep *, const void *, size_t, fi_addr_t, uint64_t, uint64_t, fi_datatype, fi_op>,
	.readwrite = enosys<ssize_t, fid_ep *, const void *, size_t, void *, void *, void *, fi_addr_t, uint64_t,
			    uint64_t, fi_datatype, fi_op, void *>,
	.readwritev = enosys<ssize_t, fid_ep *, const fi_ioc *, void **, size_t, fi_ioc *, void **, size_t, fi_addr_t,
			     uint64_t, uint64_t, fi_datatype, fi_op, void *>,
	.readwritemsg = enosys<ssize_t, fid_ep *, const fi_msg_atomic *, fi_ioc *, void **, size_t, uint64_t>,
	.compwrite = enosys<ssize_t, fid_ep *, const void *, size_t, void *, const void *, void *, void *, void *,
			    fi_addr_t, uint64_t, uint64_t, fi_datatype, fi_op, void *>,
	.compwritev = enosys<ssize_t, fid_ep *, const fi_ioc *, void **, size_t, const fi_ioc *, void **, size_t,
			     fi_ioc *, void **, size_t, fi_addr_t, uint64_t, uint64_t, fi_datatype, fi_op, void *>,
	.compwritemsg = enosys<ssize_t, fid_ep *, const fi_msg_atomic *, const fi_ioc *, void **, size_t, fi_ioc *,
			       void **, size_t, uint64_t>,
	.writevalid = enosys<int, fid_ep *, fi_datatype, fi_op, size_t *>,
	.readwritevalid = enosys<int, fid_ep *, fi_datatype, fi_op, size_t *>,
	.compwritevalid = enosys<int, fid_ep *, fi_datatype, fi_op, size_t *>,
};

} // namespace efa::rdm
