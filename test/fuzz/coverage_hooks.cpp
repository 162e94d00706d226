// g++'s -fsanitize-coverage=trace-pc calls __sanitizer_cov_trace_pc() at the head of every basic
// block. libFuzzer 14 no longer takes that form (FuzzerTracePC.cpp prints "trace-pc is no longer
// supported"), so test/fuzz/meson.build weakens its definition and this one feeds the form it does
// take: a table of 8-bit counters and the table of the program counters they stand for
// (__sanitizer_cov_8bit_counters_init, __sanitizer_cov_pcs_init: clang.llvm.org/docs/
// SanitizerCoverage.html, "Inline 8bit-counters" and "PC-Table"). A block's slot is a hash of its
// return address; two blocks that share a slot count as one, which only costs the fuzzer a little
// guidance. This file itself is built without the hook, or every call would call itself.
#include <cstddef>
#include <cstdint>

namespace {

constexpr std::size_t slot_count = std::size_t{1} << 18;

alignas(64) std::uint8_t counters[slot_count];

struct pc_entry {   // one PC-Table row: the program counter and its flags (1 = a function's entry)
    std::uintptr_t pc;
    std::uintptr_t flags;
};
pc_entry pc_table[slot_count];

}  // namespace

extern "C" {
void __sanitizer_cov_8bit_counters_init(std::uint8_t* begin, std::uint8_t* end);
void __sanitizer_cov_pcs_init(const std::uintptr_t* begin, const std::uintptr_t* end);

__attribute__((no_sanitize_coverage, no_sanitize_address, no_sanitize_undefined))
void __sanitizer_cov_trace_pc() {
    const auto pc = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
    const std::size_t slot = (pc ^ (pc >> 18)) & (slot_count - 1);
    pc_table[slot].pc = pc;   // what libFuzzer prints for a slot (-print_coverage) when it is new
    ++counters[slot];
}

// g++'s trace-cmp also reports floating-point comparisons, which clang's does not, so libFuzzer
// has no hook for them (gcc/sancov.def: BUILT_IN_SANITIZER_COV_TRACE_CMPF, _CMPD). No parser here
// steers by a float's exact value; the block counters still see which way each one went.
__attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_cmpf(float, float) {}
__attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_cmpd(double, double) {}
}

namespace {

// Before main: libFuzzer reads the tables when it starts (FuzzerTracePC.cpp, TracePC::HandleInline8bitCountersInit).
__attribute__((constructor, no_sanitize_coverage)) void register_tables() {
    __sanitizer_cov_8bit_counters_init(counters, counters + slot_count);
    __sanitizer_cov_pcs_init(&pc_table[0].pc, &pc_table[0].pc + 2 * slot_count);
}

}  // namespace
