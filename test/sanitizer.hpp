#pragma once
// What a sanitizer build changes in a test's measure of CPU. ThreadSanitizer instruments every
// memory access of the model's threads, so their idle passes (a look at each doorbell, then a
// back-off) cost about three times a plain build's CPU: a test bounding the process's CPU while a
// thread sleeps allows that much more, and keeps its bound on the sleeping thread itself as it is
// (issue 20: the sanitizer builds adapt their tests, they skip none).
namespace rig::test {

#if defined(__SANITIZE_THREAD__)
inline constexpr double sanitizer_cpu_factor = 2.0;   // the bounds stay at or under one core
#else
inline constexpr double sanitizer_cpu_factor = 1.0;
#endif

}  // namespace rig::test
