/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared by the fuzz harnesses (README "Fuzzing"): each harness defines
 * LLVMFuzzerTestOneInput, which libFuzzer drives under clang (contrib/fuzz.sh) and
 * replay.cpp drives over the committed corpus under g++ (make check).
 *
 * A harness reads every byte a parser's result points to, from a heap copy of the input
 * of exactly its size, so that AddressSanitizer reports any pointer or length the parser
 * let through wrongly; FUZZ_CHECK turns a broken invariant into a crash libFuzzer keeps.
 */
#ifndef EFA_FUZZ_H
#define EFA_FUZZ_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace efa::fuzz {

inline volatile uint8_t g_sink;

/* Reads n bytes at p so that the compiler cannot drop the reads. */
inline void consume(const void *p, size_t n)
{
	const uint8_t *b = static_cast<const uint8_t *>(p);
	uint8_t x = 0;
	for (size_t i = 0; i < n; i++)
		x ^= b[i];
	g_sink = x;
}

template <typename T> inline void consume(const T &v) { consume(&v, sizeof v); }

/* The input in a buffer of exactly its size (operator new: 16-byte aligned, as the
 * device's receive buffers are at least 8-byte aligned). */
inline std::unique_ptr<uint8_t[]> exact_copy(const uint8_t *data, size_t size)
{
	std::unique_ptr<uint8_t[]> b(new uint8_t[size ? size : 1]);
	if (size)
		std::memcpy(b.get(), data, size);
	return b;
}

/* Whether [p, p + n) lies inside [base, base + len). */
inline bool inside(const void *p, size_t n, const void *base, size_t len)
{
	const uintptr_t a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base);
	return a >= b && a - b <= len && n <= len - (a - b);
}

} // namespace efa::fuzz

#define FUZZ_CHECK(cond)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
				     #cond);                                               \
			std::abort();                                                      \
		}                                                                          \
	} while (0)

#endif
