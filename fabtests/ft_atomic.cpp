/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_atomic: every atomic operation the provider says it supports, on every datatype,
 * with the results computed by the test (fi_atomic(3)).
 *
 * Queries, on both sides, for the 16 datatypes (FI_INT8 .. FI_LONG_DOUBLE_COMPLEX,
 * FI_INT128, FI_UINT128) and the 19 operations (FI_MIN .. FI_MSWAP):
 *   - fi_atomicvalid, fi_fetch_atomicvalid, fi_compare_atomicvalid return 0 with a count
 *     >= 1, or -FI_EOPNOTSUPP; anything else fails;
 *   - fi_query_atomic (flags 0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC) agrees with them,
 *     with the same count and size = the C type's size;
 *   - an operation outside a family's list in fi_atomic(3) ("usable with base / fetch /
 *     compare atomic operations") is not valid in that family;
 *   - FI_SUM and FI_ATOMIC_WRITE (base and fetch), FI_ATOMIC_READ (fetch) and FI_CSWAP
 *     (compare) are valid on FI_UINT32 and FI_UINT64 (this project's minimum; the man
 *     page has no list of operations every provider must support);
 *   - both processes find the same valid set.
 * Then the client, for every valid (family, op, datatype), runs fi_atomic,
 * fi_fetch_atomic or fi_compare_atomic on min(count, 4) elements of a slot of its own in
 * the server's region (the elements chosen so both outcomes of every comparison occur,
 * and the arithmetic is exact); fetched results must be the initial values, the
 * initiator entry has op_context and FI_ATOMIC (with FI_WRITE for base; FI_READ or
 * FI_WRITE for fetch/compare, fi_cq(3) does not say which). fi_fetch_atomic(FI_ATOMIC_READ) passes a NULL source buffer, which
 * fi_atomic(3) allows. Afterwards the server checks every slot: the operation's result
 * (by value: long double padding bytes are not compared) in the used elements, the
 * initial bytes everywhere else and in every slot of an invalid operation.
 */
#include "common/ft_rdm.h"

#include <complex>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr int n_dt = 16;
const fi_datatype dts[n_dt] = {FI_INT8,	  FI_UINT8,	     FI_INT16,	     FI_UINT16,
			       FI_INT32,  FI_UINT32,	     FI_INT64,	     FI_UINT64,
			       FI_FLOAT,  FI_DOUBLE,	     FI_FLOAT_COMPLEX, FI_DOUBLE_COMPLEX,
			       FI_LONG_DOUBLE, FI_LONG_DOUBLE_COMPLEX, FI_INT128, FI_UINT128};
const char *const dt_names[n_dt] = {"FI_INT8",	   "FI_UINT8",		 "FI_INT16",
				    "FI_UINT16",   "FI_INT32",		 "FI_UINT32",
				    "FI_INT64",	   "FI_UINT64",		 "FI_FLOAT",
				    "FI_DOUBLE",   "FI_FLOAT_COMPLEX",	 "FI_DOUBLE_COMPLEX",
				    "FI_LONG_DOUBLE", "FI_LONG_DOUBLE_COMPLEX", "FI_INT128",
				    "FI_UINT128"};
constexpr int n_op = 19;
const char *const op_names[n_op] = {
	"FI_MIN",  "FI_MAX",	  "FI_SUM",	 "FI_PROD",	"FI_LOR",      "FI_LAND",
	"FI_BOR",  "FI_BAND",	  "FI_LXOR",	 "FI_BXOR",	"FI_ATOMIC_READ", "FI_ATOMIC_WRITE",
	"FI_CSWAP", "FI_CSWAP_NE", "FI_CSWAP_LE", "FI_CSWAP_LT", "FI_CSWAP_GE", "FI_CSWAP_GT",
	"FI_MSWAP"};
enum Kind { BASE, FETCH, COMPARE, N_KIND };
const char *const kind_names[] = {"fi_atomic", "fi_fetch_atomic", "fi_compare_atomic"};
const uint64_t kind_query_flags[] = {0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC};

/* fi_atomic(3): the operations usable with each family. */
bool in_family(Kind k, int op)
{
	switch (k) {
	case BASE: return op <= FI_BXOR || op == FI_ATOMIC_WRITE;
	case FETCH: return op <= FI_ATOMIC_WRITE;
	case COMPARE: return op >= FI_CSWAP && op <= FI_MSWAP;
	default: return false;
	}
}

constexpr int max_elems = 4;
constexpr size_t elem_room = 32; /* the largest type: long double complex */
constexpr size_t slot_size = max_elems * elem_room;
size_t slot_of(Kind k, int op, int d) { return ((size_t(k) * n_op + size_t(op)) * n_dt + size_t(d)) * slot_size; }
constexpr size_t region = size_t(N_KIND) * n_op * n_dt * slot_size;

/* ------------------------------------------------------------------ typed arithmetic */

template <typename T> struct is_cplx : std::false_type {};
template <typename T> struct is_cplx<std::complex<T>> : std::true_type {};
template <typename T>
constexpr bool integral = std::is_integral_v<T> || std::is_same_v<T, __int128> ||
			  std::is_same_v<T, unsigned __int128>;
template <typename T> constexpr bool ordered = !is_cplx<T>::value;

template <typename T> T num(long long v, int salt)
{
	if constexpr (is_cplx<T>::value) {
		using R = typename T::value_type;
		return T(R(v), R((salt % 3) - 1));
	} else if constexpr (integral<T> && !std::is_signed_v<T> &&
			     !std::is_same_v<T, __int128>) {
		return T(v < 0 ? -v : v);
	} else {
		return T(v);
	}
}

/* A byte pattern repeated over an integer type. */
template <typename T> T bits(uint8_t b)
{
	T v{};
	uint8_t raw[sizeof(T)];
	memset(raw, b, sizeof raw);
	memcpy(&v, raw, sizeof v);
	return v;
}

template <typename T> bool truth(const T &v) { return v != T(0); }

/* The initial value, operand and compare value of element i of operation op. */
template <typename T> void values(int op, int i, T &init, T &operand, T &compare)
{
	static const long long base_init[4] = {10, 13, 16, 19};
	init = num<T>(base_init[i], i);
	compare = num<T>(0, 0);
	switch (op) {
	case FI_MIN:
	case FI_MAX: {
		static const long long o[4] = {-5, 13, 40, 0};
		operand = num<T>(o[i], i);
		break;
	}
	case FI_SUM: {
		static const long long o[4] = {1, 100, -7, 3};
		operand = num<T>(o[i], i + 1);
		break;
	}
	case FI_PROD: {
		static const long long o[4] = {2, 3, 0, -5};
		operand = num<T>(o[i], i + 2);
		break;
	}
	case FI_LOR:
	case FI_LAND:
	case FI_LXOR: {
		static const long long a[4] = {0, 0, 7, 7}, o[4] = {0, 5, 0, 5};
		init = a[i] ? num<T>(a[i], i) : T(0);
		operand = o[i] ? num<T>(o[i], i) : T(0);
		break;
	}
	case FI_BOR:
	case FI_BAND:
	case FI_BXOR:
	case FI_MSWAP:
		if constexpr (integral<T>) {
			static const uint8_t a[4] = {0x5a, 0x0f, 0x33, 0x00};
			static const uint8_t o[4] = {0x3c, 0xf0, 0x55, 0xff};
			static const uint8_t m[4] = {0x0f, 0xff, 0x00, 0x55};
			init = bits<T>(a[i]);
			operand = bits<T>(o[i]);
			compare = bits<T>(m[i]);
		} else {
			operand = num<T>(3, i);
		}
		break;
	case FI_ATOMIC_READ: operand = num<T>(99, i); break;
	case FI_ATOMIC_WRITE: {
		static const long long o[4] = {77, 0, 1, 126};
		operand = num<T>(o[i], i + 1);
		break;
	}
	default: { /* FI_CSWAP .. FI_CSWAP_GT: compare below, equal, above, equal */
		static const long long d[4] = {-1, 0, 1, 0};
		compare = num<T>(base_init[i] + d[i], i);
		operand = num<T>(100 + i, i + 2);
		break;
	}
	}
}

/* fi_atomic(3), "Atomic Operations": the new target value. ok=false: not defined for T. */
template <typename T> T result(int op, const T &a, const T &b, const T &c, bool &ok)
{
	ok = true;
	switch (op) {
	case FI_SUM: return T(a + b);
	case FI_PROD: return T(a * b);
	case FI_LOR: return (truth(a) || truth(b)) ? T(1) : T(0);
	case FI_LAND: return (truth(a) && truth(b)) ? T(1) : T(0);
	case FI_LXOR: return ((truth(a) && !truth(b)) || (!truth(a) && truth(b))) ? T(1) : T(0);
	case FI_ATOMIC_READ: return a;
	case FI_ATOMIC_WRITE: return b;
	case FI_CSWAP: return c == a ? b : a;
	case FI_CSWAP_NE: return c != a ? b : a;
	default: break;
	}
	if constexpr (ordered<T>) {
		switch (op) {
		case FI_MIN: return b < a ? b : a;
		case FI_MAX: return b > a ? b : a;
		case FI_CSWAP_LE: return c <= a ? b : a;
		case FI_CSWAP_LT: return c < a ? b : a;
		case FI_CSWAP_GE: return c >= a ? b : a;
		case FI_CSWAP_GT: return c > a ? b : a;
		default: break;
		}
	}
	if constexpr (integral<T>) {
		switch (op) {
		case FI_BOR: return T(a | b);
		case FI_BAND: return T(a & b);
		case FI_BXOR: return T(a ^ b);
		case FI_MSWAP: return T((b & c) | (a & ~c));
		default: break;
		}
	}
	ok = false;
	return a;
}

template <typename T> std::string show(const T &v)
{
	char s[96];
	if constexpr (is_cplx<T>::value)
		snprintf(s, sizeof s, "(%Lg, %Lg)", (long double)v.real(), (long double)v.imag());
	else if constexpr (std::is_floating_point_v<T>)
		snprintf(s, sizeof s, "%Lg", (long double)v);
	else if constexpr (sizeof(T) == 16)
		snprintf(s, sizeof s, "0x%016llx%016llx", (unsigned long long)((unsigned __int128)v >> 64),
			 (unsigned long long)(unsigned __int128)v);
	else if constexpr (std::is_signed_v<T>)
		snprintf(s, sizeof s, "%lld", (long long)v);
	else
		snprintf(s, sizeof s, "%llu (0x%llx)", (unsigned long long)v, (unsigned long long)v);
	return s;
}

/* Stores v at p; the 6 padding bytes of an x86 long double are zeroed, so the bytes
 * are deterministic (they are not part of the value). */
template <typename T> void store(uint8_t *p, const T &v)
{
	memcpy(p, &v, sizeof v);
	if constexpr (std::is_same_v<T, long double> && sizeof(long double) == 16 &&
		      std::numeric_limits<long double>::digits == 64)
		memset(p + 10, 0, 6);
	if constexpr (std::is_same_v<T, std::complex<long double>> && sizeof(long double) == 16 &&
		      std::numeric_limits<long double>::digits == 64) {
		memset(p + 10, 0, 6);
		memset(p + 26, 0, 6);
	}
}

/* Calls f(T{}) with the C type of datatype index d. */
template <typename F> void with_type(int d, F &&f)
{
	switch (dts[d]) {
	case FI_INT8: f(int8_t{}); break;
	case FI_UINT8: f(uint8_t{}); break;
	case FI_INT16: f(int16_t{}); break;
	case FI_UINT16: f(uint16_t{}); break;
	case FI_INT32: f(int32_t{}); break;
	case FI_UINT32: f(uint32_t{}); break;
	case FI_INT64: f(int64_t{}); break;
	case FI_UINT64: f(uint64_t{}); break;
	case FI_FLOAT: f(float{}); break;
	case FI_DOUBLE: f(double{}); break;
	case FI_FLOAT_COMPLEX: f(std::complex<float>{}); break;
	case FI_DOUBLE_COMPLEX: f(std::complex<double>{}); break;
	case FI_LONG_DOUBLE: f(static_cast<long double>(0)); break;
	case FI_LONG_DOUBLE_COMPLEX: f(std::complex<long double>{}); break;
	case FI_INT128: f(__int128{}); break;
	case FI_UINT128: f(static_cast<unsigned __int128>(0)); break;
	default: FT_FAIL("datatype %d", int(dts[d]));
	}
}

size_t type_size(int d)
{
	size_t n = 0;
	with_type(d, [&](auto t) { n = sizeof t; });
	return n;
}

/* The initial bytes of a slot (all 4 elements, the rest of the slot a pattern). */
void init_slot(uint8_t *p, Kind k, int op, int d)
{
	fill_pattern(p, slot_size, uint32_t(slot_of(k, op, d) / slot_size));
	with_type(d, [&](auto t) {
		using T = decltype(t);
		for (int i = 0; i < max_elems; i++) {
			T a, b, c;
			values<T>(op, i, a, b, c);
			store(p + size_t(i) * sizeof(T), a);
		}
	});
}

/* The valid table: counts (0: not valid) per family, op, datatype. */
struct Table {
	size_t count[N_KIND][n_op][n_dt] = {};
};

Table query(const Fabric &fab, fid_ep *ep)
{
	Table t;
	bool domain_query = true;
	for (int k = 0; k < N_KIND; k++) {
		for (int op = 0; op < n_op; op++) {
			for (int d = 0; d < n_dt; d++) {
				std::string what = std::string(kind_names[k]) + "valid(" + dt_names[d] +
						   ", " + op_names[op] + ")";
				size_t count = 0;
				int rc = k == BASE    ? fi_atomicvalid(ep, dts[d], fi_op(op), &count)
					 : k == FETCH ? fi_fetch_atomicvalid(ep, dts[d], fi_op(op), &count)
						      : fi_compare_atomicvalid(ep, dts[d], fi_op(op), &count);
				FT_CHECK(rc == 0 || rc == -FI_EOPNOTSUPP,
					 "%s returned %d (%s): expected 0 or -FI_EOPNOTSUPP", what.c_str(),
					 rc, fi_strerror(-rc));
				if (rc == 0) {
					FT_CHECK(count >= 1, "%s: valid with count %zu", what.c_str(), count);
					FT_CHECK(in_family(Kind(k), op),
						 "%s: valid, but fi_atomic(3) does not list %s for %s",
						 what.c_str(), op_names[op], kind_names[k]);
					t.count[k][op][d] = count;
				}
				if (!domain_query)
					continue;
				fi_atomic_attr attr{};
				int q = fi_query_atomic(fab.domain(), dts[d], fi_op(op), &attr,
							kind_query_flags[k]);
				if (q == -FI_ENOSYS) {
					deviation(fab, false, Loc::current(),
						  "fi_query_atomic returns -FI_ENOSYS: not implemented");
					domain_query = false;
					continue;
				}
				FT_CHECK(q == rc,
					 "fi_query_atomic(%s, %s, %s) returned %d (%s), but %s returned "
					 "%d",
					 dt_names[d], op_names[op],
					 k == BASE ? "0" : k == FETCH ? "FI_FETCH_ATOMIC" : "FI_COMPARE_ATOMIC",
					 q, fi_strerror(-q), what.c_str(), rc);
				if (q == 0) {
					FT_CHECK(attr.count == count,
						 "fi_query_atomic: count %zu, %s: %zu", attr.count,
						 what.c_str(), count);
					FT_CHECK(attr.size == type_size(d),
						 "fi_query_atomic(%s): size %zu, the C type has %zu",
						 dt_names[d], attr.size, type_size(d));
				}
			}
		}
	}
	/* This project's minimum. */
	for (int d : {5 /* FI_UINT32 */, 7 /* FI_UINT64 */}) {
		struct {
			Kind k;
			int op;
		} need[] = {{BASE, FI_SUM},	  {BASE, FI_ATOMIC_WRITE}, {FETCH, FI_SUM},
			    {FETCH, FI_ATOMIC_WRITE}, {FETCH, FI_ATOMIC_READ}, {COMPARE, FI_CSWAP}};
		for (auto [k, op] : need)
			FT_CHECK(t.count[k][op][d] > 0,
				 "%s(%s, %s) is not valid: the minimum set (FI_SUM, FI_ATOMIC_WRITE, "
				 "FI_ATOMIC_READ, FI_CSWAP on FI_UINT32 and FI_UINT64) is required",
				 kind_names[k], dt_names[d], op_names[op]);
	}
	return t;
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "every valid atomic operation and datatype, results verified");
	Fabric fab(FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	Endpoint ep(fab, ep_spec(fab));
	fi_addr_t peer = ctl.exchange_names(fab, ep);
	Table mine = query(fab, ep);
	/* Both sides' counts: equal on one provider (the server checks it below); a pair on
	 * two providers (EFA_FT_INTEROP=1) uses the smaller of each. */
	ctl.send(&mine, sizeof mine);
	Table theirs;
	ctl.recv(&theirs, sizeof theirs);
	if (interop()) {
		for (int k = 0; k < N_KIND; k++)
			for (int op = 0; op < n_op; op++)
				for (int d = 0; d < n_dt; d++)
					mine.count[k][op][d] = std::min(mine.count[k][op][d], theirs.count[k][op][d]);
		theirs = mine;
	}
	int n_valid = 0;
	std::string per_kind;
	for (int k = 0; k < N_KIND; k++) {
		int n = 0;
		for (int op = 0; op < n_op; op++)
			for (int d = 0; d < n_dt; d++)
				n += mine.count[k][op][d] > 0;
		n_valid += n;
		per_kind += std::string(per_kind.empty() ? "" : ", ") + kind_names[k] + " " +
			    std::to_string(n);
	}

	if (opts.client) {
		RemoteMr rmr = ctl.recv_mr();
		Buffer local(fab, 3 * slot_size + 4096, FI_READ | FI_WRITE);
		uint8_t *src = local.data(), *cmp = src + slot_size, *res = cmp + slot_size;
		/* fi_atomic(3): FI_ATOMIC_READ ignores the source buffer, which may be NULL. */
		const bool read_null = !known_broken(fab, "FI_ATOMIC_READ with no source buffer");
		int done = 0;
		for (int k = 0; k < N_KIND; k++) {
			for (int op = 0; op < n_op; op++) {
				for (int d = 0; d < n_dt; d++) {
					size_t count = mine.count[k][op][d];
					if (!count)
						continue;
					int n = int(std::min<size_t>(count, max_elems));
					std::string what = std::string(kind_names[k]) + "(" + dt_names[d] +
							   ", " + op_names[op] + ", " + std::to_string(n) +
							   " elements)";
					memset(local.data(), canary, 3 * slot_size);
					size_t sz = type_size(d);
					bool ok_all = true;
					with_type(d, [&](auto t) {
						using T = decltype(t);
						for (int i = 0; i < n; i++) {
							T a, b, c;
							values<T>(op, i, a, b, c);
							store(src + size_t(i) * sz, b);
							store(cmp + size_t(i) * sz, c);
							bool ok;
							result<T>(op, a, b, c, ok);
							ok_all = ok_all && ok;
						}
					});
					FT_CHECK(ok_all,
						 "%s is valid, but fi_atomic(3) defines no result for it "
						 "(the test cannot check it)",
						 what.c_str());
					fi_context2 ctx{};
					uint64_t addr = rmr.at(slot_of(Kind(k), op, d));
					fi_datatype dt = dts[d];
					fi_op o = fi_op(op);
					if (k == BASE)
						FT_POST(fi_atomic(ep, src, size_t(n), local.desc(), peer, addr,
								   rmr.key, dt, o, &ctx));
					else if (k == FETCH)
						FT_POST(fi_fetch_atomic(
							ep, op == FI_ATOMIC_READ && read_null ? nullptr : src,
							size_t(n),
							op == FI_ATOMIC_READ && read_null ? nullptr : local.desc(), res,
							local.desc(), peer, addr, rmr.key, dt, o, &ctx));
					else
						FT_POST(fi_compare_atomic(ep, src, size_t(n), local.desc(),
									   cmp, local.desc(), res,
									   local.desc(), peer, addr,
									   rmr.key, dt, o, &ctx));
					Entry e = ep.tx().wait(&ctx, what);
					/* fi_cq(3): FI_WRITE for an atomic write; a fetch or compare
					 * atomic both reads and writes, and the man page does not say
					 * which flag it gets: one of the two. */
					expect_flags(e, FI_ATOMIC | (k == BASE ? FI_WRITE : 0),
						     FI_RECV | FI_SEND | (k == BASE ? FI_READ : 0), what);
					FT_CHECK(e.flags & (FI_READ | FI_WRITE),
						 "%s: completion flags %s: neither FI_READ nor FI_WRITE",
						 what.c_str(), flags_str(e.flags).c_str());
					if (k != BASE) {
						with_type(d, [&](auto t) {
							using T = decltype(t);
							for (int i = 0; i < n; i++) {
								T a, b, c, got;
								values<T>(op, i, a, b, c);
								memcpy(&got, res + size_t(i) * sz, sz);
								FT_CHECK(got == a,
									 "%s: element %d fetched %s, the "
									 "initial value is %s",
									 what.c_str(), i, show(got).c_str(),
									 show(a).c_str());
							}
						});
						FT_EXPECT_BYTES(res + size_t(n) * sz, slot_size - size_t(n) * sz,
								canary, (what + ": after the results").c_str());
					}
					done++;
				}
			}
		}
		ctl.sync("done");
		ctl.sync("verified");
		note("%d atomic operations verified (%s valid of %d x %d per family)", done,
		     per_kind.c_str(), n_op, n_dt);
		return 0;
	}

	/* server: the target */
	for (int k = 0; k < N_KIND; k++)
		for (int op = 0; op < n_op; op++)
			for (int d = 0; d < n_dt; d++)
				FT_CHECK(mine.count[k][op][d] == theirs.count[k][op][d],
					 "%s(%s, %s): the server's query gives count %zu, the client's "
					 "%zu",
					 kind_names[k], dt_names[d], op_names[op], mine.count[k][op][d],
					 theirs.count[k][op][d]);
	Buffer target(fab, region, FI_REMOTE_READ | FI_REMOTE_WRITE);
	for (int k = 0; k < N_KIND; k++)
		for (int op = 0; op < n_op; op++)
			for (int d = 0; d < n_dt; d++)
				init_slot(target.data() + slot_of(Kind(k), op, d), Kind(k), op, d);
	ctl.send_mr(target);
	ctl.sync("done");
	std::vector<uint8_t> expect(slot_size);
	for (int k = 0; k < N_KIND; k++) {
		for (int op = 0; op < n_op; op++) {
			for (int d = 0; d < n_dt; d++) {
				uint8_t *p = target.data() + slot_of(Kind(k), op, d);
				init_slot(expect.data(), Kind(k), op, d);
				size_t count = mine.count[k][op][d];
				int n = int(std::min<size_t>(count, max_elems));
				size_t sz = type_size(d);
				std::string what = std::string("target of ") + kind_names[k] + "(" +
						   dt_names[d] + ", " + op_names[op] + ")";
				with_type(d, [&](auto t) {
					using T = decltype(t);
					for (int i = 0; i < n; i++) {
						T a, b, c, got;
						values<T>(op, i, a, b, c);
						bool ok;
						T want = result<T>(op, a, b, c, ok);
						memcpy(&got, p + size_t(i) * sz, sz);
						FT_CHECK(got == want,
							 "%s: element %d is %s, expected %s (initial %s, "
							 "operand %s, compare %s)",
							 what.c_str(), i, show(got).c_str(), show(want).c_str(),
							 show(a).c_str(), show(b).c_str(), show(c).c_str());
					}
				});
				/* Elements not operated on, and the rest of the slot: initial bytes. */
				size_t used = size_t(n) * sz;
				if (memcmp(p + used, expect.data() + used, slot_size - used))
					FT_FAIL("%s: bytes after the %d elements it operated on changed",
						what.c_str(), n);
			}
		}
	}
	ctl.sync("verified");
	note("target: %d valid (family, op, datatype) combinations (%s), every slot verified",
	     n_valid, per_kind.c_str());
	return 0;
}
