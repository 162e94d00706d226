#pragma once
/// @file
/// What every public header of Rig needs first: C++23's std::expected (the API returns
/// rig::result<T>, a std::expected), and the mark of what librig.so exports.
#include <version>

#if !defined(__cpp_lib_expected) || __cpp_lib_expected < 202202L
#error "Rig's API needs C++23's std::expected: compile with -std=c++23 (g++ 12 with libstdc++ 12, or newer)"
#endif

/// Marks a class or function the shared library exports; the library is built with
/// -fvisibility=hidden, so everything else in it stays internal (gcc.gnu.org/wiki/Visibility).
#define RIG_API __attribute__((visibility("default")))
