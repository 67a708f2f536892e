/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Software atomics: the valid (kind, op, datatype) combinations, invalid ones touching
 * nothing, and every valid one on unaligned multi-element buffers against fi_atomic(3)'s
 * pseudo-code and hand-computed values (wrap-around, signedness, complex, compare-swaps).
 */
#include "rdm/atomic_ops.h"

#include <criterion/criterion.h>
#include <rdma/fi_errno.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

using namespace efa::rdm;

namespace {

using cfloat = std::complex<float>;
using cdouble = std::complex<double>;
using cldouble = std::complex<long double>;

const AtomicKind kKinds[] = {AtomicKind::Write, AtomicKind::Fetch, AtomicKind::Compare};

/*
 * The valid combinations, written out independently of the implementation from
 * fi_atomic(3) (which ops each kind takes) and libfabric's prov/util/src/util_atomic.c
 * (which datatypes each op takes; its logical ops take complex values too).
 * W: write and fetch, F: fetch only, C: compare, '.': none.
 */
const char *const kGrid[FI_ATOMIC_OP_LAST] = {
	/*                    i8 u8 i16 u16 i32 u32 i64 u64 flt dbl fc dc ld ldc */
	/* FI_MIN */          "WWWWWWWWWW..W.",
	/* FI_MAX */          "WWWWWWWWWW..W.",
	/* FI_SUM */          "WWWWWWWWWWWWWW",
	/* FI_PROD */         "WWWWWWWWWWWWWW",
	/* FI_LOR */          "WWWWWWWWWWWWWW",
	/* FI_LAND */         "WWWWWWWWWWWWWW",
	/* FI_BOR */          "WWWWWWWW......",
	/* FI_BAND */         "WWWWWWWW......",
	/* FI_LXOR */         "WWWWWWWWWWWWWW",
	/* FI_BXOR */         "WWWWWWWW......",
	/* FI_ATOMIC_READ */  "FFFFFFFFFFFFFF",
	/* FI_ATOMIC_WRITE */ "WWWWWWWWWWWWWW",
	/* FI_CSWAP */        "CCCCCCCCCCCCCC",
	/* FI_CSWAP_NE */     "CCCCCCCCCCCCCC",
	/* FI_CSWAP_LE */     "CCCCCCCCCC..C.",
	/* FI_CSWAP_LT */     "CCCCCCCCCC..C.",
	/* FI_CSWAP_GE */     "CCCCCCCCCC..C.",
	/* FI_CSWAP_GT */     "CCCCCCCCCC..C.",
	/* FI_MSWAP */        "CCCCCCCC......",
};

bool expected_valid(AtomicKind kind, int op, int dt)
{
	if (op < 0 || op >= FI_ATOMIC_OP_LAST || dt < 0 || dt >= FI_DATATYPE_LAST)
		return false;
	char c = kGrid[op][dt];
	switch (kind) {
	case AtomicKind::Write: return c == 'W';
	case AtomicKind::Fetch: return c == 'W' || c == 'F';
	case AtomicKind::Compare: return c == 'C';
	}
	return false;
}

/*
 * Every kind, op and datatype a wire byte can carry, and a few values above: the enums'
 * collective values (FI_NOOP, FI_VOID) and the 128-bit integers among them.
 */
constexpr int kKindsTried[] = {0, 1, 2, 3, 255};
constexpr int kLastTried = 300;

template <typename F> void for_all_triples(F f)
{
	for (int k : kKindsTried)
		for (int op = 0; op <= kLastTried; op++)
			for (int dt = 0; dt <= kLastTried; dt++)
				f(AtomicKind(k), op, dt);
}

/* ------------------------------------------------------------------ reference */

template <typename T> constexpr bool kComplex = false;
template <typename S> constexpr bool kComplex<std::complex<S>> = true;

template <typename T> bool truthy(T v)
{
	if constexpr (kComplex<T>)
		return v.real() != 0 || v.imag() != 0;
	else
		return v != 0;
}

/*
 * fi_atomic(3)'s pseudo-code for addr[i] after the op, integers wrapping; *stores says
 * whether the op writes addr[i] at all.
 */
template <typename T> T ref(AtomicKind kind, fi_op op, T addr, T buf, T cmp, bool *stores)
{
	constexpr bool integer = std::is_integral_v<T>, ordered = !kComplex<T>;
	const bool l = truthy(addr), r = truthy(buf);
	*stores = op != FI_ATOMIC_READ;
	if (kind == AtomicKind::Compare) {
		switch (op) {
		case FI_CSWAP: *stores = cmp == addr; break;
		case FI_CSWAP_NE: *stores = cmp != addr; break;
		case FI_MSWAP:
			if constexpr (integer)
				return T((buf & cmp) | (addr & ~cmp));
			break;
		default:
			if constexpr (ordered)
				*stores = op == FI_CSWAP_LE ? cmp <= addr
					: op == FI_CSWAP_LT ? cmp < addr
					: op == FI_CSWAP_GE ? cmp >= addr
					: cmp > addr;
		}
		return *stores ? buf : addr;
	}
	switch (op) {
	case FI_MIN:
	case FI_MAX:
		if constexpr (ordered)
			return (op == FI_MIN ? buf < addr : buf > addr) ? buf : addr;
		break;
	case FI_SUM:
	case FI_PROD:
		if constexpr (integer)
			return T(op == FI_SUM ? uint64_t(addr) + uint64_t(buf)
					      : uint64_t(addr) * uint64_t(buf));
		return op == FI_SUM ? addr + buf : addr * buf;
	case FI_LOR: return T(l || r ? 1 : 0);
	case FI_LAND: return T(l && r ? 1 : 0);
	case FI_LXOR: return T((l && !r) || (!l && r) ? 1 : 0);
	case FI_BOR:
	case FI_BAND:
	case FI_BXOR:
		if constexpr (integer) {
			if (op == FI_BOR)
				return T(addr | buf);
			return T(op == FI_BAND ? addr & buf : addr ^ buf);
		}
		break;
	case FI_ATOMIC_READ: return addr;
	case FI_ATOMIC_WRITE: return buf;
	default: break;
	}
	cr_assert_fail("op %d has no reference for this type", int(op));
	return addr;
}

/* ------------------------------------------------------------------ buffers */

template <typename T> T make(int re, int im)
{
	if constexpr (kComplex<T>)
		return T(re, im);
	else
		return T(re); /* unsigned types take negative values modulo 2^n */
}

template <typename T> void put(unsigned char *p, size_t i, T v)
{
	std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

template <typename T> T get(const unsigned char *p, size_t i)
{
	T v;
	std::memcpy(&v, p + i * sizeof(T), sizeof(T));
	return v;
}

/*
 * Target, operand and comparand per element. Comparand against target: equal (0, 3),
 * less (1, 4), greater (2, 5), and for complex a real part that matches while the
 * imaginary one does not (3). Logical truth pairs: TT, FT, TF, FF, and for complex a
 * value true through its imaginary part alone (2, 6).
 */
constexpr size_t kN = 7;
constexpr int kA[kN] = {3, -2, 0, 5, -7, 0, 0}, kAi[kN] = {1, 0, -1, 2, 0, 0, 0};
constexpr int kB[kN] = {-2, -2, 4, 0, 3, 0, 0}, kBi[kN] = {0, 1, 0, 0, 0, 0, 3};
constexpr int kC[kN] = {3, -3, 1, 5, -8, 2, -1}, kCi[kN] = {1, 0, 0, 0, 0, 0, 0};

/* A patterned buffer, so that a stray write shows wherever it lands. */
struct alignas(64) Buf {
	unsigned char b[16 + 8 + kN * 32 + 16];

	explicit Buf(unsigned seed)
	{
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = uint8_t(seed + i * 37);
	}
	/* Whether the bytes outside [from, from + len) are those of o. */
	bool same_outside(const Buf &o, size_t from, size_t len) const
	{
		return !std::memcmp(b, o.b, from) &&
		       !std::memcmp(b + from + len, o.b + from + len, sizeof(b) - from - len);
	}
	bool operator==(const Buf &o) const { return !std::memcmp(b, o.b, sizeof(b)); }
};

/* Runs one valid combination on n elements at byte offset at, against the reference. */
template <typename T>
void check_combo(AtomicKind kind, fi_op op, fi_datatype dt, size_t at, size_t n, bool fetch)
{
	const size_t sz = sizeof(T);
	const int k = int(kind);
	Buf tgt(1), opd(2), cmp(3), res(4);
	for (size_t i = 0; i < n; i++) {
		put(tgt.b + at, i, make<T>(kA[i], kAi[i]));
		put(opd.b + at, i, make<T>(kB[i], kBi[i]));
		put(cmp.b + at, i, make<T>(kC[i], kCi[i]));
	}
	const Buf tgt0 = tgt, opd0 = opd, cmp0 = cmp, res0 = res;
	unsigned char *t = tgt.b + at, *r = res.b + at;
	const unsigned char *t0 = tgt0.b + at;
	int rc = atomic_apply(kind, op, dt, t, op == FI_ATOMIC_READ ? nullptr : opd.b + at,
			      kind == AtomicKind::Compare ? cmp.b + at : nullptr,
			      fetch ? r : nullptr, n);
	cr_assert_eq(rc, 0, "kind %d op %d dt %d: rc %d", k, op, dt, rc);
	cr_assert(opd == opd0 && cmp == cmp0, "kind %d op %d dt %d: input written", k, op, dt);
	cr_assert(tgt.same_outside(tgt0, at, n * sz), "kind %d op %d dt %d at %zu: next to target",
		  k, op, dt, at);
	fetch = fetch && kind != AtomicKind::Write;
	if (fetch)
		cr_assert(res.same_outside(res0, at, n * sz), "kind %d op %d dt %d: beside result",
			  k, op, dt);
	else
		cr_assert(res == res0, "kind %d op %d dt %d: result written", k, op, dt);

	for (size_t i = 0; i < n; i++) {
		bool stores;
		T a = get<T>(t0, i), b = get<T>(opd0.b + at, i), c = get<T>(cmp0.b + at, i);
		cr_assert(get<T>(t, i) == ref(kind, op, a, b, c, &stores),
			  "kind %d op %d dt %d at %zu: element %zu", k, op, dt, at, i);
		cr_assert(stores || !std::memcmp(t + i * sz, t0 + i * sz, sz),
			  "kind %d op %d dt %d: element %zu rewritten", k, op, dt, i);
		/* Bit for bit, long double padding included: no trip through a register. */
		const unsigned char *sent = opd0.b + at + i * sz;
		cr_assert(op != FI_ATOMIC_WRITE || !std::memcmp(t + i * sz, sent, sz),
			  "kind %d op %d dt %d: element %zu not copied", k, op, dt, i);
		cr_assert(!fetch || !std::memcmp(r + i * sz, t0 + i * sz, sz),
			  "kind %d op %d dt %d: element %zu fetched wrong", k, op, dt, i);
	}
}

/* Every valid combination for datatype dt (of element type T), at odd and even offsets. */
template <typename T> int check_type(fi_datatype dt)
{
	int n = 0;
	for (AtomicKind kind : kKinds) {
		for (int i = 0; i < FI_ATOMIC_OP_LAST; i++) {
			const auto op = fi_op(i);
			if (!expected_valid(kind, op, dt))
				continue;
			n++;
			for (size_t at : {16, 17, 19, 23})
				check_combo<T>(kind, op, dt, at, kN, true);
			check_combo<T>(kind, op, dt, 21, kN, false);
			check_combo<T>(kind, op, dt, 17, 1, true);
			int rc = atomic_apply(kind, op, dt, nullptr, nullptr, nullptr, nullptr, 0);
			cr_assert_eq(rc, 0, "a count of 0 touches nothing");
		}
	}
	return n;
}

/*
 * One element at an odd address: asserts the target's new value and, for the kinds that
 * fetch, that the result is the old one.
 */
template <typename T>
void expect(AtomicKind kind, fi_op op, fi_datatype dt, T target, T operand, T compare, T want)
{
	Buf t(5), o(6), c(7), r(8);
	put(t.b + 1, 0, target);
	put(o.b + 1, 0, operand);
	put(c.b + 1, 0, compare);
	int rc = atomic_apply(kind, op, dt, t.b + 1, o.b + 1, c.b + 1, r.b + 1, 1);
	cr_assert_eq(rc, 0, "op %d dt %d: rc %d", op, dt, rc);
	cr_assert(get<T>(t.b + 1, 0) == want, "op %d dt %d: wrong value", op, dt);
	cr_assert(kind == AtomicKind::Write || get<T>(r.b + 1, 0) == target,
		  "op %d dt %d: fetch", op, dt);
}

/* A write op, then the same as a fetch op. */
template <typename T> void expect_update(fi_op op, fi_datatype dt, T target, T operand, T want)
{
	expect(AtomicKind::Write, op, dt, target, operand, T(), want);
	expect(AtomicKind::Fetch, op, dt, target, operand, T(), want);
}

/* Every compare-swap, with the comparand below, equal to and above the target. */
template <typename T> void expect_cswaps(fi_datatype dt, T target, T below, T above)
{
	const struct {
		fi_op op;
		bool below, equal, above;
	} cases[] = {
		{FI_CSWAP, false, true, false},   {FI_CSWAP_NE, true, false, true},
		{FI_CSWAP_LE, true, true, false}, {FI_CSWAP_LT, true, false, false},
		{FI_CSWAP_GE, false, true, true}, {FI_CSWAP_GT, false, false, true},
	};
	const T swap = T(42);
	const auto k = AtomicKind::Compare;
	for (auto &c : cases) {
		expect(k, c.op, dt, target, swap, below, c.below ? swap : target);
		expect(k, c.op, dt, target, swap, target, c.equal ? swap : target);
		expect(k, c.op, dt, target, swap, above, c.above ? swap : target);
	}
}

} // namespace

Test(atomic_ops, datatype_sizes)
{
	const size_t want[FI_DATATYPE_LAST] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16, 16, 32};
	static_assert(sizeof(long double) == 16, "sizes as on x86-64 and aarch64");
	for (int dt = 0; dt < FI_DATATYPE_LAST; dt++)
		cr_assert_eq(atomic_datatype_size(fi_datatype(dt)), want[dt], "datatype %d", dt);
	for (int dt = FI_DATATYPE_LAST; dt <= kLastTried; dt++)
		cr_assert_eq(atomic_datatype_size(fi_datatype(dt)), 0u, "datatype %d", dt);
}

Test(atomic_ops, valid_matches_table)
{
	int n = 0;
	for_all_triples([&](AtomicKind kind, int op, int dt) {
		bool want = expected_valid(kind, op, dt);
		n += want;
		cr_assert_eq(atomic_valid(kind, fi_op(op), fi_datatype(dt)), want,
			     "kind %d op %d dt %d: valid should be %d", int(kind), op, dt, want);
	});
	/* write 130, fetch 130 + 14 reads, compare 80 */
	cr_assert_eq(n, 354, "%d valid combinations in the table", n);
}

Test(atomic_ops, invalid_touches_nothing)
{
	Buf t(9), o(10), c(11), r(12);
	const Buf t0 = t, o0 = o, c0 = c, r0 = r;
	for_all_triples([&](AtomicKind kind, int op, int dt) {
		if (expected_valid(kind, op, dt))
			return;
		int rc = atomic_apply(kind, fi_op(op), fi_datatype(dt), t.b + 1, o.b + 1, c.b + 1,
				      r.b + 1, 4);
		cr_assert_eq(rc, -FI_EOPNOTSUPP, "kind %d op %d dt %d: %d", int(kind), op, dt, rc);
		cr_assert(t == t0 && r == r0 && o == o0 && c == c0, "kind %d op %d dt %d: written",
			  int(kind), op, dt);
		/* Refused before any length is computed: a count that could not be walked. */
		rc = atomic_apply(kind, fi_op(op), fi_datatype(dt), t.b, o.b, c.b, r.b, SIZE_MAX);
		cr_assert_eq(rc, -FI_EOPNOTSUPP);
	});
}

Test(atomic_ops, every_valid_combination_matches_reference)
{
	int n = check_type<int8_t>(FI_INT8) + check_type<uint8_t>(FI_UINT8) +
		check_type<int16_t>(FI_INT16) + check_type<uint16_t>(FI_UINT16) +
		check_type<int32_t>(FI_INT32) + check_type<uint32_t>(FI_UINT32) +
		check_type<int64_t>(FI_INT64) + check_type<uint64_t>(FI_UINT64) +
		check_type<float>(FI_FLOAT) + check_type<double>(FI_DOUBLE) +
		check_type<cfloat>(FI_FLOAT_COMPLEX) + check_type<cdouble>(FI_DOUBLE_COMPLEX) +
		check_type<long double>(FI_LONG_DOUBLE) +
		check_type<cldouble>(FI_LONG_DOUBLE_COMPLEX);
	cr_assert_eq(n, 354);
}

Test(atomic_ops, integers)
{
	const int64_t max = std::numeric_limits<int64_t>::max();
	const int64_t min = std::numeric_limits<int64_t>::min();
	expect_update<int8_t>(FI_SUM, FI_INT8, 100, 100, -56);
	expect_update<int8_t>(FI_SUM, FI_INT8, -5, 3, -2);
	expect_update<int8_t>(FI_PROD, FI_INT8, -3, 4, -12);
	expect_update<int8_t>(FI_MIN, FI_INT8, -5, 3, -5);
	expect_update<int8_t>(FI_MAX, FI_INT8, -5, 3, 3);
	expect_update<int32_t>(FI_PROD, FI_INT32, 65536, 65536, 0);
	expect_update<int64_t>(FI_SUM, FI_INT64, max, 1, min);
	expect_update<int64_t>(FI_PROD, FI_INT64, min, -1, min);
	expect_update<uint8_t>(FI_SUM, FI_UINT8, 200, 100, 44);
	expect_update<uint8_t>(FI_MIN, FI_UINT8, 200, 3, 3);
	/* Promoted to int, 65535 * 65535 would overflow. */
	expect_update<uint16_t>(FI_PROD, FI_UINT16, 65535, 65535, 1);
	expect_update<uint32_t>(FI_SUM, FI_UINT32, 0xffffffffu, 2, 1);
	expect_update<uint64_t>(FI_PROD, FI_UINT64, 1ull << 63, 2, 0);
	/* The bits of -1 are the largest unsigned value. */
	expect_update<uint32_t>(FI_MIN, FI_UINT32, 5, uint32_t(-1), 5);
	expect_update<int32_t>(FI_MIN, FI_INT32, 5, -1, -1);

	expect_update<int32_t>(FI_BAND, FI_INT32, -1, 0x0f0f, 0x0f0f);
	expect_update<int32_t>(FI_BOR, FI_INT32, -256, 0x0f, -241);
	expect_update<int32_t>(FI_BXOR, FI_INT32, -1, 0xff, -256);
	expect_update<int16_t>(FI_LOR, FI_INT16, -7, 0, 1);
	expect_update<uint64_t>(FI_LXOR, FI_UINT64, 4, 8, 0);
	expect_update<uint64_t>(FI_LAND, FI_UINT64, 4, 0, 0);

	auto c = AtomicKind::Compare;
	expect<uint16_t>(c, FI_MSWAP, FI_UINT16, 0x1234, 0xabcd, 0x00ff, 0x12cd);
	expect<int8_t>(c, FI_MSWAP, FI_INT8, 0x0f, -1, int8_t(0xf0), -1);
	expect<uint64_t>(c, FI_MSWAP, FI_UINT64, ~0ull, 0, 1ull << 63, ~0ull >> 1);
}

Test(atomic_ops, floating_and_complex)
{
	expect_update<float>(FI_SUM, FI_FLOAT, -1.5f, 0.25f, -1.25f);
	expect_update<double>(FI_PROD, FI_DOUBLE, -1.5, -4.0, 6.0);
	expect_update<double>(FI_MIN, FI_DOUBLE, -1.5, -4.0, -4.0);
	expect_update<long double>(FI_MAX, FI_LONG_DOUBLE, -1.5L, -4.0L, -1.5L);
	/* long double keeps its 64-bit mantissa. */
	expect_update<long double>(FI_SUM, FI_LONG_DOUBLE, 1.0L, 0x1p-60L, 1.0L + 0x1p-60L);
	expect_update<cfloat>(FI_SUM, FI_FLOAT_COMPLEX, {1, 2}, {3, -4}, {4, -2});
	expect_update<cdouble>(FI_PROD, FI_DOUBLE_COMPLEX, {1, 2}, {3, -4}, {11, 2});
	expect_update<cldouble>(FI_PROD, FI_LONG_DOUBLE_COMPLEX, {0, 1}, {0, 1}, {-1, 0});
	expect_update<cldouble>(FI_ATOMIC_WRITE, FI_LONG_DOUBLE_COMPLEX, {0, 1}, {-5, 6}, {-5, 6});

	expect_update<float>(FI_LOR, FI_FLOAT, 0.0f, 0.5f, 1.0f);
	expect_update<float>(FI_LOR, FI_FLOAT, 0.0f, -0.0f, 0.0f);
	expect_update<double>(FI_LAND, FI_DOUBLE, 2.5, 0.0, 0.0);
	expect_update<double>(FI_LAND, FI_DOUBLE, 2.5, -3.0, 1.0);
	expect_update<long double>(FI_LXOR, FI_LONG_DOUBLE, -1.0L, 2.0L, 0.0L);
	expect_update<long double>(FI_LXOR, FI_LONG_DOUBLE, 0.0L, 2.0L, 1.0L);
	/* A complex value is true when either part is; the result is real. */
	expect_update<cfloat>(FI_LOR, FI_FLOAT_COMPLEX, {0, 1}, {0, 0}, {1, 0});
	expect_update<cdouble>(FI_LAND, FI_DOUBLE_COMPLEX, {0, 1}, {2, 0}, {1, 0});
	expect_update<cdouble>(FI_LAND, FI_DOUBLE_COMPLEX, {0, 1}, {0, 0}, {0, 0});
	expect_update<cldouble>(FI_LXOR, FI_LONG_DOUBLE_COMPLEX, {0, 1}, {2, 0}, {0, 0});
	expect_update<cldouble>(FI_LXOR, FI_LONG_DOUBLE_COMPLEX, {0, -1}, {0, 0}, {1, 0});
}

Test(atomic_ops, cswap_variants_hold_and_fail)
{
	expect_cswaps<int32_t>(FI_INT32, 5, 4, 6);
	expect_cswaps<int8_t>(FI_INT8, -3, -4, -2);
	expect_cswaps<int64_t>(FI_INT64, -1, std::numeric_limits<int64_t>::min(), 0);
	/* Unsigned, the bits of -1 are above everything. */
	expect_cswaps<uint32_t>(FI_UINT32, 5, 0, 0xffffffffu);
	expect_cswaps<uint64_t>(FI_UINT64, 1ull << 63, 0, ~0ull);
	expect_cswaps<float>(FI_FLOAT, -0.5f, -0.75f, 0.0f);
	expect_cswaps<double>(FI_DOUBLE, -2.0, -2.5, 1e300);
	expect_cswaps<long double>(FI_LONG_DOUBLE, 1.0L, 1.0L - 0x1p-63L, 1.0L + 0x1p-62L);

	auto c = AtomicKind::Compare;
	/* IEEE: -0 equals +0. */
	expect<double>(c, FI_CSWAP, FI_DOUBLE, -0.0, 7.0, 0.0, 7.0);
	/* Complex equality needs both parts. */
	expect<cfloat>(c, FI_CSWAP, FI_FLOAT_COMPLEX, {1, 2}, {9, 9}, {1, 2}, {9, 9});
	expect<cfloat>(c, FI_CSWAP, FI_FLOAT_COMPLEX, {1, 2}, {9, 9}, {1, 3}, {1, 2});
	expect<cdouble>(c, FI_CSWAP_NE, FI_DOUBLE_COMPLEX, {1, 2}, {9, 9}, {1, 3}, {9, 9});
	expect<cldouble>(c, FI_CSWAP_NE, FI_LONG_DOUBLE_COMPLEX, {1, 2}, {9, 9}, {1, 2}, {1, 2});
}

Test(atomic_ops, read_with_null_operand)
{
	for (int dt = 0; dt < FI_DATATYPE_LAST; dt++) {
		const size_t len = 3 * atomic_datatype_size(fi_datatype(dt));
		Buf t(13), r(14);
		const Buf t0 = t, r0 = r;
		int rc = atomic_apply(AtomicKind::Fetch, FI_ATOMIC_READ, fi_datatype(dt), t.b + 3,
				      nullptr, nullptr, r.b + 5, 3);
		cr_assert_eq(rc, 0, "dt %d", dt);
		cr_assert(t == t0, "dt %d: target written", dt);
		cr_assert(!std::memcmp(r.b + 5, t0.b + 3, len), "dt %d: wrong values read", dt);
		cr_assert(r.same_outside(r0, 5, len), "dt %d: beside the result", dt);
	}
}
