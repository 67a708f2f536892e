/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Software execution of libfabric atomics for the target of an emulated atomic. */
#include "rdm/atomic_ops.h"

#include <rdma/fi_errno.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace efa::rdm {

namespace {

/*
 * Which (kind, op, datatype) combinations are valid: the table of libfabric's own
 * software atomics, ofiwg/libfabric prov/util/src/util_atomic.c (ofi_atomic_valid() over
 * ofi_atomic_write_handlers, ofi_atomic_readwrite_handlers and ofi_atomic_swap_handlers),
 * as filled by its open-coded variant (without HAVE_BUILTIN_MM_ATOMICS):
 *
 *   all 14 types      SUM PROD LOR LAND LXOR ATOMIC_WRITE, ATOMIC_READ (fetch only),
 *                     CSWAP CSWAP_NE
 *   integers + reals  MIN MAX CSWAP_LE CSWAP_LT CSWAP_GE CSWAP_GT
 *   integers          BOR BAND BXOR MSWAP
 *
 * where reals are float, double and long double. Logical ops do take complex operands
 * there (a complex value is true when either part is non-zero; the result is 0 or 1 with
 * a zero imaginary part). Its builtin-atomics variant leaves out the types wider than 8
 * bytes only because __atomic cannot reach them; emulated atomics are serialised by the
 * target's progress and need no such limit.
 */
constexpr unsigned kInt = 1, kReal = 2, kComplex = 4;
constexpr unsigned kAll = kInt | kReal | kComplex;

unsigned type_class(fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
	case FI_INT16:
	case FI_UINT16:
	case FI_INT32:
	case FI_UINT32:
	case FI_INT64:
	case FI_UINT64:
		return kInt;
	case FI_FLOAT:
	case FI_DOUBLE:
	case FI_LONG_DOUBLE:
		return kReal;
	case FI_FLOAT_COMPLEX:
	case FI_DOUBLE_COMPLEX:
	case FI_LONG_DOUBLE_COMPLEX:
		return kComplex;
	default:
		return 0;
	}
}

unsigned allowed_types(AtomicKind kind, fi_op op)
{
	switch (kind) {
	case AtomicKind::Write:
	case AtomicKind::Fetch:
		switch (op) {
		case FI_MIN:
		case FI_MAX:
			return kInt | kReal;
		case FI_SUM:
		case FI_PROD:
		case FI_LOR:
		case FI_LAND:
		case FI_LXOR:
		case FI_ATOMIC_WRITE:
			return kAll;
		case FI_BOR:
		case FI_BAND:
		case FI_BXOR:
			return kInt;
		case FI_ATOMIC_READ:
			return kind == AtomicKind::Fetch ? kAll : 0;
		default:
			return 0;
		}
	case AtomicKind::Compare:
		switch (op) {
		case FI_CSWAP:
		case FI_CSWAP_NE:
			return kAll;
		case FI_CSWAP_LE:
		case FI_CSWAP_LT:
		case FI_CSWAP_GE:
		case FI_CSWAP_GT:
			return kInt | kReal;
		case FI_MSWAP:
			return kInt;
		default:
			return 0;
		}
	}
	return 0; /* a kind byte from the wire that names no kind */
}

template <typename T> struct IsComplex : std::false_type {};
template <typename S> struct IsComplex<std::complex<S>> : std::true_type {};

/* The wire's FI_*_COMPLEX layout is {real, imag}; std::complex guarantees the same. */
static_assert(sizeof(std::complex<float>) == 2 * sizeof(float));
static_assert(sizeof(std::complex<double>) == 2 * sizeof(double));
static_assert(sizeof(std::complex<long double>) == 2 * sizeof(long double));

/* Targets sit at whatever address the initiator named, so every access is a memcpy. */
template <typename T> T load(const unsigned char *p)
{
	T v;
	std::memcpy(&v, p, sizeof(T));
	return v;
}

template <typename T> void store(unsigned char *p, const T &v) { std::memcpy(p, &v, sizeof(T)); }

/*
 * Integer sums and products wrap, as a NIC's would: computed in an unsigned type at least
 * as wide as unsigned int, so neither signed overflow nor the promotion of small unsigned
 * types to int can make them undefined.
 */
template <typename T> using Wide = std::common_type_t<std::make_unsigned_t<T>, unsigned>;

template <typename T> T add(T a, T b)
{
	if constexpr (std::is_integral_v<T>)
		return T(Wide<T>(a) + Wide<T>(b));
	else
		return a + b;
}

template <typename T> T mul(T a, T b)
{
	if constexpr (std::is_integral_v<T>)
		return T(Wide<T>(a) * Wide<T>(b));
	else
		return a * b;
}

/* C's truth of a value, which libfabric extends to complex numbers part by part. */
template <typename T> bool truth(const T &v)
{
	if constexpr (IsComplex<T>::value)
		return v.real() != 0 || v.imag() != 0;
	else
		return v != 0;
}

/*
 * The previous value goes to result as bytes, so that what the initiator fetches is
 * exactly what was there (padding and NaN payloads included).
 */
template <typename T, typename F>
void update(unsigned char *t, const unsigned char *o, unsigned char *r, size_t n, F f)
{
	for (size_t i = 0; i < n; i++, t += sizeof(T), o += sizeof(T)) {
		if (r) {
			std::memcpy(r, t, sizeof(T));
			r += sizeof(T);
		}
		store(t, T(f(load<T>(t), load<T>(o))));
	}
}

/*
 * The target is stored to only where holds(compare[i], target[i]), so an unmet condition
 * leaves it bit for bit.
 */
template <typename T, typename P>
void swap_if(unsigned char *t, const unsigned char *o, const unsigned char *c, unsigned char *r,
	     size_t n, P holds)
{
	for (size_t i = 0; i < n; i++, t += sizeof(T), o += sizeof(T), c += sizeof(T)) {
		if (r) {
			std::memcpy(r, t, sizeof(T));
			r += sizeof(T);
		}
		if (holds(load<T>(c), load<T>(t)))
			std::memcpy(t, o, sizeof(T));
	}
}

template <typename T>
void mswap(unsigned char *t, const unsigned char *o, const unsigned char *c, unsigned char *r,
	   size_t n)
{
	for (size_t i = 0; i < n; i++, t += sizeof(T), o += sizeof(T), c += sizeof(T)) {
		if (r) {
			std::memcpy(r, t, sizeof(T));
			r += sizeof(T);
		}
		T mask = load<T>(c);
		store(t, T((load<T>(o) & mask) | (load<T>(t) & T(~mask))));
	}
}

/*
 * The ops that depend on the element type. atomic_valid() has already refused the
 * combinations whose branch is compiled out here, so an empty branch is never taken.
 */
template <typename T>
void run(fi_op op, unsigned char *t, const unsigned char *o, const unsigned char *c,
	 unsigned char *r, size_t n)
{
	constexpr bool integer = std::is_integral_v<T>;
	constexpr bool ordered = !IsComplex<T>::value;

	switch (op) {
	case FI_MIN:
		if constexpr (ordered)
			update<T>(t, o, r, n, [](T a, T b) { return b < a ? b : a; });
		break;
	case FI_MAX:
		if constexpr (ordered)
			update<T>(t, o, r, n, [](T a, T b) { return b > a ? b : a; });
		break;
	case FI_SUM:
		update<T>(t, o, r, n, add<T>);
		break;
	case FI_PROD:
		update<T>(t, o, r, n, mul<T>);
		break;
	case FI_LOR:
		update<T>(t, o, r, n, [](T a, T b) { return T(truth(a) || truth(b)); });
		break;
	case FI_LAND:
		update<T>(t, o, r, n, [](T a, T b) { return T(truth(a) && truth(b)); });
		break;
	case FI_LXOR:
		update<T>(t, o, r, n, [](T a, T b) { return T(truth(a) != truth(b)); });
		break;
	case FI_BOR:
		if constexpr (integer)
			update<T>(t, o, r, n, [](T a, T b) { return a | b; });
		break;
	case FI_BAND:
		if constexpr (integer)
			update<T>(t, o, r, n, [](T a, T b) { return a & b; });
		break;
	case FI_BXOR:
		if constexpr (integer)
			update<T>(t, o, r, n, [](T a, T b) { return a ^ b; });
		break;
	/* fi_atomic(3) compares the comparand against the target: compare OP target. */
	case FI_CSWAP:
		swap_if<T>(t, o, c, r, n, [](T cmp, T cur) { return cmp == cur; });
		break;
	case FI_CSWAP_NE:
		swap_if<T>(t, o, c, r, n, [](T cmp, T cur) { return cmp != cur; });
		break;
	case FI_CSWAP_LE:
		if constexpr (ordered)
			swap_if<T>(t, o, c, r, n, [](T cmp, T cur) { return cmp <= cur; });
		break;
	case FI_CSWAP_LT:
		if constexpr (ordered)
			swap_if<T>(t, o, c, r, n, [](T cmp, T cur) { return cmp < cur; });
		break;
	case FI_CSWAP_GE:
		if constexpr (ordered)
			swap_if<T>(t, o, c, r, n, [](T cmp, T cur) { return cmp >= cur; });
		break;
	case FI_CSWAP_GT:
		if constexpr (ordered)
			swap_if<T>(t, o, c, r, n, [](T cmp, T cur) { return cmp > cur; });
		break;
	case FI_MSWAP:
		if constexpr (integer)
			mswap<T>(t, o, c, r, n);
		break;
	default:
		break;
	}
}

} // namespace

size_t atomic_datatype_size(fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
		return 1;
	case FI_INT16:
	case FI_UINT16:
		return 2;
	case FI_INT32:
	case FI_UINT32:
		return 4;
	case FI_INT64:
	case FI_UINT64:
		return 8;
	case FI_FLOAT:
		return sizeof(float);
	case FI_DOUBLE:
		return sizeof(double);
	case FI_FLOAT_COMPLEX:
		return sizeof(std::complex<float>);
	case FI_DOUBLE_COMPLEX:
		return sizeof(std::complex<double>);
	case FI_LONG_DOUBLE:
		return sizeof(long double);
	case FI_LONG_DOUBLE_COMPLEX:
		return sizeof(std::complex<long double>);
	default:
		return 0;
	}
}

bool atomic_valid(AtomicKind kind, fi_op op, fi_datatype dt)
{
	return (allowed_types(kind, op) & type_class(dt)) != 0;
}

int atomic_apply(AtomicKind kind, fi_op op, fi_datatype dt, void *target, const void *operand,
		 const void *compare, void *result, size_t count)
{
	if (!atomic_valid(kind, op, dt))
		return -FI_EOPNOTSUPP;
	/* memcpy with a null pointer is undefined even for 0 bytes. */
	if (count == 0)
		return 0;

	auto *t = static_cast<unsigned char *>(target);
	auto *o = static_cast<const unsigned char *>(operand);
	auto *c = static_cast<const unsigned char *>(compare);
	auto *r = kind == AtomicKind::Write ? nullptr : static_cast<unsigned char *>(result);

	/*
	 * Plain reads and writes move bytes, so that no value passes through a floating-point
	 * register and every bit (padding of long double too) survives.
	 */
	if (op == FI_ATOMIC_READ || op == FI_ATOMIC_WRITE) {
		size_t bytes = count * atomic_datatype_size(dt);
		if (r)
			std::memcpy(r, t, bytes);
		if (op == FI_ATOMIC_WRITE)
			std::memcpy(t, o, bytes);
		return 0;
	}

	switch (dt) {
	case FI_INT8: run<int8_t>(op, t, o, c, r, count); break;
	case FI_UINT8: run<uint8_t>(op, t, o, c, r, count); break;
	case FI_INT16: run<int16_t>(op, t, o, c, r, count); break;
	case FI_UINT16: run<uint16_t>(op, t, o, c, r, count); break;
	case FI_INT32: run<int32_t>(op, t, o, c, r, count); break;
	case FI_UINT32: run<uint32_t>(op, t, o, c, r, count); break;
	case FI_INT64: run<int64_t>(op, t, o, c, r, count); break;
	case FI_UINT64: run<uint64_t>(op, t, o, c, r, count); break;
	case FI_FLOAT: run<float>(op, t, o, c, r, count); break;
	case FI_DOUBLE: run<double>(op, t, o, c, r, count); break;
	case FI_FLOAT_COMPLEX: run<std::complex<float>>(op, t, o, c, r, count); break;
	case FI_DOUBLE_COMPLEX: run<std::complex<double>>(op, t, o, c, r, count); break;
	case FI_LONG_DOUBLE: run<long double>(op, t, o, c, r, count); break;
	case FI_LONG_DOUBLE_COMPLEX: run<std::complex<long double>>(op, t, o, c, r, count); break;
	default: break;
	}
	return 0;
}

} // namespace efa::rdm
